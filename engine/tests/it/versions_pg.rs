//! Worker builds on a shared PostgreSQL database (docs/patching.md, "Worker build ids"): a
//! thread started by build A is pinned to it and not taken by build B after A stops, until an
//! operator repins it; an unpinned (auto-upgrade) thread is taken by either.

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::{END, Engine, START, StartOptions, ThreadStatus};
use cairn_storage_testkit::pg_cluster::Cluster;

use crate::common::Tally;

/// Waits for one `go` signal.
fn gate() -> Workflow<Tally> {
    Workflow::<Tally>::builder("gate", 1)
        .node("wait", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.recv("go").await?;
            Ok(NodeOutput::update((n, "went".to_owned())))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .build()
        .unwrap()
}

async fn open(url: &str, wf: &Workflow<Tally>, build: &str) -> Engine {
    Engine::builder(url)
        .lease_ttl_ms(400)
        .poll_ms(50)
        .workflow(wf)
        .build_id(build)
        .open()
        .await
        .unwrap()
}

async fn status(engine: &Engine, id: &str) -> ThreadStatus {
    engine.thread(id).await.unwrap().status().await.unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_thread_pinned_to_one_build_is_not_taken_by_another_until_repinned() {
    let Some(cluster) = Cluster::start("versions_pinned_builds") else { return };
    let url = cluster.new_database();
    let wf = gate();
    let a = open(&url, &wf, "build-a").await;
    a.start_json("gate", Tally::default(), StartOptions::id("pinned")).await.unwrap();
    let free = StartOptions::id("free").auto_upgrade();
    a.start_json("gate", Tally::default(), free).await.unwrap();
    for id in ["pinned", "free"] {
        while status(&a, id).await != ThreadStatus::WaitingInput {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    a.shutdown().await;
    drop(a);

    let b = open(&url, &wf, "build-b").await;
    b.signal("free", "go", 1u64).await.unwrap();
    b.signal("pinned", "go", 1u64).await.unwrap();
    let done = tokio::time::timeout(Duration::from_secs(20), async {
        b.thread("free").await.unwrap().finished().await.unwrap()
    });
    assert_eq!(done.await.unwrap().status, ThreadStatus::Completed, "unpinned: taken by b");
    // Past the orphan grace (1 s at this poll) and several looks for work: still not b's.
    tokio::time::sleep(Duration::from_millis(2_500)).await;
    assert!(!status(&b, "pinned").await.is_terminal(), "pinned to build-a: left alone");
    let drain = b.drain().await.unwrap();
    let a_row = drain.builds.iter().find(|r| r.build.as_deref() == Some("build-a")).unwrap();
    assert_eq!((a_row.total, a_row.taken_here), (1, false));

    b.repin("pinned", Some("build-b")).await.unwrap();
    let done = tokio::time::timeout(Duration::from_secs(20), async {
        b.thread("pinned").await.unwrap().finished().await.unwrap()
    });
    assert_eq!(done.await.unwrap().status, ThreadStatus::Completed, "repinned: taken by b");
    b.shutdown().await;
}
