//! Write intents: a caller computing a write it will queue soon says so, and the group commit
//! may keep its group open for it instead of committing without it.
//!
//! A durable commit costs about the same for one write as for a hundred, so a writer that
//! commits the moment its queue is empty pays one commit per write when the writes come one
//! after the other from one caller that is still computing the next. An intent tells the writer
//! that another write is on its way: while any intent is held, a store that gathers groups (the
//! redb writer) keeps the group open, up to its gathering bound, and it stops waiting as soon as
//! the last intent goes. Holding an intent never delays a write beyond that bound, and never
//! changes what is written or when a write is acknowledged: only how writes are grouped.
//!
//! # Examples
//!
//! ```
//! use std::sync::Arc;
//! use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
//! use cairn_storage::WriteIntents;
//!
//! let nudged = Arc::new(AtomicUsize::new(0));
//! let counter = nudged.clone();
//! let intents = WriteIntents::new(move || {
//!     counter.fetch_add(1, Ordering::SeqCst);
//! });
//! let a = intents.hold();
//! let b = intents.hold();
//! assert_eq!(intents.held(), 2);
//! drop(a);
//! assert_eq!(nudged.load(Ordering::SeqCst), 0, "one intent is still held");
//! drop(b);
//! assert_eq!((intents.held(), nudged.load(Ordering::SeqCst)), (0, 1), "the last one nudges");
//! ```

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::Instant;

/// The intents held on one store, and how to wake its writer when the last one goes.
pub struct WriteIntents {
    held: AtomicUsize,
    /// A group is open and may wait for the intents: only then does the last one withdrawn
    /// nudge the writer (an idle writer woken by a nudge would find nothing to do).
    gathering: AtomicBool,
    nudge: Box<dyn Fn() + Send + Sync>,
    /// Wakes a writer in [`WriteIntents::wait_withdrawn`] when the last intent goes.
    withdrawn: (Mutex<()>, Condvar),
}

impl std::fmt::Debug for WriteIntents {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WriteIntents").field("held", &self.held()).finish_non_exhaustive()
    }
}

impl WriteIntents {
    /// No intent held yet; `nudge` is called each time the count falls to zero while a group
    /// is open (for a store implementation: wake the writer that may be waiting for the
    /// intents to turn into writes; see `WriteIntents::gathering`, private to this crate).
    pub fn new(nudge: impl Fn() + Send + Sync + 'static) -> Arc<WriteIntents> {
        Arc::new(WriteIntents {
            held: AtomicUsize::new(0),
            gathering: AtomicBool::new(true),
            nudge: Box::new(nudge),
            withdrawn: (Mutex::new(()), Condvar::new()),
        })
    }

    /// Takes one intent, held until the returned guard drops.
    pub fn hold(self: &Arc<Self>) -> WriteIntent {
        self.held.fetch_add(1, Ordering::SeqCst);
        WriteIntent { intents: self.clone() }
    }

    /// How many intents are held now.
    pub fn held(&self) -> usize {
        self.held.load(Ordering::SeqCst)
    }

    /// Says whether the writer has a group open (set before it looks at [`WriteIntents::held`]
    /// for the group, cleared once it no longer waits): an intent withdrawn meanwhile nudges
    /// it, one withdrawn while it is idle does not. Either the writer sees the count fall or
    /// the last withdrawal sees the group open (both sequentially consistent).
    pub(crate) fn gathering(&self, open: bool) {
        self.gathering.store(open, Ordering::SeqCst);
    }

    /// Blocks until no intent is held or `deadline` passes; whether none is held. Writes queued
    /// meanwhile do not wake the caller: a writer that waits here for a runner's announced
    /// batches takes them all at once when the runner withdraws its intent, instead of waking
    /// for each.
    pub(crate) fn wait_withdrawn(&self, deadline: Instant) -> bool {
        let (lock, withdrawn) = &self.withdrawn;
        let mut guard = lock.lock().unwrap_or_else(PoisonError::into_inner);
        loop {
            if self.held() == 0 {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            guard = withdrawn
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// One held intent (see [`WriteIntents`]); dropping it withdraws it.
#[derive(Debug)]
pub struct WriteIntent {
    intents: Arc<WriteIntents>,
}

impl Drop for WriteIntent {
    fn drop(&mut self) {
        if self.intents.held.fetch_sub(1, Ordering::SeqCst) == 1 {
            if self.intents.gathering.load(Ordering::SeqCst) {
                (self.intents.nudge)();
            }
            // Under the lock: a waiter checks the count and starts waiting without letting go
            // of it, so this wake cannot fall between its check and its wait.
            let (lock, withdrawn) = &self.intents.withdrawn;
            drop(lock.lock().unwrap_or_else(PoisonError::into_inner));
            withdrawn.notify_all();
        }
    }
}
