//! The signals a workflow declares ([`WorkflowBuilder::signal`](crate::WorkflowBuilder::signal)):
//! each name with the type its value must decode as, so that a sender is refused a value the
//! receiving node could not read (`docs/signals.md`).
//!
//! A declaration is a type-erased check, as the state's codec is: the value is decoded into the
//! declared type and dropped. Declarations are not part of the fingerprint: they change what a
//! sender may send, not how a thread runs, so adding one never blocks a thread that is running.

use std::collections::BTreeMap;
use std::fmt;
use std::sync::Arc;

use serde::de::DeserializeOwned;
use serde_json::Value;

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

/// Why a thread's workflow refuses a signal ([`DynWorkflow::check_signal`](crate::DynWorkflow::check_signal)).
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

/// The signals a workflow declares, by name.
#[derive(Clone, Default)]
pub(crate) struct Signals(BTreeMap<String, DynSignal>);

impl FromIterator<(String, DynSignal)> for Signals {
    fn from_iter<I: IntoIterator<Item = (String, DynSignal)>>(iter: I) -> Self {
        Self(iter.into_iter().collect())
    }
}

impl Signals {
    /// The declared names, in order.
    pub(crate) fn names(&self) -> Vec<&str> {
        self.0.keys().map(String::as_str).collect()
    }

    /// The declared type of `name`, without module paths.
    pub(crate) fn type_name(&self, name: &str) -> Option<&str> {
        self.0.get(name).map(|s| s.type_name.as_str())
    }

    /// Whether the workflow `workflow` accepts signal `name` with `value`: any signal when it
    /// declares none; otherwise a declared name whose value decodes as its type.
    pub(crate) fn check(
        &self,
        workflow: &str,
        name: &str,
        value: &Value,
    ) -> Result<(), SignalError> {
        if self.0.is_empty() {
            return Ok(());
        }
        let Some(signal) = self.0.get(name) else {
            return Err(SignalError::Undeclared {
                workflow: workflow.to_owned(),
                name: name.to_owned(),
                declared: self.0.keys().cloned().collect(),
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
