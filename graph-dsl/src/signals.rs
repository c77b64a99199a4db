//! The signals a workflow declares ([`WorkflowBuilder::signal`](crate::WorkflowBuilder::signal)):
//! each name with the type its value must decode as, so that a sender is refused a value the
//! receiving node could not read (`docs/signals.md`).
//!
//! A declaration is a type-erased check, as the state's codec is: the value is decoded into the
//! declared type and dropped. Declarations are not part of the fingerprint: they change what a
//! sender may send, not how a thread runs, so adding one never blocks a thread that is running.

use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::erased::DynWorkflow;

/// Whether a value decodes as a signal's declared type (`Err`: the decoder's error).
type DynCheck = Arc<dyn Fn(&Value) -> Result<(), String> + Send + Sync>;

/// One declared signal: the name of its type and a check that a value decodes as it.
#[derive(Clone)]
pub(crate) struct DynSignal {
    type_name: String,
    check: DynCheck,
}

impl DynSignal {
    /// The declaration of a signal whose values are `T`s.
    pub(crate) fn of<T: DeserializeOwned>() -> Self {
        let check =
            Arc::new(|value: &Value| T::deserialize(value).map(drop).map_err(|e| e.to_string()));
        Self { type_name: short_type_name(std::any::type_name::<T>()), check }
    }
}

/// Why a thread's workflow refuses a signal ([`DynWorkflow::check_signal`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum SignalError {
    /// The workflow declares signals, and not this name.
    #[error("workflow {workflow:?} declares no signal {name:?} (it declares {})", quoted(declared))]
    Undeclared {
        /// The workflow's id.
        workflow: String,
        /// The name sent.
        name: String,
        /// The names it declares, in order.
        declared: Vec<String>,
    },
    /// The value does not decode as the declared type.
    #[error("signal {name:?} takes a {expected}, and the value does not decode as one: {detail}")]
    Type {
        /// The name sent.
        name: String,
        /// The declared type (its name without module paths, e.g. `Option<String>`).
        expected: String,
        /// The decoder's error.
        detail: String,
    },
}

impl SignalError {
    /// The field of a request that is wrong: `"name"` for an undeclared name, `"value"` for a
    /// value of the wrong type.
    pub fn field(&self) -> &'static str {
        match self {
            Self::Undeclared { .. } => "name",
            Self::Type { .. } => "value",
        }
    }
}

fn quoted(names: &[String]) -> String {
    names.iter().map(|n| format!("{n:?}")).collect::<Vec<_>>().join(", ")
}

impl DynWorkflow {
    /// The names of the signals the workflow declares, in order (empty: it declares none, and
    /// any name is accepted).
    pub fn signal_names(&self) -> Vec<&str> {
        self.signals.keys().map(String::as_str).collect()
    }

    /// The declared type of signal `name`, as its name without module paths (`Option<String>`).
    pub fn signal_type(&self, name: &str) -> Option<&str> {
        self.signals.get(name).map(|s| s.type_name.as_str())
    }

    /// Checks that a signal `name` with `value` is one a thread of this workflow accepts: any
    /// signal when the workflow declares none; otherwise a declared name whose value decodes
    /// as the declared type.
    ///
    /// # Errors
    /// [`SignalError::Undeclared`] for a name the workflow does not declare (when it declares
    /// some); [`SignalError::Type`] for a value that does not decode as the declared type.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, SignalError, Workflow, END, START};
    /// let wf = Workflow::<Replace<String>>::builder("parcel", 1)
    ///     .node("wait", |_s, _ctx| async { Ok(NodeOutput::none()) })
    ///     .edge(START, "wait")
    ///     .edge("wait", END)
    ///     .signal::<String>("delivered")
    ///     .build()?
    ///     .erase();
    /// assert!(wf.check_signal("delivered", &serde_json::json!("at the door")).is_ok());
    /// let wrong = wf.check_signal("delivered", &serde_json::json!(12345)).unwrap_err();
    /// assert!(matches!(wrong, SignalError::Type { .. }));
    /// assert_eq!(wrong.to_string(), "signal \"delivered\" takes a String, and the value does \
    ///     not decode as one: invalid type: integer `12345`, expected a string");
    /// let unknown = wf.check_signal("lost", &serde_json::json!(null)).unwrap_err();
    /// assert!(matches!(unknown, SignalError::Undeclared { .. }));
    /// # Ok::<(), cairn_dsl::BuildError>(())
    /// ```
    pub fn check_signal(&self, name: &str, value: &Value) -> Result<(), SignalError> {
        if self.signals.is_empty() {
            return Ok(());
        }
        let Some(signal) = self.signals.get(name) else {
            return Err(SignalError::Undeclared {
                workflow: self.id.clone(),
                name: name.to_owned(),
                declared: self.signals.keys().cloned().collect(),
            });
        };
        (signal.check)(value).map_err(|detail| SignalError::Type {
            name: name.to_owned(),
            expected: signal.type_name.clone(),
            detail,
        })
    }
}

impl fmt::Debug for DynSignal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.type_name)
    }
}

/// `full` (a `std::any::type_name`) without module paths: `core::option::Option<alloc::string::
/// String>` is `Option<String>`, what the user wrote.
pub(crate) fn short_type_name(full: &str) -> String {
    let mut out = String::with_capacity(full.len());
    // Where the path being read began in `out`: a `::` drops what was read since.
    let mut path_start = 0;
    let mut chars = full.chars().peekable();
    while let Some(c) = chars.next() {
        if c == ':' && chars.peek() == Some(&':') {
            chars.next();
            out.truncate(path_start);
        } else {
            out.push(c);
            if !(c.is_alphanumeric() || c == '_') {
                path_start = out.len();
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::short_type_name;

    #[test]
    fn type_names_lose_their_module_paths() {
        let cases = [
            ("alloc::string::String", "String"),
            ("core::option::Option<alloc::string::String>", "Option<String>"),
            ("(u32, alloc::vec::Vec<my_app::Payment>)", "(u32, Vec<Payment>)"),
            ("&str", "&str"),
            ("u64", "u64"),
        ];
        for (full, short) in cases {
            assert_eq!(short_type_name(full), short, "{full}");
        }
    }
}
