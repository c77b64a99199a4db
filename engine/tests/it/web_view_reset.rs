//! Reset and repin from a thread's page of the web view (issue 43 items 1 and 6), in a real
//! browser (`cdp`): Repin with a build id that is none shows the endpoint's refusal, with a good
//! one the summary's worker build reads it, Unpin clears it; Reset to a seq of 0 shows the
//! refusal, to the latest checkpoint links to the new thread, which waits where the checkpoint
//! left it, and the original reads cancelled. Control: the other thread is untouched.
//! Screenshots go to `<target>/screenshots/`.

use std::sync::Arc;
use std::sync::atomic::AtomicU64;
use std::time::Duration;

use cairn::storage::ThreadId;
use cairn::{Durability, Engine, StartOptions, ThreadStatus};
use serde_json::json;

use crate::cdp::Browser;
use crate::common::Tally;
use crate::reset::{cancel_reasons, parked, stages};
use crate::web_view::screenshots;
use cairn_tools::serve::Serve as _;

/// The thread's `cairn.build` label and its status.
async fn pin(engine: &Engine, thread: &str) -> (Option<String>, ThreadStatus) {
    let record = engine.store().thread(&ThreadId::new(thread).unwrap()).await.unwrap().unwrap();
    (record.labels.get("cairn.build").cloned(), record.status)
}

const RESULT: &str = "document.getElementById('control-result')";

/// On t-1's page: a refused repin, a repin to 2026.12.2, then an unpin.
fn repin_from_the_page(browser: &mut Browser, shots: &std::path::Path) {
    browser.eval(&format!(
        "document.getElementById('repin-build').value = 'has space'; \
         {RESULT}.textContent = ''; document.getElementById('repin').click()"
    ));
    browser.wait_for(&format!("{RESULT}.className === 'error'"), Duration::from_secs(10));
    let refused = browser.eval(&format!("{RESULT}.textContent"));
    assert!(refused.as_str().unwrap().contains("build"), "{refused}");
    browser.screenshot(&shots.join("thread-repin-refused.png"), 1000.);
    browser.eval(
        "document.getElementById('repin-build').value = '2026.12.2'; \
         document.getElementById('repin').click()",
    );
    let shown = "document.getElementById('build') && document.getElementById('build').textContent";
    let build =
        browser.wait_for(&format!("({shown}) === '2026.12.2' && {shown}"), Duration::from_secs(10));
    assert_eq!(build, json!("2026.12.2"));
    let said = browser.eval(&format!("{RESULT}.textContent"));
    assert!(said.as_str().unwrap().contains("pinned to build 2026.12.2"), "{said}");
    browser.screenshot(&shots.join("thread-repinned.png"), 1000.);
}

/// On t-1's page: a refused reset (seq 0), then one to the latest checkpoint; follows the
/// link to the new thread and answers its id.
fn reset_from_the_page(browser: &mut Browser, shots: &std::path::Path) -> String {
    browser.eval(&format!(
        "window.confirm = () => true; \
         document.getElementById('reset-to').value = 'seq'; \
         document.getElementById('reset-to').dispatchEvent(new Event('change')); \
         document.getElementById('reset-seq').value = '0'; \
         {RESULT}.textContent = ''; document.getElementById('reset').click()"
    ));
    browser.wait_for(&format!("{RESULT}.className === 'error'"), Duration::from_secs(10));
    let refused = browser.eval(&format!("{RESULT}.textContent"));
    assert!(refused.as_str().unwrap().contains("seq:N"), "{refused}");
    assert_eq!(browser.eval("document.getElementById('reset-link')"), json!(null), "no new thread");
    browser.eval(
        "document.getElementById('reset-to').value = 'checkpoint'; \
         document.getElementById('reset-to').dispatchEvent(new Event('change'))",
    );
    // The seq field shows for a seq only.
    assert_eq!(browser.eval("document.getElementById('reset-seq').hidden"), json!(true));
    browser.eval("document.getElementById('reset').click()");
    let link = browser.wait_for(
        "document.getElementById('reset-link') && document.getElementById('reset-link').textContent",
        Duration::from_secs(10),
    );
    let new = link.as_str().unwrap().to_owned();
    assert!(new.starts_with("t-1.reset."), "{new}");
    browser.screenshot(&shots.join("thread-reset.png"), 1000.);
    browser.eval("document.getElementById('reset-link').click()");
    // The click navigates: while the new page is still being parsed its `#title` (or its body)
    // may not exist yet, and reading it would throw; so the wait is on the page's loaded marker
    // first (set once its script has filled the page in), then on what it shows.
    browser.wait_for(
        &format!(
            "document.body && document.body.dataset.loaded === '1' && \
             document.getElementById('title').textContent === '{new}' && \
             document.body.dataset.status === 'waiting_input'"
        ),
        Duration::from_secs(20),
    );
    browser.screenshot(&shots.join("thread-reset-new.png"), 1000.);
    new
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_threads_page_resets_and_repins_it_and_links_to_the_new_thread() {
    let (_d, path) = crate::common::db();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&stages(Arc::new(AtomicU64::new(0))))
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    for id in ["t-1", "t-2"] {
        engine.start_json("stages", Tally::default(), StartOptions::id(id)).await.unwrap();
        parked(&engine, id).await;
    }
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let shots = screenshots();
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/threads/t-1"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        // Without the token the page asks for it, posting nothing.
        browser.eval("document.getElementById('unpin').click()");
        browser
            .wait_for(&format!("{RESULT}.textContent.includes('token')"), Duration::from_secs(10));
        browser.eval(&format!(
            "document.getElementById('token').value = '{token}'; \
             document.getElementById('token-save').click()"
        ));
        repin_from_the_page(&mut browser, &shots);
    });
    assert_eq!(pin(&engine, "t-1").await, (Some("2026.12.2".into()), ThreadStatus::WaitingInput));
    tokio::task::block_in_place(|| {
        browser.eval("document.getElementById('unpin').click()");
        browser.wait_for("!document.getElementById('build')", Duration::from_secs(10));
        let said = browser.eval(&format!("{RESULT}.textContent"));
        assert!(said.as_str().unwrap().starts_with("unpinned"), "{said}");
    });
    assert_eq!(pin(&engine, "t-1").await, (None, ThreadStatus::WaitingInput));
    // What a user has half typed in the controls survives a live update: a repin made
    // elsewhere (not from this page) reaches the page as an event, the page reads the summary
    // again and shows the new build, and the build and seq fields still hold their text.
    tokio::task::block_in_place(|| {
        browser.eval(
            "document.getElementById('repin-build').value = '2026.12.'; \
             document.getElementById('reset-seq').value = '3'",
        );
    });
    engine.repin("t-1", Some("2026.12.9")).await.unwrap();
    tokio::task::block_in_place(|| {
        let shown =
            "document.getElementById('build') && document.getElementById('build').textContent";
        browser.wait_for(&format!("({shown}) === '2026.12.9'"), Duration::from_secs(10));
        assert_eq!(browser.eval("document.getElementById('repin-build').value"), json!("2026.12."));
        assert_eq!(browser.eval("document.getElementById('reset-seq').value"), json!("3"));
    });
    engine.repin("t-1", None).await.unwrap();
    tokio::task::block_in_place(|| {
        browser.wait_for("!document.getElementById('build')", Duration::from_secs(10));
    });
    let new = tokio::task::block_in_place(|| reset_from_the_page(&mut browser, &shots));
    assert_eq!(cancel_reasons(&engine, "t-1"), [format!("reset to {new}")]);
    parked(&engine, &new).await;
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/threads/t-1"));
        browser.wait_for(
            "document.body && document.body.dataset.loaded === '1' && \
             document.body.dataset.status === 'cancelled'",
            Duration::from_secs(20),
        );
        // A cancelled thread offers Reset (to run it again), not Repin.
        let shown = |id: &str| format!("document.getElementById('{id}').offsetParent !== null");
        assert_eq!(browser.eval(&shown("reset")), json!(true));
        assert_eq!(browser.eval(&shown("repin")), json!(false));
        browser.screenshot(&shots.join("thread-reset-original.png"), 1000.);
    });
    // Control: t-2 untouched.
    assert_eq!(pin(&engine, "t-2").await, (None, ThreadStatus::WaitingInput));
    assert!(cancel_reasons(&engine, "t-2").is_empty());
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}
