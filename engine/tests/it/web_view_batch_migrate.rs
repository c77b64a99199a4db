//! The threads page's batch form, its migrate option (issue 43 item 1; `it::web_view_batch` has
//! the others), in a real browser (`cdp`): with a migration from waiter v1 to v2 registered (as
//! `it::batch` registers it), the page filtered to team a's waiters counts them, then applies a
//! migrate batch to version 2: those threads, and only they, are on v2 and go on from the
//! migrated state; team b's, outside the filter, stay on v1. Screenshots go to
//! `<target>/screenshots/`.

use std::time::Duration;

use cairn::{Durability, Engine};
use cairn_tools::serve::Serve as _;
use serde_json::json;

use crate::batch::{version_of, waiter_v, waiting_v1};
use crate::cdp::Browser;
use crate::common::{Tally, db};
use crate::web_view::screenshots;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_threads_page_migrates_the_threads_its_filters_match_to_a_new_version() {
    let (_d, path) = db();
    let (v1, v2) = (waiter_v(1), waiter_v(2));
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&v1)
        .workflow(&v2)
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    engine.register_migration("waiter", 1, 2, |mut state| {
        let log = state.get_mut("log").and_then(|l| l.as_array_mut()).ok_or("no log")?;
        log.push("migrated".into());
        Ok(state)
    });
    waiting_v1(&engine, &["m-1", "m-3", "m-5"], "a").await;
    waiting_v1(&engine, &["m-2", "m-4"], "b").await;
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let shots = screenshots();
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/threads?workflow=waiter&label=team=a"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        browser.eval(&format!(
            "document.getElementById('token').value = '{token}'; \
             document.getElementById('token-save').click(); \
             document.getElementById('batch-box').open = true; \
             document.getElementById('batch-op').value = 'migrate'; \
             document.getElementById('batch-op').dispatchEvent(new Event('change')); \
             document.getElementById('batch-to-version').value = '2'; \
             document.getElementById('batch-count').click()"
        ));
        let count = browser.wait_for(
            "document.getElementById('batch-result').dataset.count",
            Duration::from_secs(10),
        );
        assert_eq!(count, json!("3"), "team a's three waiters");
        browser.screenshot(&shots.join("threads-batch-migrate-count.png"), 1200.);
        browser.eval("document.getElementById('batch-apply').click()");
        browser.wait_for(
            "document.getElementById('batch-result').dataset.finished === '1'",
            Duration::from_secs(20),
        );
        let done = browser.eval("document.getElementById('batch-result').textContent");
        let done = done.as_str().unwrap().to_owned();
        assert!(done.contains("(migrate): finished, 3 of 3 done: 3 applied"), "{done}");
        // The listing, refreshed, shows the three on the new version.
        browser.wait_for(
            "[...document.querySelectorAll('#threads tbody tr')] \
               .filter((tr) => tr.textContent.includes('waiter v2')).length === 3",
            Duration::from_secs(10),
        );
        browser.screenshot(&shots.join("threads-batch-migrate-done.png"), 1200.);
    });
    for (id, version) in [("m-1", 2), ("m-3", 2), ("m-5", 2), ("m-2", 1), ("m-4", 1)] {
        assert_eq!(version_of(&engine, id).await, version, "{id}");
    }
    // A migrated thread goes on under v2 from the migrated state; one outside the filter, under
    // v1 from its own.
    for id in ["m-3", "m-4"] {
        engine.signal(id, "go", 1_u64).await.unwrap();
    }
    let migrated: Tally = engine.thread("m-3").await.unwrap().output().await.unwrap();
    assert_eq!(migrated.log, ["migrated", "go 1"]);
    let kept: Tally = engine.thread("m-4").await.unwrap().output().await.unwrap();
    assert_eq!(kept.log, ["go 1"]);
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}
