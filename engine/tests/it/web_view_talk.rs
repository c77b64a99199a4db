//! Talking to a running thread from its page (issue 41, the web view), in a real browser
//! (`cdp`): the update form applies a declared update to a waiting thread and shows its reply,
//! the same update id again its duplicate answer, a validator's refusal (400 naming `args`) and
//! an unknown update (404) show and write nothing; the thread's published events show with
//! their latest values and its open promise with a form that completes it, after which the
//! waiting thread finishes; another completion of it shows the 409, an update to the finished
//! thread the 409; the page links to the thread's live stream. An update with a short wait to a
//! thread inside a long step shows the 504, and the same id sent again is applied once.
//! Screenshots go to
//! `<target>/screenshots/`.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::{Durability, END, Engine, START, StartOptions, ThreadStatus};
use cairn_tools::Operator;
use cairn_tools::serve::Serve as _;
use serde_json::{Value, json};

use crate::cdp::Browser;
use crate::common::{Tally, call, db};
use crate::updates::ADD;
use crate::web_view::screenshots;

/// Publishes its stage and a promise's id, awaits the promise (a `u64`), then finishes with
/// it; declares the update `add` (refuses 0, replies with the new total).
pub(crate) fn desk() -> Workflow<Tally> {
    Workflow::<Tally>::builder("desk", 1)
        .node("ask", |_s: Arc<Tally>, ctx: Ctx| async move {
            ctx.set_event("stage", "waiting for approval").await?;
            let p = ctx.promise().await?;
            ctx.set_event("approval", p.id()).await?;
            let n = match ctx.await_promise::<u64>(&p).await? {
                Ok(n) => n,
                Err(message) => return Ok(NodeOutput::update((0, format!("refused: {message}")))),
            };
            ctx.set_event("stage", format!("approved {n}")).await?;
            Ok(NodeOutput::update((n, format!("approved {n}"))))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .update(
            ADD,
            |_s: &Tally, by: &u64| if *by == 0 { Err("add at least 1".into()) } else { Ok(()) },
            |s: &mut Tally, by: u64| {
                s.total += by;
                s.log.push(format!("update {by}"));
                Ok(s.total)
            },
        )
        .build()
        .unwrap()
}

/// Sets a form field's value as typing would (an `input` event follows).
pub(crate) fn type_into(browser: &mut Browser, selector: &str, value: &str) {
    browser.eval(&format!(
        "(() => {{ const f = document.querySelector({selector:?}); f.value = {value:?}; \
           f.dispatchEvent(new Event('input', {{bubbles: true}})); }})()"
    ));
}

/// Submits form `form` (a selector) and waits until its result starts with `starts`.
fn submit_and_wait(browser: &mut Browser, form: &str, starts: &str) -> String {
    browser.eval(&format!(
        "document.querySelector('{form} .send-result').textContent = ''; \
         document.querySelector('{form}').requestSubmit()"
    ));
    let shown = browser.wait_for(
        &format!(
            "(() => {{ const t = document.querySelector('{form} .send-result').textContent; \
               return t.startsWith({starts:?}) ? t : null; }})()"
        ),
        Duration::from_secs(10),
    );
    shown.as_str().unwrap().to_owned()
}

/// The thread's state total and its last seq.
async fn total_and_seq(engine: &Engine, thread: &str) -> (Value, u64) {
    let view = Operator::new(engine).state_at(thread, None).await.unwrap();
    (view.state["total"].clone(), view.seq)
}

const UPDATE: &str = "form[data-send=update]";
const PROMISE: &str = "form[data-send=promise]";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_thread_page_applies_updates_shows_published_events_and_completes_a_promise() {
    let (_d, path) = db();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&desk())
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let t = engine.start_json("desk", Tally::default(), StartOptions::id("desk-1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let promise =
        engine.published("desk-1").await.unwrap()["approval"].as_str().unwrap().to_owned();
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let shots = screenshots();
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/threads/desk-1#token={token}"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        // The published events, the open promise, the declared update, the stream's link.
        let stage = browser.wait_for(
            "document.querySelector('#published tr[data-key=stage] td:last-child')?.textContent",
            Duration::from_secs(10),
        );
        assert_eq!(stage, json!("\"waiting for approval\""));
        let approval = browser.eval(
            "document.querySelector('#published tr[data-key=approval] td:last-child').textContent",
        );
        assert_eq!(approval, json!(format!("{promise:?}")));
        let open = browser.wait_for(
            "[...document.querySelectorAll('#promises tr[data-state=open]')].map((r) => r.dataset.promise)",
            Duration::from_secs(10),
        );
        assert_eq!(open, json!([promise]));
        let names = browser
            .eval("[...document.querySelectorAll('#update-names option')].map((o) => o.value)");
        assert_eq!(names, json!(["add"]));
        let link = browser.eval("document.getElementById('stream-link').getAttribute('href')");
        assert_eq!(link, json!("/ui/threads/desk-1/stream"));
    });
    let before = total_and_seq(&engine, "desk-1").await;

    tokio::task::block_in_place(|| {
        // A validator's refusal: the 400 names the arguments, which are marked.
        type_into(&mut browser, &format!("{UPDATE} input[name=name]"), "add");
        type_into(&mut browser, &format!("{UPDATE} textarea[name=args]"), "0");
        let refused = submit_and_wait(&mut browser, UPDATE, "400");
        assert!(refused.contains("add at least 1") && refused.ends_with("(args)"), "{refused}");
        let marked =
            format!("document.querySelector('{UPDATE} textarea').classList.contains('invalid')");
        assert_eq!(browser.eval(&marked), json!(true));
        // An unknown update: the 404 names it and the declared ones.
        type_into(&mut browser, &format!("{UPDATE} input[name=name]"), "nope");
        type_into(&mut browser, &format!("{UPDATE} textarea[name=args]"), "1");
        let unknown = submit_and_wait(&mut browser, UPDATE, "404");
        assert!(unknown.contains("nope") && unknown.contains("add"), "{unknown}");
        browser.screenshot(&shots.join("thread-update-refused.png"), 1400.);
    });
    assert_eq!(total_and_seq(&engine, "desk-1").await, before, "a refusal writes nothing");

    tokio::task::block_in_place(|| {
        // A good update with an id: its reply; the same id again, the duplicate answer.
        type_into(&mut browser, &format!("{UPDATE} input[name=name]"), "add");
        type_into(&mut browser, &format!("{UPDATE} textarea[name=args]"), "5");
        type_into(&mut browser, &format!("{UPDATE} input[name=id]"), "u-1");
        let applied = submit_and_wait(&mut browser, UPDATE, "update");
        assert!(
            applied.starts_with("update u-1 applied") && applied.ends_with("reply: 5"),
            "{applied}"
        );
        let again = submit_and_wait(&mut browser, UPDATE, "update");
        assert!(again.contains("was applied before: its reply 5"), "{again}");
    });
    let (total, _) = total_and_seq(&engine, "desk-1").await;
    assert_eq!(total, json!(5), "applied once");
    let record = engine.thread("desk-1").await.unwrap().wait().await.unwrap();
    assert_eq!(record.status, ThreadStatus::WaitingInput, "still waiting for its promise");

    tokio::task::block_in_place(|| {
        // Complete the promise from its row: the thread finishes with the value.
        browser.eval("document.querySelector('#promises tr[data-state=open] button').click()");
        let picked =
            browser.eval(&format!("document.querySelector('{PROMISE} input[name=promise]').value"));
        assert_eq!(picked, json!(promise));
        type_into(&mut browser, &format!("{PROMISE} textarea[name=value]"), "3");
        let done = submit_and_wait(&mut browser, PROMISE, "promise");
        assert!(done.ends_with("completed (signal #1)"), "{done}");
        browser.wait_for("document.body.dataset.status === 'completed'", Duration::from_secs(20));
        let output = browser.wait_for(
            "document.querySelector('details#output pre')?.textContent",
            Duration::from_secs(10),
        );
        let output: Value = serde_json::from_str(output.as_str().unwrap()).unwrap();
        assert_eq!(output, json!({"total": 8, "log": ["update 5", "approved 3"]}));
        // The promise shows completed with its value, the stage its latest value.
        browser.wait_for(
            "document.querySelector('#promises tr[data-state=completed]')",
            Duration::from_secs(10),
        );
        let stage = browser.wait_for(
            "(() => { const t = document.querySelector('#published tr[data-key=stage] td:last-child').textContent; \
               return t.includes('approved') ? t : null; })()",
            Duration::from_secs(10),
        );
        assert_eq!(stage, json!("\"approved 3\""));
        browser.screenshot(&shots.join("thread-promise-completed.png"), 2400.);

        // The same completion again: the duplicate; another one (an error): the 409.
        let again = submit_and_wait(&mut browser, PROMISE, "promise");
        assert!(again.contains("was completed so before"), "{again}");
        type_into(&mut browser, &format!("{PROMISE} input[name=error]"), "too late");
        let note = browser.eval(&format!("document.querySelector('{PROMISE} .note').textContent"));
        assert_eq!(note, json!("the value is not sent"));
        let other = submit_and_wait(&mut browser, PROMISE, "409");
        assert!(other.contains("too late"), "{other}");
        // An update to the finished thread: the 409.
        type_into(&mut browser, &format!("{UPDATE} input[name=id]"), "u-2");
        let finished = submit_and_wait(&mut browser, UPDATE, "409");
        assert!(finished.contains("completed"), "{finished}");
        browser.screenshot(&shots.join("thread-talk-refused.png"), 1400.);
    });
    let (total, _) = total_and_seq(&engine, "desk-1").await;
    assert_eq!(total, json!(8), "the refusals after the end changed nothing");
    // The route the page reads: the promise completed with its value, by the first signal; an
    // unknown thread's promises a 404 naming it.
    let (status, body) =
        call("GET", format!("{base}/api/threads/desk-1/promises"), None, String::new()).await;
    assert_eq!(status, 200, "{body}");
    let row = json!({"promise": promise, "state": "completed", "signal": 1, "value": 3});
    assert_eq!(body, json!({"thread": "desk-1", "promises": [row]}));
    let (status, body) =
        call("GET", format!("{base}/api/threads/nobody/promises"), None, String::new()).await;
    assert_eq!((status, body["field"].as_str()), (404, Some("thread")), "{body}");
    // A promise completed with an error lists the error; an open one, nothing more.
    let t2 = engine.start_json("desk", Tally::default(), StartOptions::id("desk-2")).await.unwrap();
    assert_eq!(t2.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let second = engine.published("desk-2").await.unwrap()["approval"].as_str().unwrap().to_owned();
    let (_, body) =
        call("GET", format!("{base}/api/threads/desk-2/promises"), None, String::new()).await;
    assert_eq!(body["promises"], json!([{"promise": second, "state": "open"}]));
    engine.complete_promise(&second, Err("no budget".into())).await.unwrap();
    assert_eq!(t2.wait().await.unwrap().status, ThreadStatus::Completed);
    let (_, body) =
        call("GET", format!("{base}/api/threads/desk-2/promises"), None, String::new()).await;
    let row = json!({"promise": second, "state": "completed", "signal": 1, "error": "no budget"});
    assert_eq!(body["promises"], json!([row]));
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}

/// Works 3 s in one step (no step boundary meanwhile), then waits for `go`; declares `add`.
fn slow() -> Workflow<Tally> {
    Workflow::<Tally>::builder("slow", 1)
        .node("work", |_s: Arc<Tally>, _ctx: Ctx| async move {
            tokio::time::sleep(Duration::from_millis(3_000)).await;
            Ok(NodeOutput::none())
        })
        .node("park", |_s: Arc<Tally>, ctx: Ctx| async move {
            let _go: u64 = ctx.recv("go").await?;
            Ok(NodeOutput::none())
        })
        .edge(START, "work")
        .edge("work", "park")
        .edge("park", END)
        .update(
            ADD,
            |_s: &Tally, by: &u64| if *by == 0 { Err("add at least 1".into()) } else { Ok(()) },
            |s: &mut Tally, by: u64| {
                s.total += by;
                Ok(s.total)
            },
        )
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_update_form_shows_the_504_of_a_thread_inside_a_step_and_the_same_id_applies_once() {
    let (_d, path) = db();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&slow())
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    // The browser first (it starts slower than the step), then the thread and its page.
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/threads#token={token}"));
    });
    engine.start_json("slow", Tally::default(), StartOptions::id("slow-1")).await.unwrap();
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/threads/slow-1"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        assert_eq!(browser.eval("document.body.dataset.status"), json!("running"));
        type_into(&mut browser, &format!("{UPDATE} input[name=name]"), "add");
        type_into(&mut browser, &format!("{UPDATE} textarea[name=args]"), "1");
        type_into(&mut browser, &format!("{UPDATE} input[name=id]"), "u-slow");
        type_into(&mut browser, &format!("{UPDATE} input[name=wait_ms]"), "100");
        let pending = submit_and_wait(&mut browser, UPDATE, "504");
        assert!(pending.contains("u-slow"), "{pending}");
        browser.screenshot(&screenshots().join("thread-update-pending.png"), 1000.);
        // The same id again, waiting long enough: applied once, at the step boundary.
        type_into(&mut browser, &format!("{UPDATE} input[name=wait_ms]"), "");
        let applied = submit_and_wait(&mut browser, UPDATE, "update u-slow");
        assert!(applied.contains("reply: 1") || applied.contains("its reply 1"), "{applied}");
    });
    let t = engine.thread("slow-1").await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    assert_eq!(total_and_seq(&engine, "slow-1").await.0, json!(1), "applied once");
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}
