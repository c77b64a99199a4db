//! Restore's reads of checkpoints, through a store that counts them and can damage some: a
//! thread's first drive reads its latest checkpoint once (restore says where it started; the
//! resume check and the pipeline's tail take it from there), and the retry restore of
//! `restore_and_retry` falls back past a damaged latest checkpoint as every restore does.

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering};
use std::sync::{Arc, OnceLock};

use cairn::dsl::{Ctx, NodeError, NodeOutput, NodePolicy, Recovery, RetryPolicy, Workflow};
use cairn::event::Body;
use cairn::storage::{
    Append, Batch, Checkpoint, CheckpointFilter, CheckpointId, CheckpointInfo, Decorates,
    Durability, Error, Event, ForwardCatalog, ForwardMaintenance, Lsn, Options, Page, PayloadRef,
    Pending, Reading, RedbStore, Scope, Seq, Store, Subscription, ThreadId, ThreadLog,
};
use cairn::{END, Engine, RecoveryPolicy, START, StartOptions};
use cairn_core::restore::{Answer, Next, Origin, Read, Restore, Restored};

use crate::common::{Tally, db};

/// How a damaged checkpoint reads.
#[derive(Debug, Clone, Copy)]
enum Damage {
    /// Its snapshot bytes do not decode.
    Undecodable,
    /// The store finds the record corrupted.
    Corrupted,
}

/// Which checkpoints a [`Watched`] store damages.
type Picked = Arc<dyn Fn(&Checkpoint) -> bool + Send + Sync>;

/// A store over another that counts checkpoint reads (every lookup and listing of checkpoints)
/// and damages the checkpoints `damaged` picks.
struct Watched {
    inner: Arc<dyn Store>,
    reads: AtomicU64,
    damaged: Option<(Damage, Picked)>,
}

impl Watched {
    fn new(inner: Arc<dyn Store>, damaged: Option<(Damage, Picked)>) -> Self {
        Watched { inner, reads: AtomicU64::new(0), damaged }
    }

    fn reads(&self) -> u64 {
        self.reads.load(Ordering::SeqCst)
    }

    /// A checkpoint read: counted, and damaged if picked.
    fn checkpoint_read(&self, read: Reading<Option<Checkpoint>>) -> Reading<Option<Checkpoint>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        let Some((damage, picked)) = self.damaged.clone() else { return read };
        Reading::later(async move {
            match read.await? {
                Some(cp) if picked(&cp) => damaged(cp, damage).map(Some),
                other => Ok(other),
            }
        })
    }
}

/// `cp` as `damage` makes it read.
fn damaged(cp: Checkpoint, damage: Damage) -> Result<Checkpoint, Error> {
    match damage {
        Damage::Undecodable => Ok(Checkpoint { snapshot: b"not a snapshot".to_vec(), ..cp }),
        Damage::Corrupted => Err(Error::Corrupted {
            table: "checkpoints",
            thread: Some(cp.thread),
            seq: Some(Seq(cp.id.0)),
            detail: "checksum mismatch (damaged by the test)".into(),
        }),
    }
}

impl Decorates for Watched {
    fn inner(&self) -> &dyn Store {
        &*self.inner
    }
}
impl ForwardCatalog for Watched {}
impl ForwardMaintenance for Watched {}
impl Append for Watched {
    fn append(&self, batch: Batch) -> Result<Pending, Error> {
        self.inner.append(batch)
    }
    fn append_async(&self, batch: Batch) -> Reading<Pending> {
        self.inner.append_async(batch)
    }
    fn durability(&self) -> Durability {
        self.inner.durability()
    }
}
impl Store for Watched {}

impl ThreadLog for Watched {
    fn read_since(&self, thread: &ThreadId, after: Seq, limit: usize) -> Reading<Vec<Event>> {
        self.inner.read_since(thread, after, limit)
    }
    fn read_range(&self, thread: &ThreadId, from: Seq, to: Seq) -> Reading<Vec<Event>> {
        self.inner.read_range(thread, from, to)
    }
    fn last_lsn(&self) -> Lsn {
        self.inner.last_lsn()
    }
    fn read_all_since(&self, after: Lsn, limit: usize) -> Reading<Vec<Event>> {
        self.inner.read_all_since(after, limit)
    }
    fn read_correlated(
        &self,
        query: &cairn::storage::CorrelationQuery,
        after: Lsn,
        limit: usize,
    ) -> Reading<Vec<Event>> {
        self.inner.read_correlated(query, after, limit)
    }
    fn subscribe(&self, scope: Scope, after: u64) -> Result<Subscription, Error> {
        self.inner.subscribe(scope, after)
    }
    fn payload(&self, r: &PayloadRef) -> Reading<Vec<u8>> {
        self.inner.payload(r)
    }
    fn checkpoint(&self, id: CheckpointId) -> Reading<Option<Checkpoint>> {
        self.checkpoint_read(self.inner.checkpoint(id))
    }
    fn checkpoint_exists(&self, id: CheckpointId) -> Reading<bool> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.checkpoint_exists(id)
    }
    fn latest_checkpoint_at_or_before(
        &self,
        thread: &ThreadId,
        seq: Seq,
    ) -> Reading<Option<Checkpoint>> {
        self.checkpoint_read(self.inner.latest_checkpoint_at_or_before(thread, seq))
    }
    fn checkpoint_covering(&self, thread: &ThreadId, seq: Seq) -> Reading<Option<CheckpointId>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.checkpoint_covering(thread, seq)
    }
    fn list_checkpoints(
        &self,
        filter: &CheckpointFilter,
        page: Page,
    ) -> Reading<Vec<CheckpointInfo>> {
        self.reads.fetch_add(1, Ordering::SeqCst);
        self.inner.list_checkpoints(filter, page)
    }
}

/// START -> inc (20 times) -> END; while `hold` is set, `inc` stalls once the total is 5 (the
/// first process crashes there).
fn held_counter(hold: Arc<AtomicBool>) -> Workflow<Tally> {
    Workflow::<Tally>::builder("counter", 1)
        .node("inc", move |s: Arc<Tally>, _ctx| {
            let hold = hold.clone();
            async move {
                if hold.load(Ordering::SeqCst) && s.total >= 5 {
                    std::future::pending::<()>().await;
                }
                Ok(NodeOutput::update((1, String::new())))
            }
        })
        .edge(START, "inc")
        .route("inc", |s: &Tally| if s.total >= 20 { END } else { "inc" }, ["inc", END])
        .loop_bound("inc", 20)
        .build()
        .unwrap()
}

/// A thread that was running when its process died, driven again by a new process (so its
/// resume check runs), reads its checkpoints once before its first step: restore's lookup of
/// the latest. The resume check starts from where restore started, and the pipeline's tail
/// is the events restore folded. (Before: three reads, restore's lookup, the check's, and the
/// tail's listing.)
#[tokio::test]
async fn a_first_drive_reads_the_latest_checkpoint_once() {
    let (_d, path) = db();
    let hold = Arc::new(AtomicBool::new(true));
    let wf = held_counter(hold.clone());
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .checkpoint_every(Some(2), None)
        .workflow(&wf)
        .open()
        .await
        .unwrap();
    let rx = crate::common::after_steps(&engine, 5);
    engine.start_json("counter", Tally::default(), StartOptions::id("c")).await.unwrap();
    rx.await.unwrap();
    engine.crash().await;
    drop(engine);
    hold.store(false, Ordering::SeqCst);

    let file = RedbStore::open(&path, Options::default()).unwrap();
    let store = Arc::new(Watched::new(Arc::new(file), None));
    let engine = Engine::with_store(store.clone())
        .workflow(&wf)
        .recovery(RecoveryPolicy::Park)
        .open()
        .await
        .unwrap();
    let id = ThreadId::new("c").unwrap();
    let latest = store.inner.latest_checkpoint_at_or_before(&id, Seq(u64::MAX)).await.unwrap();
    assert!(latest.is_some(), "the thread has a periodic checkpoint");
    let before = store.reads();
    let at_first_step = Arc::new(OnceLock::new());
    let (seen, reads) = (at_first_step.clone(), store.clone());
    engine.on_step(Arc::new(move |_t, _s, _total| {
        let _ = seen.set(reads.reads());
    }));
    engine.resume("c").await.unwrap();
    let out: Tally = engine.thread("c").await.unwrap().output().await.unwrap();
    assert_eq!(out.total, 20);
    let drive = at_first_step.get().expect("a step after the resume") - before;
    crate::common::report(&format!("RESTORE first_drive_checkpoint_reads={drive}"));
    assert_eq!(drive, 1, "checkpoint reads of the first drive up to its first step");
    engine.shutdown().await;
}

/// START -> a -> b -> work -> END: `a` and `b` checkpoint after they complete; `work` fails its
/// first two runs (its two attempts), then recovers with `restore_and_retry`.
fn retried(runs: Arc<AtomicU32>) -> Workflow<Tally> {
    let after = NodePolicy::default().checkpoint_after(true);
    let policy =
        NodePolicy::default().retry(RetryPolicy::fixed(2, 1)).on_failure(Recovery::RestoreAndRetry);
    Workflow::<Tally>::builder("retried", 1)
        .node_with(
            "a",
            |_s, _ctx| async move { Ok(NodeOutput::update((1, "a".into()))) },
            after.clone(),
        )
        .node_with("b", |_s, _ctx| async move { Ok(NodeOutput::update((1, "b".into()))) }, after)
        .node_with(
            "work",
            move |_s, _ctx: Ctx| {
                let run = runs.fetch_add(1, Ordering::SeqCst);
                async move {
                    if run < 2 {
                        return Err(NodeError::retryable(format!("run {run} failed")));
                    }
                    Ok(NodeOutput::update((10, "work".into())))
                }
            },
            policy,
        )
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", "work")
        .edge("work", END)
        .build()
        .unwrap()
}

/// The step a checkpoint's snapshot is at.
fn step_of(cp: &Checkpoint) -> u64 {
    let snapshot: serde_json::Value = serde_json::from_slice(&cp.snapshot).unwrap();
    snapshot["meta"]["step"].as_u64().unwrap()
}

/// The retry restore of `restore_and_retry` meets a damaged latest checkpoint (b's): it falls
/// back to the older intact one (a's), as every restore does, and the thread runs on from
/// there (b again, then work) instead of its runner stopping with the damage.
#[tokio::test]
async fn a_damaged_latest_checkpoint_during_a_retry_restore_falls_back_to_an_older_one() {
    for damage in [Damage::Undecodable, Damage::Corrupted] {
        let (_d, path) = db();
        let options = Options { durability: Durability::None, ..Options::default() };
        let file = Arc::new(RedbStore::open(&path, options).unwrap());
        let picked: Picked = Arc::new(|cp| step_of(cp) >= 2);
        let store = Arc::new(Watched::new(file, Some((damage, picked))));
        let wf = retried(Arc::default());
        let engine = Engine::with_store(store.clone()).workflow(&wf).open().await.unwrap();
        let t =
            engine.start_json("retried", Tally::default(), StartOptions::id("r")).await.unwrap();
        let out = tokio::time::timeout(std::time::Duration::from_secs(60), t.output::<Tally>())
            .await
            .expect("the thread ends");
        let out = out.unwrap_or_else(|e| panic!("{damage:?}: {e}"));
        assert_eq!(out.log, ["a", "b", "work"], "{damage:?}");
        let mut events = t.events(0).unwrap();
        let mut rolled_back = Vec::new();
        while let Some(e) = events.try_next().await.unwrap() {
            if let Body::RolledBack { checkpoint, to_seq, .. } = e.body {
                rolled_back.push((checkpoint, to_seq));
            }
        }
        let [(checkpoint, to_seq)] = rolled_back[..] else {
            panic!("{damage:?}: one rollback expected, not {rolled_back:?}")
        };
        let cp = store.inner.checkpoint(checkpoint).await.unwrap().expect("the checkpoint");
        assert_eq!((step_of(&cp), cp.covers.seq.0), (1, to_seq), "{damage:?}: a's checkpoint");
        engine.shutdown().await;
    }
}

/// Runs `restore` with `store`'s reads (as the engine's driver does).
async fn run(store: &dyn Store, thread: &ThreadId, mut restore: Restore<'_>) -> Restored {
    let mut answer = None;
    loop {
        let read = match restore.step(answer.take()).unwrap() {
            Next::Done(restored) => return restored,
            Next::Read(read) => read,
        };
        answer = Some(match read {
            Read::Latest { at } => {
                store.latest_checkpoint_at_or_before(thread, at).await.map(Answer::Checkpoint)
            }
            Read::Checkpoints => {
                let filter = CheckpointFilter {
                    thread: Some(thread.clone()),
                    ..CheckpointFilter::default()
                };
                let page = Page { limit: 1_000, offset: 0 };
                store.list_checkpoints(&filter, page).await.map(Answer::Checkpoints)
            }
            Read::Checkpoint(id) => store.checkpoint(id).await.map(Answer::Checkpoint),
            Read::Range { from, to } => {
                store.read_range(thread, from, to).await.map(Answer::Events)
            }
            Read::Since { after, limit } => {
                store.read_since(thread, after, limit).await.map(Answer::Events)
            }
            Read::Payload(r) => store.payload(&r).await.map(Answer::Payload),
        });
    }
}

/// Every entry of the machine says where it started: the checkpoint (id and seq) whose context
/// it folded on, or the first event; the checkpoint entry folds nothing, and a damaged latest
/// checkpoint moves both to the older intact one.
#[tokio::test]
async fn restore_says_where_it_started() {
    let (_d, path) = db();
    let wf = held_counter(Arc::new(AtomicBool::new(false)));
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .checkpoint_every(Some(3), None)
        .workflow(&wf)
        .open()
        .await
        .unwrap();
    let t = engine.start_json("counter", Tally::default(), StartOptions::id("c")).await.unwrap();
    assert_eq!(t.output::<Tally>().await.unwrap().total, 20);
    let (store, id, erased) = (engine.store().clone(), ThreadId::new("c").unwrap(), wf.erase());
    let last = store.last_bookmark(&id).await.unwrap().unwrap().seq.0;
    let latest = store.latest_checkpoint_at_or_before(&id, Seq(u64::MAX)).await.unwrap().unwrap();
    let older = store.latest_checkpoint_at_or_before(&id, Seq(latest.covers.seq.0 - 1));
    let older = older.await.unwrap().expect("an older checkpoint");
    let origin = |cp: &Checkpoint| Origin::Checkpoint {
        id: cp.id,
        seq: cp.covers.seq.0,
        at_ms: cp.created_at_ms,
    };
    let state = |r: &Restored| r.ctx.snapshot().unwrap();

    let whole = run(store.as_ref(), &id, Restore::new(&erased, id.clone(), None)).await;
    assert_eq!((whole.from, whole.ctx.meta.seq), (origin(&latest), last));
    assert!(whole.start.is_none(), "the start is kept only when asked for");
    let first = run(store.as_ref(), &id, Restore::new(&erased, id.clone(), Some(1))).await;
    assert_eq!((first.from, first.ctx.meta.seq), (Origin::Creation, 1));
    let at = Restore::at_checkpoint(&erased, id.clone(), None).keeping_start();
    let at = run(store.as_ref(), &id, at).await;
    assert_eq!((at.from, at.ctx.meta.seq), (origin(&latest), latest.covers.seq.0));
    assert_eq!(at.start.expect("kept").meta.seq, latest.covers.seq.0);

    let latest_id = latest.id;
    let picked: Picked = Arc::new(move |cp| cp.id == latest_id);
    let damaged = Watched::new(store.clone(), Some((Damage::Undecodable, picked)));
    let past = run(&damaged, &id, Restore::new(&erased, id.clone(), None).keeping_start()).await;
    assert_eq!((past.from, past.ctx.meta.seq), (origin(&older), last));
    assert_eq!(state(&past), state(&whole), "the same context, from further back");
    assert_eq!(past.start.expect("kept").meta.seq, older.covers.seq.0);
    let at = run(&damaged, &id, Restore::at_checkpoint(&erased, id.clone(), None)).await;
    assert_eq!((at.from, at.ctx.meta.seq), (origin(&older), older.covers.seq.0));
    engine.shutdown().await;
}
