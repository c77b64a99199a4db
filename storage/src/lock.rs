//! Named resource locks with lease timeouts, made durable: a thread holds a lock on a name (a
//! file, an account) until it releases it, its time to live runs out, or it ends.
//!
//! Invariant: a lock has one owner; another owner may take it only once `expires_at_ms` has
//! passed on the caller's clock (`now_ms` given with each operation, so tests and replay control
//! time).

use serde::{Deserialize, Serialize};

/// A held lock.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockRecord {
    /// The resource's name.
    pub name: String,
    /// Who holds it.
    pub owner: String,
    /// When it was (last) acquired, in engine-clock ms.
    pub acquired_at_ms: u64,
    /// When it lapses unless renewed, in engine-clock ms.
    pub expires_at_ms: u64,
}

impl LockRecord {
    /// Whether the lock still binds at `now_ms`.
    ///
    /// # Examples
    ///
    /// ```
    /// use cairn_storage::LockRecord;
    /// let lock = LockRecord { name: "f".into(), owner: "a".into(), acquired_at_ms: 0, expires_at_ms: 10 };
    /// assert!(lock.is_live(9));
    /// assert!(!lock.is_live(10));
    /// ```
    pub fn is_live(&self, now_ms: u64) -> bool {
        now_ms < self.expires_at_ms
    }
}
