//! The claim registry of one process: which of its runners drives which thread, and the signals
//! that runner checks at step boundaries (cancel, pause).
//!
//! Claiming a thread here is what makes sure one process never runs the same thread twice; the
//! storage lease does the same across processes and crashes.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};

use cairn_storage::{CheckpointId, CheckpointMeta, ThreadId};
use tokio::sync::oneshot;
use tokio_util::sync::CancellationToken;

use super::StillParked;
use crate::error::Error;
use crate::limits::{CHECKPOINT_ASKS_MAX, UPDATE_ASKS_MAX};

/// A manual checkpoint, or a checkpoint request, asked of a running thread: its runner writes
/// it at its next step boundary and answers once it is durable. A runner that stops first drops
/// the ask (the asker's receiver then fails, and it writes to the parked thread itself).
#[derive(Debug)]
pub(crate) struct CheckpointAsk {
    /// What is asked.
    pub what: Asked,
    /// Where the runner answers: the manual checkpoint's id (`None` for a request).
    pub reply: oneshot::Sender<Result<Option<CheckpointId>, Error>>,
}

/// What a [`CheckpointAsk`] asks for.
#[derive(Debug, Clone)]
pub(crate) enum Asked {
    /// A manual checkpoint now, with the caller's metadata, stored as given.
    Now(CheckpointMeta),
    /// A checkpoint request recorded (a `checkpoint_requested` event); boxed, so that an ask
    /// handed back stays small.
    Request(Box<crate::core::checkpoint_requests::CheckpointRequest>),
}

/// An update asked of a running thread: its runner applies it at its next step boundary and
/// answers once the event is durable. A runner that stops first drops the ask (the asker's
/// receiver then fails, and it applies the update to the parked thread itself).
#[derive(Debug)]
pub(crate) struct UpdateAsk {
    /// What is asked.
    pub request: UpdateRequest,
    /// Where the runner answers.
    pub reply: oneshot::Sender<Result<Applied, Error>>,
}

/// An update call: its id, the update's name and its arguments.
#[derive(Debug, Clone)]
pub(crate) struct UpdateRequest {
    /// The id it is applied once under.
    pub id: String,
    /// The update's name.
    pub name: String,
    /// Its arguments.
    pub args: serde_json::Value,
}

/// Where an update stands in a thread's log.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Applied {
    /// Applied now by the event at `seq`, with this reply.
    Now {
        /// The seq of its `update_applied` event.
        seq: u64,
        /// The handler's reply.
        reply: serde_json::Value,
    },
    /// Applied before, by the event at this seq (its reply is in that event).
    Before(u64),
}

/// The signals of one running thread.
#[derive(Debug, Default)]
pub(crate) struct Control {
    /// Cancelled when the thread is cancelled (or its deadline passes).
    pub cancel: CancellationToken,
    /// Cancelled when the runner ends (stops the deadline watcher).
    pub done: CancellationToken,
    /// Notified to fail the node attempts running now as a timeout would
    /// ([`Control::retry_attempts`]).
    pub retry: Arc<tokio::sync::Notify>,
    pause: AtomicBool,
    timed_out: AtomicBool,
    reason: Mutex<Option<String>>,
    checkpoints: Mutex<Vec<CheckpointAsk>>,
    updates: Mutex<Vec<UpdateAsk>>,
    /// Update requests from other processes wait in the thread's inbox.
    update_requests: AtomicBool,
    /// The number of the last inbox signal the runner looked at for update requests.
    update_inbox_read: std::sync::atomic::AtomicU64,
}

impl Control {
    /// Asks the runner to pause at the next step boundary.
    pub fn request_pause(&self) {
        self.pause.store(true, Ordering::SeqCst);
    }

    /// True once, after a pause was requested.
    pub fn take_pause(&self) -> bool {
        self.pause.swap(false, Ordering::SeqCst)
    }

    /// Cancels with a reason the runner records.
    pub fn cancel(&self, reason: String) {
        *lock(&self.reason) = Some(reason);
        self.cancel.cancel();
    }

    /// Fails the node attempts running now as their timeout would (each attempt listens while
    /// it runs; one backing off or begun later is not touched).
    pub fn retry_attempts(&self) {
        self.retry.notify_waiters();
    }

    /// Ends the thread because its deadline passed.
    pub fn time_out(&self) {
        self.timed_out.store(true, Ordering::SeqCst);
        self.cancel.cancel();
    }

    /// Whether the deadline ended the thread.
    pub fn timed_out(&self) -> bool {
        self.timed_out.load(Ordering::SeqCst)
    }

    /// Queues a manual checkpoint for the next step boundary; the ask back when
    /// [`CHECKPOINT_ASKS_MAX`] are waiting already.
    pub fn ask_checkpoint(&self, ask: CheckpointAsk) -> Result<(), CheckpointAsk> {
        let mut asks = lock(&self.checkpoints);
        if asks.len() >= CHECKPOINT_ASKS_MAX {
            return Err(ask);
        }
        asks.push(ask);
        Ok(())
    }

    /// The manual checkpoints asked since the last call, oldest first.
    pub fn take_checkpoint_asks(&self) -> Vec<CheckpointAsk> {
        std::mem::take(&mut *lock(&self.checkpoints))
    }

    /// Queues an update for the next step boundary; the ask back when [`UPDATE_ASKS_MAX`] are
    /// waiting already.
    pub fn ask_update(&self, ask: UpdateAsk) -> Result<(), UpdateAsk> {
        let mut asks = lock(&self.updates);
        if asks.len() >= UPDATE_ASKS_MAX {
            return Err(ask);
        }
        asks.push(ask);
        Ok(())
    }

    /// The updates asked since the last call, oldest first.
    pub fn take_update_asks(&self) -> Vec<UpdateAsk> {
        std::mem::take(&mut *lock(&self.updates))
    }

    /// Notes that update requests from other processes wait in the thread's inbox.
    pub fn note_update_requests(&self) {
        self.update_requests.store(true, Ordering::SeqCst);
    }

    /// True once, after update requests were noted.
    pub fn take_update_requests(&self) -> bool {
        self.update_requests.swap(false, Ordering::SeqCst)
    }

    /// The number of the last inbox signal looked at for update requests (0: none yet).
    pub fn update_inbox_read(&self) -> u64 {
        self.update_inbox_read.load(Ordering::SeqCst)
    }

    /// Notes that the inbox was looked at up to signal `n`.
    pub fn set_update_inbox_read(&self, n: u64) {
        self.update_inbox_read.store(n, Ordering::SeqCst);
    }

    /// The reason given to [`Control::cancel`].
    pub fn reason(&self) -> Option<String> {
        lock(&self.reason).clone()
    }
}

/// The threads this process is driving right now.
#[derive(Debug, Default)]
pub(crate) struct Claims {
    running: Mutex<HashMap<ThreadId, Arc<Control>>>,
    /// Signalled whenever a claim is given up.
    released: tokio::sync::Notify,
}

impl Claims {
    /// Claims `thread`; with `parent`, cancelling the parent's token cancels this thread too
    /// (a sub-workflow's child thread ends with its parent).
    pub fn claim_under(
        &self,
        thread: &ThreadId,
        parent: Option<&CancellationToken>,
    ) -> Option<Arc<Control>> {
        let mut running = lock(&self.running);
        if running.contains_key(thread) {
            return None;
        }
        let cancel = parent.map_or_else(CancellationToken::new, CancellationToken::child_token);
        let control = Arc::new(Control { cancel, ..Control::default() });
        running.insert(thread.clone(), control.clone());
        Some(control)
    }

    /// Gives `thread` up.
    pub fn release(&self, thread: &ThreadId) {
        if let Some(control) = lock(&self.running).remove(thread) {
            control.done.cancel();
            // Unanswered asks fail now, not when the last holder of the control lets it go:
            // their askers go on with the parked thread.
            drop(control.take_checkpoint_asks());
            drop(control.take_update_asks());
        }
        self.released.notify_waiters();
    }

    /// Returns once no runner drives `thread` (at once if none does). The runner's last batch is
    /// durable by then, so the stored record says how it left the thread.
    pub async fn wait_released(&self, thread: &ThreadId) {
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            // Register interest before looking, so a release in between is not missed.
            released.as_mut().enable();
            if !lock(&self.running).contains_key(thread) {
                return;
            }
            released.await;
        }
    }

    /// Claims `thread` once its current runner lets go, as long as `still_parked()` says the
    /// stored status is a parked one (a runner that just committed the step that parked the
    /// thread releases its claim right after). `None` if the thread is being driven.
    pub async fn claim_parked(
        &self,
        thread: &ThreadId,
        still_parked: &StillParked<'_>,
    ) -> Option<Arc<Control>> {
        loop {
            let released = self.released.notified();
            tokio::pin!(released);
            // Register interest before trying, so a release between the try and the wait is
            // not missed.
            released.as_mut().enable();
            if let Some(control) = self.claim_under(thread, None) {
                return Some(control);
            }
            if !still_parked().await {
                return None;
            }
            released.await;
        }
    }

    /// The threads claimed now (the heartbeat renews their leases).
    pub fn threads(&self) -> Vec<ThreadId> {
        lock(&self.running).keys().cloned().collect()
    }

    /// The control of a running thread.
    pub fn get(&self, thread: &ThreadId) -> Option<Arc<Control>> {
        lock(&self.running).get(thread).cloned()
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    // Nothing panics while these locks are held; a poisoned lock would still hold valid data.
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}
