//! `cairn signal` to a thread whose workflow declares its signals' types, through the endpoint
//! of the application that serves the file (this binary does not have the workflow): a value of
//! the wrong type, or an undeclared name, exits 2 with the reason and leaves the thread waiting.

use std::path::Path;
use std::sync::Arc;

use cairn::{Ctx, END, Engine, NodeOutput, Replace, START, StartOptions, ThreadStatus, Workflow};

use crate::harness::{Run, on, tempdir};

fn parcel() -> Workflow<Replace<String>> {
    Workflow::<Replace<String>>::builder("parcel", 1)
        .node("wait", |_s: Arc<Replace<String>>, ctx: Ctx| async move {
            let place: String = ctx.recv("delivered").await?;
            Ok(NodeOutput::update(place))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .signal::<String>("delivered")
        .build()
        .expect("valid workflow")
}

/// `cairn ARGS... --db DB`, off the runtime's workers (the engine serving DB runs on them).
async fn cairn_on(db: &Path, args: &'static [&'static str]) -> Run {
    let db = db.to_path_buf();
    tokio::task::spawn_blocking(move || on(&db, args)).await.expect("the command's thread")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn signal_of_the_wrong_type_exits_2_and_the_thread_keeps_waiting() {
    let dir = tempdir();
    let db = dir.path().join("parcels.db");
    let builder = Engine::builder(&db).workflow(&parcel());
    let builder = cairn_tools::serve::ServingBuilder::new(builder, ([127, 0, 0, 1], 0).into());
    let (engine, server) = builder.open().await.expect("a serving engine");
    let t = engine.start_json("parcel", String::new(), StartOptions::id("c")).await.expect("start");
    assert_eq!(t.wait().await.expect("parks").status, ThreadStatus::WaitingInput);

    let refused = cairn_on(&db, &["signal", "c", "delivered", "12345"]).await.expect(2);
    let said = &refused.stderr;
    assert!(said.contains(r#"signal "delivered" takes a String"#), "{said}");
    assert!(said.contains("invalid type: integer `12345`, expected a string"), "{said}");
    let undeclared = cairn_on(&db, &["signal", "c", "lost", "x"]).await.expect(2);
    assert!(undeclared.stderr.contains(r#"declares no signal "lost""#), "{}", undeclared.stderr);
    assert_eq!(t.status().await.expect("status"), ThreadStatus::WaitingInput);

    let sent = cairn_on(&db, &["signal", "c", "delivered", "porch", "--json"]).await.expect(0);
    assert_eq!(sent.json()["signal"], 1, "nothing was stored before: {}", sent.stdout);
    assert_eq!(t.output::<Replace<String>>().await.expect("output").0, "porch");
    server.shutdown().await;
    engine.shutdown().await;
}
