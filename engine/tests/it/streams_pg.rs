//! Streams across engines on PostgreSQL (`exec/stream_forward.rs`): a reader on engine B gets
//! the chunks a task of a thread engine A drives writes (a large one cut into several NOTIFY
//! messages and put back together), in order, then the durable close and the thread's end.

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::storage::ThreadId;
use cairn::{END, Engine, START, StartOptions, StreamItem, ThreadStatus};
use cairn_storage_testkit::pg_cluster::Cluster;
use futures::StreamExt as _;
use serde_json::{Value, json};

use crate::common::Tally;

/// A chunk larger than one NOTIFY payload (4 KiB): sent in parts.
fn big() -> String {
    "é-".repeat(5_000)
}

/// `write`: waits for `go`, streams `a`, a large chunk and `b`, then waits for `done` (so that
/// the test sees every chunk arrive before the thread ends) and ends (running again after
/// `done`, it streams them again).
fn writing() -> Workflow<Tally> {
    Workflow::<Tally>::builder("writing", 1)
        .node("write", |_s: Arc<Tally>, ctx: Ctx| async move {
            let _: u64 = ctx.recv("go").await?;
            ctx.stream("a")?;
            ctx.stream(big())?;
            ctx.stream("b")?;
            let _: u64 = ctx.recv("done").await?;
            Ok(NodeOutput::update((1, "written".to_owned())))
        })
        .edge(START, "write")
        .edge("write", END)
        .build()
        .unwrap()
}

/// An engine on `url`. Its lease outlives a loaded machine's pauses: the test is about a reader
/// on the engine that does not drive the thread, and a takeover (a 2 s lease renewed late on a
/// busy CI machine did it once) would make the reader's engine the driving one.
async fn open(url: &str, wf: &Workflow<Tally>) -> Engine {
    Engine::builder(url).lease_ttl_ms(15_000).poll_ms(50).workflow(wf).open().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_on_another_engine_gets_the_chunks_then_the_durable_end() {
    let Some(cluster) = Cluster::start("streams_across_engines") else { return };
    let url = cluster.new_database();
    let wf = writing();
    let (a, b) = (open(&url, &wf).await, open(&url, &wf).await);
    let t = a.start_json("writing", Tally::default(), StartOptions::id("w")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let mut items = b.stream("w").await.unwrap();
    a.signal("w", "go", 1u64).await.unwrap();
    let id = ThreadId::new("w").unwrap();
    let mut chunks: Vec<Value> = Vec::new();
    let read = async {
        while chunks.len() < 3 {
            match items.next().await.expect("an item").unwrap() {
                StreamItem::Chunk { value, step, node, .. } => {
                    assert_eq!(node, "write");
                    assert!(step >= 1);
                    chunks.push(value);
                }
                StreamItem::Gap { missed } => panic!("missed {missed}"),
                StreamItem::Ended { .. } => panic!("ended before its chunks"),
                _ => {}
            }
        }
    };
    tokio::time::timeout(Duration::from_secs(20), read).await.expect("the chunks in time");
    assert_eq!(chunks, vec![json!("a"), json!(big()), json!("b")], "in order, whole");
    assert!(a.is_driven(&id) || !b.is_driven(&id), "written by a, read on b");
    a.signal("w", "done", 1u64).await.unwrap();
    let end = async {
        let mut closed = false;
        loop {
            match items.next().await.expect("an item").unwrap() {
                StreamItem::Closed { node, .. } => closed |= node == "write",
                StreamItem::Ended { status, .. } => return (closed, status),
                // The node runs again after `done` and streams again.
                _ => {}
            }
        }
    };
    let (closed, status) = tokio::time::timeout(Duration::from_secs(20), end).await.expect("end");
    assert!(closed, "the task's durable close");
    assert_eq!(status, ThreadStatus::Completed);
    a.shutdown().await;
    b.shutdown().await;
}
