//! How a thread stands once it stopped running ([`Outcome`]), and how a handle reads it: as its
//! workflow's state type, or as JSON ([`Untyped`]). A leaf of `api/`: the handle and its typed
//! layer (`typed.rs`) both name it.

use cairn_dsl::State;
use cairn_storage::ThreadStatus;
use serde_json::Value;

use crate::error::Error;

/// How a thread stands once it stopped running (ended or parked). `O` is the type of its
/// output: the workflow's state for a typed handle, JSON otherwise.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome<O = Value> {
    /// Its status: terminal, or parked (paused, waiting for input, sleeping, blocked).
    pub status: ThreadStatus,
    /// The final state, when completed.
    pub output: Option<O>,
    /// The last error recorded, if any.
    pub error: Option<String>,
}

/// The state type of a handle whose workflow is not known at compile time (a start by name):
/// its results are JSON.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Untyped {}

/// How a handle reads a thread's output: as its state type `S`, or as JSON for [`Untyped`].
pub trait Typing: sealed::Sealed {
    /// The output's type.
    type Output;

    /// `outcome` with its output decoded.
    ///
    /// # Errors
    /// [`Error::Codec`] for an output that does not decode.
    fn outcome(outcome: Outcome) -> Result<Outcome<Self::Output>, Error>;
}

mod sealed {
    /// Only the engine's typings.
    pub trait Sealed {}
    impl Sealed for super::Untyped {}
    impl<S: cairn_dsl::State> Sealed for S {}
}

impl Typing for Untyped {
    type Output = Value;

    fn outcome(outcome: Outcome) -> Result<Outcome, Error> {
        Ok(outcome)
    }
}

impl<S: State> Typing for S {
    type Output = S;

    fn outcome(outcome: Outcome) -> Result<Outcome<S>, Error> {
        let Outcome { status, output, error } = outcome;
        let output = output.map(serde_json::from_value).transpose()?;
        Ok(Outcome { status, output, error })
    }
}
