//! The coordinator of one process that owns its database file (redb's file lock proves it):
//! claims, controls, wake-ups and timers all live in this process's memory.
//!
//! On a redb file no other process can write, so any lease found on a thread at open belongs to
//! a process that died: recovery takes every one over. On a shared database (PostgreSQL) only
//! an expired lease is taken over; claims, controls and timers stay in this process (the
//! cross-process coordinator is the PostgreSQL issue's remaining work). Timers are armed in
//! memory and re-armed from the log at the next open.

use std::sync::{Arc, OnceLock};

use cairn_storage::{SharedDatabase, Store, ThreadId, ThreadStatus};
use futures::future::BoxFuture;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::Seen;
use super::claims::Claims;
use super::timers::Armed;
use super::watchers::Watchers;
use super::{CheckpointAsk, Control, Coordinator, Due, Request, Wake};
use crate::clock::Clock;
use crate::error::Error;
use crate::tasks::Tasks;

/// How long the waiters' look after other processes' commits waits for more of them.
const REMOTE_GATHER: std::time::Duration = std::time::Duration::from_millis(10);

/// The in-process coordinator.
pub(crate) struct Local {
    clock: Arc<dyn Clock>,
    tasks: Tasks,
    claims: Arc<Claims>,
    watchers: Arc<Watchers>,
    lock_releases: Arc<watch::Sender<u64>>,
    armed: Arc<Armed>,
    wake: OnceLock<Arc<dyn Wake>>,
    /// Whether this process is the only one on its database (a redb file, whose lock proves
    /// it), so that any other lease holder is dead.
    exclusive: bool,
}

impl Local {
    /// Hands `request` to this engine's runner of `thread`: false if none drives it here.
    pub(super) fn deliver_here(&self, thread: &ThreadId, request: Request) -> bool {
        let Some(control) = self.claims.get(thread) else { return false };
        match request {
            Request::Cancel(reason) => control.cancel(reason),
            Request::TimeOut => control.time_out(),
            Request::Pause => control.request_pause(),
            Request::RetryAttempts => control.retry_attempts(),
            Request::Updates => control.note_update_requests(),
        }
        true
    }

    /// Update requests were stored for `thread`, which no runner of this engine drives: the
    /// engine looks whether it is a parked thread of its own to apply them to
    /// (`exec/update_parked.rs`), in a task of its own (that writes to the store).
    pub(super) fn updates_stored(&self, thread: &ThreadId) {
        let Some(wake) = self.wake.get().cloned() else { return };
        let thread = thread.clone();
        self.tasks.spawn(async move { wake.updates_stored(thread).await });
    }

    /// A coordinator reading statuses from `store`, timing on `clock`, its timers on `tasks`
    /// (exclusive when no other process can write the database: no [`cairn_storage::Backend::shared`]).
    pub fn new(store: Arc<dyn Store>, clock: Arc<dyn Clock>, tasks: Tasks) -> Self {
        let commits = store.shared().map(SharedDatabase::commits);
        let exclusive = commits.is_none();
        let local = Self {
            clock,
            tasks,
            claims: Arc::default(),
            watchers: Arc::new(Watchers::new(store)),
            lock_releases: Arc::new(watch::Sender::new(0)),
            armed: Arc::new(Armed::default()),
            wake: OnceLock::new(),
            exclusive,
        };
        if let Some(commits) = commits {
            local.follow_remote_commits(commits);
        }
        local
    }

    /// The threads this engine's runners drive now.
    pub(super) fn driven(&self) -> Vec<ThreadId> {
        self.claims.threads()
    }

    /// On a shared database: after other processes commit, waiters of this process look at the
    /// stored status again (a thread driven elsewhere is notified by nobody here), and lock
    /// waiters try again (the commit may have released a lock).
    fn follow_remote_commits(&self, mut commits: watch::Receiver<u64>) {
        let watchers = self.watchers.clone();
        let claims = self.claims.clone();
        let lock_releases = self.lock_releases.clone();
        let stopping = self.tasks.stopping().clone();
        self.tasks.spawn(async move {
            loop {
                tokio::select! {
                    changed = commits.changed() => if changed.is_err() { return },
                    () = stopping.cancelled() => return,
                }
                // Gather a burst of commits into one look.
                tokio::time::sleep(REMOTE_GATHER).await;
                commits.borrow_and_update();
                // Threads this process drives are notified by their runners.
                watchers.refresh_all(|t| claims.get(t).is_some()).await;
                // A lock another process released: waiters try again now.
                lock_releases.send_modify(|n| *n = n.wrapping_add(1));
            }
        });
    }
}

impl Local {
    /// The one timer task: sleeps until the earliest armed time (looking again whenever an
    /// arming changes), then wakes every thread whose timer or deadline is due, each in a task
    /// of its own (a wake writes to the store).
    fn fire_timers(&self, wake: Arc<dyn Wake>) {
        let (armed, clock, tasks) = (self.armed.clone(), self.clock.clone(), self.tasks.clone());
        let stopping = tasks.stopping().clone();
        self.tasks.spawn(async move {
            loop {
                let sleep = armed.next_due_ms().map(|at_ms| clock.sleep_until(at_ms));
                tokio::select! {
                    () = async { match sleep { Some(s) => s.await, None => std::future::pending().await } } => {}
                    () = armed.changed.notified() => {}
                    () = stopping.cancelled() => return,
                }
                for (thread, due) in armed.take_due(clock.now_ms()) {
                    let wake = wake.clone();
                    tasks.spawn(async move { wake.due(thread, due).await });
                }
            }
        });
    }
}

impl Local {
    pub fn serve(&self, wake: Arc<dyn Wake>, timers_armed: metrics::Gauge) {
        assert!(self.wake.set(wake.clone()).is_ok(), "a coordinator serves one engine");
        self.armed.report_to(timers_armed);
        self.fire_timers(wake);
    }

    pub fn claim(
        &self,
        thread: &ThreadId,
        parent: Option<&CancellationToken>,
    ) -> Option<Arc<Control>> {
        self.claims.claim_under(thread, parent)
    }

    pub fn release(&self, thread: &ThreadId) {
        // Under the claim still: no writer of this engine has moved the thread since its end.
        self.watchers.publish_end(thread);
        self.claims.release(thread);
    }

    pub fn is_driven(&self, thread: &ThreadId) -> bool {
        self.claims.get(thread).is_some()
    }

    pub fn deliver<'a>(&'a self, thread: &'a ThreadId, request: Request) -> BoxFuture<'a, bool> {
        Box::pin(std::future::ready(self.deliver_here(thread, request)))
    }

    pub fn ask_checkpoint(
        &self,
        thread: &ThreadId,
        ask: CheckpointAsk,
    ) -> Result<(), CheckpointAsk> {
        match self.claims.get(thread) {
            Some(control) => control.ask_checkpoint(ask),
            None => Err(ask),
        }
    }

    pub fn ask_update(
        &self,
        thread: &ThreadId,
        ask: super::UpdateAsk,
    ) -> Result<(), super::UpdateAsk> {
        match self.claims.get(thread) {
            Some(control) => control.ask_update(ask),
            None => Err(ask),
        }
    }

    pub fn wait_released<'a>(&'a self, thread: &'a ThreadId) -> BoxFuture<'a, ()> {
        Box::pin(self.claims.wait_released(thread))
    }

    pub fn claim_parked<'a>(
        &'a self,
        thread: &'a ThreadId,
        still_parked: &'a super::StillParked<'a>,
    ) -> BoxFuture<'a, Option<Arc<Control>>> {
        Box::pin(self.claims.claim_parked(thread, still_parked))
    }

    pub fn status_changed<'a>(
        &'a self,
        thread: &'a ThreadId,
        status: ThreadStatus,
    ) -> BoxFuture<'a, ()> {
        Box::pin(self.watchers.changed(thread, status))
    }

    pub fn watch<'a>(
        &'a self,
        thread: &'a ThreadId,
    ) -> BoxFuture<'a, Result<watch::Receiver<Seen>, Error>> {
        Box::pin(self.watchers.watch(thread))
    }

    pub fn unwatch_if_unused(&self, thread: &ThreadId) {
        self.watchers.unwatch_if_unused(thread);
    }

    pub fn ended(&self, thread: &ThreadId, ended: super::Ended) {
        self.watchers.ended(thread, ended);
    }

    pub fn stopped(&self, thread: &ThreadId, error: &Error) {
        self.watchers.stopped(thread, error);
    }

    pub fn expect_status(&self, thread: &ThreadId, status: ThreadStatus) -> watch::Receiver<Seen> {
        self.watchers.expect(thread, status)
    }

    pub fn locks_released(&self) {
        self.lock_releases.send_modify(|n| *n = n.wrapping_add(1));
    }

    pub fn lock_releases(&self) -> watch::Receiver<u64> {
        self.lock_releases.subscribe()
    }

    pub fn arm(&self, thread: &ThreadId, due: Due) {
        if self.wake.get().is_none() {
            // A read-only engine serves nobody: nothing it opens is ever due.
            return;
        }
        self.armed.arm(thread, due);
    }

    pub fn disarm(&self, thread: &ThreadId) {
        self.armed.disarm(thread);
    }

    pub fn disarm_timer(&self, thread: &ThreadId) {
        self.armed.disarm_timer(thread);
    }

    pub fn is_armed(&self, thread: &ThreadId, slot: super::Slot) -> bool {
        self.armed.is_armed(thread, slot)
    }

    pub fn has_peers(&self) -> bool {
        !self.exclusive
    }
}

impl Coordinator for Local {
    fn local(&self) -> &Local {
        self
    }

    fn wake_index(&self) -> Option<&dyn SharedDatabase> {
        None
    }

    fn kind(&self) -> crate::telemetry::Coordination {
        crate::telemetry::Coordination::Local
    }
}
