//! The engine's error type.

use cairn_storage::ThreadStatus;

// The status machine's refusal lives with the machine, in `cairn-core`.
pub use cairn_core::error::{InvalidTransition, Transition};

/// Everything the engine can report. Each variant says whether retrying can help.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Storage failed (permanent or transient as the inner error says). A thread the store
    /// finds missing is [`Error::UnknownThread`], not this.
    #[error(transparent)]
    Storage(cairn_storage::Error),
    /// The workflow definition was rejected (permanent).
    #[error(transparent)]
    Build(#[from] cairn_dsl::BuildError),
    /// No workflow with this id (and version, when one was asked for) is registered
    /// (permanent until registered).
    #[error(
        "workflow {id}{} is not registered; registered: {}",
        version.map(|v| format!(" v{v}")).unwrap_or_default(),
        if registered.is_empty() { "none".to_owned() } else { registered.join(", ") }
    )]
    UnknownWorkflow {
        /// Workflow id.
        id: String,
        /// The version asked for (`None`: the newest was).
        version: Option<u32>,
        /// The workflows that are registered, as `id vN`, so that the error says what could
        /// have been meant (the engine's own schedule workflow left out).
        registered: Vec<String>,
    },
    /// The thread's workflow changed since it started (permanent: register the old version or
    /// migrate the thread).
    #[error(
        "thread {thread} was started with {workflow} fingerprint {recorded}, the registered one is {current}"
    )]
    FingerprintChanged {
        /// Thread id.
        thread: String,
        /// Workflow id and version.
        workflow: String,
        /// The fingerprint recorded with the thread.
        recorded: String,
        /// The fingerprint of the registered workflow.
        current: String,
    },
    /// No such thread (permanent).
    #[error("no thread {0}")]
    UnknownThread(String),
    /// A start over the rate of a queue that drops such starts (`QueueLimits::rate_drops`):
    /// nothing was written (transient: retry after `retry_after_ms`).
    #[error("queue {queue} (key {key:?}) is over its rate: retry in {retry_after_ms} ms")]
    RateLimited {
        /// The queue.
        queue: String,
        /// The key whose rate (or the queue's) is full.
        key: String,
        /// When the rate window frees a start, in ms from the refusal.
        retry_after_ms: u64,
    },
    /// The start waited for ended superseded by a later start of its key on a debounced queue
    /// (permanent: wait for `by`, which runs with the last input).
    #[error("thread {thread} was debounced: superseded by {by}")]
    Debounced {
        /// The superseded start.
        thread: String,
        /// The start that superseded it.
        by: String,
    },
    /// The start waited for was taken by a batch run on a batching queue (permanent: wait for
    /// `into`, whose input lists this start's).
    #[error("thread {thread} was batched into {into}")]
    Batched {
        /// The start taken.
        thread: String,
        /// The batch run.
        into: String,
    },
    /// The status machine refused (permanent for this status).
    #[error("{thread}: {source}")]
    Transition {
        /// Thread id.
        thread: String,
        /// The refused transition.
        source: InvalidTransition,
    },
    /// An operation needs a different status (permanent for this status).
    #[error("thread {thread} is {status}: {detail}")]
    WrongStatus {
        /// Thread id.
        thread: String,
        /// Its status.
        status: ThreadStatus,
        /// What was attempted.
        detail: String,
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
    /// A value could not be encoded or decoded as JSON (permanent).
    #[error("codec: {0}")]
    Codec(String),
    /// A limit was exceeded (permanent for this input).
    #[error("{limit} is {value}, over the limit of {max}")]
    LimitExceeded {
        /// What the limit bounds, in words ("the steps of one thread").
        limit: &'static str,
        /// The value.
        value: u64,
        /// The maximum.
        max: u64,
    },
    /// The engine is shutting down or shut down (permanent for this engine instance).
    #[error("the engine is shut down")]
    ShutDown,
    /// The thread has no state at `seq` to show or fork from: seq 0, past its last event, or
    /// before what a prune kept (permanent for this seq). Said with the seqs there are.
    #[error("{}", seq_words(thread, *seq, *last, *first_stored))]
    SeqUnavailable {
        /// Thread id.
        thread: String,
        /// The seq asked for.
        seq: u64,
        /// The thread's last seq.
        last: u64,
        /// Its first stored seq: 1, or the first after what a prune removed (its newest
        /// checkpoint covers the seq before it, so the state is there from that seq on).
        first_stored: u64,
    },
    /// Invalid argument from the caller (permanent).
    #[error("invalid argument: {0}")]
    Invalid(String),
    /// A signal the thread's workflow does not accept: a name it does not declare (when it
    /// declares some), or a value that does not decode as the declared type
    /// (`WorkflowBuilder::signal`). Refused before anything is stored: the thread is untouched
    /// (permanent for this name and value).
    #[error("signal refused for thread {thread}: {source}")]
    SignalRefused {
        /// Thread id.
        thread: String,
        /// Why, naming the signal, the declared type and the decoder's error, or the declared
        /// names.
        source: cairn_dsl::SignalError,
    },
    /// An update the thread's workflow does not take: an unknown name, arguments that do not
    /// convert, its validator's refusal, or its handler's error (`WorkflowBuilder::update`).
    /// Refused before anything is written: the thread is untouched.
    #[error("update refused for thread {thread}: {source}")]
    UpdateRefused {
        /// Thread id.
        thread: String,
        /// Why, naming the update.
        source: cairn_dsl::UpdateError,
    },
    /// The thread's runner did not reach a step boundary within the wait: the update is queued
    /// and may still be applied there. Send it again with the same id to learn its reply (it is
    /// applied at most once).
    #[error(
        "update {id:?} of thread {thread} was not answered within {waited_ms} ms: send it again \
         with the same id for its reply"
    )]
    UpdatePending {
        /// Thread id.
        thread: String,
        /// The update's id.
        id: String,
        /// How long the caller waited.
        waited_ms: u64,
    },
    /// A debug bundle is malformed or unsupported; `path` is the JSON path of the first problem
    /// (permanent for these bytes).
    #[error("bundle {path}: {detail}")]
    Bundle {
        /// JSON path of the offending value, e.g. `$.events.events[3].seq`.
        path: String,
        /// What is wrong.
        detail: String,
    },
    /// No chain of registered migrations leads from one workflow version to another (permanent
    /// until one is registered).
    #[error("no migration of workflow {workflow} from v{from} to v{to} is registered")]
    NoMigration {
        /// Workflow id.
        workflow: String,
        /// The thread's version.
        from: u32,
        /// The version asked for.
        to: u32,
    },
    /// A body sealed at rest that this engine cannot open: it has no payload codec, another
    /// codec, no key of this id, or a key that does not open it (a wrong key, damaged bytes).
    /// Permanent until the engine is opened with the key (`docs/encryption.md`); never shown as
    /// plain bytes.
    #[error("sealed with key {key} (codec {codec}): {detail}")]
    Sealed {
        /// The codec id the envelope names.
        codec: String,
        /// The key id the envelope names.
        key: String,
        /// Why it does not open.
        detail: String,
    },
    /// No promise has this id: not an id's shape, or its thread never created it (permanent).
    #[error("no promise {0}")]
    UnknownPromise(String),
    /// The promise was completed before with another value or error: a promise completes once
    /// (permanent; the same completion again is a success).
    #[error("promise {promise} was completed before with {first}, not {now}")]
    PromiseCompleted {
        /// The promise's id.
        promise: String,
        /// Its completion (`{"value": ..}` or `{"error": ..}`).
        first: String,
        /// The completion refused.
        now: String,
    },
}

/// "thread t has events 1..=45; seq 99 is not one of them", with the seqs a prune removed.
fn seq_words(thread: &str, seq: u64, last: u64, first_stored: u64) -> String {
    let from = first_stored.saturating_sub(1).max(1);
    let have = if first_stored <= 1 {
        format!("thread {thread} has events 1..={last}")
    } else {
        let at = if from == last { format!("seq {last}") } else { format!("seqs {from}..={last}") };
        format!(
            "thread {thread} has events 1..={last}, of which 1..={} were pruned (the first \
             available seq is {first_stored}; its state is available at {at})",
            first_stored - 1
        )
    };
    let not = if seq != 0 && seq < from { "was pruned" } else { "is not one of them" };
    format!("{have}; seq {seq} {not}")
}

impl Error {
    /// An [`Error::UnknownWorkflow`] for `id` (and `version`, when one was asked for), listing
    /// `registered` (id and version of each workflow there is, in any order).
    pub fn unknown_workflow<'a>(
        id: &str,
        version: Option<u32>,
        registered: impl IntoIterator<Item = (&'a str, u32)>,
    ) -> Self {
        let internal = [crate::ScheduleSpec::WORKFLOW, crate::BatchInfo::WORKFLOW];
        let mut known: Vec<(&str, u32)> =
            registered.into_iter().filter(|(id, _)| !internal.contains(id)).collect();
        known.sort_unstable();
        let registered = known.into_iter().map(|(id, v)| format!("{id} v{v}")).collect();
        Error::UnknownWorkflow { id: id.to_owned(), version, registered }
    }
}

impl From<cairn_storage::Error> for Error {
    fn from(e: cairn_storage::Error) -> Self {
        match e {
            // One "no such thread" to match, whether the engine or the store found it missing
            // (a thread deleted between a listing and a read is found missing by the store).
            cairn_storage::Error::UnknownThread(id) => Error::UnknownThread(id.to_string()),
            // A sealed body is the engine's word: what to do (give the key) is not storage's.
            cairn_storage::Error::Sealed { codec, key, detail } => {
                Error::Sealed { codec, key, detail }
            }
            cairn_storage::Error::RateLimited { queue, key, retry_after_ms } => {
                Error::RateLimited { queue, key, retry_after_ms }
            }
            e => Error::Storage(e),
        }
    }
}

/// The core's errors are the engine's variants of the same name, with the same words (the match
/// is exhaustive: a variant the core adds needs its place here).
impl From<cairn_core::Error> for Error {
    fn from(e: cairn_core::Error) -> Self {
        match e {
            cairn_core::Error::Storage(cairn_storage::Error::Sealed { codec, key, detail }) => {
                Error::Sealed { codec, key, detail }
            }
            cairn_core::Error::Storage(e) => Error::Storage(e),
            cairn_core::Error::UnknownThread(thread) => Error::UnknownThread(thread),
            cairn_core::Error::Transition { thread, source } => {
                Error::Transition { thread, source }
            }
            cairn_core::Error::Record { thread, seq, detail } => {
                Error::Record { thread, seq, detail }
            }
            cairn_core::Error::Codec(detail) => Error::Codec(detail),
        }
    }
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::Codec(e.to_string())
    }
}

#[cfg(test)]
mod tests {
    use super::{Error, seq_words};

    #[test]
    fn an_unavailable_seq_is_said_with_the_seqs_there_are_and_those_pruned() {
        let whole = seq_words("t", 99, 45, 1);
        assert_eq!(whole, "thread t has events 1..=45; seq 99 is not one of them");
        let pruned = seq_words("t", 3, 45, 20);
        assert_eq!(
            pruned,
            "thread t has events 1..=45, of which 1..=19 were pruned (the first available seq \
             is 20; its state is available at seqs 19..=45); seq 3 was pruned"
        );
        let all = seq_words("t", 0, 45, 46);
        let said = "(the first available seq is 46; its state is available at seq 45); seq 0 is \
                    not one of them";
        assert!(all.ends_with(said), "{all}");
    }

    #[test]
    fn a_thread_the_store_finds_missing_is_the_engines_unknown_thread() {
        let id = cairn_storage::ThreadId::new("gone").unwrap();
        let e = Error::from(cairn_storage::Error::UnknownThread(id));
        assert!(matches!(&e, Error::UnknownThread(id) if id == "gone"), "{e:?}");
        let closed = Error::from(cairn_storage::Error::Closed);
        assert!(matches!(closed, Error::Storage(cairn_storage::Error::Closed)));
    }
}
