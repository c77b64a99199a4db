//! The web view's thread page of a thread sealed at rest, served by an engine without the key,
//! in a real browser (`cdp`): the page renders (status, summary, events, their summaries),
//! each sealed value shows "encrypted" naming its key, and no sealed value reaches the page;
//! with the key the same page shows the values and nothing "encrypted".

use std::sync::Arc;
use std::time::Duration;

use cairn::{Durability, Engine, EngineBuilder};
use serde_json::Value;

use crate::cdp::Browser;
use crate::common::{db, open};
use crate::sealing::{key, orders, run_order};
use crate::web_view::screenshots;
use cairn_tools::serve::Serve as _;

/// What the thread page of `o1` shows, served by `builder`'s engine; a screenshot named `shot`.
async fn page(builder: EngineBuilder, shot: &str) -> Value {
    let wf = orders(Arc::default());
    let (engine, server) =
        builder.workflow(&wf).serve(([127, 0, 0, 1], 0).into()).open().await.unwrap();
    let base = format!("http://{}", server.addr());
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    let seen = tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/threads/o1"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        browser.wait_for(
            "document.getElementById('state').textContent !== ''",
            Duration::from_secs(10),
        );
        browser.screenshot(&screenshots().join(shot), 2600.);
        browser.eval(
            "(() => ({ \
               status: document.getElementById('status').textContent, \
               events: document.querySelectorAll('#events tr[data-seq]').length, \
               sealedEvents: document.querySelectorAll('#events tr[data-seq] .encrypted').length, \
               summary: document.getElementById('summary').textContent, \
               summarySealed: document.querySelectorAll('#summary .encrypted').length, \
               usage: document.getElementById('usage').textContent, \
               state: document.getElementById('state').textContent, \
               keys: [...document.querySelectorAll('.encrypted')].map((e) => e.dataset.encrypted), \
               error: document.getElementById('error').textContent, \
               panels: ['timeline', 'published', 'promises'].map((id) => \
                 document.querySelectorAll(`#${id} .encrypted`).length), \
               text: document.body.innerText }))()",
        )
    });
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
    seen
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_thread_page_without_the_key_shows_encrypted_per_value() {
    let wf = orders(Arc::default());
    let (_d, path) = db();
    let sealed = |b: EngineBuilder| b.payload_codec(key("k1", 1)).checkpoint_every(Some(1), None);
    let engine = open(&path, &[&wf], sealed).await;
    run_order(&engine, "o1").await;
    engine.shutdown().await;
    drop(engine);
    let quiet = |b: EngineBuilder| b.durability(Durability::None);

    let without =
        page(quiet(Engine::builder(&path).sealed_without_key()), "thread-sealed.png").await;
    assert_eq!(without["status"], "completed", "{without}");
    assert_eq!(without["error"], "", "the page rendered: {without}");
    let events = without["events"].as_u64().unwrap();
    assert!(events > 5, "{without}");
    assert_eq!(without["sealedEvents"], events, "each event's body: {without}");
    assert!(without["summarySealed"].as_u64().unwrap() >= 2, "output and more: {without}");
    assert!(without["summary"].as_str().unwrap().contains("sealed-orders v1"), "{without}");
    assert!(without["usage"].as_str().unwrap().contains("encrypted (key k1)"), "{without}");
    assert!(without["state"].as_str().unwrap().contains("encrypted (key k1)"), "{without}");
    assert!(without["keys"].as_array().unwrap().iter().all(|k| k == "k1"), "{without}");
    // The panels folded from the sealed log say so, naming the key.
    assert_eq!(without["panels"], serde_json::json!([1, 1, 1]), "{without}");
    let text = without["text"].as_str().unwrap();
    assert!(text.contains("message (sealed)") && text.contains("charge"), "clear summaries");
    for mark in ["SIGNAL-MARK", "STATE-MARK", "TOOLRESULT-MARK", "INPUT-MARK"] {
        assert!(!text.contains(mark), "{mark} on the page without the key");
    }

    // Control: with the key, the values and nothing encrypted.
    let with =
        page(quiet(Engine::builder(&path).payload_codec(key("k1", 1))), "thread-keyed.png").await;
    assert_eq!(with["error"], "", "{with}");
    assert_eq!(with["keys"], serde_json::json!([]), "{with}");
    assert_eq!(with["panels"], serde_json::json!([0, 0, 0]), "{with}");
    assert!(with["state"].as_str().unwrap().contains("SIGNAL-MARK by ann"), "{with}");
}
