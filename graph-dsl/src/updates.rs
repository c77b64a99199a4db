//! The updates a workflow declares ([`WorkflowBuilder::update`](crate::WorkflowBuilder::update)):
//! synchronous, validated calls into a running thread that change its state and answer the
//! caller (`docs/updates.md`).
//!
//! An update is two pieces of user code, type-erased as queries are: a validator, which reads
//! the state and the arguments and may refuse (nothing is written then), and a handler, which
//! changes a copy of the state and returns the reply. The engine records the arguments, the
//! reply and the state after the handler in one `update_applied` event, so replay takes the
//! recorded state and never runs the handler again. Declarations are not part of the
//! fingerprint: they change what a caller may send, not how the graph runs.

use std::fmt;
use std::sync::Arc;

use serde_json::Value;

use crate::DynState;

/// The state after an update and the reply, both as JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateOutcome {
    /// The whole state after the handler ran.
    pub state: Value,
    /// What the handler returned to the caller.
    pub reply: Value,
}

/// The validator, erased: the state and the JSON arguments to a refusal or nothing.
pub(crate) type DynValidate =
    Arc<dyn Fn(&dyn DynState, &Value) -> Result<(), UpdateError> + Send + Sync>;
/// The validator and handler, erased: the state and the JSON arguments to the outcome.
pub(crate) type DynApply =
    Arc<dyn Fn(&dyn DynState, &Value) -> Result<UpdateOutcome, UpdateError> + Send + Sync>;

/// One declared update: its validator and its handler, with their types erased.
#[derive(Clone)]
pub(crate) struct DynUpdate {
    /// Runs the validator.
    pub(crate) validate: DynValidate,
    /// Runs the validator, then the handler on a copy of the state.
    pub(crate) apply: DynApply,
}

impl fmt::Debug for DynUpdate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DynUpdate")
    }
}

impl DynUpdate {
    pub(crate) fn validate(&self, state: &dyn DynState, args: &Value) -> Result<(), UpdateError> {
        (self.validate)(state, args)
    }

    pub(crate) fn apply(
        &self,
        state: &dyn DynState,
        args: &Value,
    ) -> Result<UpdateOutcome, UpdateError> {
        (self.apply)(state, args)
    }
}

/// Why an update was not applied. Nothing is written for any of them.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum UpdateError {
    /// The workflow declares no update of this name.
    #[error("workflow {workflow:?} has no update {name:?} (it has: {})", declared.join(", "))]
    Unknown {
        /// The workflow's id.
        workflow: String,
        /// The name asked for.
        name: String,
        /// The names it declares, in order.
        declared: Vec<String>,
    },
    /// The validator refused the call.
    #[error("update {name:?} was refused: {message}")]
    Refused {
        /// The update's name.
        name: String,
        /// The validator's message.
        message: String,
    },
    /// The handler returned an error (the state is left as it was).
    #[error("update {name:?} failed: {message}")]
    Failed {
        /// The update's name.
        name: String,
        /// The handler's message.
        message: String,
    },
    /// The arguments (or the state, the reply) do not convert.
    #[error("update {name:?}: cannot convert the {what}: {detail}")]
    Codec {
        /// The update's name.
        name: String,
        /// `arguments`, `state` or `reply`.
        what: &'static str,
        /// The decoder's error.
        detail: String,
    },
}
