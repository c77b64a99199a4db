//! The embedding API: open an engine on a database file, register workflows, start threads.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, RwLock};

use cairn_dsl::{DynWorkflow, State, Workflow};
use cairn_storage::{
    Batch, Durability, Guard, Options, Page, RedbStore, Store, ThreadFilter, ThreadId,
    ThreadRecord, ThreadStatus, WorkflowRef,
};
use serde::Serialize;
use tokio::sync::{Semaphore, watch};
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::Instrument as _;

use crate::coord::claims::Claims;
use crate::clock::{Clock, SystemClock};
use crate::error::Error;
use crate::api::handle::ThreadHandle;
use crate::core::codec;
use crate::core::event::Body;
use crate::exec::runner::{Exit, drive};
use crate::core::status::Transition;
use crate::exec::timers::Timers;

/// What to do with threads found unfinished when the engine opens.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryPolicy {
    /// Resume them at once (the default).
    #[default]
    Resume,
    /// Leave them for [`Engine::resume`] or [`Engine::abandon`]; see [`Engine::resumable`].
    Park,
}

/// Options a thread starts with.
#[derive(Debug, Clone, Default)]
pub struct StartOptions {
    /// The thread's id. Starting an id that exists returns the existing thread (idempotent
    /// start); without one, the engine makes a fresh id.
    pub thread_id: Option<String>,
    /// Labels for listing and filtering.
    pub labels: std::collections::BTreeMap<String, String>,
    /// The workflow version; the newest registered one when `None`.
    pub version: Option<u32>,
    /// The thread times out this long after it starts (engine clock): it ends TimedOut.
    pub deadline_ms: Option<u64>,
    /// Budgets replacing the workflow's for this thread.
    pub budgets: Option<cairn_dsl::Budgets>,
    /// Permissions replacing the workflow's for this thread's tool calls.
    pub permissions: Option<std::collections::BTreeSet<String>>,
}

impl StartOptions {
    /// Options with this thread id.
    pub fn id(id: impl Into<String>) -> Self {
        Self { thread_id: Some(id.into()), ..Self::default() }
    }

    /// Adds a label.
    #[must_use]
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.insert(key.into(), value.into());
        self
    }
}

/// Engine settings, fixed at open.
#[derive(Debug, Clone)]
pub struct Config {
    /// Threads driven at once.
    pub concurrency: usize,
    /// Overrides every workflow's checkpoint policy: a checkpoint every N steps.
    pub checkpoint_every_steps: Option<u64>,
    /// Overrides every workflow's checkpoint policy: a checkpoint every T ms.
    pub checkpoint_every_ms: Option<u64>,
    /// A periodic checkpoint once this many events follow the latest one (default
    /// [`limits::CHECKPOINT_TAIL_EVENTS_DEFAULT`]; `None`: no such bound).
    pub checkpoint_tail_events: Option<u64>,
    /// A periodic checkpoint once this many bytes of events and payloads follow the latest one
    /// (default [`limits::CHECKPOINT_TAIL_BYTES_DEFAULT`]; `None`: no such bound).
    pub checkpoint_tail_bytes: Option<u64>,
    /// What to do with unfinished threads at open.
    pub recovery: RecoveryPolicy,
    /// How long a cancelled node may run on before its future is dropped (engine clock).
    pub cancel_grace_ms: u64,
    /// Seed of the engine's random stream (ids, node randomness); from the clock when `None`.
    pub seed: Option<u64>,
}

impl Default for Config {
    fn default() -> Self {
        Self {
            concurrency: 64,
            checkpoint_every_steps: None,
            checkpoint_every_ms: None,
            checkpoint_tail_events: Some(crate::limits::CHECKPOINT_TAIL_EVENTS_DEFAULT),
            checkpoint_tail_bytes: Some(crate::limits::CHECKPOINT_TAIL_BYTES_DEFAULT),
            recovery: RecoveryPolicy::Resume,
            cancel_grace_ms: 5_000,
            seed: None,
        }
    }
}

/// Builds an [`Engine`].
///
/// # Examples
/// ```no_run
/// # async fn run() -> Result<(), cairn::Error> {
/// let engine = cairn::Engine::builder("cairn.db").concurrency(8).open().await?;
/// # Ok(()) }
/// ```
#[must_use]
pub struct EngineBuilder {
    path: Option<PathBuf>,
    store: Option<Arc<dyn Store>>,
    durability: Durability,
    config: Config,
    clock: Arc<dyn Clock>,
    workflows: Vec<Arc<DynWorkflow>>,
    read_only: bool,
}

impl EngineBuilder {
    /// Opens the file read-only, as a consistent snapshot of its last durable commit, also while
    /// another process (an engine) has it open. Nothing runs and nothing is recovered: for
    /// inspection (events, state at a seq, checkpoints, bundles export).
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// Durability of acknowledged steps (default [`Durability::Immediate`]).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.durability = durability;
        self
    }

    /// Threads driven at once (default 64).
    pub fn concurrency(mut self, n: usize) -> Self {
        self.config.concurrency = n.max(1);
        self
    }

    /// A checkpoint every `steps` steps and/or every `ms` ms, for every workflow.
    pub fn checkpoint_every(mut self, steps: Option<u64>, ms: Option<u64>) -> Self {
        self.config.checkpoint_every_steps = steps;
        self.config.checkpoint_every_ms = ms;
        self
    }

    /// A periodic checkpoint once the log after a thread's latest checkpoint holds `events`
    /// events or `bytes` bytes (event bodies, summaries, payloads), whichever comes first, so
    /// that restoring a thread (after a crash, for `state_at`, to resume it) never folds more
    /// than about that much. On by default (1,000 events or 8 MiB); `None` turns a bound off.
    /// Counted from the latest checkpoint when a runner picks a thread up (its events; the
    /// bytes from then on).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), cairn::Error> {
    /// let engine = cairn::Engine::builder("cairn.db")
    ///     .checkpoint_tail(Some(200), Some(1 << 20))
    ///     .open()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn checkpoint_tail(mut self, events: Option<u64>, bytes: Option<u64>) -> Self {
        self.config.checkpoint_tail_events = events;
        self.config.checkpoint_tail_bytes = bytes;
        self
    }

    /// What to do with unfinished threads at open.
    pub fn recovery(mut self, policy: RecoveryPolicy) -> Self {
        self.config.recovery = policy;
        self
    }

    /// The clock (default: the system clock).
    pub fn clock(mut self, clock: Arc<dyn Clock>) -> Self {
        self.clock = clock;
        self
    }

    /// Grace period for cancelled nodes.
    pub fn cancel_grace_ms(mut self, ms: u64) -> Self {
        self.config.cancel_grace_ms = ms;
        self
    }

    /// Seed of the random stream (deterministic ids and randomness in tests).
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = Some(seed);
        self
    }

    /// Uses an already open store instead of a file (tests, fault injection, other backends).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Registers a workflow before recovery runs (so recovered threads find it).
    pub fn workflow<S: State>(mut self, wf: &Workflow<S>) -> Self {
        self.workflows.push(wf.erase());
        self
    }

    /// Registers a type-erased workflow before recovery runs.
    pub fn workflow_dyn(mut self, wf: Arc<DynWorkflow>) -> Self {
        self.workflows.push(wf);
        self
    }

    /// Opens the store, registers the workflows, and recovers unfinished threads.
    ///
    /// # Errors
    /// Storage errors opening the file (missing directory, not a Cairn file, newer format, locked
    /// by another process); [`Error::Build`]-like registration conflicts.
    pub async fn open(self) -> Result<Engine, Error> {
        let store: Arc<dyn Store> = match (self.store, self.path) {
            (Some(store), _) => store,
            (None, Some(path)) => {
                let options = Options { durability: self.durability, ..Options::default() };
                let path2 = path.clone();
                let read_only = self.read_only;
                let store = tokio::task::spawn_blocking(move || {
                    if read_only {
                        RedbStore::open_read_only(&path2)
                    } else {
                        RedbStore::open(&path2, options)
                    }
                })
                .await
                .map_err(|e| Error::Invalid(format!("opening {}: {e}", path.display())))??;
                Arc::new(store)
            }
            (None, None) => return Err(Error::Invalid("no database path or store given".into())),
        };
        let seed = self.config.seed.unwrap_or_else(|| self.clock.now_ms() ^ 0x9E37_79B9_7F4A_7C15);
        let owner = format!("engine-{:016x}", splitmix(seed ^ u64::from(std::process::id())));
        let inner = Arc::new(Inner {
            store,
            clock: self.clock,
            permits: Arc::new(Semaphore::new(self.config.concurrency)),
            config: self.config,
            owner,
            registry: RwLock::new(HashMap::new()),
            claims: Claims::default(),
            shutdown: CancellationToken::new(),
            kill: CancellationToken::new(),
            tracker: TaskTracker::new(),
            watchers: Mutex::new(HashMap::new()),
            rng: Mutex::new(seed),
            locks_released: tokio::sync::Notify::new(),
            seed,
            acked_steps: AtomicU64::new(0),
            step_hook: RwLock::new(None),
            verified: Mutex::new(std::collections::HashSet::new()),
            timers: Timers::default(),
        });
        let engine = Engine { inner };
        for wf in self.workflows {
            engine.register_dyn(wf)?;
        }
        if !self.read_only {
            engine.recover().await?;
        }
        Ok(engine)
    }
}

/// A hook called after every acknowledged step (test harnesses, the demo's crash switch).
pub type StepHook = Arc<dyn Fn(&ThreadId, u64, u64) + Send + Sync>;

/// The shared engine state.
pub(crate) struct Inner {
    pub store: Arc<dyn Store>,
    pub clock: Arc<dyn Clock>,
    pub config: Config,
    /// This engine instance's lease owner name.
    pub owner: String,
    registry: RwLock<HashMap<(String, u32), Arc<DynWorkflow>>>,
    /// Which runner of this process drives which thread.
    pub claims: Claims,
    permits: Arc<Semaphore>,
    /// Cancelled on graceful shutdown: runners stop at the next step boundary.
    pub shutdown: CancellationToken,
    /// Cancelled on a simulated crash: every task is dropped where it stands.
    kill: CancellationToken,
    tracker: TaskTracker,
    watchers: Mutex<HashMap<ThreadId, watch::Sender<ThreadStatus>>>,
    rng: Mutex<u64>,
    /// Signalled after every commit that releases locks, so waiters retry at once.
    pub locks_released: tokio::sync::Notify,
    /// Seed of node randomness for threads created before seeds were recorded in the log (a
    /// newer thread draws from its own recorded seed).
    pub seed: u64,
    acked_steps: AtomicU64,
    step_hook: RwLock<Option<StepHook>>,
    /// Unfinished threads this instance created or checked against its code (the resume
    /// check, `resume_check.rs`): code cannot change inside one process. An entry goes when
    /// its thread ends, so the set is bounded by the live threads.
    pub verified: Mutex<std::collections::HashSet<ThreadId>>,
    /// The armed durable timers (`timers.rs`).
    pub timers: Timers,
}

impl Inner {
    /// The registered workflow a thread is pinned to, checked against its fingerprint.
    pub fn workflow_for(&self, record: &ThreadRecord) -> Result<Arc<DynWorkflow>, Error> {
        let w = &record.workflow;
        let wf = self
            .registry
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .get(&(w.id.clone(), w.version))
            .cloned()
            .ok_or_else(|| Error::UnknownWorkflow { id: w.id.clone(), version: w.version })?;
        let current = wf.fingerprint().to_string();
        if current != w.fingerprint {
            return Err(Error::FingerprintChanged {
                thread: record.id.to_string(),
                workflow: format!("{} v{}", w.id, w.version),
                recorded: w.fingerprint.clone(),
                current,
            });
        }
        Ok(wf)
    }

    fn latest(&self, id: &str, version: Option<u32>) -> Result<Arc<DynWorkflow>, Error> {
        let reg = self.registry.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let found = match version {
            Some(v) => reg.get(&(id.to_owned(), v)).cloned(),
            None => reg
                .iter()
                .filter(|((i, _), _)| i == id)
                .max_by_key(|((_, v), _)| *v)
                .map(|(_, w)| w.clone()),
        };
        found.ok_or_else(|| Error::UnknownWorkflow {
            id: id.to_owned(),
            version: version.unwrap_or(0),
        })
    }

    /// The seed recorded in a new thread's `ThreadCreated` event: the engine's own seed when one
    /// was configured (a seeded engine draws the same values run after run), else the next
    /// number of the engine's random stream.
    pub fn thread_seed(&self) -> u64 {
        self.config.seed.unwrap_or_else(|| self.random_u64())
    }

    /// A random number for a task's `n`th fresh draw: a function of the thread's recorded seed
    /// and the task's identity only, so whichever process drives the thread, and whatever the
    /// timing, the thread draws the same values.
    pub fn task_random(
        seed: u64,
        thread: &ThreadId,
        step: u64,
        task: &str,
        attempt: u32,
        n: u64,
    ) -> u64 {
        let mut h = blake3::Hasher::new();
        h.update(&seed.to_le_bytes());
        h.update(thread.as_str().as_bytes());
        h.update(&[0]);
        h.update(&step.to_le_bytes());
        h.update(task.as_bytes());
        h.update(&[0]);
        h.update(&attempt.to_le_bytes());
        h.update(&n.to_le_bytes());
        let mut first = [0u8; 8];
        first.copy_from_slice(&h.finalize().as_bytes()[..8]);
        u64::from_le_bytes(first)
    }

    /// The next number of the engine's random stream (SplitMix64), for ids the engine makes.
    pub fn random_u64(&self) -> u64 {
        let mut s = lock(&self.rng);
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix(*s)
    }

    /// A fresh 128-bit id as 32 hex digits, from the random stream.
    pub fn new_id(&self) -> String {
        format!("{:016x}{:016x}", self.random_u64(), self.random_u64())
    }

    /// Tells whoever waits on `thread` that its status changed (to `status`, or since then to
    /// what is stored now: the stored status is what they see).
    pub fn notify(&self, thread: &ThreadId, status: ThreadStatus) {
        let mut watchers = lock(&self.watchers);
        let Some(tx) = watchers.get(thread) else { return };
        // Publish the stored status, read under the lock, not the caller's: callers notify
        // after letting go of the thread, so a later change (a resume right after a pause) may
        // have been committed and notified in between, and must not be overwritten by an older
        // status (a handle would then wait on, or report, a status the thread has left).
        let status = match self.store.thread(thread) {
            Ok(Some(record)) => record.status,
            _ => status,
        };
        tx.send_replace(status);
        // Nobody listens any more (a waiter gave up): the next `watch` starts a new channel.
        if status.is_terminal() || tx.receiver_count() == 0 {
            watchers.remove(thread);
        }
    }

    /// Drops `thread`'s status channel if nobody listens to it any more (a waiter is done), so
    /// the channels are bounded by the threads being waited on, not every thread ever waited
    /// on. The next [`Inner::watch`] makes a new one from the stored status.
    pub fn unwatch_if_unused(&self, thread: &ThreadId) {
        let mut watchers = lock(&self.watchers);
        if watchers.get(thread).is_some_and(|tx| tx.receiver_count() == 0) {
            watchers.remove(thread);
        }
    }

    /// A receiver of `thread`'s status changes, starting from its stored status.
    pub fn watch(&self, thread: &ThreadId) -> Result<watch::Receiver<ThreadStatus>, Error> {
        let mut watchers = lock(&self.watchers);
        if let Some(tx) = watchers.get(thread) {
            return Ok(tx.subscribe());
        }
        // Read under the lock: a runner's notify after its commit either finds this watcher or
        // happened before the read, which then sees the committed status.
        let record =
            self.store.thread(thread)?.ok_or_else(|| Error::UnknownThread(thread.to_string()))?;
        let (tx, rx) = watch::channel(record.status);
        if !record.status.is_terminal() {
            watchers.insert(thread.clone(), tx);
        }
        Ok(rx)
    }

    /// Counts an acknowledged step and calls the step hook.
    pub fn step_acknowledged(&self, thread: &ThreadId, step: u64) {
        let total = self.acked_steps.fetch_add(1, Ordering::SeqCst) + 1;
        let hook = self.step_hook.read().unwrap_or_else(std::sync::PoisonError::into_inner).clone();
        if let Some(hook) = hook {
            hook(thread, step, total);
        }
    }

    /// Watches a running thread's deadline: when it passes, the runner is told to time out.
    pub fn arm_deadline(
        self: &Arc<Self>,
        thread: &ThreadId,
        at_ms: u64,
        control: &Arc<crate::coord::claims::Control>,
    ) {
        let clock = self.clock.clone();
        let control = control.clone();
        let _ = thread;
        self.spawn(async move {
            tokio::select! {
                () = clock.sleep_until(at_ms) => control.time_out(),
                () = control.cancel.cancelled() => {}
                () = control.done.cancelled() => {}
            }
        });
    }

    /// Times out a parked thread (waiting, sleeping, paused) when its deadline passes.
    pub fn arm_parked_deadline(self: &Arc<Self>, thread: ThreadId, at_ms: u64) {
        let inner = self.clone();
        self.spawn(async move {
            tokio::select! {
                () = inner.clock.sleep_until(at_ms) => {}
                () = inner.shutdown.cancelled() => return,
            }
            let engine = Engine { inner: inner.clone() };
            match engine.time_out_parked(&thread).await {
                Ok(()) => {}
                Err(e) => {
                    tracing::debug!(thread = %thread, error = %e, "deadline of a parked thread")
                }
            }
        });
    }

    /// Arms the deadline of a parked thread from the deadline kept in its record's summary.
    pub fn arm_parked_deadline_from_record(self: &Arc<Self>, thread: &ThreadId) {
        let Ok(Some(record)) = self.store.thread(thread) else { return };
        let summary: serde_json::Value =
            serde_json::from_slice(&record.summary).unwrap_or_default();
        if let Some(at) = summary.get("deadline_at_ms").and_then(serde_json::Value::as_u64) {
            self.arm_parked_deadline(thread.clone(), at);
        }
    }

    /// Appends events to a thread no runner drives, guarded by its expected status; with
    /// `next`, the same batch moves it on: `Run` wakes it (so that nobody sees it waiting after
    /// the input or timer that ends the wait is recorded), `WaitInput` or `Sleep` puts a paused
    /// thread back into the wait it was paused in.
    ///
    /// # Errors
    /// [`Error::WrongStatus`] if the thread's status is not `expected` (or stops being it before
    /// the write).
    pub async fn write_parked(
        &self,
        thread: &ThreadId,
        expected: ThreadStatus,
        mut bodies: Vec<Body>,
        next: Option<Transition>,
    ) -> Result<(), Error> {
        let now = self.clock.now_ms();
        let mut record =
            self.store.thread(thread)?.ok_or_else(|| Error::UnknownThread(thread.to_string()))?;
        if record.status != expected {
            return Err(Error::WrongStatus {
                thread: thread.to_string(),
                status: record.status,
                detail: format!("it is not {expected}"),
            });
        }
        let wake = next == Some(Transition::Run);
        if let Some(t) = next {
            let to = crate::core::status::transition(expected, t)
                .map_err(|source| Error::Transition { thread: thread.to_string(), source })?;
            let reason = if wake { "woken" } else { "resumed into its wait" };
            bodies.push(Body::StatusChanged { from: expected, to, reason: reason.into() });
            record.status = to;
        }
        record.updated_at_ms = now;
        let to = record.status;
        let mut batch = Batch::default();
        for body in &bodies {
            codec::push_event(&mut batch, thread, body, now)?;
        }
        batch.threads.push(record);
        batch.guards.push(Guard::Status { thread: thread.clone(), expected });
        let parked = || matches!(self.store.thread(thread), Ok(Some(r)) if r.status == expected);
        let Some(_claim) = self.claims.claim_parked(thread, parked).await else {
            return Err(Error::WrongStatus {
                thread: thread.to_string(),
                status: ThreadStatus::Running,
                detail: "a runner is driving it".into(),
            });
        };
        let result = self.store.append(batch).map(|p| async move { p.wait().await });
        let result = match result {
            Ok(fut) => fut.await.map(|_| ()),
            Err(e) => Err(e),
        };
        self.claims.release(thread);
        match result {
            Ok(()) => {
                if next.is_some() {
                    // Handles waiting on this thread must not see the old status any more.
                    self.notify(thread, to);
                }
                Ok(())
            }
            // The status moved between the read above and the commit.
            Err(cairn_storage::Error::GuardFailed { .. }) => Err(Error::WrongStatus {
                thread: thread.to_string(),
                status: self.store.thread(thread)?.map_or(expected, |r| r.status),
                detail: format!("it stopped being {expected}"),
            }),
            Err(e) => Err(e.into()),
        }
    }

    /// Runs `fut` as an engine task (stopped on a simulated crash, awaited on shutdown).
    pub fn spawn(&self, fut: impl std::future::Future<Output = ()> + Send + 'static) {
        let kill = self.kill.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                () = fut => {}
                () = kill.cancelled() => {}
            }
        });
    }

    /// Drives `thread` in the background under the concurrency limit. If something else holds
    /// the thread at that moment (another runner, or a control writing to it), waits until it
    /// lets go and looks again: the runner then finds the thread as that holder left it
    /// (running on, parked, ended), so a wake is never dropped because of a passing claim.
    pub fn spawn_drive(self: &Arc<Self>, thread: ThreadId, reason: &'static str) {
        let inner = self.clone();
        self.spawn(async move {
            loop {
                let Ok(permit) = inner.permits.clone().acquire_owned().await else { return };
                if inner.shutdown.is_cancelled() {
                    return;
                }
                // Boxed: a task waiting for its permit holds only this small future, not the
                // runner's whole state machine (10,000 queued threads must stay cheap).
                match Box::pin(drive(inner.clone(), thread.clone(), 0, reason)).await {
                    Ok(Exit::Busy) => {
                        drop(permit);
                        inner.claims.wait_released(&thread).await;
                    }
                    Ok(_) => return,
                    Err(e) => {
                        tracing::error!(thread = %thread, error = %e, "runner stopped with an error");
                        return;
                    }
                }
            }
        });
    }
}

fn splitmix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Locks `m`, poisoned or not.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while these locks are held; a poisoned lock would still hold valid data.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// What recovery at open found and did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RecoveryReport {
    /// Threads resumed.
    pub resumed: Vec<ThreadId>,
    /// Threads parked as resumable.
    pub parked: Vec<ThreadId>,
    /// Sleeping threads whose timers were re-armed.
    pub timers: Vec<ThreadId>,
    /// Unfinished sub-workflow child threads left to their unfinished parents, whose nodes
    /// drive them on.
    pub children: Vec<ThreadId>,
}

/// A durable workflow engine on one database file.
///
/// # Examples
/// ```no_run
/// use cairn::dsl::{Replace, Workflow, NodeOutput, START, END};
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// let wf = Workflow::<Replace<u64>>::builder("double", 1)
///     .node("double", |s: std::sync::Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(s.0 * 2)) })
///     .edge(START, "double")
///     .edge("double", END)
///     .build()?;
/// let engine = cairn::Engine::builder("cairn.db").workflow(&wf).open().await?;
/// let thread = engine.start("double", 21, cairn::StartOptions::id("t1")).await?;
/// assert_eq!(thread.output::<u64>().await?, 42);
/// engine.shutdown().await;
/// # Ok(()) }
/// ```
#[derive(Clone)]
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
}

impl Engine {
    /// A builder for an engine on the database file at `path` (created if missing).
    pub fn builder(path: impl AsRef<Path>) -> EngineBuilder {
        EngineBuilder {
            path: Some(path.as_ref().to_path_buf()),
            store: None,
            durability: Durability::Immediate,
            config: Config::default(),
            clock: Arc::new(SystemClock),
            workflows: Vec::new(),
            read_only: false,
        }
    }

    /// A builder over an already open store.
    pub fn with_store(store: Arc<dyn Store>) -> EngineBuilder {
        EngineBuilder { path: None, ..Self::builder("").store(store) }
    }

    /// Registers a workflow (and its sub-workflows). Several versions of one id may be
    /// registered; a thread stays on the version it started with.
    ///
    /// # Errors
    /// [`Error::Invalid`] if this id and version are registered with another fingerprint.
    pub fn register<S: State>(&self, wf: &Workflow<S>) -> Result<(), Error> {
        self.register_dyn(wf.erase())
    }

    /// Registers a type-erased workflow (and its sub-workflows).
    ///
    /// # Errors
    /// As [`Engine::register`].
    pub fn register_dyn(&self, wf: Arc<DynWorkflow>) -> Result<(), Error> {
        let mut stack = vec![wf];
        let mut reg =
            self.inner.registry.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        while let Some(wf) = stack.pop() {
            for node in wf.nodes() {
                if let cairn_dsl::DynNodeKind::Subgraph { child, .. } = &node.kind {
                    stack.push(child.clone());
                }
            }
            let key = (wf.id().to_owned(), wf.version());
            if let Some(existing) = reg.get(&key)
                && existing.fingerprint() != wf.fingerprint()
            {
                return Err(Error::Invalid(format!(
                    "workflow {} v{} is registered with fingerprint {}; this definition has {} (bump the version)",
                    key.0,
                    key.1,
                    existing.fingerprint(),
                    wf.fingerprint()
                )));
            }
            reg.insert(key, wf);
        }
        Ok(())
    }

    /// Starts a thread of the newest registered version of `workflow` (or `options.version`) on
    /// `input`, which is the initial state. Idempotent on `options.thread_id`.
    ///
    /// # Errors
    /// [`Error::UnknownWorkflow`]; [`Error::Invalid`] if the input is not a valid state or the id
    /// exists with another workflow; storage errors.
    pub async fn start(
        &self,
        workflow: &str,
        input: impl Serialize,
        options: StartOptions,
    ) -> Result<ThreadHandle, Error> {
        let input = serde_json::to_value(input)?;
        self.start_json(workflow, input, options).await
    }

    /// [`Engine::start`] with a JSON input.
    ///
    /// # Errors
    /// As [`Engine::start`].
    pub async fn start_json(
        &self,
        workflow: &str,
        input: serde_json::Value,
        options: StartOptions,
    ) -> Result<ThreadHandle, Error> {
        let (wf, id, batch) = self.prepare_start(workflow, input, options)?;
        if let Some(batch) = batch {
            let pending = self.inner.store.append(batch)?;
            if crate::exec::start::settle(&self.inner, &wf, &id, pending).await? {
                self.inner.spawn_drive(id.clone(), "started");
            }
        }
        Ok(ThreadHandle::new(self.clone(), id))
    }

    /// Starts many threads at once. Their creations are handed to storage together and share
    /// durable commits, where a loop that awaits each [`Engine::start`] pays one durable commit
    /// per thread before it can start the next. Returns one handle per start, in order;
    /// idempotent per id, as `start` is.
    ///
    /// Use `start` for one thread, or when each start depends on the one before; `start_many`
    /// for a batch of independent threads (an import, a fan-out of jobs).
    ///
    /// # Errors
    /// As [`Engine::start`]. Every start is checked before anything is written, so a bad input
    /// or an unknown workflow writes nothing; a storage error comes after the threads written
    /// before it were started.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// use cairn::StartOptions;
    /// let jobs = (0..100).map(|i| (i, StartOptions::id(format!("job-{i}"))));
    /// let handles = engine.start_many("double", jobs).await?;
    /// assert_eq!(handles.len(), 100);
    /// # Ok(()) }
    /// ```
    pub async fn start_many<I: Serialize>(
        &self,
        workflow: &str,
        starts: impl IntoIterator<Item = (I, StartOptions)>,
    ) -> Result<Vec<ThreadHandle>, Error> {
        let mut prepared = Vec::new();
        for (input, options) in starts {
            let input = serde_json::to_value(input)?;
            prepared.push(self.prepare_start(workflow, input, options)?);
        }
        let mut first_error = None;
        let mut written = Vec::new();
        let mut handles = Vec::with_capacity(prepared.len());
        for (wf, id, batch) in prepared {
            handles.push(ThreadHandle::new(self.clone(), id.clone()));
            let Some(batch) = batch else { continue };
            if first_error.is_some() {
                continue;
            }
            match self.inner.store.append(batch) {
                Ok(pending) => written.push((wf, id, pending)),
                Err(e) => first_error = Some(e.into()),
            }
        }
        for (wf, id, pending) in written {
            match crate::exec::start::settle(&self.inner, &wf, &id, pending).await {
                Ok(true) => self.inner.spawn_drive(id, "started"),
                Ok(false) => {}
                Err(e) => {
                    first_error.get_or_insert(e);
                }
            }
        }
        match first_error {
            Some(e) => Err(e),
            None => Ok(handles),
        }
    }

    /// Checks a start and builds the batch that creates its thread (`None`: the thread exists).
    #[allow(clippy::type_complexity, reason = "a private triple read once by each caller")]
    fn prepare_start(
        &self,
        workflow: &str,
        input: serde_json::Value,
        options: StartOptions,
    ) -> Result<(Arc<DynWorkflow>, ThreadId, Option<cairn_storage::Batch>), Error> {
        let wf = self.inner.latest(workflow, options.version)?;
        if options.labels.contains_key(crate::core::children::PARENT_LABEL) {
            return Err(Error::Invalid(format!(
                "the label {:?} is reserved: the engine sets it on sub-workflow child threads",
                crate::core::children::PARENT_LABEL
            )));
        }
        let id = match &options.thread_id {
            Some(id) => ThreadId::new(id.clone())?,
            None => ThreadId::new(self.inner.new_id())?,
        };
        let policy = crate::core::event::ThreadPolicy {
            deadline_at_ms: options
                .deadline_ms
                .map(|d| self.inner.clock.now_ms().saturating_add(d)),
            budgets: options.budgets,
            permissions: options.permissions,
        };
        let batch =
            crate::exec::start::prepare(&self.inner, &wf, &id, input, options.labels, None, policy)?;
        Ok((wf, id, batch))
    }

    /// A handle to an existing thread.
    ///
    /// # Errors
    /// [`Error::UnknownThread`].
    pub fn thread(&self, id: &str) -> Result<ThreadHandle, Error> {
        let id = ThreadId::new(id)?;
        if self.inner.store.thread(&id)?.is_none() {
            return Err(Error::UnknownThread(id.to_string()));
        }
        Ok(ThreadHandle::new(self.clone(), id))
    }

    /// The store under the engine (reads, subscriptions, verify).
    pub fn store(&self) -> &Arc<dyn Store> {
        &self.inner.store
    }

    /// The engine's clock.
    pub fn clock(&self) -> &Arc<dyn Clock> {
        &self.inner.clock
    }

    /// Calls `hook(thread, step, total_acknowledged_steps)` after every acknowledged step.
    pub fn on_step(&self, hook: StepHook) {
        *self.inner.step_hook.write().unwrap_or_else(std::sync::PoisonError::into_inner) =
            Some(hook);
    }

    /// Finds unfinished threads and resumes or parks them (run by `open`).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn recover(&self) -> Result<RecoveryReport, Error> {
        let span = tracing::info_span!(
            "recovery",
            resumed = tracing::field::Empty,
            parked = tracing::field::Empty,
            timers = tracing::field::Empty,
            children = tracing::field::Empty,
        );
        let report = self.recover_all().instrument(span.clone()).await?;
        span.record("resumed", report.resumed.len());
        span.record("parked", report.parked.len());
        span.record("timers", report.timers.len());
        span.record("children", report.children.len());
        tracing::info!(
            parent: &span,
            resumed = report.resumed.len(),
            parked = report.parked.len(),
            timers = report.timers.len(),
            children = report.children.len(),
            "recovery done"
        );
        Ok(report)
    }

    async fn recover_all(&self) -> Result<RecoveryReport, Error> {
        let mut report = RecoveryReport::default();
        for status in [
            ThreadStatus::Running,
            ThreadStatus::Created,
            ThreadStatus::Sleeping,
            ThreadStatus::WaitingInput,
            ThreadStatus::Paused,
            ThreadStatus::Blocked,
        ] {
            let mut offset = 0;
            loop {
                let filter = ThreadFilter { status: Some(status), ..ThreadFilter::default() };
                let page = self.inner.store.list_threads(&filter, Page { limit: 500, offset })?;
                offset += page.len();
                let done = page.len() < 500;
                for record in page {
                    if self.inner.claims.get(&record.id).is_some() {
                        continue;
                    }
                    self.recover_one(record, &mut report).await?;
                }
                if done {
                    break;
                }
            }
        }
        Ok(report)
    }

    async fn recover_one(
        &self,
        record: ThreadRecord,
        report: &mut RecoveryReport,
    ) -> Result<(), Error> {
        let id = record.id.clone();
        if matches!(
            record.status,
            ThreadStatus::WaitingInput | ThreadStatus::Paused | ThreadStatus::Blocked
        ) {
            self.inner.arm_parked_deadline_from_record(&id);
            return Ok(());
        }
        if record.status == ThreadStatus::Sleeping {
            match self.inner.workflow_for(&record) {
                Ok(wf) => {
                    let ctx = crate::core::restore::restore(self.inner.store.as_ref(), &wf, &id, None)?;
                    self.inner.schedule_timers(&id, &ctx);
                    report.timers.push(id);
                }
                Err(e) => tracing::warn!(thread = %id, error = %e, "sleeping thread not re-armed"),
            }
            return Ok(());
        }
        if let Some(parent) =
            crate::core::children::unfinished_parent(self.inner.store.as_ref(), &record)?
        {
            // A sub-workflow's child is driven by its parent's node (which re-runs, finds the
            // child and drives it on, under the parent's cancellation): one driver, never two.
            tracing::debug!(thread = %id, %parent, "child thread left to its parent");
            report.children.push(id);
            return Ok(());
        }
        if let Err(e) = self.inner.workflow_for(&record) {
            // Not runnable by this binary: leave it untouched, resumable once registered.
            tracing::warn!(thread = %id, error = %e, "unfinished thread left as is");
            report.parked.push(id);
            return Ok(());
        }
        match self.inner.config.recovery {
            RecoveryPolicy::Resume => {
                self.inner.spawn_drive(id.clone(), "recovered after restart: resumed");
                report.resumed.push(id);
            }
            RecoveryPolicy::Park => {
                let body = Body::Recovered { action: "parked".into() };
                self.inner.write_parked(&id, record.status, vec![body], None).await?;
                report.parked.push(id);
            }
        }
        Ok(())
    }

    /// Shuts down gracefully: every runner stops at its next step boundary (its thread stays
    /// Running and is recovered at the next open), timers stop, then the store is flushed.
    pub async fn shutdown(&self) {
        self.inner.shutdown.cancel();
        self.inner.tracker.close();
        self.inner.tracker.wait().await;
    }

    /// Stops every engine task where it stands, as a crash would (for tests: the store stays
    /// whatever the last commit left; writes already handed to storage may still commit).
    pub async fn crash(&self) {
        self.inner.kill.cancel();
        self.inner.shutdown.cancel();
        self.inner.tracker.close();
        self.inner.tracker.wait().await;
    }

    /// Number of steps acknowledged by this engine instance.
    pub fn acknowledged_steps(&self) -> u64 {
        self.inner.acked_steps.load(Ordering::SeqCst)
    }

    /// The registered workflow a thread runs, checked against the fingerprint it was started
    /// with.
    ///
    /// # Errors
    /// [`Error::UnknownWorkflow`], [`Error::FingerprintChanged`], [`Error::UnknownThread`].
    pub fn workflow_of(&self, thread: &ThreadId) -> Result<Arc<DynWorkflow>, Error> {
        let record = self
            .inner
            .store
            .thread(thread)?
            .ok_or_else(|| Error::UnknownThread(thread.to_string()))?;
        self.inner.workflow_for(&record)
    }

    /// Every registered workflow, by id then version.
    pub fn workflows(&self) -> Vec<Arc<DynWorkflow>> {
        let reg = self.inner.registry.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut all: Vec<_> = reg.values().cloned().collect();
        all.sort_by(|a, b| (a.id(), a.version()).cmp(&(b.id(), b.version())));
        all
    }

    pub(crate) fn workflow_ref(wf: &DynWorkflow) -> WorkflowRef {
        WorkflowRef {
            id: wf.id().to_owned(),
            version: wf.version(),
            fingerprint: wf.fingerprint().to_string(),
        }
    }
}
