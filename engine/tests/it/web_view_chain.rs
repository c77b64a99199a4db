//! The messages page's chain step-through (issue 43 item 7), in a real browser (`cdp`): on
//! `/ui/messages/c1`, the `chain` button of message m3 shows the messages that led to it (m1 in
//! the root thread, m2 in its child, m3), first message first, each with its thread's state right
//! after it, as `GET /api/trace?chain=m3&states=1` answers them; a message without a parent shows
//! itself alone. Screenshots go to `<target>/screenshots/`.

use std::sync::Arc;
use std::time::Duration;

use cairn::{Durability, Engine, StartOptions, ThreadStatus};
use cairn_tools::serve::Serve as _;
use serde_json::{Value, json};

use crate::cdp::Browser;
use crate::common::{Tally, db};
use crate::trace::session_with;
use crate::web_view::screenshots;

/// The steps shown: each one's message id, thread and state total.
const SHOWN: &str = "[...document.querySelectorAll('#chain li.chain-step')].map((li) => \
    [li.dataset.id, li.dataset.thread, JSON.parse(li.querySelector('pre').textContent).total])";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_messages_page_steps_through_a_chain_with_the_state_after_each_message() {
    let (_d, path) = db();
    let wf = session_with(Arc::new(|| ()));
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&wf)
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let t = engine.start_json("session", Tally::default(), StartOptions::id("s1")).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
    let base = format!("http://{}", server.addr());
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1300, 1000));
    let (chain, root) = tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/messages/c1"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        // Nothing is shown before a message is picked.
        assert_eq!(browser.eval("document.getElementById('chain-card').hidden"), json!(true));
        browser.eval("document.querySelector('#list tr[data-id=\"m3\"] button.chain').click()");
        browser.wait_for("document.body.dataset.chain === 'm3'", Duration::from_secs(20));
        let chain = browser.eval(SHOWN);
        browser.screenshot(&screenshots().join("messages-chain.png"), 1600.);
        // Control: the chain to m1, which has no parent, is m1 alone.
        browser.eval("document.querySelector('#list tr[data-id=\"m1\"] button.chain').click()");
        browser.wait_for("document.body.dataset.chain === 'm1'", Duration::from_secs(20));
        (chain, browser.eval(SHOWN))
    });
    let rows = chain.as_array().expect("the steps shown");
    let ids: Vec<&Value> = rows.iter().map(|r| &r[0]).collect();
    assert_eq!(ids, [&json!("m1"), &json!("m2"), &json!("m3")], "{chain}");
    assert_eq!(rows[0][1], "s1");
    assert!(rows[1][1].as_str().unwrap().starts_with("s1/plan@"), "m2 is the child's: {chain}");
    let totals: Vec<&Value> = rows.iter().map(|r| &r[2]).collect();
    assert_eq!(totals, [&json!(0), &json!(1), &json!(1)], "the state after each message");
    assert_eq!(root, json!([["m1", "s1", 0]]));
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}
