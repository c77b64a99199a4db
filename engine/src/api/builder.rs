//! Opening an engine: the builder, and what a thread starts with.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use cairn_dsl::{DynWorkflow, State, Workflow};
use cairn_storage::{Durability, Options, RedbStore, Store, ThreadId};
use tokio::sync::Semaphore;

use super::engine::Engine;
use crate::clock::{Clock, SystemClock};
use crate::config::{Config, RecoveryPolicy};
use crate::coord::REMOTE_DRIVER_MARGIN;
use crate::error::Error;
use crate::exec::registry::Registry;
use crate::exec::shell::{FailureHook, Ids, Shell, Verified, splitmix};
use crate::exec::wake::Waker;
use crate::sealing::{PayloadCodec, SealedView, SealingStore};
use crate::tasks::Tasks;

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
    pub(super) path: Option<PathBuf>,
    pub(super) store: Option<Arc<dyn Store>>,
    pub(super) durability: Durability,
    pub(super) config: Config,
    pub(super) clock: Arc<dyn Clock>,
    pub(super) workflows: Vec<Arc<DynWorkflow>>,
    pub(super) read_only: bool,
    /// Read-only without a copy ([`EngineBuilder::read_only_in_place`]).
    pub(super) in_place: bool,
    pub(super) on_failure: Option<FailureHook>,
    pub(super) on_stuck: Option<crate::exec::shell::StuckHook>,
    /// Where the engine's and the store's metrics go (`None`: the global recorder).
    pub(super) recorder: Option<super::health::SharedRecorder>,
    /// Queues this engine defines at open (`api/queues.rs`).
    pub(super) queues: Vec<(String, cairn_storage::QueueLimits)>,
    /// How bodies are sealed at rest: `None` not at all, `Some(None)` not, with sealed ones
    /// refused by name ([`EngineBuilder::sealed_without_key`]), `Some(Some(codec))` by `codec`.
    pub(super) sealing: Option<Option<Arc<dyn PayloadCodec>>>,
    /// Migrations registered at open, before recovery (`api/migrate.rs`).
    pub(super) migrations: Vec<(String, u32, u32, super::migrate::MigrationFn)>,
}

impl EngineBuilder {
    /// Opens the file read-only, as a consistent snapshot of its last durable commit, also while
    /// another process (an engine) has it open. Nothing runs and nothing is recovered: for
    /// inspection (events, state at a seq, checkpoints, bundles export).
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// As [`EngineBuilder::read_only`], but the file is opened where it is, without a copy
    /// (`RedbStore::open_read_only_in_place`): memory does not grow with the file. Refused with
    /// `Storage(Locked)` while another process (an engine) holds the file for writing; while
    /// this engine is open, none can open the file for writing. The command line opens files
    /// this way.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), cairn::Error> {
    /// let engine = cairn::Engine::builder("cairn.db").read_only_in_place().open().await?;
    /// let ended = engine.store().thread(&cairn::storage::ThreadId::new("t1")?).await?;
    /// # Ok(()) }
    /// ```
    pub fn read_only_in_place(mut self) -> Self {
        self.read_only = true;
        self.in_place = true;
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

    /// The database file's page cache, in bytes (default 64 MiB, storage's). Its memory stays
    /// bounded by this whatever the number of threads in the file, and it fills with the pages
    /// the engine reads and writes, so an engine holding many parked threads holds up to this
    /// much for them (at 100,000 threads waiting for input, a 16 MiB cache makes each cost
    /// about 0.35 KiB instead of 0.8); a smaller cache makes reads of long histories
    /// (`replay`, `state_at`, restores) go to the file more often (a replay of a 100,000-step
    /// thread took 20% more CPU with 16 MiB). Ignored for PostgreSQL and read-only opens.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), cairn::Error> {
    /// let engine = cairn::Engine::builder("cairn.db").page_cache_bytes(16 << 20).open().await?;
    /// # Ok(()) }
    /// ```
    pub fn page_cache_bytes(mut self, bytes: usize) -> Self {
        self.config.page_cache_bytes = Some(bytes);
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

    /// A completing thread writes its `completion` checkpoint when at least `events` events
    /// follow its latest checkpoint (its last step's included), or when its last step would
    /// have taken one anyway (a node's or phase's policy, a request at run time, a periodic
    /// policy due); 0 writes one at every completion. Default 100
    /// (`COMPLETION_CHECKPOINT_AFTER_DEFAULT`): a shorter thread's final state is
    /// read from its log, as every read folds the events after the latest checkpoint. A thread
    /// that fails, times out or is cancelled always writes its `failure` checkpoint.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), cairn::Error> {
    /// // Every completed thread keeps a snapshot of its final state.
    /// let engine = cairn::Engine::builder("cairn.db").completion_checkpoint_after(0).open().await?;
    /// # Ok(()) }
    /// ```
    pub fn completion_checkpoint_after(mut self, events: u64) -> Self {
        self.config.completion_checkpoint_after = events;
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

    /// How long a lease on a thread lasts without renewal (default
    /// 60,000 ms); see [`Config::lease_ttl_ms`].
    pub fn lease_ttl_ms(mut self, ms: u64) -> Self {
        self.config.lease_ttl_ms = ms.max(1);
        self
    }

    /// This worker's build id (a deployment's name: "2026.12.1", a commit hash): the threads
    /// this engine starts are pinned to it (label `cairn.build`, unless started
    /// [`StartOptions::auto_upgrade`](crate::StartOptions::auto_upgrade)), and it takes (recovers,
    /// wakes, drives) only threads pinned to it or unpinned ones; `Engine::repin` moves a thread
    /// to another build. Checked at `open`: at most `BUILD_ID_BYTES_MAX` (64) bytes of printable
    /// ASCII, not empty. See docs/patching.md.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), cairn::Error> {
    /// let engine = cairn::Engine::builder("app.db").build_id("2026.12.1").open().await?;
    /// # Ok(()) }
    /// ```
    pub fn build_id(mut self, build: impl Into<String>) -> Self {
        self.config.build_id = Some(build.into());
        self
    }

    /// How often an engine on a shared database looks for work (default 500 ms); see
    /// [`Config::poll_ms`].
    pub fn poll_ms(mut self, ms: u64) -> Self {
        self.config.poll_ms = ms.max(1);
        self
    }

    /// Runs `hook` for every thread a runner of this engine fails (a node failed with no retry
    /// left, a budget or step limit stopped it), once the failure is durable and before anyone
    /// waiting on the thread is told; the runner awaits the future it returns. It cannot change
    /// the thread's outcome: it reports its own errors itself. A thread failed from outside a
    /// runner (`abandon`) is not passed to it. Setting it again replaces it.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), cairn::Error> {
    /// let engine = cairn::Engine::builder("app.db")
    ///     .on_failure(|_engine, thread| {
    ///         Box::pin(async move { tracing::warn!(%thread, "thread failed") })
    ///     })
    ///     .open()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn on_failure(
        mut self,
        hook: impl Fn(Engine, ThreadId) -> futures::future::BoxFuture<'static, ()>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        let hook: FailureHook =
            Arc::new(move |shell, thread| hook(Engine { shell: shell.clone() }, thread.clone()));
        self.on_failure = Some(hook);
        self
    }

    /// Runs `hook` for every stuck thread a health pass names (Running, no step for longer
    /// than the watchdog), when the engine acts on the pass ([`Engine::act_on_health`], which
    /// the engine's own passes call), before the [`crate::HealthPolicy`]'s action: a notifier.
    /// The pass awaits the future it returns; it reports its own errors itself. Setting it
    /// again replaces it.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), cairn::Error> {
    /// let engine = cairn::Engine::builder("app.db")
    ///     .on_stuck(|_engine, stuck| {
    ///         Box::pin(async move { tracing::error!(thread = %stuck.thread, "stuck") })
    ///     })
    ///     .open()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn on_stuck(
        mut self,
        hook: impl Fn(Engine, crate::telemetry::StuckThread) -> futures::future::BoxFuture<'static, ()>
        + Send
        + Sync
        + 'static,
    ) -> Self {
        self.on_stuck = Some(Arc::new(move |shell, stuck| {
            hook(Engine { shell: shell.clone() }, stuck.clone())
        }));
        self
    }

    /// Grace period for cancelled nodes.
    pub fn cancel_grace_ms(mut self, ms: u64) -> Self {
        self.config.cancel_grace_ms = ms;
        self
    }

    /// Seed of the random stream (deterministic ids and randomness in tests). Node randomness
    /// draws from the seed itself; the ids the engine makes (a start without an id, a fork, a
    /// schedule's trigger) draw from the seed mixed with the database's last lsn at open: the
    /// same ids on the same history, and never again the ids of an earlier life on the same
    /// database.
    pub fn seed(mut self, seed: u64) -> Self {
        self.config.seed = Some(seed);
        self
    }

    /// Seals every body the engine stores (state, inputs, outputs, tool results, signals,
    /// checkpoints) with `codec` and opens it when read: protection at rest
    /// (`docs/encryption.md`). The store is wrapped in a [`SealingStore`]; its layout does
    /// not change. Bodies written before the codec was installed read as they are.
    ///
    /// # Examples
    /// ```no_run
    /// # #[cfg(feature = "encryption")]
    /// # async fn run() -> Result<(), cairn::Error> {
    /// let codec = cairn::sealing::AesGcmCodec::from_spec(&std::env::var("ORDER_KEYS").unwrap())?;
    /// let engine = cairn::Engine::builder("orders.db")
    ///     .payload_codec(std::sync::Arc::new(codec))
    ///     .open()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn payload_codec(mut self, codec: Arc<dyn PayloadCodec>) -> Self {
        self.sealing = Some(Some(codec));
        self
    }

    /// Opens without a payload codec, but answers a read of a sealed body with
    /// [`Error::Sealed`] naming its key (tools opened without the key), rather than bytes that
    /// do not decode.
    pub fn sealed_without_key(mut self) -> Self {
        self.sealing = Some(None);
        self
    }

    /// Uses an already open store instead of a file (tests, fault injection, other backends).
    pub fn store(mut self, store: Arc<dyn Store>) -> Self {
        self.store = Some(store);
        self
    }

    /// Defines a named queue with its limits, written to the store when the engine opens
    /// (replacing the limits of a queue of that name; its waiting and running threads are
    /// kept). Threads start on it with [`crate::StartOptions::on_queue`]; see `docs/queues.md`.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), cairn::Error> {
    /// use cairn::storage::{QueueLimits, RateLimit};
    /// let limits = QueueLimits {
    ///     concurrency_max: Some(8),
    ///     per_key_max: Some(2),
    ///     rate: Some(RateLimit { starts: 60, period_ms: 60_000 }),
    ///     ..QueueLimits::default()
    /// };
    /// let engine = cairn::Engine::builder("cairn.db").queue("reports", limits).open().await?;
    /// # Ok(()) }
    /// ```
    pub fn queue(mut self, name: impl Into<String>, limits: cairn_storage::QueueLimits) -> Self {
        self.queues.push((name.into(), limits));
        self
    }

    /// Registers a workflow before recovery runs (so recovered threads find it).
    pub fn workflow<S: State>(mut self, wf: &Workflow<S>) -> Self {
        self.workflows.push(wf.erase());
        self
    }

    /// Registers a migration as [`Engine::register_migration`] does, but before recovery runs:
    /// a migrate batch (`BatchOp::Migrate`) that an engine continues at open finds it, where
    /// one registered after `open` may come too late for the threads the batch reaches first
    /// (they are skipped: no migration registered).
    pub fn migration(
        mut self,
        workflow: impl Into<String>,
        from: u32,
        to: u32,
        f: impl Fn(serde_json::Value) -> Result<serde_json::Value, String> + Send + Sync + 'static,
    ) -> Self {
        self.migrations.push((workflow.into(), from, to, Arc::new(f)));
        self
    }

    /// Registers a type-erased workflow before recovery runs.
    pub fn workflow_dyn(mut self, wf: Arc<DynWorkflow>) -> Self {
        self.workflows.push(wf);
        self
    }

    /// The database file this builder opens (`None` for a store or a PostgreSQL URL): where
    /// tooling beside the engine announces itself (the endpoint's `<db>.endpoint` file).
    ///
    /// # Examples
    /// ```
    /// let builder = cairn::Engine::builder("app.db");
    /// assert_eq!(builder.file_path(), Some(std::path::Path::new("app.db")));
    /// ```
    pub fn file_path(&self) -> Option<&Path> {
        match (&self.store, &self.path) {
            (None, Some(path)) if !is_postgres_url(path) => Some(path),
            _ => None,
        }
    }

    /// Opens the store, registers the workflows, and recovers unfinished threads.
    ///
    /// # Errors
    /// Storage errors opening the file (missing directory, not a Cairn file, newer format, locked
    /// by another process); [`Error::Build`]-like registration conflicts.
    pub async fn open(mut self) -> Result<Engine, Error> {
        let store = self.open_store().await?;
        let (store, view) = self.sealed(store);
        // Without a configured seed, the operating system's randomness: two engines opened in
        // the same millisecond (a supervisor starting workers together) draw different streams,
        // so they never make the same thread id or the same node randomness. A configured seed
        // keeps runs reproducible.
        let entropy = os_random()?;
        let seed = self.config.seed.unwrap_or(entropy);
        let owner = instance_owner(entropy);
        let tasks = Tasks::default();
        let wait = Duration::from_millis(self.config.cancel_grace_ms) + REMOTE_DRIVER_MARGIN;
        let coord = crate::coord::for_store(
            store.clone(),
            crate::coord::Runtime { clock: self.clock.clone(), tasks: tasks.clone() },
            owner.clone(),
            wait,
            self.config.lease_ttl_ms,
        );
        let metrics = super::health::metrics_for(&store, self.recorder.as_ref(), &self.config);
        let history = store.last_lsn().0;
        let shell = Arc::new(Shell {
            store,
            view,
            clock: self.clock,
            coord,
            tasks,
            permits: Arc::new(Semaphore::new(self.config.concurrency)),
            ids: Ids::new(seed, self.config.seed.is_some(), history),
            config: self.config,
            registry: Registry::default(),
            owner: owner.into(),
            acks: Arc::default(),
            verified: Verified::default(),
            queued: Arc::default(),
            on_failure: self.on_failure,
            on_stuck: self.on_stuck,
            metrics,
            retention: tokio::sync::watch::Sender::default(),
            admit: tokio::sync::Notify::new(),
            queue_waiting: false.into(),
            orphans: Default::default(),
            streams: Default::default(),
        });
        forward_streams(&shell);
        if !self.read_only {
            let timers_armed = shell.metrics.timers_armed.clone();
            shell.coord.serve(Arc::new(Waker(Arc::downgrade(&shell))), timers_armed);
        }
        let engine = Engine { shell };
        for wf in self.workflows {
            engine.register_dyn(wf)?;
        }
        for (workflow, from, to, f) in self.migrations {
            engine.register_migration(&workflow, from, to, move |state| f(state));
        }
        // Schedules are threads of a built-in workflow that starts threads on this engine: it
        // is known to recovery only on an engine that resumes work, so that one opened to
        // inspect or control (the CLI, `RecoveryPolicy::Park`) never runs a due tick.
        let resumes = !self.read_only && engine.shell.config.recovery == RecoveryPolicy::Resume;
        if resumes {
            engine.register_schedules()?;
            engine.register_batches()?;
        }
        if !self.read_only {
            engine.recover().await?;
            // A shared database is served by every engine that resumes work (not by one
            // opened only to inspect or control threads, which parks what it finds).
            if engine.shell.coord.has_peers()
                && engine.shell.config.recovery == RecoveryPolicy::Resume
            {
                engine.spawn_poller();
            }
            engine.spawn_health_passes();
            engine.spawn_recovery_after_refusals();
            engine.spawn_retention();
            engine.define_queues(&self.queues).await?;
            if engine.shell.config.recovery == RecoveryPolicy::Resume {
                engine.spawn_admitter();
            }
        }
        if !resumes {
            engine.register_schedules()?;
            engine.register_batches()?;
        }
        Ok(engine)
    }

    /// `store` under the sealing asked for (a payload codec, or none but sealed reads), if any,
    /// and the read-only view of it the tools read through (`SealedView`).
    fn sealed(&mut self, store: Arc<dyn Store>) -> (Arc<dyn Store>, SealedView) {
        match self.sealing.take() {
            None => (store.clone(), SealedView::new(store, None)),
            Some(Some(codec)) => {
                let view = SealedView::new(store.clone(), Some(codec.clone()));
                (Arc::new(SealingStore::new(store, codec)), view)
            }
            Some(None) => {
                let view = SealedView::new(store.clone(), None);
                (Arc::new(SealingStore::without_key(store)), view)
            }
        }
    }

    /// The store given, or the one at the builder's path (a PostgreSQL URL, or a file opened
    /// writable, read-only, or read-only in place).
    async fn open_store(&mut self) -> Result<Arc<dyn Store>, Error> {
        // Checked before anything is opened: a bad build id changes nothing.
        if let Some(build) = &self.config.build_id {
            check_build_id(build)?;
        }
        Ok(match (self.store.take(), self.path.take()) {
            (Some(store), _) => store,
            (None, Some(path)) if is_postgres_url(&path) => {
                let url = path.to_string_lossy().into_owned();
                connect_postgres(url, self.durability).await?
            }
            (None, Some(path)) => {
                self.config.database_file = Some(path.clone());
                let cache_bytes =
                    self.config.page_cache_bytes.unwrap_or(Options::default().cache_bytes);
                let options =
                    Options { durability: self.durability, cache_bytes, ..Options::default() };
                let path2 = path.clone();
                let (read_only, in_place) = (self.read_only, self.in_place);
                let store = tokio::task::spawn_blocking(move || {
                    if in_place {
                        RedbStore::open_read_only_in_place(&path2)
                    } else if read_only {
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
        })
    }
}

/// The engine instance's owner name, unique also between two engines of one process with one
/// seed (on a shared database, a lease is someone else's exactly when its owner is not us):
/// fresh randomness, the process id and a per-process counter.
fn instance_owner(entropy: u64) -> String {
    static INSTANCES: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let instance = INSTANCES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    format!("engine-{:016x}-{instance}", splitmix(entropy ^ u64::from(std::process::id())))
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
            in_place: false,
            on_failure: None,
            on_stuck: None,
            recorder: None,
            queues: Vec::new(),
            sealing: None,
            migrations: Vec::new(),
        }
    }

    /// A builder over an already open store.
    pub fn with_store(store: Arc<dyn Store>) -> EngineBuilder {
        EngineBuilder { path: None, ..Self::builder("").store(store) }
    }
}

/// Whether `path` is a PostgreSQL URL (`postgres://` or `postgresql://`) rather than a file.
///
/// # Examples
/// ```
/// use cairn::admin::is_postgres_url;
/// assert!(is_postgres_url("postgres://db/cairn".as_ref()));
/// assert!(!is_postgres_url("cairn.db".as_ref()));
/// ```
pub fn is_postgres_url(path: &Path) -> bool {
    path.to_str().is_some_and(|s| s.starts_with("postgres://") || s.starts_with("postgresql://"))
}

#[cfg(feature = "postgres")]
async fn connect_postgres(url: String, durability: Durability) -> Result<Arc<dyn Store>, Error> {
    let store =
        tokio::task::spawn_blocking(move || cairn_storage::PgStore::connect(&url, durability))
            .await
            .map_err(|e| Error::Invalid(format!("connecting to PostgreSQL: {e}")))??;
    Ok(Arc::new(store))
}

#[cfg(not(feature = "postgres"))]
async fn connect_postgres(_url: String, _durability: Durability) -> Result<Arc<dyn Store>, Error> {
    Err(Error::Invalid(
        "this build of cairn has no `postgres` feature: build it with --features postgres".into(),
    ))
}

/// On a shared database the chunks tasks write here reach readers elsewhere, and theirs
/// readers here.
fn forward_streams(shell: &Arc<Shell>) {
    let hub = Arc::downgrade(shell);
    let existing = move |t: &cairn_storage::ThreadId| hub.upgrade()?.streams.existing(t);
    let owner = &shell.owner;
    if let Some(f) = crate::exec::stream_forward::start(&shell.store, &shell.tasks, owner, existing)
    {
        shell.streams.forward_to(f);
    }
}

/// Refuses a build id that is empty, longer than `BUILD_ID_BYTES_MAX` or not printable ASCII.
///
/// # Errors
/// [`Error::Invalid`] saying which.
pub(crate) fn check_build_id(build: &str) -> Result<(), Error> {
    let max = crate::limits::BUILD_ID_BYTES_MAX;
    if build.is_empty() || build.len() > max {
        return Err(Error::Invalid(format!(
            "a build id has 1 to BUILD_ID_BYTES_MAX ({max}) bytes, not {}",
            build.len()
        )));
    }
    if !build.bytes().all(|b| b.is_ascii_graphic()) {
        return Err(Error::Invalid(format!(
            "a build id is printable ASCII without spaces: {build:?} is not"
        )));
    }
    Ok(())
}

/// 64 bits of the operating system's randomness.
///
/// # Errors
/// [`Error::Invalid`] if the operating system has none to give (no `getrandom(2)` and no
/// `/dev/urandom`): the engine refuses to open rather than make ids two engines could share.
fn os_random() -> Result<u64, Error> {
    getrandom::u64().map_err(|e| Error::Invalid(format!("the operating system's randomness: {e}")))
}
