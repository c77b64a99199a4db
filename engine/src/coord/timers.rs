//! Armed timers and deadlines of parked threads, in memory: at most one timer and one deadline
//! per thread. Arming a thread's timer again (recovery, a resume after a pause) disarms the one
//! before; an arming read from a sleep the thread has left since (it woke and slept again) may
//! replace the new sleep's, and is refused as it fires (`exec/wake.rs`), which arms the new
//! sleep's again. An end from outside (cancel, deadline) disarms both, so the armed set is
//! bounded by the parked threads.
//!
//! An arming is two small table entries (by thread and slot, and by due time), not a task: one
//! timer task per engine (`local.rs`) sleeps until the earliest due time, takes what is due and
//! wakes those threads. So a sleeping thread costs an entry until it is due, and a million
//! sleeping threads cost no million tasks.

use std::collections::{BTreeMap, HashMap};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Mutex, MutexGuard};

use cairn_storage::ThreadId;

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
            // A thread not started yet sleeps on nothing else: the timer slot is free.
            Due::Timer { .. } | Due::Start { .. } => Slot::Timer,
            Due::Deadline { .. } => Slot::Deadline,
        }
    }
}

/// The armed timers: by thread and slot (a generation and the due time), and by due time.
#[derive(Debug, Default)]
pub(super) struct Armed {
    table: Mutex<Table>,
    next: AtomicU64,
    /// Told when an arming may be due before the time the timer task sleeps towards.
    pub(super) changed: tokio::sync::Notify,
    /// Kept at the number of armings (`cairn_timers_armed`), once the engine serves.
    gauge: std::sync::OnceLock<metrics::Gauge>,
}

#[derive(Debug, Default)]
struct Table {
    by_thread: HashMap<(ThreadId, Slot), (u64, u64)>,
    by_time: BTreeMap<(u64, u64), (ThreadId, Due)>,
}

impl Table {
    fn remove(&mut self, thread: &ThreadId, slot: Slot) -> bool {
        match self.by_thread.remove(&(thread.clone(), slot)) {
            Some((generation, at_ms)) => {
                self.by_time.remove(&(at_ms, generation));
                true
            }
            None => false,
        }
    }
}

impl Armed {
    /// Reports the number of armings to `gauge` from now on.
    pub fn report_to(&self, gauge: metrics::Gauge) {
        gauge.set(self.table().by_thread.len() as f64);
        // Set once, by the one `serve`; a second call keeps the first gauge.
        let _ = self.gauge.set(gauge);
    }

    fn report(&self, table: &Table) {
        if let Some(gauge) = self.gauge.get() {
            gauge.set(table.by_thread.len() as f64);
        }
    }

    fn table(&self) -> MutexGuard<'_, Table> {
        // Nothing panics while this lock is held; a poisoned lock would still hold valid data.
        self.table.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Arms the slot of `due` for `thread`, disarming the one before; returns its generation.
    pub fn arm(&self, thread: &ThreadId, due: Due) -> u64 {
        let generation = self.next.fetch_add(1, Ordering::Relaxed);
        let slot = Slot::of(&due);
        let at_ms = due.at_ms();
        let mut table = self.table();
        table.remove(thread, slot);
        table.by_thread.insert((thread.clone(), slot), (generation, at_ms));
        table.by_time.insert((at_ms, generation), (thread.clone(), due));
        self.report(&table);
        drop(table);
        // A permit is kept if the timer task is not waiting now: it looks again either way.
        self.changed.notify_one();
        generation
    }

    /// The earliest due time armed.
    pub fn next_due_ms(&self) -> Option<u64> {
        self.table().by_time.first_key_value().map(|((at_ms, _), _)| *at_ms)
    }

    /// Takes every arming due at `now_ms` (each fires once).
    pub fn take_due(&self, now_ms: u64) -> Vec<(ThreadId, Due)> {
        let mut table = self.table();
        let mut due = Vec::new();
        while let Some(entry) = table.by_time.first_entry() {
            if entry.key().0 > now_ms {
                break;
            }
            let (thread, what) = entry.remove();
            table.by_thread.remove(&(thread.clone(), Slot::of(&what)));
            due.push((thread, what));
        }
        if !due.is_empty() {
            self.report(&table);
        }
        due
    }

    /// Whether `slot` of `thread` is armed.
    pub fn is_armed(&self, thread: &ThreadId, slot: Slot) -> bool {
        self.table().by_thread.contains_key(&(thread.clone(), slot))
    }

    /// Disarms `thread`'s timer slot (its sleep's timer, or its delayed start), leaving its
    /// deadline armed.
    pub fn disarm_timer(&self, thread: &ThreadId) {
        let mut table = self.table();
        table.remove(thread, Slot::Timer);
        self.report(&table);
    }

    /// Disarms both slots of `thread`.
    pub fn disarm(&self, thread: &ThreadId) {
        let mut table = self.table();
        for slot in [Slot::Timer, Slot::Deadline] {
            table.remove(thread, slot);
        }
        self.report(&table);
    }

    /// Armings now.
    #[cfg(test)]
    pub fn len(&self) -> usize {
        let table = self.table();
        assert_eq!(table.by_thread.len(), table.by_time.len(), "the two views agree");
        table.by_thread.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn timer(until_ms: u64) -> Due {
        Due::Timer { task: crate::core::event::TaskKey::node("nap"), until_ms }
    }

    #[test]
    fn arming_again_replaces_the_one_before_and_the_slots_are_apart() {
        let armed = Armed::default();
        let t = ThreadId::new("t").unwrap();
        armed.arm(&t, timer(100));
        armed.arm(&t, timer(300));
        assert_eq!(armed.len(), 1, "the second timer replaced the first");
        assert_eq!(armed.next_due_ms(), Some(300));
        assert!(armed.take_due(299).is_empty(), "a replaced timer does not fire");
        armed.arm(&t, Due::Deadline { at_ms: 200 });
        assert_eq!(armed.len(), 2, "a deadline does not disarm the timer");
        let due = armed.take_due(300);
        assert_eq!(due.len(), 2);
        assert_eq!(due[0].1, Due::Deadline { at_ms: 200 }, "in the order they are due");
        assert_eq!(due[1].1, timer(300));
        assert!(armed.take_due(1_000).is_empty(), "each fires once");
        assert!(!armed.is_armed(&t, Slot::Timer));
        armed.arm(&t, timer(400));
        armed.arm(&t, Due::Deadline { at_ms: 500 });
        armed.disarm(&t);
        assert_eq!(armed.len(), 0);
        assert_eq!(armed.next_due_ms(), None);
    }
}
