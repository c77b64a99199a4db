//! `cairn stream THREAD`: a running thread's chunks printed as they come through the endpoint of
//! the application that serves the file, then its end; a connection cut by the engine's restart
//! is made again after the last durable item, and the stream goes on to the end; without an
//! endpoint, a finished thread's end is read from the file and an unfinished one's refused.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use cairn::{Ctx, END, Engine, NodeOutput, Replace, START, StartOptions, Workflow};
use serde_json::{Value, json};

use crate::harness::{Run, Spawned, on, tempdir};

/// Opened by the test: the node waits for it in its runner (so its chunks are kept).
type Gate = Arc<AtomicBool>;

/// Streams `one` and `{"n": 2}`, waits (in its runner) for `gate`, then (parked) for the
/// signal `go`, streams `three` and ends with `done`.
fn talker(gate: &Gate) -> Workflow<Replace<String>> {
    let gate = gate.clone();
    Workflow::<Replace<String>>::builder("talker", 1)
        .node("say", move |_s: Arc<Replace<String>>, ctx: Ctx| {
            let gate = gate.clone();
            async move {
                ctx.stream("one")?;
                ctx.stream(json!({"n": 2}))?;
                while !gate.load(Ordering::SeqCst) {
                    if ctx.cancellation().is_cancelled() {
                        return Err(cairn::dsl::NodeError::Cancelled);
                    }
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
                let _go: u64 = ctx.recv("go").await?;
                ctx.stream("three")?;
                Ok(NodeOutput::update("done".to_owned()))
            }
        })
        .edge(START, "say")
        .edge("say", END)
        .build()
        .expect("valid workflow")
}

async fn serving(db: &Path, gate: &Gate) -> (Engine, cairn_tools::serve::Server) {
    let builder = Engine::builder(db).workflow(&talker(gate));
    let builder = cairn_tools::serve::ServingBuilder::new(builder, ([127, 0, 0, 1], 0).into());
    builder.open().await.expect("a serving engine")
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

/// `cairn stream THREAD --json --db DB` started, its lines read as they come.
fn spawn_stream(db: &Path, thread: &str) -> Spawned {
    let db = db.to_str().expect("utf-8 path");
    Spawned::start(&["stream", thread, "--json", "--db", db], Duration::from_secs(60))
}

/// The next line of `s` as JSON, waited for (up to 30 s) without blocking the runtime.
async fn next_item(s: &Spawned) -> Value {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let line = loop {
        match s.lines.try_recv() {
            Ok(line) => break line,
            Err(std::sync::mpsc::TryRecvError::Empty) if std::time::Instant::now() < deadline => {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            Err(e) => panic!("no line of the stream: {e}"),
        }
    };
    serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?} is not JSON: {e}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_prints_the_chunks_as_they_come_then_the_end() {
    let dir = tempdir();
    let db = dir.path().join("talk.db");
    let gate = Gate::default();
    let (engine, server) = serving(&db, &gate).await;
    let t = engine.start_json("talker", String::new(), StartOptions::id("s")).await.expect("start");
    let s = spawn_stream(&db, "s");
    let first = next_item(&s).await;
    assert_eq!((first["kind"].clone(), first["value"].clone()), (json!("chunk"), json!("one")));
    assert_eq!(next_item(&s).await["value"], json!({"n": 2}), "the chunks kept, in order");
    gate.store(true, Ordering::SeqCst);
    t.wait().await.expect("parks in recv");
    engine.signal("s", "go", 1u64).await.expect("go");
    let mut kinds = Vec::new();
    let mut values = Vec::new();
    loop {
        let item = next_item(&s).await;
        kinds.push(item["kind"].as_str().expect("a kind").to_owned());
        values.push(item["value"].clone());
        if item["kind"] == "ended" {
            assert_eq!(item["output"], json!("done"), "{item}");
            break;
        }
    }
    // The node ran again after its wake: it streamed again, `three` last.
    assert_eq!(values[values.len() - 3], json!("three"), "the chunk written after: {values:?}");
    assert_eq!(kinds[kinds.len() - 2..], ["closed", "ended"], "{kinds:?}");
    assert_eq!(tokio::task::block_in_place(|| s.wait()), 0);
    t.finished().await.expect("ended");
    // Text, through the endpoint: the finished thread's output.
    let text = cairn_on(&db, &["stream", "s"]).await.expect(0);
    assert_eq!(text.stdout.lines().last(), Some("\"done\""), "{text:?}");
    // A thread that has not finished (parked in `recv`) when the engine stops.
    let p = engine.start_json("talker", String::new(), StartOptions::id("p")).await;
    p.expect("start").wait().await.expect("parks");
    server.shutdown().await;
    engine.shutdown().await;
    drop((t, engine));
    // From the file: the finished thread's end; the unfinished one refused, saying why.
    let text = cairn_on(&db, &["stream", "s"]).await.expect(0);
    assert_eq!(text.stdout.trim(), "\"done\"", "{text:?}");
    let refused = cairn_on(&db, &["stream", "p"]).await.expect(1);
    assert!(refused.stderr.contains("no engine serves"), "{refused:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn stream_connects_again_after_the_engine_restarts_and_reads_on_to_the_end() {
    let dir = tempdir();
    let db = dir.path().join("restart.db");
    let gate = Gate::default();
    let (engine, server) = serving(&db, &gate).await;
    engine.start_json("talker", String::new(), StartOptions::id("r")).await.expect("start");
    let s = spawn_stream(&db, "r");
    assert_eq!(next_item(&s).await["value"], json!("one"));
    assert_eq!(next_item(&s).await["value"], json!({"n": 2}));
    gate.store(true, Ordering::SeqCst);
    let r = engine.thread("r").await.expect("r");
    r.wait().await.expect("parks in recv");
    // The engine stops (the stream's connection ends with it) and another one serves the
    // file; the signal wakes the thread there, and it ends.
    server.shutdown().await;
    engine.shutdown().await;
    drop((r, engine));
    let (engine, server) = serving(&db, &gate).await;
    engine.signal("r", "go", 1u64).await.expect("go");
    let mut last = next_item(&s).await;
    while last["kind"] != "ended" {
        last = next_item(&s).await;
    }
    assert_eq!(last["status"], "completed", "{last}");
    assert_eq!(last["output"], json!("done"), "{last}");
    assert_eq!(tokio::task::block_in_place(|| s.wait()), 0, "read on to the end");
    server.shutdown().await;
    engine.shutdown().await;
}
