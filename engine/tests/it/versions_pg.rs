//! Worker builds on a shared PostgreSQL database (docs/patching.md, "Worker build ids"): a
//! thread started by build A is pinned to it and not taken by build B after A stops, until an
//! operator repins it; an unpinned (auto-upgrade) thread is taken by either.

use std::sync::Arc;
use std::time::Duration;

use cairn::clock::ManualClock;
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

/// Sleeps until 1 s of the engine's clock, then ends.
fn nap() -> Workflow<Tally> {
    Workflow::<Tally>::builder("nap", 1)
        .node("nap", |_s: Arc<Tally>, ctx: Ctx| async move {
            ctx.sleep_until_ms(1_000).await?;
            Ok(NodeOutput::update((1, "woke".to_owned())))
        })
        .edge(START, "nap")
        .edge("nap", END)
        .build()
        .unwrap()
}

/// The `timer_fired` events of `id`'s log.
async fn fired(engine: &Engine, id: &str) -> usize {
    let mut events = engine.thread(id).await.unwrap().events(0).unwrap();
    let mut n = 0;
    while let Some(e) = events.try_next().await.unwrap() {
        n += usize::from(matches!(e.body, cairn::event::Body::TimerFired { .. }));
    }
    n
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timer_armed_before_another_engine_repinned_its_thread_away_does_not_fire() {
    let Some(cluster) = Cluster::start("versions_repinned_timer") else { return };
    let url = cluster.new_database();
    let wf = nap();
    let open_at = |build: &'static str, clock: &ManualClock| {
        let b = Engine::builder(url.as_str()).lease_ttl_ms(400).poll_ms(50).workflow(&wf);
        b.build_id(build).clock(Arc::new(clock.clone())).open()
    };
    let clock_a = ManualClock::new(0);
    let a = open_at("build-a", &clock_a).await.unwrap();
    for id in ["moved", "stays"] {
        a.start_json("nap", Tally::default(), StartOptions::id(id)).await.unwrap();
        while status(&a, id).await != ThreadStatus::Sleeping {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    // Another engine, of another build, moves one thread to a third build: a's timer of it
    // is still armed in a.
    let b = open_at("build-b", &ManualClock::new(0)).await.unwrap();
    b.repin("moved", Some("build-c")).await.unwrap();
    clock_a.set_ms(1_000);
    let done = tokio::time::timeout(Duration::from_secs(20), async {
        a.thread("stays").await.unwrap().finished().await.unwrap()
    });
    assert_eq!(done.await.unwrap().status, ThreadStatus::Completed, "control: its timer fired");
    assert_eq!(fired(&a, "stays").await, 1);
    // Past several of a's looks for work: still asleep, no timer_fired from build-a.
    tokio::time::sleep(Duration::from_millis(1_000)).await;
    assert_eq!(status(&a, "moved").await, ThreadStatus::Sleeping, "left to build-c");
    assert_eq!(fired(&a, "moved").await, 0, "no timer_fired written by build-a");
    b.shutdown().await;
    a.shutdown().await;
}
