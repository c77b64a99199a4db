//! The engine's background tasks: spawned on one tracker, stopped together.
//!
//! A graceful shutdown cancels [`Tasks::stopping`] (runners stop at their next step boundary,
//! timers stop) and waits for every task; a simulated crash also drops every task where it
//! stands.

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;

/// The tracker every engine task runs on, and the two ways they stop.
#[derive(Debug, Clone, Default)]
pub(crate) struct Tasks {
    tracker: TaskTracker,
    /// Cancelled on graceful shutdown.
    stopping: CancellationToken,
    /// Cancelled on a simulated crash: every task is dropped where it stands.
    kill: CancellationToken,
    /// The largest future spawned so far, in bytes (what its box took a copy of).
    #[cfg(test)]
    largest: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Tasks {
    /// Runs `fut` as an engine task (stopped on a simulated crash, awaited on shutdown).
    ///
    /// The future is boxed first, so that the wrappers around it (the kill switch, the
    /// tracker's, tokio's task cell) and their first polls move a pointer, not the future: a
    /// runner's state machine is several KiB, and its moves were a third of the engine's
    /// `memcpy` per step.
    pub fn spawn(&self, fut: impl std::future::Future<Output = ()> + Send + 'static) {
        #[cfg(test)]
        self.largest.fetch_max(std::mem::size_of_val(&fut), std::sync::atomic::Ordering::Relaxed);
        let fut = Box::pin(fut);
        let kill = self.kill.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                () = fut => {}
                () = kill.cancelled() => {}
            }
        });
    }

    /// The size of the largest future spawned so far.
    #[cfg(test)]
    pub fn largest_spawned(&self) -> usize {
        self.largest.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// Cancelled once the engine shuts down (or crashes).
    pub fn stopping(&self) -> &CancellationToken {
        &self.stopping
    }

    /// Whether the engine is shutting down.
    pub fn is_stopping(&self) -> bool {
        self.stopping.is_cancelled()
    }

    /// Stops: every task sees [`Tasks::stopping`]; with `kill`, every task is also dropped
    /// where it stands. Returns once all have ended.
    pub async fn stop(&self, kill: bool) {
        if kill {
            self.kill.cancel();
        }
        self.stopping.cancel();
        self.tracker.close();
        self.tracker.wait().await;
    }
}
