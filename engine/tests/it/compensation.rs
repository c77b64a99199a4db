//! Compensation (`ctx.on_undo`, `WorkflowBuilder::compensation`): a thread that fails for good
//! runs the undos its completed steps registered, last registered first, each exactly once
//! across crashes, before it is marked failed.

use cairn::storage::Catalog;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::event::Body;
use cairn::storage::{RedbStore, Seq, Store, ThreadId};
use cairn::{Durability, END, Engine, START, StartOptions, ThreadStatus, ToolError};
use proptest::prelude::*;

use crate::common::{Tally, db};
use crate::crash::{Dying, cases_from_env};

/// Real executions of undo bodies: (idempotency key, what it undid), in order.
#[derive(Clone, Default)]
struct Undone(Arc<Mutex<Vec<(String, String)>>>);

impl Undone {
    fn take(&self) -> Vec<(String, String)> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

/// START -> book0 -> ... -> book{n-1} -> fail -> END. Each `book{i}` registers `per_step`
/// undos (`{thread}:undo{i}.{j}`), `fail` fails for good (unless `succeed`).
fn trip(n: usize, per_step: usize, succeed: bool, undone: Undone) -> Workflow<Tally> {
    let mut b = Workflow::<Tally>::builder("trip", 1);
    for i in 0..n {
        b = b.node(format!("book{i}"), move |_s, ctx: Ctx| async move {
            let _: u64 = ctx
                .tool("book", i as u64, |x: u64, _| async move { Ok::<_, ToolError>(x) })
                .await?;
            for j in 0..per_step {
                ctx.on_undo("cancel", &format!("{}:undo{i}.{j}", ctx.thread_id()))?;
            }
            Ok(NodeOutput::update((1, String::new())))
        });
    }
    b = b.node("fail", move |_s, _ctx| async move {
        if succeed {
            Ok(NodeOutput::update((0, String::new())))
        } else {
            Err(cairn::dsl::NodeError::fatal("no car available"))
        }
    });
    b = b.edge(START, "book0");
    for i in 1..n {
        b = b.edge(format!("book{}", i - 1), format!("book{i}"));
    }
    b.edge(format!("book{}", n - 1), "fail")
        .edge("fail", END)
        .compensation("cancel", move |what: String, tool: cairn::dsl::ToolCtx| {
            let undone = undone.clone();
            async move {
                undone.0.lock().unwrap().push((tool.idempotency_key().to_owned(), what.clone()));
                Ok::<_, ToolError>(format!("cancelled {what}"))
            }
        })
        .build()
        .unwrap()
}

fn redb(path: &Path) -> Arc<RedbStore> {
    let options = cairn::storage::Options { durability: Durability::None, ..Default::default() };
    Arc::new(RedbStore::open(path, options).unwrap())
}

fn bodies(store: &dyn Store, id: &str) -> Vec<Body> {
    let events = store.read_since(&ThreadId::new(id).unwrap(), Seq(0), 10_000).wait().unwrap();
    events.into_iter().map(|e| cairn::blocking::decode(store, e).unwrap().body).collect()
}

#[tokio::test]
async fn a_failed_thread_runs_its_undos_in_reverse_order_then_fails() {
    let (_d, path) = db();
    let undone = Undone::default();
    let wf = trip(3, 1, false, undone.clone());
    let engine = Engine::with_store(redb(&path)).workflow(&wf).seed(2).open().await.unwrap();
    let h = engine.start_json("trip", Tally::default(), StartOptions::id("trip-1")).await.unwrap();
    let outcome = h.wait().await.unwrap();
    assert_eq!(outcome.status, ThreadStatus::Failed);
    let ran: Vec<String> = undone.take().into_iter().map(|(_, what)| what).collect();
    assert_eq!(ran, ["trip-1:undo2.0", "trip-1:undo1.0", "trip-1:undo0.0"], "in reverse");
    let kinds: Vec<String> = bodies(engine.store().as_ref(), "trip-1")
        .iter()
        .filter_map(|b| match b {
            Body::CompensationBegan { undos, .. } => Some(format!("began {undos}")),
            Body::UndoStarted { index, .. } => Some(format!("start {index}")),
            Body::UndoFinished { index, output: Ok(_), .. } => Some(format!("done {index}")),
            Body::StatusChanged { to, .. } if to.is_terminal() => Some(to.to_string()),
            _ => None,
        })
        .collect();
    assert_eq!(
        kinds,
        ["began 3", "start 2", "done 2", "start 1", "done 1", "start 0", "done 0", "failed"]
    );
    // The undos are visible in the thread's view; the replay of the log is clean.
    let report = engine.replay("trip-1", &Default::default()).await.unwrap();
    assert_eq!(report.divergence, None);
    engine.shutdown().await;

    // A thread that completes runs none.
    let (_d2, path) = db();
    let wf = trip(2, 2, true, undone.clone());
    let engine = Engine::with_store(redb(&path)).workflow(&wf).seed(2).open().await.unwrap();
    let h = engine.start_json("trip", Tally::default(), StartOptions::id("trip-2")).await.unwrap();
    assert_eq!(h.wait().await.unwrap().status, ThreadStatus::Completed);
    assert!(undone.take().is_empty());
    engine.shutdown().await;
}

const THREADS: usize = 2;

/// Runs THREADS trip threads over `dying` until they end (or the store dies: then crashes).
async fn run(dying: Arc<Dying>, wf: &Workflow<Tally>, crashing: bool) {
    let engine = Engine::with_store(dying.clone()).workflow(wf).seed(5).open().await.unwrap();
    let mut handles = Vec::new();
    for t in 0..THREADS {
        match engine.start_json("trip", Tally::default(), StartOptions::id(format!("t{t}"))).await {
            Ok(h) => handles.push(h),
            Err(_) => break,
        }
    }
    let all_done = async {
        for h in &handles {
            let _ = tokio::time::timeout(Duration::from_secs(60), h.finished()).await;
        }
    };
    if crashing {
        tokio::select! {
            () = dying.died.notified() => {}
            () = all_done => {}
        }
        engine.crash().await;
    } else {
        all_done.await;
        engine.shutdown().await;
    }
}

/// Per thread: registered undos (from `compensation_began`), and the `undo_finished` count of
/// each index.
fn finished_undos(store: &dyn Store) -> BTreeMap<String, (u32, BTreeMap<u32, u32>)> {
    let mut out = BTreeMap::new();
    for t in 0..THREADS {
        let id = format!("t{t}");
        let mut registered = 0;
        let mut finished: BTreeMap<u32, u32> = BTreeMap::new();
        if store.thread(&ThreadId::new(id.as_str()).unwrap()).wait().unwrap().is_some() {
            for body in bodies(store, &id) {
                match body {
                    Body::CompensationBegan { undos, .. } => registered = undos,
                    Body::UndoFinished { index, .. } => *finished.entry(index).or_default() += 1,
                    _ => {}
                }
            }
        }
        out.insert(id, (registered, finished));
    }
    out
}

static CASES: AtomicU64 = AtomicU64::new(0);
static RUN: AtomicU64 = AtomicU64::new(0);
static DOUBLED: AtomicU64 = AtomicU64::new(0);
static MISSING: AtomicU64 = AtomicU64::new(0);

fn one_case(n: usize, per_step: usize, frac: f64) -> Result<(), TestCaseError> {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let undone = Undone::default();
        let wf = trip(n, per_step, false, undone.clone());
        let dir = tempfile::tempdir().unwrap();
        let clean = dir.path().join("clean.db");
        let dying = Arc::new(Dying::new(redb(&clean), None));
        run(dying.clone(), &wf, false).await;
        let appends = dying.appends.load(Ordering::SeqCst);
        drop(dying);
        let expected: BTreeSet<(String, String)> = undone.take().into_iter().collect();
        prop_assert_eq!(expected.len(), THREADS * n * per_step, "every undo ran once, clean");

        let crashed = dir.path().join("crashed.db");
        let crash_after = ((appends as f64 * frac) as i64).max(1);
        run(Arc::new(Dying::new(redb(&crashed), Some(crash_after))), &wf, true).await;
        let before: Vec<(String, String)> = undone.take();
        // Undos whose end was recorded before the crash: running one again would be a double.
        let recorded: BTreeSet<String> = {
            let store = RedbStore::open(&crashed, cairn::storage::Options::default()).unwrap();
            let mut keys = BTreeSet::new();
            for t in 0..THREADS {
                let id = format!("t{t}");
                if store.thread(&ThreadId::new(id.as_str()).unwrap()).wait().unwrap().is_none() {
                    continue;
                }
                let mut started = BTreeMap::new();
                for body in bodies(&store, &id) {
                    match body {
                        Body::UndoStarted { index, args, .. } => {
                            started.insert(index, args);
                        }
                        Body::UndoFinished { index, .. } => {
                            keys.insert(started[&index].as_str().unwrap_or("").to_owned());
                        }
                        _ => {}
                    }
                }
            }
            keys
        };
        run(Arc::new(Dying::new(redb(&crashed), None)), &wf, false).await;
        let after: Vec<(String, String)> = undone.take();
        let store = RedbStore::open(&crashed, cairn::storage::Options::default()).unwrap();
        let finished = finished_undos(&store);

        // Each undo's effect, deduplicated by its idempotency key as the service would.
        let mut by_key: BTreeMap<&str, BTreeSet<&str>> = BTreeMap::new();
        for (key, what) in before.iter().chain(&after) {
            by_key.entry(key).or_default().insert(what);
        }
        let ran: BTreeSet<&str> = by_key.values().flatten().copied().collect();
        let mut doubled = after.iter().filter(|(_, what)| recorded.contains(what)).count() as u64;
        doubled += by_key.values().filter(|w| w.len() > 1).count() as u64;
        let mut missing = 0u64;
        for (registered, ends) in finished.values() {
            prop_assert_eq!(*registered as usize, n * per_step);
            doubled += ends.values().filter(|c| **c > 1).count() as u64;
            missing += u64::from(*registered) - ends.len() as u64;
        }
        let want: BTreeSet<&str> = expected.iter().map(|(_, w)| w.as_str()).collect();
        missing += want.difference(&ran).count() as u64;
        CASES.fetch_add(1, Ordering::SeqCst);
        RUN.fetch_add(ran.len() as u64, Ordering::SeqCst);
        DOUBLED.fetch_add(doubled, Ordering::SeqCst);
        MISSING.fetch_add(missing, Ordering::SeqCst);
        prop_assert_eq!((doubled, missing), (0, 0), "crash after {} of {}", crash_after, appends);
        for t in 0..THREADS {
            let r = store.thread(&ThreadId::new(format!("t{t}")).unwrap()).wait().unwrap().unwrap();
            prop_assert_eq!(r.status, ThreadStatus::Failed);
        }
        Ok(())
    })
}

#[test]
fn engine_crash_during_compensation_runs_each_undo_once() {
    let config = ProptestConfig {
        cases: cases_from_env("CAIRN_COMPENSATION_CASES", 48),
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result =
        runner.run(&(1usize..4, 1usize..3, 0.0f64..1.0), |(n, per, frac)| one_case(n, per, frac));
    crate::common::report(&format!(
        "RELIABILITY compensation cases={} compensations_run={} doubled={} missing={}",
        CASES.load(Ordering::SeqCst),
        RUN.load(Ordering::SeqCst),
        DOUBLED.load(Ordering::SeqCst),
        MISSING.load(Ordering::SeqCst)
    ));
    if let Err(e) = result {
        panic!("{e}");
    }
    assert_eq!((DOUBLED.load(Ordering::SeqCst), MISSING.load(Ordering::SeqCst)), (0, 0));
}

/// Restore == live for a finished thread: its last checkpoint (a snapshot of the live context,
/// written by its runner) equals the fold of its whole log up to the checkpoint's seq through
/// `ThreadCtx::apply`, the new events (compensation, continue-as-new) included.
pub(crate) fn restore_equals_live(store: &dyn Store, wf: &cairn::dsl::DynWorkflow, id: &str) {
    use cairn::thread_ctx::ThreadCtx;
    let tid = ThreadId::new(id).unwrap();
    let checkpoint =
        store.latest_checkpoint_at_or_before(&tid, Seq(u64::MAX)).wait().unwrap().unwrap();
    let live: serde_json::Value = serde_json::from_slice(&checkpoint.snapshot).unwrap();
    let events = store.read_since(&tid, Seq(0), 10_000).wait().unwrap();
    let mut ctx: Option<ThreadCtx> = None;
    for e in events {
        let rec = cairn::blocking::decode(store, e).unwrap();
        if rec.bookmark.seq > checkpoint.covers.seq {
            break;
        }
        let at = rec.bookmark.at_ms;
        match &mut ctx {
            None => ctx = Some(ThreadCtx::created(wf, id, &rec.body, at).unwrap()),
            Some(c) => c.apply(rec.bookmark.seq.0, at, &rec.body).unwrap(),
        }
    }
    let folded = serde_json::to_value(ctx.unwrap().snapshot().unwrap()).unwrap();
    assert_eq!(folded, live, "{id}: the fold of the log differs from the live context");
}

#[tokio::test]
async fn a_restored_unwound_thread_is_the_live_one() {
    let (_d, path) = db();
    let wf = trip(2, 2, false, Undone::default());
    let engine = Engine::with_store(redb(&path)).workflow(&wf).seed(2).open().await.unwrap();
    let h = engine.start_json("trip", Tally::default(), StartOptions::id("trip-3")).await.unwrap();
    assert_eq!(h.wait().await.unwrap().status, ThreadStatus::Failed);
    restore_equals_live(engine.store().as_ref(), wf.as_dyn(), "trip-3");
    engine.shutdown().await;
}
