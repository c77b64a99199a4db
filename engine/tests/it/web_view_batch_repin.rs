//! The threads page's batch form, its repin option (issue 43 items 1 and 6; `it::web_view_batch`
//! and `it::web_view_batch_migrate` have the others), in a real browser (`cdp`): the page filtered
//! to team a's waiters counts them, then repins them to a worker build; those threads, and only
//! they, carry the build's `cairn.build` pin, each moved by one `labels_changed` event; an unpin
//! batch (the build left empty) then removes the pins again. Screenshots go to
//! `<target>/screenshots/`.

use std::time::Duration;

use cairn::{Durability, Engine};
use cairn_tools::serve::Serve as _;
use serde_json::json;

use crate::batch::{waiter_v, waiting_v1};
use crate::batch_repin::pin_and_moves;
use crate::cdp::Browser;
use crate::common::db;
use crate::web_view::screenshots;

/// Asks for a repin batch of what the page's filters match to `build` (empty: unpin): counts
/// first (the count is returned), then applies it and waits for it to finish.
fn repin_from_the_form(browser: &mut Browser, build: &str) -> serde_json::Value {
    browser.eval(&format!(
        "document.getElementById('batch-box').open = true; \
         document.getElementById('batch-op').value = 'repin'; \
         document.getElementById('batch-op').dispatchEvent(new Event('change')); \
         document.getElementById('batch-build').value = '{build}'; \
         delete document.getElementById('batch-result').dataset.count; \
         delete document.getElementById('batch-result').dataset.finished; \
         document.getElementById('batch-count').click()"
    ));
    let count = browser
        .wait_for("document.getElementById('batch-result').dataset.count", Duration::from_secs(10));
    browser.eval("document.getElementById('batch-apply').click()");
    browser.wait_for(
        "document.getElementById('batch-result').dataset.finished === '1'",
        Duration::from_secs(20),
    );
    count
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_threads_page_repins_the_threads_its_filters_match_and_unpins_them() {
    let (_d, path) = db();
    let v1 = waiter_v(1);
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&v1)
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    waiting_v1(&engine, &["p-1", "p-3", "p-5"], "a").await;
    waiting_v1(&engine, &["p-2", "p-4"], "b").await;
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let shots = screenshots();
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/threads?workflow=waiter&label=team=a"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        browser.eval(&format!(
            "document.getElementById('token').value = '{token}'; \
             document.getElementById('token-save').click()"
        ));
        let count = repin_from_the_form(&mut browser, "2026.12.2");
        assert_eq!(count, json!("3"), "team a's three waiters");
        let done = browser.eval("document.getElementById('batch-result').textContent");
        let done = done.as_str().unwrap().to_owned();
        assert!(done.contains("(repin): finished, 3 of 3 done: 3 applied"), "{done}");
        // The listing, refreshed, shows the pin among each thread's labels.
        browser.wait_for(
            "[...document.querySelectorAll('#threads tbody tr')] \
               .filter((tr) => tr.textContent.includes('cairn.build=2026.12.2')).length === 3",
            Duration::from_secs(10),
        );
        browser.screenshot(&shots.join("threads-batch-repin-done.png"), 1200.);
    });
    for id in ["p-1", "p-3", "p-5"] {
        assert_eq!(pin_and_moves(&engine, id), (Some("2026.12.2".into()), 1), "{id}");
    }
    for id in ["p-2", "p-4"] {
        assert_eq!(pin_and_moves(&engine, id), (None, 0), "{id}: outside the filter");
    }
    tokio::task::block_in_place(|| {
        let count = repin_from_the_form(&mut browser, "");
        assert_eq!(count, json!("3"));
    });
    for id in ["p-1", "p-3", "p-5"] {
        assert_eq!(pin_and_moves(&engine, id), (None, 2), "{id}: unpinned by a second event");
    }
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}
