//! The core's error type, and the status machine's refusal ([`InvalidTransition`]).
//!
//! The engine's `cairn::Error` has a variant of the same name and words for each of these, and
//! converts from this type, so a user matches on the engine's error as before.

use cairn_storage::ThreadStatus;
use serde::{Deserialize, Serialize};

/// What the core can report: a record that does not fit, a value that does not decode, a refused
/// status change, or the storage error a read it asked for failed with.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Error {
    /// A read the core asked for failed (permanent or transient as the inner error says). A
    /// thread the store finds missing is [`Error::UnknownThread`], not this.
    #[error(transparent)]
    Storage(cairn_storage::Error),
    /// No such thread (permanent).
    #[error("no thread {0}")]
    UnknownThread(String),
    /// The status machine refused (permanent for this status).
    #[error("{thread}: {source}")]
    Transition {
        /// Thread id.
        thread: String,
        /// The refused transition.
        source: InvalidTransition,
    },
    /// A recorded event does not fit the thread: the log is damaged or was written by other
    /// code (permanent).
    #[error("thread {thread} seq {seq}: {detail}")]
    Record {
        /// Thread id.
        thread: String,
        /// The seq of the event.
        seq: u64,
        /// What is wrong.
        detail: String,
    },
    /// A value could not be encoded or decoded (as JSON, or as a binary event body) (permanent).
    #[error("codec: {0}")]
    Codec(String),
}

impl Error {
    /// An [`Error::Record`]: the event at `seq` of `thread` does not fit, as `detail` says.
    pub fn record(thread: impl ToString, seq: u64, detail: impl Into<String>) -> Self {
        Error::Record { thread: thread.to_string(), seq, detail: detail.into() }
    }
}

impl From<cairn_storage::Error> for Error {
    fn from(e: cairn_storage::Error) -> Self {
        match e {
            // One "no such thread" to match, whether the core or the store found it missing.
            cairn_storage::Error::UnknownThread(id) => Error::UnknownThread(id.to_string()),
            e => Error::Storage(e),
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::Codec(e.to_string())
    }
}

/// What happened to a thread, as seen by its status machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transition {
    /// A runner picked the thread up (first run, resume after a restart, after input or a timer).
    Run,
    /// The thread stopped at a step boundary because somebody asked it to (or a budget ran out).
    Pause,
    /// A node interrupted and asked for human input (or a thread paused while it waited for
    /// input was resumed).
    WaitInput,
    /// A node started a durable timer (or a thread paused while it slept was resumed).
    Sleep,
    /// The frontier is empty: every branch reached END.
    Complete,
    /// A node failed for good (retries exhausted or not retryable), or the engine hit an error.
    Fail,
    /// Somebody cancelled the thread.
    Cancel,
    /// Somebody gave the thread up for good (`Engine::abandon`): it ends Cancelled, as a
    /// cancellation does, but a refusal names what was asked.
    Abandon,
    /// The thread's deadline passed.
    TimeOut,
    /// Resuming would diverge from the recorded history (changed code): held for a human.
    Block,
    /// A thread paused while it waited in a queue was resumed: it waits in line again
    /// (`docs/queues.md`). Admission itself is the store's (Queued to Created).
    Requeue,
}

/// A transition that the table does not allow from the current status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}; it cannot {}", InvalidTransition::status_words(*from), transition.verb())]
pub struct InvalidTransition {
    /// The status the thread was in.
    pub from: ThreadStatus,
    /// What was attempted.
    pub transition: Transition,
}

impl InvalidTransition {
    /// "is already cancelled" for an ended thread, "is paused" for another.
    fn status_words(from: ThreadStatus) -> String {
        let status = from.to_string().replace('_', " ");
        if from.is_terminal() {
            format!("it is already {status}")
        } else {
            format!("it is {status}")
        }
    }
}

impl Transition {
    /// What the transition does, as a verb ("be cancelled").
    pub fn verb(self) -> &'static str {
        match self {
            Transition::Run => "run",
            Transition::Pause => "be paused",
            Transition::WaitInput => "wait for input",
            Transition::Sleep => "sleep",
            Transition::Complete => "complete",
            Transition::Fail => "fail",
            Transition::Cancel => "be cancelled",
            Transition::Abandon => "be abandoned",
            Transition::TimeOut => "time out",
            Transition::Block => "be blocked",
            Transition::Requeue => "wait in its queue again",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::Error;

    #[test]
    fn a_thread_the_store_finds_missing_is_unknown_thread() {
        let id = cairn_storage::ThreadId::new("gone").unwrap();
        let e = Error::from(cairn_storage::Error::UnknownThread(id));
        assert!(matches!(&e, Error::UnknownThread(id) if id == "gone"), "{e:?}");
        let closed = Error::from(cairn_storage::Error::Closed);
        assert!(matches!(closed, Error::Storage(cairn_storage::Error::Closed)));
    }
}
