//! Sending a signal from a thread's page (issue 41, the web view's signal form), in a real
//! browser (`cdp`): the form checks the value as JSON as it is typed and sends nothing while it
//! does not parse; a value the workflow refuses shows the endpoint's 400 naming the value and
//! stores nothing; a good one, with a dedup key, reaches the waiting thread, which finishes
//! with it; the same key again answers the duplicate, another key the finished thread's 409,
//! and an unknown thread's page the 404. Screenshots go to `<target>/screenshots/`.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::{Durability, END, Engine, START, StartOptions, ThreadStatus};
use serde_json::{Value, json};

use crate::cdp::Browser;
use crate::common::{Tally, db};
use crate::web_view::screenshots;
use cairn_tools::serve::Serve as _;

/// Waits for one `add` signal (a `u64`, declared), then finishes with it.
fn adder() -> Workflow<Tally> {
    Workflow::<Tally>::builder("adder", 1)
        .signal::<u64>("add")
        .node("add", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.recv("add").await?;
            Ok(NodeOutput::update((n, format!("added {n}"))))
        })
        .edge(START, "add")
        .edge("add", END)
        .build()
        .unwrap()
}

/// The signals stored in `thread`'s inbox (the dedup markers among them).
fn inbox(engine: &Engine, thread: &str) -> Vec<String> {
    let id = cairn::ThreadId::new(thread).unwrap();
    let signals = engine.store().signals(&id, 0, 100).wait().unwrap();
    signals.into_iter().map(|s| s.name).collect()
}

/// Sets a form field's value as typing would (an `input` event follows).
fn type_into(browser: &mut Browser, selector: &str, value: &str) {
    browser.eval(&format!(
        "(() => {{ const f = document.querySelector({selector:?}); f.value = {value:?}; \
           f.dispatchEvent(new Event('input', {{bubbles: true}})); }})()"
    ));
}

/// The signal form's parts, by selector.
const FORM: &str = "form[data-send=signal]";

fn result(browser: &mut Browser) -> String {
    let r = browser.eval(&format!("document.querySelector('{FORM} .send-result').textContent"));
    r.as_str().unwrap().to_owned()
}

/// Submits the form as its button would, whether or not the button is enabled, and waits
/// until the result shows something other than `before`.
fn submit(browser: &mut Browser) {
    browser.eval(&format!(
        "document.querySelector('{FORM} .send-result').textContent = ''; \
         document.querySelector('{FORM}').requestSubmit()"
    ));
}

fn submit_and_wait(browser: &mut Browser, starts: &str) -> String {
    submit(browser);
    let shown = browser.wait_for(
        &format!(
            "(() => {{ const t = document.querySelector('{FORM} .send-result').textContent; \
               return t.startsWith({starts:?}) ? t : null; }})()"
        ),
        Duration::from_secs(10),
    );
    shown.as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_thread_page_sends_a_signal_the_waiting_thread_finishes_with_and_shows_refusals() {
    let (_d, path) = db();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&adder())
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let t = engine.start_json("adder", Tally::default(), StartOptions::id("sig-1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let shots = screenshots();
    let button = format!("document.querySelector('{FORM} button[type=submit]')");
    let note = format!("document.querySelector('{FORM} .note').textContent");
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/threads/sig-1#token={token}"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        assert_eq!(browser.eval("document.body.dataset.status"), json!("waiting_input"));

        // No name, then a value that is not JSON: no send, the reason shown.
        assert_eq!(browser.eval(&format!("{button}.disabled")), json!(true), "no name yet");
        assert_eq!(browser.eval(&note), json!("signal name is required"));
        type_into(&mut browser, &format!("{FORM} input[name=name]"), "add");
        type_into(&mut browser, &format!("{FORM} textarea[name=value]"), "{\"n\": ");
        assert_eq!(browser.eval(&format!("{button}.disabled")), json!(true));
        let said = browser.eval(&note);
        assert!(said.as_str().unwrap().starts_with("not JSON"), "{said}");
        submit(&mut browser);
        std::thread::sleep(Duration::from_millis(300));
        assert_eq!(result(&mut browser), "", "nothing sent");
    });
    assert!(inbox(&engine, "sig-1").is_empty(), "a value that is not JSON writes nothing");

    tokio::task::block_in_place(|| {
        // JSON, but not the `u64` the workflow declares: the endpoint's 400 names the value.
        type_into(&mut browser, &format!("{FORM} textarea[name=value]"), "\"seven\"");
        assert_eq!(browser.eval(&note), json!("valid JSON"));
        let refused = submit_and_wait(&mut browser, "400");
        assert!(refused.ends_with("(value)"), "{refused}");
        let marked =
            format!("document.querySelector('{FORM} textarea').classList.contains('invalid')");
        assert_eq!(browser.eval(&marked), json!(true));
    });
    assert!(inbox(&engine, "sig-1").is_empty(), "a refused value writes nothing");

    tokio::task::block_in_place(|| {
        // A good value with a dedup key: stored, and the waiting thread finishes with it.
        type_into(&mut browser, &format!("{FORM} textarea[name=value]"), "7");
        type_into(&mut browser, &format!("{FORM} input[name=dedup_key]"), "hook-1");
        let sent = submit_and_wait(&mut browser, "signal");
        assert!(sent.starts_with("signal #") && sent.contains(" stored"), "{sent}");
        browser.wait_for("document.body.dataset.status === 'completed'", Duration::from_secs(20));
        let output = browser.wait_for(
            "document.querySelector('details#output pre')?.textContent",
            Duration::from_secs(10),
        );
        let output: Value = serde_json::from_str(output.as_str().unwrap()).unwrap();
        assert_eq!(output, json!({"total": 7, "log": ["added 7"]}));
        browser.screenshot(&shots.join("thread-signal-sent.png"), 1400.);

        // The same key again: the first signal's number, nothing stored.
        let again = submit_and_wait(&mut browser, "signal");
        assert!(again.contains("was sent before"), "{again}");
        // Another key: the finished thread refuses it.
        type_into(&mut browser, &format!("{FORM} input[name=dedup_key]"), "hook-2");
        let finished = submit_and_wait(&mut browser, "409");
        assert!(finished.contains("completed"), "{finished}");
        browser.screenshot(&shots.join("thread-signal-refused.png"), 1400.);
    });
    let names = inbox(&engine, "sig-1");
    assert_eq!(names.iter().filter(|n| *n == "add").count(), 1, "one signal stored: {names:?}");

    tokio::task::block_in_place(|| {
        // An unknown thread's page: the form shows the 404.
        browser.navigate(&format!("{base}/ui/threads/nobody"));
        browser.wait_for(&format!("document.querySelector('{FORM}')"), Duration::from_secs(20));
        type_into(&mut browser, &format!("{FORM} input[name=name]"), "add");
        type_into(&mut browser, &format!("{FORM} textarea[name=value]"), "1");
        let unknown = submit_and_wait(&mut browser, "404");
        assert!(unknown.contains("nobody"), "{unknown}");
    });
    let none = engine.thread("nobody").await;
    assert!(matches!(none, Err(cairn::Error::UnknownThread(_))), "no thread made");
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}
