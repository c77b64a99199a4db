//! The store's poison: the failure that made it refuse writes.
//!
//! Set by the writer at the first failed commit (the outcome of that group is unknown, and redb
//! wants its file reopened, which repairs it), read by every caller (refused at once while it
//! is set, with [`Error::Poisoned`] naming the cause), and watched by whoever must know when it
//! changes (the engine: waits end with the cause; its threads are restored when it clears).
//! Cleared by the writer once it reopened the database (see `writer::Writer::recover`).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use tokio::sync::watch;

use crate::error::Error;

/// The failure that poisoned the store, shared by its writer and its handles.
#[derive(Clone)]
pub(crate) struct Poison {
    /// Whether a cause is set: the check on every write, without a lock.
    set: Arc<AtomicBool>,
    cause: Arc<watch::Sender<Option<Error>>>,
    /// Where the store's health is reported (`cairn_database_writable`, the health report).
    metrics: crate::telemetry::StoreMetrics,
}

impl Poison {
    /// No poison; changes are reported to `metrics`.
    pub fn new(metrics: crate::telemetry::StoreMetrics) -> Poison {
        Poison { set: Arc::default(), cause: Arc::new(watch::channel(None).0), metrics }
    }

    /// Whether the store refuses writes now.
    pub fn is_set(&self) -> bool {
        self.set.load(Ordering::Acquire)
    }

    /// The error a write is refused with now, if it is ([`Error::Poisoned`] with the cause).
    pub fn refusal(&self) -> Option<Error> {
        if !self.is_set() {
            return None;
        }
        let cause = self.cause.borrow().clone()?;
        Some(Error::Poisoned { cause: Arc::new(cause) })
    }

    /// Whether the cause may clear by itself, so that a reopen is worth trying: an I/O error,
    /// a full disk, a permission taken away. A damaged file (redb panicked on a page) stays
    /// damaged: the store stays poisoned until its owner repairs and reopens it.
    pub fn may_clear(&self) -> bool {
        matches!(
            *self.cause.borrow(),
            Some(Error::Storage { .. } | Error::DiskFull { .. } | Error::PermissionDenied { .. })
        )
    }

    /// Poisons the store with `cause`, unless it is poisoned already (the first failure is the
    /// cause; what fails after it fails because of it).
    pub fn set(&self, cause: &Error) {
        let cause = match cause {
            Error::Poisoned { cause } => Error::clone(cause),
            other => other.clone(),
        };
        let said = cause.to_string();
        // The database's state says "refuses writes" before anyone watching the cause wakes:
        // a caller told of the failure and asking for health at once hears the same.
        let first = self.cause.send_if_modified(|now| {
            if now.is_some() {
                return false;
            }
            self.metrics.writes_refused(&said);
            *now = Some(cause);
            true
        });
        self.set.store(true, Ordering::Release);
        if first {
            tracing::error!(cause = %said, "the store refuses writes until it recovers");
        }
    }

    /// Lifts the poison: the database was reopened and writes are accepted again.
    pub fn clear(&self) {
        self.set.store(false, Ordering::Release);
        if self.cause.send_if_modified(|now| now.take().is_some()) {
            tracing::warn!("the store accepts writes again");
            self.metrics.writes_accepted();
        }
    }

    /// The cause as it changes: `Some` while the store refuses writes.
    pub fn watch(&self) -> watch::Receiver<Option<Error>> {
        self.cause.subscribe()
    }
}
