//! A sub-workflow child whose parent recovery drives again carries the `recovered` marker in
//! its own log: a reader of the child's log alone tells the re-executed tool call from a bug.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::event::Body;
use cairn::replay::ReplayOptions;
use cairn::{END, Engine, RecoveryPolicy, START, StartOptions, ThreadStatus};

use crate::common::{Tally, db};

/// A child whose node `call` runs the tool `work`; while `hold` is set the tool's body never
/// returns (the engine is killed with its `tool_called` durable and no `tool_returned`).
fn child(
    hold: Arc<AtomicBool>,
    started: Arc<tokio::sync::Notify>,
    runs: Arc<AtomicU64>,
) -> Workflow<Tally> {
    Workflow::<Tally>::builder("child", 1)
        .node("call", move |_s: Arc<Tally>, ctx: Ctx| {
            let (hold, started, runs) = (hold.clone(), started.clone(), runs.clone());
            async move {
                let v: u64 = ctx
                    .tool("work", 7_u64, move |x: u64, _| async move {
                        runs.fetch_add(1, Ordering::SeqCst);
                        if hold.load(Ordering::SeqCst) {
                            started.notify_one();
                            std::future::pending::<()>().await;
                        }
                        Ok::<_, cairn::ToolError>(x)
                    })
                    .await?;
                Ok(NodeOutput::update((v, "call".into())))
            }
        })
        .edge(START, "call")
        .edge("call", END)
        .build()
        .unwrap()
}

fn parent(child: Workflow<Tally>) -> Workflow<Tally> {
    Workflow::<Tally>::builder("parent", 1)
        .subgraph("sub", child, |s: &Tally| s.clone(), |c: &Tally| (c.total, "sub".to_owned()))
        .edge(START, "sub")
        .edge("sub", END)
        .build()
        .unwrap()
}

/// The child's events, in order.
async fn log_of(engine: &Engine, id: &str) -> Vec<Body> {
    let mut stream = engine.thread(id).await.unwrap().events(0).unwrap();
    let mut out = Vec::new();
    while let Some(e) = stream.try_next().await.unwrap() {
        out.push(e.body);
    }
    out
}

/// Killed with the child's tool call in flight (`tool_called` durable, no `tool_returned`): after
/// reopening, the parent's node drives the child on, its tool runs again, and the child's own log
/// has a `recovered` event between the first `tool_called` and the second. Replay of both
/// threads and the store's verify stay clean. Under both recovery policies (parked, the parent is
/// resumed by hand: the child is still driven again by its parent's node).
#[tokio::test]
async fn a_recovered_parents_child_says_it_was_recovered_in_its_own_log() {
    for policy in [RecoveryPolicy::Resume, RecoveryPolicy::Park] {
        let (_d, path) = db();
        let hold = Arc::new(AtomicBool::new(true));
        let started = Arc::new(tokio::sync::Notify::new());
        let runs = Arc::new(AtomicU64::new(0));
        let wf = parent(child(hold.clone(), started.clone(), runs.clone()));
        let engine = Engine::builder(&path).workflow(&wf).open().await.unwrap();
        engine.start_json("parent", Tally::default(), StartOptions::id("p")).await.unwrap();
        started.notified().await;
        engine.crash().await;
        drop(engine);
        hold.store(false, Ordering::SeqCst);

        let engine = Engine::builder(&path).workflow(&wf).recovery(policy).open().await.unwrap();
        if policy == RecoveryPolicy::Park {
            engine.resume("p").await.unwrap();
        }
        let out: Tally = engine.thread("p").await.unwrap().output().await.unwrap();
        assert_eq!(out.total, 7, "{policy:?}");
        assert_eq!(runs.load(Ordering::SeqCst), 2, "{policy:?}: the tool ran again once");

        check_logs(&engine, &format!("{policy:?}")).await;
        engine.shutdown().await;
    }
}

/// On a shared database: the engine driving the parent dies with the child's tool call in
/// flight, and another engine takes the parent over once the dead one's lease lapses (its look
/// for work finds it). The child is driven on by the parent's node there, taking the child's
/// lapsed lease over: its own log says so too.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_taken_over_on_postgres_says_so_in_its_own_log() {
    use cairn_storage_testkit::pg_cluster::Cluster;
    let Some(cluster) = Cluster::start("a_child_taken_over_on_postgres") else { return };
    let url = cluster.new_database();
    let hold = Arc::new(AtomicBool::new(true));
    let started = Arc::new(tokio::sync::Notify::new());
    let runs = Arc::new(AtomicU64::new(0));
    let wf = parent(child(hold.clone(), started.clone(), runs.clone()));
    let open = || {
        Engine::builder(&url)
            .lease_ttl_ms(LEASE_TTL_MS)
            .poll_ms(50)
            .recovery(RecoveryPolicy::Resume)
            .workflow(&wf)
            .open()
    };
    let dying = open().await.unwrap();
    dying.start_json("parent", Tally::default(), StartOptions::id("p")).await.unwrap();
    started.notified().await;
    dying.crash().await;
    drop(dying);
    hold.store(false, Ordering::SeqCst);

    let engine = open().await.unwrap();
    let out = tokio::time::timeout(
        std::time::Duration::from_secs(20),
        engine.thread("p").await.unwrap().output::<Tally>(),
    )
    .await
    .expect("taken over within 20 s")
    .unwrap();
    assert_eq!(out.total, 7);
    assert_eq!(runs.load(Ordering::SeqCst), 2, "the tool ran again once");
    check_logs(&engine, "postgres").await;
    engine.shutdown().await;
}

/// Lease time on the shared database: short, so the take-over test waits it out quickly.
#[cfg(feature = "postgres")]
const LEASE_TTL_MS: u64 = 500;

/// The child of `p` completed once, its own log has one `recovered` marker ("taken over")
/// between its first `tool_called` and the re-executed one, the parent's log has its own, and
/// replay and verify are clean.
async fn check_logs(engine: &Engine, what: &str) {
    let children = engine
        .store()
        .list_threads(
            &cairn::storage::ThreadFilter {
                labels: vec![("parent".into(), "p".into())],
                ..Default::default()
            },
            cairn::storage::Page { limit: 10, offset: 0 },
        )
        .wait()
        .unwrap();
    assert_eq!(children.len(), 1, "{what}");
    assert_eq!(children[0].status, ThreadStatus::Completed, "{what}");
    let child_id = children[0].id.to_string();
    let log = log_of(engine, &child_id).await;
    let calls: Vec<usize> = log
        .iter()
        .enumerate()
        .filter(|(_, b)| matches!(b, Body::ToolCalled { .. }))
        .map(|(i, _)| i)
        .collect();
    assert_eq!(calls.len(), 2, "{what}: the call in flight, then its re-execution: {log:#?}");
    let recovered: Vec<(usize, &str)> = log
        .iter()
        .enumerate()
        .filter_map(|(i, b)| match b {
            Body::Recovered { action } => Some((i, action.as_str())),
            _ => None,
        })
        .collect();
    assert_eq!(recovered.len(), 1, "{what}: one marker in the child's own log: {log:#?}");
    let (at, action) = recovered[0];
    assert!(
        calls[0] < at && at < calls[1],
        "{what}: the marker precedes the re-executed call: {log:#?}"
    );
    // Driven on by its parent's node, not by recovery (one driver per child).
    assert_eq!(action, "taken over", "{what}");
    // The parent's log has its own marker, as before.
    let parent_log = log_of(engine, "p").await;
    assert!(
        parent_log.iter().any(|b| matches!(b, Body::Recovered { .. })),
        "{what}: {parent_log:#?}"
    );

    // The marker changes nothing a replay or a verify checks.
    let report = engine.replay("p", &ReplayOptions::default()).await.unwrap();
    assert_eq!(report.divergence, None, "{what}");
    assert_eq!(report.children_replayed, 1, "{what}");
    let report = engine.replay(&child_id, &ReplayOptions::default()).await.unwrap();
    assert_eq!(report.divergence, None, "{what}");
    let verify = engine.store().verify().unwrap();
    assert!(verify.is_clean(), "{what}: {:?}", verify.problems);
}
