//! Armed timers and deadlines of parked threads, in memory: at most one timer and one deadline
//! per thread. Arming a thread's timer again (recovery, a resume after a pause) disarms the one
//! before, so a stale timer never wakes a later sleep; an end from outside (cancel, deadline)
//! disarms both, so the armed set is bounded by the parked threads.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use cairn_storage::ThreadId;
use tokio_util::sync::CancellationToken;

use super::Due;

/// Which of a thread's two slots an arming takes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub(crate) enum Slot {
    /// A sleeping thread's durable timer.
    Timer,
    /// A parked thread's deadline.
    Deadline,
}

impl Slot {
    pub fn of(due: &Due) -> Slot {
        match due {
            Due::Timer { .. } => Slot::Timer,
            Due::Deadline { .. } => Slot::Deadline,
        }
    }
}

/// The armed timers, by thread and slot: a generation and the token that disarms it.
#[derive(Debug, Default)]
pub(super) struct Armed {
    armed: Mutex<HashMap<(ThreadId, Slot), (u64, CancellationToken)>>,
    next: AtomicU64,
    /// Kept at the number of armings (`cairn_timers_armed`), once the engine serves.
    gauge: std::sync::OnceLock<metrics::Gauge>,
}

impl Armed {
    /// Reports the number of armings to `gauge` from now on.
    pub fn report_to(&self, gauge: metrics::Gauge) {
        gauge.set(self.armed().len() as f64);
        // Set once, by the one `serve`; a second call keeps the first gauge.
        let _ = self.gauge.set(gauge);
    }

    fn report(&self, armed: &HashMap<(ThreadId, Slot), (u64, CancellationToken)>) {
        if let Some(gauge) = self.gauge.get() {
            gauge.set(armed.len() as f64);
        }
    }

    fn armed(&self) -> MutexGuard<'_, HashMap<(ThreadId, Slot), (u64, CancellationToken)>> {
        // Nothing panics while this lock is held; a poisoned lock would still hold valid data.
        self.armed.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Arms `slot` of `thread`, disarming the one before: its generation and its token.
    pub fn arm(&self, thread: &ThreadId, slot: Slot) -> (u64, CancellationToken) {
        let generation = self.next.fetch_add(1, Ordering::Relaxed);
        let token = CancellationToken::new();
        let mut armed = self.armed();
        if let Some((_, old)) = armed.insert((thread.clone(), slot), (generation, token.clone())) {
            old.cancel();
        }
        self.report(&armed);
        (generation, token)
    }

    /// Forgets the arming of `generation` once its time has come: true if it was still the
    /// armed one (then it fires), false if it was disarmed meanwhile (then it must not).
    pub fn done(&self, thread: &ThreadId, slot: Slot, generation: u64) -> bool {
        let mut armed = self.armed();
        let key = (thread.clone(), slot);
        let current = armed.get(&key).is_some_and(|(g, _)| *g == generation);
        if current {
            armed.remove(&key);
            self.report(&armed);
        }
        current
    }

    /// Whether `slot` of `thread` is armed.
    pub fn is_armed(&self, thread: &ThreadId, slot: Slot) -> bool {
        self.armed().contains_key(&(thread.clone(), slot))
    }

    /// Disarms both slots of `thread`.
    pub fn disarm(&self, thread: &ThreadId) {
        let mut armed = self.armed();
        for slot in [Slot::Timer, Slot::Deadline] {
            if let Some((_, token)) = armed.remove(&(thread.clone(), slot)) {
                token.cancel();
            }
        }
        self.report(&armed);
    }

    /// Armings now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        self.armed().len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arming_again_disarms_the_one_before_and_the_slots_are_apart() {
        let armed = Armed::default();
        let t = ThreadId::new("t").unwrap();
        let (first, first_token) = armed.arm(&t, Slot::Timer);
        let (second, second_token) = armed.arm(&t, Slot::Timer);
        assert!(first_token.is_cancelled());
        assert!(!second_token.is_cancelled());
        assert!(!armed.done(&t, Slot::Timer, first), "a disarmed timer does not fire");
        assert_eq!(armed.len(), 1, "a stale generation does not remove the newer timer");
        let (deadline, deadline_token) = armed.arm(&t, Slot::Deadline);
        assert!(!second_token.is_cancelled(), "a deadline does not disarm the timer");
        assert!(armed.done(&t, Slot::Timer, second));
        assert!(!armed.done(&t, Slot::Timer, second), "a timer fires once");
        assert!(!armed.done(&t, Slot::Timer, deadline), "slots do not share generations");
        let (third, third_token) = armed.arm(&t, Slot::Timer);
        armed.disarm(&t);
        assert!(third_token.is_cancelled() && deadline_token.is_cancelled());
        assert!(!armed.done(&t, Slot::Timer, third));
        assert_eq!(armed.len(), 0);
    }
}
