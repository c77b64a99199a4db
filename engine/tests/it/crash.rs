//! The invariant above all, as a proptest: any workflow of a small generator (linear head,
//! fan-out and join, map node, sub-workflow child thread, bounded loop), crashed at any append
//! boundary (inside a child thread or a map item too), reopened and resumed, ends with the same state as an uninterrupted run, and
//! no tool call whose result was recorded runs again.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cairn::dsl::{Ctx, NodeOutput, State, Workflow};
use cairn::storage::limits::READ_LIMIT_MAX;
use cairn::storage::{
    Append, Batch, Catalog, CheckpointId, Decorates, ForwardLog, LockRecord, Maintenance, Page,
    Pending, Pruned, Reading, RedbStore, Seq, Store, ThreadFilter, ThreadId, ThreadRecord,
    VerifyReport,
};
use cairn::{Durability, END, Engine, START, StartOptions, ThreadStatus};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};

/// Every real execution of a tool body, as (thread, tool input) keys.
#[derive(Debug, Clone, Default)]
pub(crate) struct EffectLog(Arc<Mutex<Vec<String>>>);

impl EffectLog {
    pub(crate) fn record(&self, key: String) {
        self.0.lock().unwrap().push(key);
    }
    pub(crate) fn take(&self) -> Vec<String> {
        std::mem::take(&mut *self.0.lock().unwrap())
    }
}

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Acc {
    items: Vec<u64>,
}

impl State for Acc {
    type Update = Vec<u64>;
    fn apply(&mut self, u: Vec<u64>) {
        self.items.extend(u);
    }
}

const TAIL_MARK: u64 = 1_000_000;

/// The shape of a generated workflow.
#[derive(Debug, Clone)]
pub(crate) struct Shape {
    /// Length of the linear head.
    head: usize,
    /// Width of the fan-out after the head (0: none).
    width: usize,
    /// Rounds of the bounded loop at the end (1: no loop back).
    rounds: u32,
    /// Tool calls per node.
    calls: usize,
    /// Items of a map node after the head (0: none).
    map_items: usize,
    /// Nodes of a sub-workflow run by a node after the head (0: none).
    child_len: usize,
}

impl Shape {
    /// A head of `head` nodes, a fan-out `width` wide and a loop of `rounds` rounds, with no
    /// tool call, map node or child thread.
    pub(crate) fn linear_loop(head: usize, width: usize, rounds: u32) -> Shape {
        Shape { head, width, rounds, calls: 0, map_items: 0, child_len: 0 }
    }
}

pub(crate) fn shape() -> impl Strategy<Value = Shape> {
    (1usize..4, 0usize..4, 1u32..4, 0usize..3, 0usize..4, 0usize..3).prop_map(
        |(head, width, rounds, calls, map_items, child_len)| Shape {
            head,
            width,
            rounds,
            calls,
            map_items,
            child_len,
        },
    )
}

/// A map node: one task per item, each making `calls` tool calls.
fn map_node(
    calls: usize,
    fx: EffectLog,
) -> impl Fn(Arc<Acc>, Ctx) -> futures::future::BoxFuture<'static, cairn::NodeResult<Vec<u64>>>
+ Send
+ Sync
+ 'static {
    move |_s: Arc<Acc>, ctx: Ctx| {
        let fx = fx.clone();
        Box::pin(async move {
            let item: u64 = ctx.item()?;
            let mut out = vec![item];
            for c in 0..calls.max(1) {
                let key = format!("{}:m[{item}]:{c}", ctx.thread_id());
                let fx = fx.clone();
                let v: u64 = ctx
                    .tool("effect", key, move |key: String, _| async move {
                        fx.record(key.clone());
                        Ok::<_, cairn::ToolError>(key.len() as u64)
                    })
                    .await?;
                out.push(v);
            }
            Ok(NodeOutput::update(out))
        })
    }
}

/// The sub-workflow: a chain of `len` generated nodes.
fn child(len: usize, calls: usize, fx: &EffectLog) -> Workflow<Acc> {
    let mut b = Workflow::<Acc>::builder("gen-child", 1);
    let mut prev = START.to_owned();
    for i in 0..len {
        let name = format!("c{i}");
        b = b.node(name.clone(), node(name.clone(), calls.max(1), fx.clone())).edge(prev, &name);
        prev = name;
    }
    b.edge(prev, END).build().expect("generated child workflow")
}

fn node(
    name: String,
    calls: usize,
    fx: EffectLog,
) -> impl Fn(Arc<Acc>, Ctx) -> futures::future::BoxFuture<'static, cairn::NodeResult<Vec<u64>>>
+ Send
+ Sync
+ 'static {
    move |s: Arc<Acc>, ctx: Ctx| {
        let fx = fx.clone();
        let name = name.clone();
        Box::pin(async move {
            let mut out = Vec::new();
            let r = ctx.random_u64() % 1000;
            for c in 0..calls {
                let key = format!("{}:{name}:{}:{c}", ctx.thread_id(), s.items.len());
                let fx = fx.clone();
                let v: u64 = ctx
                    .tool("effect", key, move |key: String, _| async move {
                        fx.record(key.clone());
                        Ok::<_, cairn::ToolError>(key.len() as u64)
                    })
                    .await?;
                out.push(v);
            }
            out.push(r);
            if name == "tail" {
                out.push(TAIL_MARK);
            }
            Ok(NodeOutput::update(out))
        })
    }
}

pub(crate) fn build(shape: &Shape, fx: &EffectLog) -> Workflow<Acc> {
    let mut b = Workflow::<Acc>::builder("gen", 1);
    let mut prev = START.to_owned();
    for i in 0..shape.head {
        let name = format!("h{i}");
        b = b
            .node(name.clone(), node(name.clone(), shape.calls, fx.clone()))
            .edge(prev, name.clone());
        prev = name;
    }
    // The map node and the sub-workflow node are fan-out branches when there is a fan-out
    // (so that crashes land inside the join too), else links of the chain.
    let mut extra = Vec::new();
    if shape.map_items > 0 {
        let k = shape.map_items as u64;
        let items = move |s: &Acc| (0..k).map(|i| i * 100 + s.items.len() as u64).collect();
        b = b.map("m", items, map_node(shape.calls, fx.clone()));
        extra.push("m".to_owned());
    }
    if shape.child_len > 0 {
        let sub = child(shape.child_len, shape.calls, fx);
        let input = |s: &Acc| Acc { items: vec![s.items.len() as u64] };
        b = b.subgraph("s", sub, input, |c: &Acc| c.items.clone());
        extra.push("s".to_owned());
    }
    if shape.width == 0 {
        for name in extra.drain(..) {
            b = b.edge(prev, &name);
            prev = name;
        }
    }
    if shape.width > 0 {
        let mut branches: Vec<String> = (0..shape.width).map(|i| format!("w{i}")).collect();
        for br in &branches {
            b = b.node(br.clone(), node(br.clone(), shape.calls, fx.clone()));
        }
        branches.extend(extra);
        b = b
            .fan_out(prev, branches.clone())
            .node("j", node("j".into(), shape.calls, fx.clone()))
            .join(branches, "j");
        prev = "j".to_owned();
    }
    let rounds = shape.rounds as usize;
    b = b
        .node("tail", node("tail".into(), shape.calls, fx.clone()))
        .edge(prev, "tail")
        .route(
            "tail",
            move |s: &Acc| {
                if s.items.iter().filter(|v| **v == TAIL_MARK).count() >= rounds {
                    END
                } else {
                    "tail"
                }
            },
            [END, "tail"],
        )
        .loop_bound("tail", shape.rounds);
    b.build().expect("generated workflow")
}

/// What happens at the crash point besides refusing writes (on PostgreSQL: the append at the
/// crash point goes through with its COMMIT cut on the wire).
pub(crate) type AtDeath = Box<dyn Fn() + Send + Sync>;

/// A store that stops accepting writes after a number of appends, as a dying process would.
/// What its inner store offers (a shared database: PostgreSQL's) it carries, as every
/// [`Decorates`] does, so the engine over it coordinates as over the inner store.
pub(crate) struct Dying {
    pub(crate) inner: Arc<dyn Store>,
    /// Appends (and thread deletions) still accepted; negative once the store has died.
    pub(crate) left: AtomicI64,
    pub(crate) appends: AtomicU64,
    pub(crate) died: tokio::sync::Notify,
    /// With it, the append at the crash point is still made after calling it (then the store
    /// dies); without it, that append is refused.
    pub(crate) at_death: Option<AtDeath>,
    /// Held before answering each thread listing after the first (a slow listing, so that the
    /// threads of one page can move on before the next is read).
    pub(crate) list_delay: Option<std::time::Duration>,
    listings: AtomicU64,
}

impl Dying {
    /// A store over `inner` that dies at its append number `crash_after + 1` (never with `None`).
    pub(crate) fn new(inner: Arc<dyn Store>, crash_after: Option<i64>) -> Self {
        Dying {
            inner,
            left: AtomicI64::new(crash_after.unwrap_or(i64::MAX)),
            appends: AtomicU64::new(0),
            died: tokio::sync::Notify::new(),
            at_death: None,
            list_delay: None,
            listings: AtomicU64::new(0),
        }
    }

    /// Waits [`Dying::list_delay`] before every listing but the first.
    fn slow_listing(&self) {
        if self.listings.fetch_add(1, Ordering::SeqCst) > 0
            && let Some(delay) = self.list_delay
        {
            std::thread::sleep(delay);
        }
    }

    /// True once an append was refused.
    pub(crate) fn dead(&self) -> bool {
        self.left.load(Ordering::SeqCst) < 0
    }

    /// A store over a redb file at `path` (opened without fsync: a crash here is a process
    /// crash, not a power cut) that dies at its append number `crash_after + 1`.
    pub(crate) fn over_file(path: &std::path::Path, crash_after: Option<i64>) -> Arc<Dying> {
        let options =
            cairn::storage::Options { durability: cairn::Durability::None, ..Default::default() };
        let file = cairn::storage::RedbStore::open(path, options).expect("open the file");
        Arc::new(Dying::new(Arc::new(file), crash_after))
    }

    /// Awaits `run` until it ends, `limit` passes or this store dies, then crashes `engine`:
    /// whether the store died (a crash point was reached; `false`: the run got past its last
    /// write, so every crash point has been covered).
    pub(crate) async fn crash_during(
        &self,
        engine: &cairn::Engine,
        limit: std::time::Duration,
        run: impl std::future::Future,
    ) -> bool {
        tokio::select! {
            _ = tokio::time::timeout(limit, run) => {}
            () = self.died.notified() => {}
        }
        engine.crash().await;
        self.dead()
    }
}

/// How long a run may go before its crash point is taken as past its last write.
const RUN_LIMIT: std::time::Duration = std::time::Duration::from_secs(10);

/// The crash test of one path: for crash points 1, 2, … below `most`, a fresh database whose
/// store dies at that write, a fresh `fixture` (what a run and its checks share: a clock),
/// `run` on an engine over it (built by `tune`) until it ends or the store dies, a crash; then
/// `check` on an engine reopened on the same file (built by `tune` too), given the crash point,
/// and a shutdown. Ends at the first point the run gets past (every one has been covered) and
/// returns how many points crashed; the caller asserts on that count.
pub(crate) async fn every_write<F>(
    most: i64,
    fixture: impl Fn() -> F,
    tune: impl Fn(cairn::EngineBuilder, &F) -> cairn::EngineBuilder,
    run: impl AsyncFn(&Engine, &F) -> Result<(), cairn::Error>,
    check: impl AsyncFn(&Engine, &F, i64),
) -> usize {
    let mut crashes = 0;
    for crash_after in 1..most {
        let (_d, path) = crate::common::db();
        let fixture = fixture();
        let dying = Dying::over_file(&path, Some(crash_after));
        let engine = tune(Engine::with_store(dying.clone()), &fixture).open().await.unwrap();
        let died = dying.crash_during(&engine, RUN_LIMIT, run(&engine, &fixture)).await;
        drop(engine);
        if !died {
            break;
        }
        crashes += 1;
        drop(dying);
        let reopened = Engine::builder(&path).durability(Durability::None);
        let engine = tune(reopened, &fixture).open().await.expect("reopen the file");
        check(&engine, &fixture, crash_after).await;
        engine.shutdown().await;
    }
    crashes
}

impl Dying {
    /// Counts a write as a crash point: the write the store dies at runs `at_death` first and
    /// still goes through; every later one is refused.
    fn write<T>(
        &self,
        write: impl FnOnce() -> Result<T, cairn::storage::Error>,
    ) -> Result<T, cairn::storage::Error> {
        self.appends.fetch_add(1, Ordering::SeqCst);
        let left = self.left.fetch_sub(1, Ordering::SeqCst);
        if left == 0
            && let Some(at_death) = &self.at_death
        {
            at_death();
            let written = write();
            self.died.notify_one();
            return written;
        }
        if left <= 0 {
            self.died.notify_one();
            return Err(cairn::storage::Error::Closed);
        }
        write()
    }
}

impl Decorates for Dying {
    fn inner(&self) -> &dyn Store {
        &*self.inner
    }
}

impl ForwardLog for Dying {}

impl Append for Dying {
    fn append(&self, batch: Batch) -> Result<Pending, cairn::storage::Error> {
        self.write(|| self.inner.append(batch))
    }
    fn append_async(&self, batch: Batch) -> Reading<Pending> {
        self.write(|| Ok(self.inner.append_async(batch))).unwrap_or_else(|e| Reading::ready(Err(e)))
    }
    fn durability(&self) -> Durability {
        self.inner.durability()
    }
}

impl Catalog for Dying {
    fn thread(&self, id: &ThreadId) -> Reading<Option<ThreadRecord>> {
        self.inner.thread(id)
    }
    fn list_threads_after(
        &self,
        f: &ThreadFilter,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Reading<Vec<ThreadRecord>> {
        self.slow_listing();
        self.inner.list_threads_after(f, after, limit)
    }
    fn list_threads(&self, f: &ThreadFilter, p: Page) -> Reading<Vec<ThreadRecord>> {
        self.slow_listing();
        self.inner.list_threads(f, p)
    }
    fn locks(&self) -> Reading<Vec<LockRecord>> {
        self.inner.locks()
    }
    fn signals(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Reading<Vec<cairn::storage::Signal>> {
        self.inner.signals(thread, after, limit)
    }
    fn queues(&self) -> Reading<Vec<cairn::storage::QueueState>> {
        self.inner.queues()
    }
    fn queue_member(&self, thread: &ThreadId) -> Reading<Option<cairn::storage::QueueMember>> {
        self.inner.queue_member(thread)
    }
}

impl Maintenance for Dying {
    fn delete_checkpoint(&self, id: CheckpointId) -> Result<Pending<bool>, cairn::storage::Error> {
        self.inner.delete_checkpoint(id)
    }
    fn clear_checkpoints(&self, t: &ThreadId) -> Result<Pending<u64>, cairn::storage::Error> {
        self.inner.clear_checkpoints(t)
    }
    fn prune(
        &self,
        t: &ThreadId,
        k: CheckpointId,
    ) -> Result<Pending<Pruned>, cairn::storage::Error> {
        self.inner.prune(t, k)
    }
    fn delete_thread(
        &self,
        t: &ThreadId,
        o: cairn::storage::DeleteOptions,
    ) -> Result<Pending<Option<cairn::storage::Deleted>>, cairn::storage::Error> {
        // A thread deletion is a write like an append: a crash point too.
        self.write(|| self.inner.delete_thread(t, o))
    }
    fn verify(&self) -> Result<VerifyReport, cairn::storage::Error> {
        self.inner.verify()
    }
}

impl Store for Dying {}

const THREADS: usize = 2;

/// Runs the workflow on THREADS threads; with `crash_after`, the store dies after that many
/// appends and the engine is dropped. Returns the number of appends made.
async fn run(
    path: &Path,
    wf: &Workflow<Acc>,
    crash_after: Option<i64>,
) -> (u64, BTreeMap<String, Acc>) {
    let store = Arc::new(
        RedbStore::open(
            path,
            cairn::storage::Options { durability: Durability::None, ..Default::default() },
        )
        .unwrap(),
    );
    run_on(Dying::new(store, crash_after), wf, crash_after.is_some(), |b| b).await
}

/// Engines [`run_on`] opened that reported, in their health, coordinating through a shared
/// database (only PostgreSQL's crash test opens such engines here).
pub(crate) static SHARED_ENGINES: AtomicU64 = AtomicU64::new(0);

/// Runs the workflow on THREADS threads over `dying` (the engine built by `tune` from the
/// builder); with `crashing`, until the store dies, then the engine crashes. Returns the number
/// of appends made, and the final states when not crashing. Counts the engine in
/// [`SHARED_ENGINES`] if its health report says it coordinates through a shared database.
pub(crate) async fn run_on(
    dying: Dying,
    wf: &Workflow<Acc>,
    crashing: bool,
    tune: impl FnOnce(cairn::EngineBuilder) -> cairn::EngineBuilder,
) -> (u64, BTreeMap<String, Acc>) {
    let dying = Arc::new(dying);
    let builder = Engine::with_store(dying.clone()).workflow(wf).seed(5).concurrency(2);
    let engine = bounded("open", tune(builder).open()).await.unwrap();
    let health = bounded("health", engine.health()).await.unwrap();
    if health.coordination == Some(cairn::telemetry::Coordination::Shared) {
        SHARED_ENGINES.fetch_add(1, Ordering::SeqCst);
    }
    let mut handles = Vec::new();
    for t in 0..THREADS {
        // Starting is idempotent: after a crash this finds the threads recovery resumed.
        let start = engine.start_json("gen", Acc::default(), StartOptions::id(format!("t{t}")));
        match bounded("start", start).await {
            Ok(h) => handles.push(h),
            Err(_) => break, // the store died during start
        }
    }
    let mut finals = BTreeMap::new();
    if !crashing {
        for h in &handles {
            let out =
                tokio::time::timeout(std::time::Duration::from_secs(60), h.output::<Acc>()).await;
            let out = match out {
                Ok(r) => r.unwrap_or_else(|e| panic!("{}: {e}", h.id())),
                Err(_) => {
                    panic!("{} did not finish: {:?}", h.id(), bounded("outcome", h.outcome()).await)
                }
            };
            finals.insert(h.id().to_string(), out);
        }
        bounded("shutdown", engine.shutdown()).await;
    } else {
        // Let the run go until the store dies (or, for a crash point past the end, until the
        // threads finish), then stop everything where it stands.
        let all_done = async {
            for h in &handles {
                let _ = h.finished().await;
            }
        };
        let died = async {
            tokio::select! {
                () = dying.died.notified() => {}
                () = all_done => {}
            }
        };
        bounded("the run to its crash point", died).await;
        bounded("crash", engine.crash()).await;
    }
    let n = dying.appends.load(Ordering::SeqCst);
    drop(handles);
    drop(engine);
    drop(dying);
    (n, finals)
}

/// How long one phase of [`run_on`] may take before the test fails naming it (a hang would
/// otherwise hold the whole suite until its CI deadline).
const PHASE_LIMIT: std::time::Duration = std::time::Duration::from_secs(120);

/// `phase` to its end, or a panic naming it once [`PHASE_LIMIT`] passes.
pub(crate) async fn bounded<T>(what: &str, phase: impl std::future::Future<Output = T>) -> T {
    match tokio::time::timeout(PHASE_LIMIT, phase).await {
        Ok(out) => out,
        Err(_) => panic!("{what} did not end within {PHASE_LIMIT:?}"),
    }
}

/// Keys of tool calls whose results are recorded in the log of any thread (the started ones
/// and their sub-workflow child threads).
fn recorded_calls(path: &Path) -> BTreeSet<String> {
    recorded_calls_in(&RedbStore::open(path, cairn::storage::Options::default()).unwrap())
}

/// [`recorded_calls`] in any store.
pub(crate) fn recorded_calls_in(store: &dyn Store) -> BTreeSet<String> {
    let mut keys = BTreeSet::new();
    let all = store.list_threads(&ThreadFilter::default(), Page { limit: 1_000, offset: 0 });
    let all = all.wait().unwrap();
    assert!(all.len() < 1_000, "more threads than one page");
    for record in all {
        let id = record.id;
        // The whole log fits in one read (the largest allowed) for these small workflows; an
        // error here must fail the case, not empty the set (which would hide repeated calls).
        let events = store.read_since(&id, Seq(0), READ_LIMIT_MAX).wait().unwrap();
        assert!(events.len() < READ_LIMIT_MAX, "{id}: log longer than one read");
        let mut inputs = BTreeMap::new();
        for e in events {
            let rec = cairn::blocking::decode(store, e).unwrap();
            match rec.body {
                cairn::event::Body::ToolCalled { step, task, attempt, call, input, .. } => {
                    inputs.insert((step, task, attempt, call), input);
                }
                cairn::event::Body::ToolReturned { step, task, attempt, call, .. } => {
                    if let Some(input) = inputs.get(&(step, task, attempt, call)) {
                        keys.insert(input.as_str().unwrap_or_default().to_owned());
                    }
                }
                _ => {}
            }
        }
    }
    keys
}

static CASES: AtomicU64 = AtomicU64::new(0);
static DIVERGED: AtomicU64 = AtomicU64::new(0);
static REPEATED: AtomicU64 = AtomicU64::new(0);
/// Cases whose workflow has a sub-workflow node, and a map node.
static WITH_CHILD: AtomicU64 = AtomicU64::new(0);
static WITH_MAP: AtomicU64 = AtomicU64::new(0);
/// Recorded tool calls found after the crashes: zero would make the repeated-effects check vacuous.
static RECORDED: AtomicU64 = AtomicU64::new(0);

fn one_case(shape: Shape, crash_frac: f64) -> Result<(), TestCaseError> {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let fx = EffectLog::default();
        let wf = build(&shape, &fx);
        let dir = tempfile::tempdir().unwrap();
        let clean = dir.path().join("clean.db");
        let (appends, expected) = run(&clean, &wf, None).await;
        let baseline: BTreeSet<String> = fx.take().into_iter().collect();

        let crashed = dir.path().join("crashed.db");
        let crash_after = ((appends as f64 * crash_frac) as i64).max(1);
        run(&crashed, &wf, Some(crash_after)).await;
        let before_crash = fx.take();
        let recorded = recorded_calls(&crashed);
        RECORDED.fetch_add(recorded.len() as u64, Ordering::SeqCst);
        let (_, got) = run(&crashed, &wf, None).await;
        let after = fx.take();

        CASES.fetch_add(1, Ordering::SeqCst);
        WITH_CHILD.fetch_add(u64::from(shape.child_len > 0), Ordering::SeqCst);
        WITH_MAP.fetch_add(u64::from(shape.map_items > 0), Ordering::SeqCst);
        let repeated = after.iter().filter(|k| recorded.contains(*k)).count() as u64;
        REPEATED.fetch_add(repeated, Ordering::SeqCst);
        if got != expected {
            DIVERGED.fetch_add(1, Ordering::SeqCst);
        }
        prop_assert_eq!(
            &got,
            &expected,
            "shape {:?} crash after {} of {} appends",
            shape,
            crash_after,
            appends
        );
        prop_assert_eq!(repeated, 0, "a recorded tool call ran again");
        let all: BTreeSet<String> = before_crash.into_iter().chain(after).collect();
        prop_assert_eq!(all, baseline, "the set of side effects differs");
        let store = RedbStore::open(&crashed, cairn::storage::Options::default()).unwrap();
        let report = store.verify().unwrap();
        prop_assert!(report.is_clean(), "{:?}", report);
        for t in 0..THREADS {
            let r = store.thread(&ThreadId::new(format!("t{t}")).unwrap()).wait().unwrap().unwrap();
            prop_assert_eq!(r.status, ThreadStatus::Completed);
        }
        Ok(())
    })
}

#[test]
fn engine_crash_at_any_append_then_resume() {
    let config = ProptestConfig {
        cases: cases_from_env("CAIRN_CRASH_CASES", 256),
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(&(shape(), 0.0f64..1.0), |(shape, frac)| one_case(shape, frac));
    crate::common::report(&format!(
        "RELIABILITY engine_crash cases={} with_child={} with_map={} diverged={} repeated_effects={}",
        CASES.load(Ordering::SeqCst),
        WITH_CHILD.load(Ordering::SeqCst),
        WITH_MAP.load(Ordering::SeqCst),
        DIVERGED.load(Ordering::SeqCst),
        REPEATED.load(Ordering::SeqCst)
    ));
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        CASES.load(Ordering::SeqCst) < 16 || RECORDED.load(Ordering::SeqCst) > 0,
        "no recorded tool call found after any crash: the repeated-effects check saw nothing"
    );
}

/// The case count: `var` if set to a number, else `default`.
pub(crate) fn cases_from_env(var: &str, default: u32) -> u32 {
    std::env::var(var).ok().and_then(|v| v.parse().ok()).unwrap_or(default)
}
