//! Whatever an application's engine accepts it runs (issue 38 items 1 and 2): an engine opened
//! with `Engine::builder(..).serve(addr)` on a file where threads were written while no engine
//! ran them (created, and queued, by an engine opened to control only, as the command line
//! writes them) runs them at open, and runs each thread started through it: from Rust and
//! through the endpoint's start route, on a queue or not. (The command line's engines,
//! `cairn serve` and `cairn worker`: `cli::accepted`.)

use std::time::Duration;

use cairn::storage::QueueLimits;
use cairn::{Engine, RecoveryPolicy, StartOptions, ThreadStatus};
use serde_json::json;

use crate::common::{Tally, db, send, serving};
use crate::serve_start::adds;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_application_runs_every_thread_it_accepts_created_queued_started_or_posted() {
    let (_d, path) = db();
    let wf = adds();
    let input = Tally::default();
    // Written, not run: by an engine that controls only (`RecoveryPolicy::Park`, the CLI's).
    let writer =
        Engine::builder(&path).recovery(RecoveryPolicy::Park).workflow(&wf).open().await.unwrap();
    writer.define_queue("q", QueueLimits::default()).await.unwrap();
    writer.create_json("add", &input, StartOptions::id("offline")).await.unwrap();
    let queued = StartOptions::id("offline-q").on_queue("q");
    let queued = writer.create_json("add", &input, queued).await.unwrap();
    assert_eq!(queued.thread.status().await.unwrap(), ThreadStatus::Queued);
    drop(queued);
    writer.shutdown().await;
    drop(writer);

    let (engine, server) = serving(&path, &wf).await;
    engine.start_json("add", &input, StartOptions::id("rust")).await.unwrap();
    engine.start_json("add", &input, StartOptions::id("rust-q").on_queue("q")).await.unwrap();
    let url = format!("http://{}/api/workflows/add/threads", server.addr());
    let token = Some(server.token().to_owned());
    for (id, queue) in [("posted", None), ("posted-q", Some("q"))] {
        let mut body = json!({"input": input, "id": id});
        if let Some(queue) = queue {
            body["queue"] = queue.into();
        }
        let answer = send("POST", url.clone(), token.clone(), body.to_string()).await;
        assert_eq!(answer.status, 201, "{id}: {}", answer.body);
    }
    for id in ["offline", "offline-q", "rust", "rust-q", "posted", "posted-q"] {
        let outcome = engine.await_result(id, Duration::from_secs(30)).await.unwrap();
        let status = outcome.map(|o| o.status);
        assert_eq!(status, Some(ThreadStatus::Completed), "{id}");
    }
    let queues = engine.queues().await.unwrap();
    assert_eq!((queues[0].waiting, queues[0].admitted), (0, 3), "{queues:?}");
    server.shutdown().await;
    engine.shutdown().await;
}
