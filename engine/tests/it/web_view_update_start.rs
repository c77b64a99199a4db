//! Update-with-start from the web view (issue 41), in a real browser (`cdp`): a workflow's start
//! form with an update named asks for the thread's id, then starts the thread if absent and
//! applies the update to it, showing the thread's link and the update's reply; the same form
//! again finds the thread there and applies another update; the same update id answers the
//! recorded reply; an unknown update (404 naming `name`) and a validator's refusal (400 naming
//! `args`) show and apply nothing. Screenshots go to `<target>/screenshots/`.

use std::time::Duration;

use cairn::{Durability, Engine, ThreadStatus};
use cairn_tools::Operator;
use cairn_tools::serve::Serve as _;
use serde_json::{Value, json};

use crate::cdp::Browser;
use crate::common::db;
use crate::web_view::screenshots;
use crate::web_view_talk::{desk, type_into};

const FORM: &str = "form[data-start=desk]";

/// Submits the start form and waits until its result says something other than "starting…".
fn submit(browser: &mut Browser) -> String {
    browser.eval(&format!(
        "document.querySelector('{FORM} .start-result').textContent = ''; \
         document.querySelector('{FORM}').requestSubmit()"
    ));
    let shown = browser.wait_for(
        &format!(
            "(() => {{ const t = document.querySelector('{FORM} .start-result').textContent; \
               return t && !t.startsWith('starting') ? t : null; }})()"
        ),
        Duration::from_secs(10),
    );
    shown.as_str().unwrap().to_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_start_form_starts_a_thread_if_absent_and_applies_an_update_to_it() {
    let (_d, path) = db();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&desk())
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let shots = screenshots();
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    let button = format!("document.querySelector('{FORM} button[type=submit]')");
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/workflows#token={token}"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        browser.wait_for(&format!("{button} !== null"), Duration::from_secs(20));
        browser.eval(&format!(
            "document.querySelector('{FORM} details[data-with=update]').open = true"
        ));
        type_into(
            &mut browser,
            &format!("{FORM} textarea[name=input]"),
            "{\"total\": 1, \"log\": []}",
        );
        type_into(&mut browser, &format!("{FORM} input[name=update]"), "add");
        type_into(&mut browser, &format!("{FORM} textarea[name=args]"), "2");
        // An update-with-start names its thread: no button without the id.
        assert_eq!(browser.eval(&format!("{button}.disabled")), json!(true));
        let note = browser.eval(&format!("document.querySelector('{FORM} .note').textContent"));
        assert!(note.as_str().unwrap().contains("needs the thread's id"), "{note}");
        type_into(&mut browser, &format!("{FORM} input[name=id]"), "ws-1");
        assert_eq!(browser.eval(&format!("{button}.disabled")), json!(false));
        assert_eq!(browser.eval(&format!("{button}.textContent")), json!("Start and update"));
        let started = submit(&mut browser);
        assert!(
            started.starts_with("started ws-1; update ") && started.ends_with("reply: 3"),
            "{started}"
        );
        let link = browser.eval(&format!(
            "document.querySelector('{FORM} .start-result a[data-thread]').getAttribute('href')"
        ));
        assert_eq!(link, json!("/ui/threads/ws-1"));
        browser.screenshot(&shots.join("workflows-update-with-start.png"), 2000.);

        // There already: the update is applied to it; its id again answers the recorded reply.
        type_into(&mut browser, &format!("{FORM} input[name=update_id]"), "u-1");
        type_into(&mut browser, &format!("{FORM} textarea[name=args]"), "4");
        let again = submit(&mut browser);
        assert!(
            again.starts_with("already there: ws-1; update u-1 applied")
                && again.ends_with("reply: 7"),
            "{again}"
        );
        let duplicate = submit(&mut browser);
        assert!(duplicate.contains("u-1 was applied before: its reply 7"), "{duplicate}");

        // Refusals name their field, which is marked; nothing is applied.
        type_into(&mut browser, &format!("{FORM} input[name=update_id]"), "");
        type_into(&mut browser, &format!("{FORM} textarea[name=args]"), "0");
        let refused = submit(&mut browser);
        assert!(refused.starts_with("400") && refused.ends_with("(args)"), "{refused}");
        let marked = browser.eval(&format!(
            "document.querySelector('{FORM} textarea[name=args]').classList.contains('invalid')"
        ));
        assert_eq!(marked, json!(true));
        type_into(&mut browser, &format!("{FORM} input[name=update]"), "nope");
        type_into(&mut browser, &format!("{FORM} textarea[name=args]"), "1");
        let unknown = submit(&mut browser);
        assert!(unknown.starts_with("404") && unknown.ends_with("(name)"), "{unknown}");
    });
    let view = Operator::new(&engine).state_at("ws-1", None).await.unwrap();
    assert_eq!(view.state["total"], json!(7), "{}", view.state);
    assert_eq!(view.state["log"], json!(["update 2", "update 4"]), "{}", view.state);
    let t = engine.thread("ws-1").await.unwrap();
    let status: Value = json!(t.wait().await.unwrap().status);
    assert_eq!(
        status,
        json!(ThreadStatus::WaitingInput),
        "the thread runs on, awaiting its promise"
    );
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}
