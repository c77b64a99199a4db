//! The streaming agent in a real browser (Debian's headless Chromium, driven over the DevTools
//! protocol by the engine's test client): the live stream page shows the draft's tokens as the
//! agent streams them, and its Approve button finishes the review approved; a second review
//! nobody answers ends escalated by its deadline, and its page, opened after the tokens are
//! gone, still shows the draft (the durable close). Screenshots go to
//! `<target dir>/screenshots/streaming-agent-*.png`.
#![allow(missing_docs, reason = "test code")]

use std::path::PathBuf;
use std::time::Duration;

use cairn_examples::streaming_agent::{self as agent, Decision, Pace, Review};

#[path = "../../engine/tests/it/cdp.rs"]
#[allow(dead_code, reason = "the engine's client; this test uses part of it")]
mod cdp;

/// `<target dir>/screenshots/`, where the web view's browser test puts its own.
fn screenshots() -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().map_or(tmp.clone(), std::path::Path::to_path_buf).join("screenshots")
}

/// The draft the scripted model writes, whole.
fn draft() -> String {
    let request = cairn_tools::model::ModelRequest {
        purpose: "draft".into(),
        prompt: "What is a lease?".into(),
    };
    use cairn_tools::model::LanguageModel as _;
    futures::executor::block_on(agent::model().complete(request)).unwrap().text
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_page_streams_the_tokens_approve_finishes_and_nobody_answering_escalates() {
    let dir = tempfile::tempdir().unwrap();
    let (engine, server) =
        agent::open(&dir.path().join("streaming.db"), ([127, 0, 0, 1], 0).into()).await.unwrap();
    let mut browser = tokio::task::block_in_place(|| cdp::Browser::launch(1100, 900));
    let shots = screenshots();

    // The review starts 1.5 s after it is created: the page is open for its first token.
    let pace = Pace { deadline_ms: 60_000, token_ms: 30, delay_ms: 1_500 };
    let review = agent::begin(&engine, "r-page", "What is a lease?", pace).await.unwrap();
    let url = agent::page(&server, "r-page");
    tokio::task::block_in_place(|| {
        browser.navigate(&url);
        browser.wait_for("Number(document.body.dataset.chunks || 0) > 3", Duration::from_secs(20));
        let partial = browser.eval("document.getElementById('tokens').textContent");
        assert!(!partial.as_str().unwrap().is_empty());
        browser.wait_for(
            "document.querySelector('#closes li[data-node=draft]')",
            Duration::from_secs(20),
        );
        let tokens = browser.eval("document.getElementById('tokens').textContent");
        assert_eq!(tokens.as_str().unwrap(), draft(), "every token, in order, live");
        assert_eq!(browser.eval("cairn.token().length > 0"), serde_json::json!(true));
        browser.screenshot(&shots.join("streaming-agent-waiting.png"), 1600.);
        browser.eval("document.getElementById('approve').click()");
        browser.wait_for("document.body.dataset.ended === 'completed'", Duration::from_secs(20));
        browser.screenshot(&shots.join("streaming-agent-approved.png"), 1600.);
    });
    let out: Review = review.output().await.unwrap();
    assert_eq!((out.decision, out.escalated_to), (Some(Decision::Approved), None));
    assert_eq!(out.draft, draft());

    // Nobody answers: the deadline escalates. The page opens after the draft streamed (its
    // tokens are gone): it shows the draft from the log, then the escalation.
    let pace = Pace { deadline_ms: 1_500, token_ms: 0, delay_ms: 0 };
    let late = agent::begin(&engine, "r-nobody", "What is a lease?", pace).await.unwrap();
    let url = agent::page(&server, "r-nobody");
    tokio::task::block_in_place(|| {
        browser.navigate(&url);
        browser.wait_for("document.body.dataset.ended === 'completed'", Duration::from_secs(20));
        let nodes = browser.eval(
            "[...document.querySelectorAll('#closes li')].map(li => li.dataset.node).join(',')",
        );
        assert_eq!(nodes.as_str().unwrap(), "draft,approval,escalate");
        let output = browser.eval("document.getElementById('output').textContent");
        assert!(output.as_str().unwrap().contains("Escalated"), "{output}");
        browser.screenshot(&shots.join("streaming-agent-escalated.png"), 1600.);
    });
    let out: Review = late.output().await.unwrap();
    assert_eq!(out.decision, Some(Decision::Escalated));
    assert_eq!(out.escalated_to.as_deref(), Some("on-call-reviewer"));
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}
