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

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::State;
use crate::erased::{DynState, snapshot};

/// The state after an update and the reply, both as JSON.
#[derive(Debug, Clone, PartialEq)]
pub struct UpdateOutcome {
    /// The whole state after the handler ran.
    pub state: Value,
    /// What the handler returned to the caller.
    pub reply: Value,
}

type DynValidate = Arc<dyn Fn(&dyn DynState, &Value) -> Result<(), UpdateError> + Send + Sync>;
type DynApply =
    Arc<dyn Fn(&dyn DynState, &Value) -> Result<UpdateOutcome, UpdateError> + Send + Sync>;

/// One declared update: its validator and its handler, with their types erased.
#[derive(Clone)]
pub(crate) struct DynUpdate {
    validate: DynValidate,
    apply: DynApply,
}

impl fmt::Debug for DynUpdate {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("DynUpdate")
    }
}

impl DynUpdate {
    /// The update of a state `S` taking `A`s and answering `R`s.
    pub(crate) fn of<S, A, R, V, H>(name: &str, validator: V, handler: H) -> Self
    where
        S: State,
        A: DeserializeOwned,
        R: Serialize,
        V: Fn(&S, &A) -> Result<(), String> + Send + Sync + 'static,
        H: Fn(&mut S, A) -> Result<R, String> + Send + Sync + 'static,
    {
        let validator = Arc::new(validator);
        let (n1, n2) = (name.to_owned(), name.to_owned());
        let check = validator.clone();
        let validate: DynValidate = Arc::new(move |state, args| {
            let (typed, args) = typed::<S, A>(&n1, state, args)?;
            check(&typed, &args)
                .map_err(|message| UpdateError::Refused { name: n1.clone(), message })
        });
        let apply: DynApply = Arc::new(move |state, args| {
            let (typed, args) = typed::<S, A>(&n2, state, args)?;
            validator(&typed, &args)
                .map_err(|message| UpdateError::Refused { name: n2.clone(), message })?;
            let mut next = S::clone(&typed);
            let reply = handler(&mut next, args)
                .map_err(|message| UpdateError::Failed { name: n2.clone(), message })?;
            let codec = |what: &'static str| {
                let name = n2.clone();
                move |e: serde_json::Error| UpdateError::Codec { name, what, detail: e.to_string() }
            };
            let reply = serde_json::to_value(reply).map_err(codec("reply"))?;
            let state = serde_json::to_value(&next).map_err(codec("state"))?;
            Ok(UpdateOutcome { state, reply })
        });
        Self { validate, apply }
    }

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

/// The typed state and arguments of an update call.
fn typed<S: State, A: DeserializeOwned>(
    name: &str,
    state: &dyn DynState,
    args: &Value,
) -> Result<(Arc<S>, A), UpdateError> {
    let codec = |what, detail: String| UpdateError::Codec { name: name.to_owned(), what, detail };
    let typed = snapshot::<S>(state).map_err(|e| codec("state", e.to_string()))?;
    let args = A::deserialize(args).map_err(|e| codec("arguments", e.to_string()))?;
    Ok((typed, args))
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
