//! The time the storage writer goes by for [`Durability::Periodic`](crate::Durability): when
//! the last durable commit was and when the next is due. Injected, so that tests move it by
//! hand ([`ManualClock`], then [`RedbStore::tick`](crate::RedbStore::tick)) instead of sleeping.
//! How long the writer waits to gather a group, and how long a commit took, stay real time:
//! they measure the disk, not the policy.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// A monotonic clock.
pub trait Clock: Send + Sync + fmt::Debug {
    /// Now.
    fn now(&self) -> Instant;
}

/// The system's monotonic clock (the default).
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Instant {
        Instant::now()
    }
}

/// A clock that stands still until moved.
///
/// # Examples
///
/// ```
/// use cairn_storage::{Clock, ManualClock};
/// let clock = ManualClock::new();
/// let before = clock.now();
/// clock.advance_ms(1_500);
/// assert_eq!(clock.now() - before, std::time::Duration::from_millis(1_500));
/// ```
#[derive(Debug)]
pub struct ManualClock {
    start: Instant,
    elapsed_ms: AtomicU64,
}

impl ManualClock {
    /// A clock at an arbitrary instant.
    pub fn new() -> Self {
        ManualClock { start: Instant::now(), elapsed_ms: AtomicU64::new(0) }
    }

    /// Moves the clock `ms` forward.
    pub fn advance_ms(&self, ms: u64) {
        self.elapsed_ms.fetch_add(ms, Ordering::SeqCst);
    }
}

impl Default for ManualClock {
    fn default() -> Self {
        ManualClock::new()
    }
}

impl Clock for ManualClock {
    fn now(&self) -> Instant {
        self.start + Duration::from_millis(self.elapsed_ms.load(Ordering::SeqCst))
    }
}
