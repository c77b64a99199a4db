//! Coordination: the seam between the engine's runners and everything else that drives, waits
//! on or controls a thread.
//!
//! [`Coordinator`] is everything the engine assumes about who else is around: claiming a thread
//! to drive, delivering a control (cancel, time out, pause) to whoever drives it, waking those
//! who wait on a thread's status or on a lock, arming durable timers and deadlines and firing
//! them, and whether other processes write the database too (then another owner's lease is
//! taken over only as the store allows, on the database's clock). The exec layer calls
//! only this trait; [`Local`] is the implementation for one process that owns its database
//! file, [`Shared`] the one for a database several processes share (controls reach a runner in
//! another process). The contract each method keeps (what is atomic, what is best effort) is in
//! docs/coordination.md.

pub(crate) mod claims;
mod heartbeat;
mod local;
mod shared;
mod timers;
mod watchers;

use std::sync::Arc;

use cairn_storage::{SharedDatabase, Store, ThreadId, ThreadRecord, ThreadStatus};
use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub(crate) use claims::{Applied, Asked, CheckpointAsk, Control, UpdateAsk, UpdateRequest};
pub(crate) use local::Local;
pub(crate) use shared::{REMOTE_DRIVER_MARGIN, Shared};
pub(crate) use timers::Slot;
pub(crate) use watchers::{Ended, Seen};

use crate::clock::Clock;
use crate::core::event::TaskKey;
use crate::core::thread_ctx::{ThreadCtx, Waiting};
use crate::error::Error;
use crate::tasks::Tasks;

/// Whether a thread's stored status is still a parked one: an async read of its record (see
/// [`Coordinator::claim_parked`]).
pub(crate) type StillParked<'a> = dyn Fn() -> BoxFuture<'a, bool> + Send + Sync + 'a;

/// Something that becomes due for a parked thread at an engine-clock time.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Due {
    /// A sleeping thread's durable timer, set by `task` until `until_ms`.
    Timer { task: TaskKey, until_ms: u64 },
    /// A parked thread's deadline (a running thread's is watched by its runner).
    Deadline { at_ms: u64 },
    /// A thread created to start later (`StartOptions::start_at_ms`) comes due: it is driven
    /// (`exec/delayed_start.rs`).
    Start { at_ms: u64 },
}

impl Due {
    /// When it is due (engine clock, ms).
    pub fn at_ms(&self) -> u64 {
        match self {
            Due::Timer { until_ms, .. } => *until_ms,
            Due::Deadline { at_ms } | Due::Start { at_ms } => *at_ms,
        }
    }

    /// The durable timer a sleeping thread waits for, if it waits for one.
    pub fn timer_of(ctx: &ThreadCtx) -> Option<Due> {
        match &ctx.meta.waiting {
            Some(Waiting::Timer { task, until_ms }) => {
                Some(Due::Timer { task: task.clone(), until_ms: *until_ms })
            }
            _ => None,
        }
    }

    /// The deadline kept in a thread record's summary, if the thread has one.
    pub fn deadline_of(record: &ThreadRecord) -> Option<Due> {
        let at_ms = crate::core::summary::deadline_at_ms(&record.summary)?;
        Some(Due::Deadline { at_ms })
    }
}

/// When `record` (as about to be written) next needs an engine although no runner drives it,
/// for the wake index of a database several engines share ([`cairn_storage::Batch::wakes`]):
/// a sleeping thread at its timer (from `ctx`, when the writer has it), a parked one at its
/// deadline or never (whoever gives input or resumes it drives it). `None` where it is not
/// known here or a runner drives the thread (its lease says when to look).
pub(crate) fn wake_hint(
    record: &ThreadRecord,
    ctx: Option<&ThreadCtx>,
) -> Option<cairn_storage::Wake> {
    // Only for a parked status (the runner writes Running on nearly every batch): the
    // deadline from the context when the writer has it, else parsed from the record's summary.
    let deadline = || match ctx {
        Some(ctx) => ctx.meta.policy.deadline_at_ms,
        None => Due::deadline_of(record).map(|d| d.at_ms()),
    };
    match record.status {
        ThreadStatus::Sleeping => {
            let timer = ctx.and_then(Due::timer_of)?.at_ms();
            Some(cairn_storage::Wake::At(deadline().map_or(timer, |d| d.min(timer))))
        }
        ThreadStatus::WaitingInput | ThreadStatus::Paused | ThreadStatus::Blocked => {
            Some(deadline().map_or(cairn_storage::Wake::Never, cairn_storage::Wake::At))
        }
        _ => None,
    }
}

/// A request from outside to whoever drives a thread, seen at its next step boundary (a cancel
/// or time-out also reaches the running node at once through its cancellation token).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Request {
    /// End the thread Cancelled, recording the reason.
    Cancel(String),
    /// End the thread TimedOut (its deadline passed).
    TimeOut,
    /// Pause the thread at its next step boundary.
    Pause,
    /// Fail the node attempts running now as a timeout would (a stuck thread's health action):
    /// their retry policy goes on.
    RetryAttempts,
    /// Update requests from other processes wait in the thread's inbox
    /// (`exec/update_inbox.rs`): take them at the next step boundary.
    Updates,
}

/// Fails the node attempts a runner of this engine is running for `thread` now as their timeout
/// would (`StuckAction::Retry`); false if no runner of this engine drives it. Never sent to
/// another engine: its health passes see its own stuck threads.
pub(crate) fn retry_attempts_here(coord: &dyn Coordinator, thread: &ThreadId) -> bool {
    coord.local().deliver_here(thread, Request::RetryAttempts)
}

/// The text of the driver message that carries [`Request::Updates`].
pub(crate) const UPDATES_MESSAGE: &str = "updates";

/// What acts when something becomes due: the exec layer, which records the timer or the
/// time-out and drives the thread on.
pub(crate) trait Wake: Send + Sync {
    /// `due` has come for `thread`. Called at most once per arming; the thread may have moved
    /// on meanwhile (the callee checks its stored status before acting).
    fn due(&self, thread: ThreadId, due: Due) -> BoxFuture<'static, ()>;

    /// Another engine stored update requests for `thread`, which no runner of this engine
    /// drives: applied if it is a parked thread of this engine's (`exec/update_parked.rs`).
    fn updates_stored(&self, thread: ThreadId) -> BoxFuture<'static, ()> {
        drop(thread);
        Box::pin(async {})
    }
}

/// The engine's view of everyone else: see the module documentation.
pub(crate) trait Coordinator: Send + Sync {
    /// The in-process coordinator: each method below is [`Local`]'s unless an implementation
    /// does more.
    fn local(&self) -> &Local;

    /// Starts firing armed timers into `wake`, keeping `timers_armed` at the number armed.
    /// Called once, when the engine opens.
    fn serve(&self, wake: Arc<dyn Wake>, timers_armed: metrics::Gauge) {
        self.local().serve(wake, timers_armed)
    }

    /// Claims `thread` for a runner of this engine: `None` if it is driven already (here, or by
    /// another engine where there are several). With `parent`, cancelling the parent's token
    /// cancels this thread too (a sub-workflow's child ends with its parent).
    fn claim(&self, thread: &ThreadId, parent: Option<&CancellationToken>) -> Option<Arc<Control>> {
        self.local().claim(thread, parent)
    }

    /// Gives `thread` up; wakes whoever waits for that.
    fn release(&self, thread: &ThreadId) {
        self.local().release(thread)
    }

    /// Whether a runner of this engine drives `thread` now.
    fn is_driven(&self, thread: &ThreadId) -> bool {
        self.local().is_driven(thread)
    }

    /// Hands `request` to whoever drives `thread`: false if nobody does (then the caller
    /// changes the parked thread itself, under a claim).
    fn deliver<'a>(&'a self, thread: &'a ThreadId, request: Request) -> BoxFuture<'a, bool> {
        self.local().deliver(thread, request)
    }

    /// Hands a manual checkpoint to the runner of this engine that drives `thread`, for its
    /// next step boundary; the ask back if none does (or too many wait already). Not sent to
    /// other processes: the reply needs the asker's channel.
    fn ask_checkpoint(&self, thread: &ThreadId, ask: CheckpointAsk) -> Result<(), CheckpointAsk> {
        self.local().ask_checkpoint(thread, ask)
    }

    /// Hands an update to the runner of this engine that drives `thread`, for its next step
    /// boundary; the ask back if none does (or too many wait already). Not sent to other
    /// processes: the reply needs the asker's channel.
    fn ask_update(&self, thread: &ThreadId, ask: UpdateAsk) -> Result<(), UpdateAsk> {
        self.local().ask_update(thread, ask)
    }

    /// Returns once nobody drives `thread` (at once if nobody does). The driver's last batch
    /// is durable by then, so the stored record says how it left the thread.
    fn wait_released<'a>(&'a self, thread: &'a ThreadId) -> BoxFuture<'a, ()> {
        self.local().wait_released(thread)
    }

    /// Claims `thread` once its driver lets go, as long as `still_parked()` says its stored
    /// status is a parked one (a runner that just committed the step that parked the thread
    /// releases its claim right after). `None` if the thread is being driven.
    fn claim_parked<'a>(
        &'a self,
        thread: &'a ThreadId,
        still_parked: &'a StillParked<'a>,
    ) -> BoxFuture<'a, Option<Arc<Control>>> {
        self.local().claim_parked(thread, still_parked)
    }

    /// Tells whoever waits on `thread` that its status changed (they see the stored status,
    /// read after this call began, never an older one).
    fn status_changed<'a>(
        &'a self,
        thread: &'a ThreadId,
        status: ThreadStatus,
    ) -> BoxFuture<'a, ()> {
        self.local().status_changed(thread, status)
    }

    /// A receiver of `thread`'s status changes, starting from its stored status.
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; storage errors.
    fn watch<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<watch::Receiver<Seen>, Error>> {
        self.local().watch(thread)
    }

    /// Drops `thread`'s status channel if nobody listens any more.
    fn unwatch_if_unused(&self, thread: &ThreadId) {
        self.local().unwatch_if_unused(thread)
    }

    /// Tells whoever waits on `thread` how it ended, from the runner that ended it (they need
    /// not read the thread back): kept, and published by [`Coordinator::release`] before the
    /// claim goes, so that the runner's permit is free by the time a waiter wakes.
    fn ended(&self, thread: &ThreadId, ended: Ended) {
        self.local().ended(thread, ended)
    }

    /// Tells whoever waits on `thread` that its runner stopped with `error` and nothing drives
    /// it now (called as the runner lets it go): their waits end with the error.
    fn stopped(&self, thread: &ThreadId, error: &Error) {
        self.local().stopped(thread, error)
    }

    /// Opens `thread`'s status channel at `status`, known without a read: the status a runner
    /// of this engine is about to drive a thread it just created from (until the runner lets it
    /// go and calls [`Coordinator::status_changed`], nothing else can have moved it). A waiter
    /// that comes later subscribes without reading the thread.
    fn expect_status(&self, thread: &ThreadId, status: ThreadStatus) -> watch::Receiver<Seen> {
        self.local().expect_status(thread, status)
    }

    /// Tells lock waiters that a lock was released (after the commit that released it).
    fn locks_released(&self) {
        self.local().locks_released()
    }

    /// A receiver whose value changes at every lock release: take it before trying a lock, so
    /// a release between the try and the wait is seen.
    fn lock_releases(&self) -> watch::Receiver<u64> {
        self.local().lock_releases()
    }

    /// Arms `due` for `thread`, replacing the one of its kind armed before (a thread has at
    /// most one timer and one deadline armed).
    fn arm(&self, thread: &ThreadId, due: Due) {
        self.local().arm(thread, due)
    }

    /// Disarms whatever is armed for `thread` (it ended).
    fn disarm(&self, thread: &ThreadId) {
        self.local().disarm(thread)
    }

    /// Disarms `thread`'s timer (its sleep's, or its delayed start), not its deadline: it was
    /// repinned to another build, whose engines arm their own.
    fn disarm_timer(&self, thread: &ThreadId) {
        self.local().disarm_timer(thread)
    }

    /// Whether `slot` of `thread` is armed in this engine (a look for work need not read the
    /// thread again to arm it).
    fn is_armed(&self, thread: &ThreadId, slot: Slot) -> bool {
        self.local().is_armed(thread, slot)
    }

    /// Whether other engines may write the database (a shared one). Then a refused write may be
    /// another engine's fence, another owner's lease is taken only by an acquisition the store
    /// allows once it lapsed by the database's clock, a lease taken is settled in the store
    /// before anything runs, a
    /// look for work reads the wake index and only this engine's workflows, a thread without a
    /// lease gets a grace before it is taken, and the workers serving the database run its
    /// schedules. Where only this engine writes, none of that can happen.
    fn has_peers(&self) -> bool {
        self.local().has_peers()
    }

    /// The wake index of a shared database, which says which threads are due for an engine
    /// ([`SharedDatabase::due_threads`]); `None` where there is none (the caller lists
    /// unfinished threads instead).
    fn wake_index(&self) -> Option<&dyn SharedDatabase>;

    /// Which coordinator this is (the engine's health report says it).
    fn kind(&self) -> crate::telemetry::Coordination;
}

/// The coordinator for `store`: [`Shared`] where other processes write the database too
/// ([`cairn_storage::Backend::shared`]), with `owner` this engine's lease name, `wait` how long a
/// control waits for another engine's runner and `lease_ttl_ms` the lease it renews; else
/// [`Local`] (a redb file is this process's alone: its lock proves any other lease holder dead).
pub(crate) fn for_store(
    store: Arc<dyn Store>,
    runtime: Runtime,
    owner: String,
    wait: std::time::Duration,
    lease_ttl_ms: u64,
) -> Arc<dyn Coordinator> {
    if store.shared().is_some() {
        Arc::new(Shared::new(store, runtime, owner, wait, lease_ttl_ms))
    } else {
        Arc::new(Local::new(store, runtime.clock, runtime.tasks))
    }
}

/// What a coordinator runs on: the engine's clock and the set of its background tasks.
pub(crate) struct Runtime {
    /// The engine's clock (lease times, timers).
    pub clock: Arc<dyn Clock>,
    /// Where the coordinator spawns its tasks (stopped with the engine's).
    pub tasks: Tasks,
}
