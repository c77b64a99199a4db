//! The coordinator of an engine on a database other processes share (PostgreSQL): [`Local`]
//! for everything this process does itself, and controls that reach a runner in another
//! process.
//!
//! A cancel, time-out or pause for a thread another engine drives (stored Running, its lease
//! live and not ours) is sent to that engine through the store ([`cairn_storage::SharedDatabase::tell_driver`]: a
//! NOTIFY every engine on the database hears); the engine that drives the thread hands it to
//! its runner as a local request, so the running node sees its cancellation token at once and
//! the runner records the outcome at its step boundary, as it would for a control given in its
//! own process. The sender waits until the driver lets go (the stored lease is released or
//! the thread stops Running). A message can be lost, and a driver can be stalled: if the
//! driver has not let go within the wait (this engine's cancel grace plus
//! [`REMOTE_DRIVER_MARGIN`]), the next delivery refuses, and the caller changes the thread
//! itself with a guarded write, which fences the driver (its next batch is refused).
//!
//! While this engine's runners drive threads, their leases are renewed by a heartbeat
//! (`heartbeat.rs`) whatever the runners do, so a live engine keeps a thread through a call
//! longer than the lease.

use std::collections::HashSet;
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use cairn_storage::{SharedDatabase, Store, ThreadId, ThreadStatus};
use futures::future::BoxFuture;
use tokio::sync::broadcast;

use super::heartbeat::Heartbeat;
use super::{Coordinator, Local, Request, Wake};
use crate::clock::Clock;
use crate::tasks::Tasks;

/// How much longer than its own cancel grace an engine waits for another engine's runner to
/// act on a control before it writes the change itself.
pub(crate) const REMOTE_DRIVER_MARGIN: Duration = Duration::from_secs(2);

/// How often a sender looks at the stored thread while it waits for the driver to let go.
const REMOTE_LOOK_EVERY: Duration = Duration::from_millis(50);

/// Bytes of a cancel reason sent to another engine (the rest is cut at a char boundary).
const REASON_BYTES_MAX: usize = 2 * 1024;

/// The coordinator for a shared database.
pub(crate) struct Shared {
    local: Arc<Local>,
    store: Arc<dyn Store>,
    clock: Arc<dyn Clock>,
    /// This engine's lease owner name.
    owner: String,
    /// How long to wait for another engine's runner to act on a control.
    wait: Duration,
    tasks: Tasks,
    /// The lease time to live the heartbeat renews to, in ms.
    lease_ttl_ms: u64,
    /// Threads whose driver elsewhere was sent a control and has not been seen to let go.
    asked: Mutex<HashSet<ThreadId>>,
}

impl Shared {
    /// A coordinator for an engine named `owner` on the shared database `store`; it waits
    /// `wait` for another engine's runner to act on a control, and keeps the leases of the
    /// threads it drives alive for `lease_ttl_ms` at a time once it serves. Controls other
    /// engines send to runners of this one are delivered from now on.
    pub fn new(
        store: Arc<dyn Store>,
        runtime: super::Runtime,
        owner: String,
        wait: Duration,
        lease_ttl_ms: u64,
    ) -> Self {
        let super::Runtime { clock, tasks } = runtime;
        let local = Arc::new(Local::new(store.clone(), clock.clone(), tasks.clone()));
        if let Some(db) = store.shared() {
            hear(&local, &tasks, db.driver_messages());
        }
        Shared { local, store, clock, owner, wait, tasks, lease_ttl_ms, asked: Mutex::default() }
    }

    /// Whether another engine drives `thread` now: stored Running, under a live lease not ours.
    async fn driven_elsewhere(&self, thread: &ThreadId) -> bool {
        let Ok(Some(record)) = self.store.thread(thread).await else { return false };
        record.status == ThreadStatus::Running
            && record.lease.as_ref().is_some_and(|lease| {
                *lease.owner != *self.owner && self.clock.now_ms() < lease.expires_at_ms
            })
    }

    fn asked(&self) -> std::sync::MutexGuard<'_, HashSet<ThreadId>> {
        self.asked.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Hands the controls other engines send to this engine's runners (a control for a thread no
/// runner of this engine drives is somebody else's, or late: dropped).
fn hear(
    local: &Arc<Local>,
    tasks: &Tasks,
    mut messages: broadcast::Receiver<cairn_storage::DriverMessage>,
) {
    let local = local.clone();
    let stopping = tasks.stopping().clone();
    tasks.spawn(async move {
        loop {
            let heard = tokio::select! {
                heard = messages.recv() => heard,
                () = stopping.cancelled() => return,
            };
            match heard {
                Ok(m) => match decode(&m.message) {
                    Some(request) if local.deliver_here(&m.thread, request.clone()) => {
                        tracing::debug!(thread = %m.thread, "a control from another engine delivered");
                    }
                    // Requests for a parked thread, maybe pinned to this engine's build.
                    Some(Request::Updates) => local.updates_stored(&m.thread),
                    _ => {}
                },
                // Senders whose message was lost act themselves after their wait.
                Err(broadcast::error::RecvError::Lagged(n)) => {
                    tracing::warn!(lost = n, "controls from other engines dropped (fell behind)");
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    });
}

/// A control as text: `cancel <reason>`, `timeout`, `pause`, `retry`.
fn encode(request: &Request) -> String {
    match request {
        Request::Cancel(reason) => {
            let mut end = reason.len().min(REASON_BYTES_MAX);
            while !reason.is_char_boundary(end) {
                end -= 1;
            }
            format!("cancel {}", &reason[..end])
        }
        Request::TimeOut => "timeout".into(),
        Request::Pause => "pause".into(),
        Request::RetryAttempts => "retry".into(),
        Request::Updates => super::UPDATES_MESSAGE.into(),
    }
}

/// The control a message carries; `None` for one this version does not know.
fn decode(message: &str) -> Option<Request> {
    match message.split_once(' ') {
        Some(("cancel", reason)) => Some(Request::Cancel(reason.to_owned())),
        _ if message == "timeout" => Some(Request::TimeOut),
        _ if message == "pause" => Some(Request::Pause),
        _ if message == "retry" => Some(Request::RetryAttempts),
        _ if message == super::UPDATES_MESSAGE => Some(Request::Updates),
        _ => None,
    }
}

impl Coordinator for Shared {
    fn local(&self) -> &Local {
        &self.local
    }

    fn serve(&self, wake: Arc<dyn Wake>, timers_armed: metrics::Gauge) {
        self.local.serve(wake, timers_armed);
        Heartbeat {
            local: self.local.clone(),
            store: self.store.clone(),
            clock: self.clock.clone(),
            owner: self.owner.clone(),
            lease_ttl_ms: self.lease_ttl_ms,
        }
        .spawn(&self.tasks);
    }

    fn deliver<'a>(&'a self, thread: &'a ThreadId, request: Request) -> BoxFuture<'a, bool> {
        Box::pin(async move {
            if self.local.deliver_here(thread, request.clone()) {
                return true;
            }
            // Asked before, and the driver did not let go in time: the caller acts itself now.
            if self.asked().remove(thread) {
                return false;
            }
            if !self.driven_elsewhere(thread).await {
                return false;
            }
            let Some(db) = self.store.shared() else { return false };
            match db.tell_driver(thread, &encode(&request)).await {
                Ok(()) => {
                    self.asked().insert(thread.clone());
                    true
                }
                Err(e) => {
                    tracing::warn!(%thread, error = %e, "cannot reach the engine that drives the thread");
                    false
                }
            }
        })
    }

    fn wait_released<'a>(&'a self, thread: &'a ThreadId) -> BoxFuture<'a, ()> {
        Box::pin(async move {
            if !self.asked().contains(thread) {
                return self.local.wait_released(thread).await;
            }
            let deadline = tokio::time::Instant::now() + self.wait;
            while tokio::time::Instant::now() < deadline {
                if !self.driven_elsewhere(thread).await {
                    self.asked().remove(thread);
                    return;
                }
                tokio::time::sleep(REMOTE_LOOK_EVERY).await;
            }
            tracing::info!(%thread, "the engine that drives the thread did not act on the control in time");
        })
    }

    fn wake_index(&self) -> Option<&dyn SharedDatabase> {
        self.store.shared()
    }

    fn kind(&self) -> crate::telemetry::Coordination {
        crate::telemetry::Coordination::Shared
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn controls_survive_their_text_form() {
        let requests = [
            Request::Cancel("stop: now".into()),
            Request::TimeOut,
            Request::Pause,
            Request::RetryAttempts,
        ];
        for request in requests {
            assert_eq!(decode(&encode(&request)), Some(request));
        }
        assert_eq!(decode("cancel "), Some(Request::Cancel(String::new())));
        assert_eq!(decode("reboot"), None);
        let long = "é".repeat(REASON_BYTES_MAX);
        let Some(Request::Cancel(cut)) = decode(&encode(&Request::Cancel(long))) else {
            panic!("a long reason still travels")
        };
        assert!(cut.len() <= REASON_BYTES_MAX && cut.chars().all(|c| c == 'é'));
    }
}
