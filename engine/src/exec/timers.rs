//! Durable timers in memory: the task that waits for a sleeping thread's timer and records that
//! it fired. At most one is armed per thread: arming a thread's timer again (recovery, a resume
//! after a pause) disarms the one before, so a stale timer never wakes a later sleep; an end from
//! outside (cancel, deadline) disarms it, so the armed set is bounded by the sleeping and paused
//! threads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cairn_storage::{ThreadId, ThreadStatus};
use tokio_util::sync::CancellationToken;

use crate::api::engine::{Inner, lock};
use crate::core::event::Body;
use crate::core::status::Transition;
use crate::core::thread_ctx::{ThreadCtx, Waiting};

/// The armed timers of this engine instance, one per sleeping thread at most.
#[derive(Debug, Default)]
pub(crate) struct Timers {
    armed: Mutex<HashMap<ThreadId, (u64, CancellationToken)>>,
    next: AtomicU64,
}

impl Timers {
    /// Arms a timer for `thread`, disarming the one before: its generation and its token.
    fn arm(&self, thread: &ThreadId) -> (u64, CancellationToken) {
        let generation = self.next.fetch_add(1, Ordering::Relaxed);
        let token = CancellationToken::new();
        if let Some((_, old)) =
            lock(&self.armed).insert(thread.clone(), (generation, token.clone()))
        {
            old.cancel();
        }
        (generation, token)
    }

    /// Forgets the timer of `generation` once its time has come: true if it was still the
    /// armed one (then it fires), false if it was disarmed meanwhile (then it must not).
    fn done(&self, thread: &ThreadId, generation: u64) -> bool {
        let mut armed = lock(&self.armed);
        let current = armed.get(thread).is_some_and(|(g, _)| *g == generation);
        if current {
            armed.remove(thread);
        }
        current
    }

    /// Disarms the timer of `thread`, if one is armed (the thread ended).
    pub fn disarm(&self, thread: &ThreadId) {
        if let Some((_, token)) = lock(&self.armed).remove(thread) {
            token.cancel();
        }
    }

    /// Timers armed now.
    #[cfg(test)]
    fn len(&self) -> usize {
        lock(&self.armed).len()
    }
}

impl Inner {
    /// Arms the durable timer of a sleeping thread: when the clock reaches it, `TimerFired` is
    /// recorded and the thread is woken and driven. A thread that is no longer Sleeping by then
    /// (cancelled, paused) is left alone; a resume re-arms the timer of a paused sleeper.
    pub fn schedule_timers(self: &Arc<Self>, thread: &ThreadId, ctx: &ThreadCtx) {
        let Some(Waiting::Timer { task, until_ms }) = ctx.meta.waiting.clone() else { return };
        let (generation, disarmed) = self.timers.arm(thread);
        let inner = self.clone();
        let thread = thread.clone();
        self.spawn(async move {
            tokio::select! {
                () = inner.clock.sleep_until(until_ms) => {}
                () = inner.shutdown.cancelled() => return,
                () = disarmed.cancelled() => return,
            }
            // Both may be ready when this task is polled: the map says which timer is armed.
            if !inner.timers.done(&thread, generation) {
                return;
            }
            let body = Body::TimerFired { task, until_ms };
            let woken = inner
                .write_parked(&thread, ThreadStatus::Sleeping, vec![body], Some(Transition::Run))
                .await;
            match woken {
                Ok(()) => inner.spawn_drive(thread, "timer fired"),
                Err(e) => tracing::debug!(thread = %thread, error = %e, "timer not delivered"),
            }
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arming_again_disarms_the_timer_before() {
        let timers = Timers::default();
        let t = ThreadId::new("t").unwrap();
        let (first, first_token) = timers.arm(&t);
        let (second, second_token) = timers.arm(&t);
        assert!(first_token.is_cancelled());
        assert!(!second_token.is_cancelled());
        assert!(!timers.done(&t, first), "a disarmed timer does not fire");
        assert_eq!(timers.len(), 1, "a stale generation does not remove the newer timer");
        assert!(timers.done(&t, second));
        assert_eq!(timers.len(), 0);
        assert!(!timers.done(&t, second), "a timer fires once");
        let (third, third_token) = timers.arm(&t);
        timers.disarm(&t);
        assert!(third_token.is_cancelled());
        assert!(!timers.done(&t, third));
        assert_eq!(timers.len(), 0);
    }
}
