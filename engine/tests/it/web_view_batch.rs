//! A batch operation from the web view (issue 43 item 1), in a real browser (`cdp`): on the
//! threads page, filtered to the waiting threads of one label, Count asks for the token, then
//! answers how many threads match (a dry run); Apply makes the batch and follows it to its end;
//! the matching threads, and only they, got the signal. Then a reset batch from the same form:
//! the other label's threads are forked anew and cancelled. Screenshots go to `<target>/screenshots/`.

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::{Durability, END, Engine, START, StartOptions, ThreadStatus};
use serde_json::json;

use crate::cdp::Browser;
use crate::common::{Tally, db};
use crate::web_view::screenshots;
use cairn_tools::serve::Serve as _;

/// Waits for a `go` signal, then notes its value.
fn waiter() -> Workflow<Tally> {
    Workflow::<Tally>::builder("waiter", 1)
        .node("wait", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.recv("go").await?;
            Ok(NodeOutput::update((n, format!("go {n}"))))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .build()
        .unwrap()
}

/// On the threads page filtered to team b's waiting threads: a reset batch to the start from
/// the form, counted then applied.
fn reset_team_b(browser: &mut Browser, base: &str, shots: &std::path::Path) {
    browser.navigate(&format!("{base}/ui/threads?status=waiting_input&label=team=b"));
    browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
    browser.eval(
        "document.getElementById('batch-box').open = true; \
         document.getElementById('batch-op').value = 'reset'; \
         document.getElementById('batch-to').value = 'start'; \
         document.getElementById('batch-count').click()",
    );
    let count = browser
        .wait_for("document.getElementById('batch-result').dataset.count", Duration::from_secs(10));
    assert_eq!(count, json!("2"), "the two waiting threads of team b");
    browser.eval("document.getElementById('batch-apply').click()");
    browser.wait_for(
        "document.getElementById('batch-result').dataset.finished === '1'",
        Duration::from_secs(20),
    );
    let done = browser.eval("document.getElementById('batch-result').textContent");
    let done = done.as_str().unwrap().to_owned();
    assert!(done.contains("(reset): finished, 2 of 2 done: 2 applied"), "{done}");
    browser.screenshot(&shots.join("threads-batch-reset.png"), 1200.);
}

/// Starts `w-0`..`w-4` (team a the first three, team b the rest) and waits until each waits.
async fn waiting_teams(engine: &Engine) {
    for i in 0..5 {
        let team = if i < 3 { "a" } else { "b" };
        let options = StartOptions::id(format!("w-{i}")).label("team", team);
        engine.start_json("waiter", Tally::default(), options).await.unwrap();
    }
    for i in 0..5 {
        let id = cairn::ThreadId::new(format!("w-{i}")).unwrap();
        let parked = async {
            while engine.store().thread(&id).await.unwrap().unwrap().status
                != ThreadStatus::WaitingInput
            {
                tokio::time::sleep(Duration::from_millis(5)).await;
            }
        };
        tokio::time::timeout(Duration::from_secs(10), parked).await.expect("parked");
    }
}

/// How many of team b's threads wait for input (the new threads of a reset).
async fn forks_waiting(engine: &Engine) -> u64 {
    let filter = cairn::BatchFilter {
        labels: vec![("team".into(), "b".into())],
        status: Some(ThreadStatus::WaitingInput),
        ..cairn::BatchFilter::default()
    };
    engine.batch_count(&filter).await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_threads_page_counts_then_applies_a_batch_to_what_its_filters_match() {
    let (_d, path) = db();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&waiter())
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    waiting_teams(&engine).await;
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let shots = screenshots();
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/threads?status=waiting_input&label=team=a"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        browser.eval(
            "document.getElementById('batch-box').open = true; \
             document.getElementById('batch-op').value = 'signal'; \
             document.getElementById('batch-name').value = 'go'; \
             document.getElementById('batch-value').value = '7';",
        );
        // Without the token the page asks for it.
        let result = "document.getElementById('batch-result').textContent";
        browser.eval("document.getElementById('batch-count').click()");
        browser.wait_for(&format!("{result}.includes('token')"), Duration::from_secs(10));
        browser.eval(&format!(
            "document.getElementById('token').value = '{token}'; \
             document.getElementById('token-save').click(); \
             document.getElementById('batch-count').click()"
        ));
        let count = browser.wait_for(
            "document.getElementById('batch-result').dataset.count",
            Duration::from_secs(10),
        );
        assert_eq!(count, json!("3"), "the three waiting threads of team a");
        assert_eq!(browser.eval("document.getElementById('batch-apply').disabled"), json!(false));
        browser.screenshot(&shots.join("threads-batch-count.png"), 1200.);
        browser.eval("document.getElementById('batch-apply').click()");
        browser.wait_for(
            "document.getElementById('batch-result').dataset.finished === '1'",
            Duration::from_secs(20),
        );
        let done = browser.eval(result);
        assert!(done.as_str().unwrap().contains("finished, 3 of 3 done: 3 applied"), "{done}");
        browser.screenshot(&shots.join("threads-batch-done.png"), 1200.);
    });
    for i in 0..5 {
        let thread = engine.thread(&format!("w-{i}")).await.unwrap();
        if i < 3 {
            let out: Tally = thread.output().await.unwrap();
            assert_eq!(out.log, ["go 7"], "w-{i}");
        } else {
            assert_eq!(thread.status().await.unwrap(), ThreadStatus::WaitingInput, "w-{i}");
        }
    }
    // A reset batch over team b, to the start: each is forked anew and cancelled.
    tokio::task::block_in_place(|| reset_team_b(&mut browser, &base, &shots));
    for i in 3..5 {
        let status = engine.thread(&format!("w-{i}")).await.unwrap().status().await.unwrap();
        assert_eq!(status, ThreadStatus::Cancelled, "w-{i}");
    }
    let waiting_forks = async {
        while forks_waiting(&engine).await != 2 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), waiting_forks).await.expect("the forks wait");
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}

/// The threads page's row checkboxes: two of five rows ticked, the batch scope "the selected
/// rows", a pause counted then applied: exactly those two are paused, the other three wait on.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_threads_page_applies_a_batch_to_the_selected_rows_only() {
    let (_d, path) = db();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&waiter())
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    waiting_teams(&engine).await;
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let shots = screenshots();
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/threads"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        browser.eval(&format!(
            "document.getElementById('token').value = '{token}'; \
             document.getElementById('token-save').click(); \
             document.getElementById('batch-box').open = true; \
             document.querySelector('input.pick[value=\"w-1\"]').click(); \
             document.querySelector('input.pick[value=\"w-3\"]').click(); \
             document.getElementById('batch-scope').value = 'selected'; \
             document.getElementById('batch-op').value = 'pause'; \
             document.getElementById('batch-count').click()"
        ));
        let count = browser.wait_for(
            "document.getElementById('batch-result').dataset.count",
            Duration::from_secs(10),
        );
        assert_eq!(count, json!("2"), "the two ticked rows");
        // The form's own filter parts narrow the selection: version 2 and a creation time from
        // 2100 match none of them (and Apply stays disabled); each cleared, both match again.
        for (field, value, expected) in [
            ("batch-version", "2", "0"),
            ("batch-version", "", "2"),
            ("batch-from", "2100-01-01T00:00", "0"),
            ("batch-from", "", "2"),
        ] {
            browser.eval(&format!(
                "delete document.getElementById('batch-result').dataset.count; \
                 document.getElementById('{field}').value = '{value}'; \
                 document.getElementById('batch-count').click()"
            ));
            let count = browser.wait_for(
                "document.getElementById('batch-result').dataset.count",
                Duration::from_secs(10),
            );
            assert_eq!(count, json!(expected), "{field} = {value:?}");
            let disabled = browser.eval("document.getElementById('batch-apply').disabled");
            assert_eq!(disabled, json!(expected == "0"), "{field} = {value:?}");
        }
        let label = browser.eval("document.getElementById('batch-selected').textContent");
        assert_eq!(label, json!("the selected rows (2)"));
        browser.screenshot(&shots.join("threads-batch-selected.png"), 1200.);
        browser.eval("document.getElementById('batch-apply').click()");
        browser.wait_for(
            "document.getElementById('batch-result').dataset.finished === '1'",
            Duration::from_secs(20),
        );
        let done = browser.eval("document.getElementById('batch-result').textContent");
        assert!(
            done.as_str().unwrap().contains("(pause): finished, 2 of 2 done: 2 applied"),
            "{done}"
        );
    });
    for i in 0..5 {
        let status = engine.thread(&format!("w-{i}")).await.unwrap().status().await.unwrap();
        let expected =
            if i == 1 || i == 3 { ThreadStatus::Paused } else { ThreadStatus::WaitingInput };
        assert_eq!(status, expected, "w-{i}");
    }
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}
