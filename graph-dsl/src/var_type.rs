//! The declared type of a [`Variable`](crate::Variable): which JSON values it admits.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// The type a variable is declared with. Writes of a value of another type are refused (by the
/// update builders with [`VarError::WrongType`](crate::VarError::WrongType), and by
/// [`State::apply`](crate::State::apply), which records them as rejected).
///
/// # Examples
/// ```
/// use cairn_dsl::VarType;
/// use serde_json::json;
/// assert!(VarType::Number.admits(&json!(2.5)));
/// assert!(!VarType::Number.admits(&json!("2.5")));
/// assert!(VarType::Any.admits(&json!(null)));
/// assert_eq!(VarType::of(&json!([1])), VarType::Array);
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum VarType {
    /// Any value: what variables set without a type, and those of snapshots written before
    /// types existed, have.
    #[default]
    Any,
    /// `null` only.
    Null,
    /// `true` or `false`.
    Boolean,
    /// A JSON number.
    Number,
    /// A string.
    String,
    /// A list.
    Array,
    /// An object.
    Object,
}

impl VarType {
    /// The type of `value` (never [`VarType::Any`]).
    pub fn of(value: &Value) -> VarType {
        match value {
            Value::Null => VarType::Null,
            Value::Bool(_) => VarType::Boolean,
            Value::Number(_) => VarType::Number,
            Value::String(_) => VarType::String,
            Value::Array(_) => VarType::Array,
            Value::Object(_) => VarType::Object,
        }
    }

    /// Whether a variable of this type may hold `value`.
    pub fn admits(self, value: &Value) -> bool {
        self == VarType::Any || self == VarType::of(value)
    }

    /// Whether this is [`VarType::Any`] (left out of the JSON then).
    pub fn is_any(&self) -> bool {
        *self == VarType::Any
    }
}
