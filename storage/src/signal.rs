//! The signal inbox (`docs/format.md` §2.3): named messages sent to a thread from outside,
//! stored apart from its log, keyed `(thread, n)` with `n` counting the thread's signals from 1.
//!
//! Why apart from the log: a runner's batches carry a `LastSeq` guard on the thread's log, so a
//! sender appending to the log of a thread somebody drives would fence that runner. A sender
//! writes only the inbox (its own batch, refused for an unknown or finished thread); the runner
//! records in its own log which signal a node received, so the inbox never changes after a
//! send and a receipt is exactly as durable as the runner's log.
//!
//! Invariants: per thread, `n` starts at 1 and has no gaps (the planner assigns it, the last
//! stored `n` + 1); a signal is never rewritten or removed while its thread exists; a thread
//! holds at most [`SIGNALS_PER_THREAD_MAX`] signals.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::ThreadId;
use crate::limits::{self, SIGNAL_BYTES_MAX, SIGNAL_NAME_BYTES_MAX, SIGNALS_PER_THREAD_MAX};

/// A signal to send: appended to `thread`'s inbox by [`crate::Batch::signals`].
///
/// # Examples
///
/// ```
/// use cairn_storage::*;
/// # fn main() -> Result<(), Error> {
/// let dir = tempfile::tempdir().expect("temp dir");
/// let store = RedbStore::open(dir.path().join("cairn.db"), Options::default())?;
/// let thread = ThreadId::new("order-7")?;
/// let workflow = WorkflowRef { id: "orders".into(), version: 1, fingerprint: "f".into() };
/// let create = Batch { threads: vec![ThreadRecord::new(thread.clone(), workflow, 0)], ..Batch::default() };
/// store.append(create)?.wait_blocking()?;
/// let signal = NewSignal::new(thread.clone(), "payment", br#"{"amount":30}"#.to_vec(), 10)?;
/// let sent = store.append(Batch { signals: vec![signal], ..Batch::default() })?.wait_blocking()?;
/// assert_eq!(sent.signals, vec![1]);
/// let inbox = store.signals(&thread, 0, 10).wait()?;
/// assert_eq!((inbox[0].n, inbox[0].name.as_str()), (1, "payment"));
/// # Ok(())
/// # }
/// ```
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NewSignal {
    /// The thread it is sent to.
    pub thread: ThreadId,
    /// Its name (what a node receives by).
    pub name: String,
    /// Its value (the engine's JSON).
    pub data: Vec<u8>,
    /// When it was sent (engine clock, ms).
    pub at_ms: u64,
}

impl NewSignal {
    /// A signal, its name and size checked.
    ///
    /// # Errors
    ///
    /// As [`NewSignal::check_limits`].
    pub fn new(
        thread: ThreadId,
        name: impl Into<String>,
        data: Vec<u8>,
        at_ms: u64,
    ) -> Result<NewSignal, Error> {
        let signal = NewSignal { thread, name: name.into(), data, at_ms };
        signal.check_limits()?;
        Ok(signal)
    }

    /// Checks the name and the size of the value.
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] past [`SIGNAL_NAME_BYTES_MAX`] or [`SIGNAL_BYTES_MAX`];
    /// [`Error::Invalid`] for an empty name or one with a control character.
    pub fn check_limits(&self) -> Result<(), Error> {
        check_name(&self.name)?;
        limits::check("SIGNAL_BYTES_MAX", self.data.len(), SIGNAL_BYTES_MAX)
    }
}

/// A stored signal (record kind 9).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Signal {
    /// The thread it was sent to (repeats the key).
    pub thread: ThreadId,
    /// Its number in the thread's inbox, from 1 (repeats the key).
    pub n: u64,
    /// Its name.
    pub name: String,
    /// When it was sent (engine clock, ms).
    pub at_ms: u64,
    /// Its value (the engine's JSON).
    #[serde(with = "crate::bytes_serde")]
    pub data: Vec<u8>,
}

/// Checks a signal name: 1 to [`SIGNAL_NAME_BYTES_MAX`] bytes, no control characters (as
/// [`limits::check_text`]).
pub(crate) fn check_name(name: &str) -> Result<(), Error> {
    limits::check_text("SIGNAL_NAME_BYTES_MAX", SIGNAL_NAME_BYTES_MAX, "signal name", name)
}

/// The number the next signal of a thread gets, after `last` (0: none yet).
///
/// # Errors
///
/// [`Error::LimitExceeded`] once the thread holds [`SIGNALS_PER_THREAD_MAX`].
pub(crate) fn next_n(last: u64) -> Result<u64, Error> {
    let n = last.saturating_add(1);
    if n > SIGNALS_PER_THREAD_MAX {
        return Err(Error::LimitExceeded {
            limit: "SIGNALS_PER_THREAD_MAX",
            value: n,
            max: SIGNALS_PER_THREAD_MAX,
        });
    }
    Ok(n)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_and_sizes_are_checked() {
        let t = ThreadId::new("t").expect("id");
        assert!(NewSignal::new(t.clone(), "payment", b"{}".to_vec(), 0).is_ok());
        assert!(matches!(NewSignal::new(t.clone(), "", vec![], 0), Err(Error::Invalid { .. })));
        assert!(matches!(NewSignal::new(t.clone(), "a\nb", vec![], 0), Err(Error::Invalid { .. })));
        let long = "x".repeat(SIGNAL_NAME_BYTES_MAX + 1);
        assert!(matches!(
            NewSignal::new(t.clone(), long, vec![], 0),
            Err(Error::LimitExceeded { .. })
        ));
        let big = vec![b'1'; SIGNAL_BYTES_MAX + 1];
        assert!(matches!(NewSignal::new(t, "big", big, 0), Err(Error::LimitExceeded { .. })));
    }

    #[test]
    fn numbers_stop_at_the_per_thread_bound() {
        assert_eq!(next_n(0).expect("first"), 1);
        assert_eq!(next_n(SIGNALS_PER_THREAD_MAX - 1).expect("last"), SIGNALS_PER_THREAD_MAX);
        assert!(matches!(next_n(SIGNALS_PER_THREAD_MAX), Err(Error::LimitExceeded { .. })));
    }
}
