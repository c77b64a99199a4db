//! Starting a thread from the web view (issue 32 item 4), in a real browser (`cdp`): the
//! workflows page draws each compiled-in version's graph side by side and names the nodes a
//! version adds; its start form checks the input as JSON as it is typed, asks for the token,
//! shows the endpoint's refusal of an input that is no state of the workflow, and starts a
//! thread whose link opens its page, where it completes; the same id answers that thread, and
//! a start on a queue names a bad queue or lands on the queue. Screenshots go to
//! `<target>/screenshots/`.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::storage::QueueLimits;
use cairn::{Durability, END, Engine, START, StartOptions};
use serde_json::{Value, json};

use crate::cdp::Browser;
use crate::common::{Tally, db};
use crate::web_view::screenshots;
use cairn_tools::serve::Serve as _;

/// `greeter` at `version`: says hello; from version 2 on it also signs.
fn greeter(version: u32) -> Workflow<Tally> {
    let b = Workflow::<Tally>::builder("greeter", version)
        .node("hello", |_s: Arc<Tally>, _ctx: Ctx| async move {
            Ok(NodeOutput::update((1, "hello".into())))
        })
        .edge(START, "hello");
    let b = if version < 2 {
        b.edge("hello", END)
    } else {
        b.node("sign", |_s: Arc<Tally>, _ctx: Ctx| async move {
            Ok(NodeOutput::update((1, "signed".into())))
        })
        .edge("hello", "sign")
        .edge("sign", END)
    };
    b.build().unwrap()
}

/// GET `url` off the async workers: the body as JSON.
async fn get(url: String) -> Value {
    tokio::task::spawn_blocking(move || {
        let mut resp = ureq::get(&url).call().unwrap();
        serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap()
    })
    .await
    .unwrap()
}

/// Sets a form field's value as typing would (an `input` event follows).
fn type_into(browser: &mut Browser, selector: &str, value: &str) {
    browser.eval(&format!(
        "(() => {{ const f = document.querySelector({selector:?}); f.value = {value:?}; \
           f.dispatchEvent(new Event('input', {{bubbles: true}})); }})()"
    ));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workflows_page_shows_versions_side_by_side_and_starts_a_thread_that_completes() {
    let (_d, path) = db();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&greeter(1))
        .workflow(&greeter(2))
        .queue("mail", QueueLimits { concurrency_max: Some(1), ..QueueLimits::default() })
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let old = StartOptions { version: Some(1), ..StartOptions::id("old-1") };
    engine.start_json("greeter", Tally::default(), old).await.unwrap().wait().await.unwrap();
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let shots = screenshots();
    let form = "form[data-start=greeter]";
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/workflows"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));

        // Both versions drawn side by side, each with its threads; v2 names the node it adds.
        browser.wait_for(
            "document.querySelectorAll('[data-workflow=greeter] figure.version svg').length === 2",
            Duration::from_secs(20),
        );
        let tops = browser.eval(
            "[...document.querySelectorAll('[data-workflow=greeter] figure.version')] \
               .map((f) => [f.dataset.version, Math.round(f.getBoundingClientRect().top)])",
        );
        assert_eq!(tops[0][0], json!("1"), "{tops}");
        assert_eq!(tops[0][1], tops[1][1], "side by side, on one row: {tops}");
        let threads =
            browser.eval("document.querySelector('[data-workflow=greeter] [data-version-threads=\"1\"]').textContent");
        let card = browser.eval("document.querySelector('[data-workflow=greeter] dl').textContent");
        assert_eq!(threads, json!("1 thread"), "{card}");
        let changes = browser.wait_for(
            "document.querySelector('[data-workflow=greeter] figure.version[data-version=\"2\"] .changes')?.textContent",
            Duration::from_secs(10),
        );
        assert!(changes.as_str().unwrap().starts_with("+ sign"), "{changes}");
        let added = browser.eval(
            "[...document.querySelectorAll('[data-workflow=greeter] figure.version[data-version=\"2\"] g.node.added')] \
               .map((g) => g.dataset.node)",
        );
        assert_eq!(added, json!(["sign"]));

        // The input is checked as it is typed: no Start for what is not JSON.
        let button = format!("document.querySelector('{form} button[type=submit]')");
        type_into(&mut browser, &format!("{form} textarea"), "{\"total\": 1,");
        assert_eq!(browser.eval(&format!("{button}.disabled")), json!(true));
        let note = browser.eval(&format!("document.querySelector('{form} .note').textContent"));
        assert!(note.as_str().unwrap().starts_with("not JSON"), "{note}");
        type_into(&mut browser, &format!("{form} input[name=labels]"), "origin");
        type_into(&mut browser, &format!("{form} textarea"), "{\"total\": \"many\"}");
        assert_eq!(browser.eval(&format!("{button}.disabled")), json!(true), "a bad label");
        type_into(&mut browser, &format!("{form} input[name=labels]"), "origin=web, team=a");
        assert_eq!(browser.eval(&format!("{button}.disabled")), json!(false));

        // Without the token the page asks for it; with it, the endpoint refuses an input that
        // is no state of the workflow, naming the input.
        let result = format!("document.querySelector('{form} .start-result').textContent");
        browser.eval(&format!("{button}.click()"));
        browser.wait_for(&format!("{result}.includes('token')"), Duration::from_secs(10));
        browser.eval(&format!(
            "document.getElementById('token').value = '{token}'; \
             document.getElementById('token-save').click(); {button}.click()"
        ));
        browser.wait_for(&format!("{result}.startsWith('400')"), Duration::from_secs(10));
        let refused = browser.eval(&result);
        assert!(refused.as_str().unwrap().ends_with("(input)"), "{refused}");
        assert_eq!(
            browser.eval(&format!(
                "document.querySelector('{form} textarea').classList.contains('invalid')"
            )),
            json!(true)
        );

        // A state, an id and labels: the thread starts, and its link is shown.
        type_into(
            &mut browser,
            &format!("{form} textarea"),
            "{\"total\": 40, \"log\": [\"from the page\"]}",
        );
        type_into(&mut browser, &format!("{form} input[name=id]"), "web-1");
        // Format pretty-prints the input in place.
        browser.eval(&format!("document.querySelector('{form} button[type=button]').click()"));
        let formatted = browser.eval(&format!("document.querySelector('{form} textarea').value"));
        assert_eq!(
            formatted,
            json!("{\n  \"total\": 40,\n  \"log\": [\n    \"from the page\"\n  ]\n}")
        );
        browser.eval(&format!("{button}.click()"));
        let link = browser.wait_for(
            &format!("document.querySelector('{form} .start-result a[data-thread]')?.getAttribute('href')"),
            Duration::from_secs(10),
        );
        assert_eq!(link, json!("/ui/threads/web-1"));
        assert!(browser.eval(&result).as_str().unwrap().starts_with("started"));
        browser.wait_for(
            "document.querySelector('[data-workflow=greeter] .count[data-status=completed]')?.dataset.n === '2'",
            Duration::from_secs(20),
        );
        browser.screenshot(&shots.join("workflows-start.png"), 2000.);

        // The link opens the thread's page, where the thread completes with the input's state.
        browser.eval(&format!("document.querySelector('{form} .start-result a').click()"));
        browser.wait_for("location.pathname === '/ui/threads/web-1'", Duration::from_secs(10));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        browser.wait_for("document.body.dataset.status === 'completed'", Duration::from_secs(20));
        let output = browser.wait_for(
            "document.querySelector('details#output pre')?.textContent",
            Duration::from_secs(10),
        );
        let output: Value = serde_json::from_str(output.as_str().unwrap()).unwrap();
        assert_eq!(output, json!({"total": 42, "log": ["from the page", "hello", "signed"]}));
        browser.screenshot(&shots.join("thread-started-from-page.png"), 2000.);
    });
    let shown = get(format!("{base}/api/threads/web-1")).await;
    assert_eq!(shown["labels"], json!({"origin": "web", "team": "a"}), "{shown}");

    // The same id again answers the thread that is there.
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/workflows"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        type_into(&mut browser, &format!("{form} textarea"), "{\"total\": 0, \"log\": []}");
        type_into(&mut browser, &format!("{form} input[name=id]"), "web-1");
        browser.eval(&format!("document.querySelector('{form} button[type=submit]').click()"));
        let again = browser.wait_for(
            &format!("document.querySelector('{form} .start-result a') && document.querySelector('{form} .start-result').textContent"),
            Duration::from_secs(10),
        );
        assert_eq!(again, json!("already there: web-1"));

        // On a queue: a key or a priority alone, or a priority out of range, is no start; an
        // unknown queue is refused by name; a known one takes the thread.
        let button = format!("document.querySelector('{form} button[type=submit]')");
        let note = format!("document.querySelector('{form} .note').textContent");
        type_into(&mut browser, &format!("{form} input[name=id]"), "web-q");
        type_into(&mut browser, &format!("{form} input[name=key]"), "acme");
        assert_eq!(browser.eval(&format!("{button}.disabled")), json!(true));
        assert_eq!(browser.eval(&note), json!("a key or a priority needs a queue"));
        type_into(&mut browser, &format!("{form} input[name=queue]"), "nope");
        type_into(&mut browser, &format!("{form} input[name=priority]"), "300");
        assert_eq!(browser.eval(&format!("{button}.disabled")), json!(true));
        type_into(&mut browser, &format!("{form} input[name=priority]"), "7");
        browser.eval(&format!("{button}.click()"));
        let result = format!("document.querySelector('{form} .start-result').textContent");
        browser.wait_for(&format!("{result}.startsWith('404')"), Duration::from_secs(10));
        let refused = browser.eval(&result);
        assert!(refused.as_str().unwrap().ends_with("(queue)"), "{refused}");
        type_into(&mut browser, &format!("{form} input[name=queue]"), "mail");
        browser.eval(&format!("{button}.click()"));
        browser.wait_for(
            &format!("document.querySelector('{form} .start-result a[data-thread=web-q]')"),
            Duration::from_secs(10),
        );
        browser.eval(&format!("document.querySelector('{form} details.more').open = true"));
        browser.screenshot(&shots.join("workflows-start-queue.png"), 2000.);
    });
    let queues = get(format!("{base}/api/queues")).await;
    let mail = queues["queues"].as_array().unwrap().iter().find(|q| q["name"] == "mail").cloned();
    assert_eq!(mail.as_ref().map(|q| q["admitted"].clone()), Some(json!(1)), "{queues}");
    engine.thread("web-q").await.unwrap().wait().await.unwrap();
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}
