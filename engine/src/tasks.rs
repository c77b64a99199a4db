//! The engine's background tasks: spawned on one tracker, stopped together.
//!
//! A graceful shutdown cancels [`Tasks::stopping`] (runners stop at their next step boundary,
//! timers stop) and waits for every task; a simulated crash also drops every task where it
//! stands.
//!
//! A task may start in the task of a caller that waits for it anyway ([`Tasks::inline`]): a
//! started thread runs in `start`'s caller until its creation is durable, and goes on as a
//! task of its own only if it is not done by then. A short thread then runs and ends without
//! waking a runtime worker, and without the caller being woken by it.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Wake, Waker};

use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tokio_util::task::task_tracker::TaskTrackerToken;

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
    /// Tasks spawned so far (an inline task counts once it goes on as a task of its own).
    #[cfg(test)]
    spawned: std::sync::Arc<std::sync::atomic::AtomicUsize>,
}

impl Tasks {
    /// Runs `fut` as an engine task (stopped on a simulated crash, awaited on shutdown).
    ///
    /// The future is boxed first, so that the wrappers around it (the kill switch, the
    /// tracker's, tokio's task cell) and their first polls move a pointer, not the future: a
    /// runner's state machine is several KiB, and its moves were a third of the engine's
    /// `memcpy` per step.
    pub fn spawn(&self, fut: impl Future<Output = ()> + Send + 'static) {
        #[cfg(test)]
        self.largest.fetch_max(std::mem::size_of_val(&fut), std::sync::atomic::Ordering::Relaxed);
        self.spawn_boxed(Box::pin(fut));
    }

    fn spawn_boxed(&self, fut: Task) {
        #[cfg(test)]
        self.spawned.fetch_add(1, Ordering::Relaxed);
        let kill = self.kill.clone();
        self.tracker.spawn(async move {
            tokio::select! {
                () = fut => {}
                () = kill.cancelled() => {}
            }
        });
    }

    /// `fut` as an engine task that first runs in the caller's task: see [`Inline::run_until`].
    /// Counted by the tracker from now (a shutdown waits for it), and stopped by a simulated
    /// crash as a spawned task is.
    pub fn inline(&self, fut: impl Future<Output = ()> + Send + 'static) -> Inline {
        #[cfg(test)]
        self.largest.fetch_max(std::mem::size_of_val(&fut), std::sync::atomic::Ordering::Relaxed);
        let running = Running { fut: Box::pin(fut), _counted: self.tracker.token() };
        Inline { running: Some(running), tasks: self.clone() }
    }

    /// The size of the largest future spawned so far.
    #[cfg(test)]
    pub fn largest_spawned(&self) -> usize {
        self.largest.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// How many tasks were spawned so far.
    #[cfg(test)]
    pub fn spawned(&self) -> usize {
        self.spawned.load(Ordering::Relaxed)
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

/// An engine task's future, boxed once.
type Task = Pin<Box<dyn Future<Output = ()> + Send>>;

/// An engine task running in its caller's task (see [`Tasks::inline`]); spawned as a task of
/// its own once the caller stops polling it unfinished (returned, or dropped: a caller that gives
/// up never stops the task).
pub(crate) struct Inline {
    /// `None` once done (or dropped, or spawned).
    running: Option<Running>,
    tasks: Tasks,
}

/// An inline task not done yet.
struct Running {
    fut: Task,
    /// Counts the task (a shutdown waits for it) until it is done, dropped or spawned.
    _counted: TaskTrackerToken,
}

/// The most polls an inline task gets after its caller's wait is over, while it stays runnable
/// (it woke itself: a step committed and acknowledged in the same poll, a yield). Handing a
/// runnable task to a worker costs a wake of that worker and its cache; a short thread's end,
/// a few polls after its creation is durable, is then reached in the caller. The bound keeps a
/// long thread that never waits from holding its caller.
pub(crate) const INLINE_POLLS_AFTER_MAX: usize = 16;

thread_local! {
    /// Whether this thread is polling an inline task now: a task started from inside one (a
    /// node that starts a thread) is spawned, not nested in it, so that a chain of starts
    /// never nests polls on one stack.
    static POLLING_INLINE: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

/// Marks this thread as polling an inline task until dropped (a panic included).
struct PollingInline;

impl PollingInline {
    fn enter() -> PollingInline {
        POLLING_INLINE.set(true);
        PollingInline
    }
}

impl Drop for PollingInline {
    fn drop(&mut self) {
        POLLING_INLINE.set(false);
    }
}

impl Inline {
    /// Polls the task and `until` together, in the caller's task, until `until` is ready and
    /// the task is done, waits on something outside itself, or has had
    /// [`INLINE_POLLS_AFTER_MAX`] more polls; the task goes on as a task of its own if it is
    /// not done by then. Called from inside another inline task's poll, it spawns the task at
    /// once and only waits.
    pub async fn run_until<T>(mut self, until: impl Future<Output = T>) -> T {
        if POLLING_INLINE.get() {
            drop(self);
            return until.await;
        }
        let mut until = std::pin::pin!(until);
        let woken = Arc::new(Woken::default());
        let waker = Waker::from(woken.clone());
        let (mut polls_after, mut out) = (0, None);
        // A simulated crash drops the task where it stands, however long its caller waits.
        let mut killed = std::pin::pin!(self.tasks.kill.clone().cancelled_owned());
        std::future::poll_fn(|cx| {
            loop {
                if killed.as_mut().poll(cx).is_ready() {
                    self.running = None;
                }
                woken.forward_to(cx.waker());
                // Only a wake during this poll says the task is runnable after it.
                woken.take();
                if let Some(Running { fut, .. }) = &mut self.running {
                    let mut task_cx = Context::from_waker(&waker);
                    // A panic ends the task, not its caller, as a spawned task's does in tokio
                    // (the hook has printed it).
                    let polled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                        let _polling = PollingInline::enter();
                        fut.as_mut().poll(&mut task_cx)
                    }));
                    if !matches!(polled, Ok(Poll::Pending)) {
                        if polled.is_err() {
                            tracing::error!("an engine task panicked in its caller's task");
                        }
                        self.running = None;
                    }
                }
                if out.is_none() {
                    // Polled until ready, never after.
                    let Poll::Ready(ready) = until.as_mut().poll(cx) else { return Poll::Pending };
                    out = Some(ready);
                }
                let runnable = self.running.is_some() && woken.take();
                if !runnable || polls_after >= INLINE_POLLS_AFTER_MAX {
                    return Poll::Ready(out.take().expect("ready"));
                }
                polls_after += 1;
            }
        })
        .await
    }
}

/// The waker an inline task gets: notes that the task was woken (by itself, during its poll,
/// or from outside) and passes the wake on to its caller's.
#[derive(Default)]
struct Woken {
    woken: AtomicBool,
    caller: Mutex<Option<Waker>>,
}

impl Woken {
    /// Passes wakes on to `caller` from now (the waker of the caller's latest poll).
    fn forward_to(&self, caller: &Waker) {
        let mut held = self.caller.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if !held.as_ref().is_some_and(|w| w.will_wake(caller)) {
            *held = Some(caller.clone());
        }
    }

    /// Whether the task was woken since the last look.
    fn take(&self) -> bool {
        self.woken.swap(false, Ordering::AcqRel)
    }
}

impl Wake for Woken {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        self.woken.store(true, Ordering::Release);
        let held = self.caller.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(caller) = held.as_ref() {
            caller.wake_by_ref();
        }
    }
}

impl Drop for Inline {
    fn drop(&mut self) {
        let Some(Running { fut, .. }) = self.running.take() else { return };
        if tokio::runtime::Handle::try_current().is_ok() {
            self.tasks.spawn_boxed(fut);
        }
        // Without a runtime (its caller's runtime is gone) the task is dropped where it stands,
        // as a crash drops it: its thread is recovered from its log at the next open.
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, Ordering};

    use super::*;

    /// A task that does not wait on anything outside itself (it wakes itself, as a step's
    /// acknowledgement does) ends in its caller, even after the caller's wait is over: nothing is
    /// spawned.
    #[tokio::test(flavor = "current_thread")]
    async fn a_task_that_never_waits_ends_in_its_caller() {
        let tasks = Tasks::default();
        let done = Arc::new(AtomicBool::new(false));
        let flag = done.clone();
        let mut wakes = 3;
        let inline = tasks.inline(async move {
            std::future::poll_fn(|cx| {
                if wakes == 0 {
                    return Poll::Ready(());
                }
                wakes -= 1;
                cx.waker().wake_by_ref();
                Poll::Pending
            })
            .await;
            flag.store(true, Ordering::SeqCst);
        });
        inline.run_until(std::future::ready(())).await;
        assert!(done.load(Ordering::SeqCst), "not done in its caller");
        assert_eq!(tasks.tracker.len(), 0, "a task was spawned, or is still counted");
    }

    /// A task that waits on something outside itself goes on as a task of its own once its
    /// caller's wait is over, or once its caller gives up (the future dropped), and ends there.
    #[tokio::test(flavor = "current_thread")]
    async fn a_waiting_task_goes_on_as_a_task_of_its_own() {
        let tasks = Tasks::default();
        for give_up in [false, true] {
            let (tx, rx) = tokio::sync::oneshot::channel::<()>();
            let (done_tx, done_rx) = tokio::sync::oneshot::channel();
            let inline = tasks.inline(async move {
                _ = rx.await;
                _ = done_tx.send(());
            });
            if give_up {
                let waited = inline.run_until(std::future::pending::<()>());
                let gave_up = tokio::time::timeout(std::time::Duration::from_millis(10), waited);
                assert!(gave_up.await.is_err(), "the caller's wait ended");
            } else {
                inline.run_until(std::future::ready(())).await;
            }
            assert_eq!(tasks.tracker.len(), 1, "not spawned (give up: {give_up})");
            _ = tx.send(());
            let ended = tokio::time::timeout(std::time::Duration::from_secs(10), done_rx).await;
            ended.expect("the task never ended").expect("the task ended on its own");
        }
    }

    /// A simulated crash drops an inline task where it stands, while its caller still waits
    /// (for something the crash means will never come): the engine's stop does not wait for it.
    #[tokio::test(flavor = "current_thread")]
    async fn a_crash_drops_an_inline_task_its_caller_still_waits_for() {
        let tasks = Tasks::default();
        let dropped = Arc::new(AtomicBool::new(false));
        struct Flag(Arc<AtomicBool>);
        impl Drop for Flag {
            fn drop(&mut self) {
                self.0.store(true, Ordering::SeqCst);
            }
        }
        let flag = Flag(dropped.clone());
        let inline = tasks.inline(async move {
            let _flag = flag;
            std::future::pending::<()>().await;
        });
        let caller = tokio::spawn(inline.run_until(std::future::pending::<()>()));
        tokio::task::yield_now().await;
        let stopped = tokio::time::timeout(std::time::Duration::from_secs(10), tasks.stop(true));
        stopped.await.expect("the stop waited for a task a crash should have dropped");
        assert!(dropped.load(Ordering::SeqCst), "the task outlived the crash");
        caller.abort();
    }

    /// A task started from inside an inline task's poll (a node that starts a thread) is
    /// spawned, not polled nested in it: a chain of starts never nests on one stack.
    #[tokio::test(flavor = "current_thread")]
    async fn a_task_started_inside_an_inline_task_is_spawned() {
        let tasks = Tasks::default();
        let inner_tasks = tasks.clone();
        let outer = tasks.inline(async move {
            let inner = inner_tasks.inline(async {});
            inner.run_until(std::future::ready(())).await;
            assert_eq!(inner_tasks.spawned(), 1, "the inner task was nested, not spawned");
        });
        outer.run_until(std::future::ready(())).await;
        assert_eq!(tasks.spawned(), 1, "the outer task was spawned");
        assert!(!POLLING_INLINE.get(), "the mark outlived the poll");
    }

    /// A task that panics in its caller's task ends there; its caller goes on (as with a
    /// spawned task, whose panic tokio keeps from the rest of the runtime).
    #[tokio::test(flavor = "current_thread")]
    async fn a_task_that_panics_ends_without_its_caller() {
        let tasks = Tasks::default();
        let inline = tasks.inline(async { panic!("a node's bug") });
        assert_eq!(inline.run_until(async { 7 }).await, 7);
        assert_eq!(tasks.tracker.len(), 0, "the panicked task was spawned");
    }
}
