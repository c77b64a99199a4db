//! The engine's error type.

use cairn_storage::ThreadStatus;

use crate::core::status::InvalidTransition;

/// Everything the engine can report. Each variant says whether retrying can help.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// Storage failed (permanent or transient as the inner error says).
    #[error(transparent)]
    Storage(#[from] cairn_storage::Error),
    /// The workflow definition was rejected (permanent).
    #[error(transparent)]
    Build(#[from] cairn_dsl::BuildError),
    /// No workflow with this id and version is registered (permanent until registered).
    #[error("workflow {id} v{version} is not registered")]
    UnknownWorkflow {
        /// Workflow id.
        id: String,
        /// Version.
        version: u32,
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
    /// Invalid argument from the caller (permanent).
    #[error("invalid argument: {0}")]
    Invalid(String),
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
}

impl From<serde_json::Error> for Error {
    fn from(e: serde_json::Error) -> Self {
        Error::Codec(e.to_string())
    }
}
