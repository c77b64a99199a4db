//! `cairn get-event` and `cairn promise complete` through the endpoint of the application that
//! serves the file (this binary does not have its workflow): a published key waited for, a
//! key not set by the end of the wait (exit 6) or never (exit 1); a promise completed once, the
//! same completion again a success, another one and an unknown id refused (exit 1).

use std::path::Path;
use std::sync::Arc;

use cairn::{Ctx, END, Engine, NodeOutput, Replace, START, StartOptions, Workflow};

use crate::harness::{Run, on, tempdir};

/// Creates a promise, publishes its id as `promise`, and ends with what completed it.
fn approver() -> Workflow<Replace<String>> {
    Workflow::<Replace<String>>::builder("approver", 1)
        .node("ask", |_s: Arc<Replace<String>>, ctx: Ctx| async move {
            let p = ctx.promise().await?;
            ctx.set_event("promise", p.id()).await?;
            let note = match ctx.await_promise::<u64>(&p).await? {
                Ok(n) => format!("approved {n}"),
                Err(e) => format!("refused: {e}"),
            };
            Ok(NodeOutput::update(note))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .build()
        .expect("valid workflow")
}

/// `cairn ARGS... --db DB`, off the runtime's workers (the engine serving DB runs on them).
async fn cairn_on(db: &Path, args: &[&str]) -> Run {
    let db = db.to_path_buf();
    let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
    tokio::task::spawn_blocking(move || {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        on(&db, &args)
    })
    .await
    .expect("the command's thread")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn get_event_waits_and_promise_complete_is_idempotent_through_the_endpoint() {
    let dir = tempdir();
    let db = dir.path().join("approvals.db");
    let builder = Engine::builder(&db).workflow(&approver());
    let builder = cairn_tools::serve::ServingBuilder::new(builder, ([127, 0, 0, 1], 0).into());
    let (engine, server) = builder.open().await.expect("a serving engine");
    let t =
        engine.start_json("approver", String::new(), StartOptions::id("c")).await.expect("start");

    let got = cairn_on(&db, &["get-event", "c", "promise", "--wait-ms", "10000"]).await.expect(0);
    assert_eq!(got.json()["state"], "set", "{}", got.stdout);
    let id = got.json()["value"].as_str().expect("the promise's id").to_owned();
    let pending = cairn_on(&db, &["get-event", "c", "other", "--wait-ms", "50"]).await.expect(6);
    assert_eq!(pending.json()["state"], "pending", "{}", pending.stdout);

    let done =
        cairn_on(&db, &["promise", "complete", &id, "--value", "4", "--json"]).await.expect(0);
    assert_eq!(done.json()["duplicate"], false, "{}", done.stdout);
    let again =
        cairn_on(&db, &["promise", "complete", &id, "--value", "4", "--json"]).await.expect(0);
    assert_eq!(again.json()["duplicate"], true, "{}", again.stdout);
    let other = cairn_on(&db, &["promise", "complete", &id, "--error", "late"]).await.expect(1);
    assert!(other.stderr.contains("completed before"), "{}", other.stderr);
    let unknown = ["promise", "complete", "c~p9.0123456789abcdef.0", "--value", "1"];
    let unknown = cairn_on(&db, &unknown).await.expect(1);
    assert!(unknown.stderr.contains("no promise"), "{}", unknown.stderr);
    assert_eq!(t.output::<Replace<String>>().await.expect("output").0, "approved 4");
    let never = cairn_on(&db, &["get-event", "c", "other"]).await.expect(1);
    assert_eq!(never.json()["state"], "never_set", "{}", never.stdout);
    server.shutdown().await;
    engine.shutdown().await;
}
