//! A ready-made state of named, scoped variables (typed values with scopes, read-only flags and metadata).
//!
//! Each variable has a JSON value, a [`Scope`], a read-only flag, a declared [`VarType`] and
//! metadata. Since [`State::apply`] cannot fail, read-only and the type are enforced twice: the
//! update builders ([`Variables::set`], [`Variables::delete`], [`Variables::declare`],
//! [`Variables::define`]) refuse a write to a read-only variable, or of a value of another type,
//! with a [`VarError`], and [`State::apply`] ignores such a write if one reaches it anyway (built
//! against an older snapshot, say) and records it in [`Variables::rejected`], so the refusal is
//! visible in the state and is replayed identically on restore.

use std::collections::BTreeMap;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::limits::{REJECTED_WRITES_MAX, VAR_METADATA_ENTRIES_MAX};
use crate::{State, StateError, VarError, VarType};

/// Where a variable lives; it decides which variables a sub-workflow inherits and which a
/// [`VarUpdate::ClearScope`] removes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Scope {
    /// Shared with sub-workflows, both ways (see [`Variables::export_scope`]).
    Global,
    /// Belongs to this thread; inherited by sub-workflows as a copy.
    Thread,
    /// Local to one sub-workflow run; not inherited.
    Subgraph,
    /// Local to one loop; clear it with [`VarUpdate::ClearScope`] when the loop ends.
    Loop,
}

/// One variable.
///
/// # Examples
/// ```
/// use cairn_dsl::{Scope, State, VarType, Variable, Variables};
/// use serde_json::json;
///
/// let budget = Variable::new(json!(5000), Scope::Global)
///     .of_type(VarType::Number)
///     .meta("unit", "tokens");
/// let mut vars = Variables::new();
/// vars.apply(vars.define("budget", budget).unwrap());
/// assert!(vars.set("budget", "lots", Scope::Global).is_err(), "a string is not a number");
/// assert_eq!(vars.variable("budget").unwrap().metadata["unit"], json!("tokens"));
/// ```
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Variable {
    /// Its value.
    pub value: Value,
    /// Its scope.
    pub scope: Scope,
    /// Whether writes and deletes are refused.
    pub read_only: bool,
    /// Its declared type: a write of a value of another type is refused. [`VarType::Any`] for
    /// variables set without one (and those of states written before types existed).
    #[serde(default, rename = "type", skip_serializing_if = "VarType::is_any")]
    pub ty: VarType,
    /// What the value is (unit, description, source...), at most
    /// [`VAR_METADATA_ENTRIES_MAX`] entries. Kept when the value is set.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub metadata: BTreeMap<String, Value>,
}

impl Variable {
    /// A writable variable of any type without metadata.
    pub fn new(value: impl Into<Value>, scope: Scope) -> Self {
        Variable {
            value: value.into(),
            scope,
            read_only: false,
            ty: VarType::Any,
            metadata: BTreeMap::new(),
        }
    }

    /// This variable with a declared type.
    #[must_use]
    pub fn of_type(mut self, ty: VarType) -> Self {
        self.ty = ty;
        self
    }

    /// This variable, read-only.
    #[must_use]
    pub fn read_only(mut self) -> Self {
        self.read_only = true;
        self
    }

    /// This variable with one more metadata entry.
    #[must_use]
    pub fn meta(mut self, key: impl Into<String>, value: impl Into<Value>) -> Self {
        self.metadata.insert(key.into(), value.into());
        self
    }

    /// Why `name` may not be defined as this variable, if it may not.
    fn check(&self, name: &str) -> Result<(), VarError> {
        if !self.ty.admits(&self.value) {
            let found = VarType::of(&self.value);
            return Err(VarError::WrongType { name: name.to_owned(), expected: self.ty, found });
        }
        if self.metadata.len() > VAR_METADATA_ENTRIES_MAX {
            let entries = self.metadata.len();
            return Err(VarError::TooMuchMetadata { name: name.to_owned(), entries });
        }
        Ok(())
    }
}

/// A change to [`Variables`].
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum VarUpdate {
    /// Sets a variable's value and scope, creating it (writable) if missing. Refused if it is
    /// read-only.
    Set {
        /// Variable name.
        name: String,
        /// New value.
        value: Value,
        /// Scope to give it.
        scope: Scope,
    },
    /// Removes a variable; nothing if missing. Refused if it is read-only.
    Delete {
        /// Variable name.
        name: String,
    },
    /// Creates or redefines a variable with its read-only flag. Refused if an existing variable of
    /// that name is read-only.
    Declare {
        /// Variable name.
        name: String,
        /// Initial value.
        value: Value,
        /// Scope.
        scope: Scope,
        /// Whether later writes are refused.
        read_only: bool,
    },
    /// Creates or redefines a variable whole: value, scope, flag, type and metadata. Refused if
    /// an existing variable of that name is read-only, if the value is not of the type, or if
    /// the metadata is over [`VAR_METADATA_ENTRIES_MAX`].
    Define {
        /// Variable name.
        name: String,
        /// The variable.
        variable: Variable,
    },
    /// Removes every variable of the scope, read-only ones included: read-only protects a value
    /// during its scope's life, and this ends that life.
    ClearScope(Scope),
    /// Several updates applied in order (one node often changes several variables).
    Batch(Vec<VarUpdate>),
}

/// The kind of write that [`Variables`] refused.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum VarOp {
    /// A [`VarUpdate::Set`].
    Set,
    /// A [`VarUpdate::Delete`].
    Delete,
    /// A [`VarUpdate::Declare`].
    Declare,
    /// A [`VarUpdate::Define`].
    Define,
}

/// A write to a read-only variable that [`State::apply`] ignored.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RejectedWrite {
    /// The variable.
    pub name: String,
    /// What was attempted.
    pub op: VarOp,
}

/// Named variables with scopes and read-only flags; a ready-made [`State`].
///
/// # Examples
/// ```
/// use cairn_dsl::{Scope, State, Variables};
/// use serde_json::json;
///
/// let mut vars = Variables::new();
/// vars.apply(vars.declare("model", "gpt", Scope::Global, true).unwrap());
/// vars.apply(vars.set("topic", "rust", Scope::Thread).unwrap());
/// assert_eq!(vars.get("topic"), Some(&json!("rust")));
/// assert!(vars.set("model", "other", Scope::Global).is_err());
/// ```
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Variables {
    vars: BTreeMap<String, Variable>,
    rejected: Vec<RejectedWrite>,
    rejected_total: u64,
}

impl Variables {
    /// An empty set of variables.
    pub fn new() -> Self {
        Self::default()
    }

    /// The value of `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.vars.get(name).map(|v| &v.value)
    }

    /// The value of `name` as a `T`.
    ///
    /// # Errors
    /// [`StateError::Codec`] if the value is not a `T`.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Scope, State, Variables};
    /// let mut vars = Variables::new();
    /// vars.apply(vars.set("n", 3, Scope::Loop).unwrap());
    /// assert_eq!(vars.get_as::<u32>("n").unwrap(), Some(3));
    /// assert!(vars.get_as::<String>("n").is_err());
    /// ```
    pub fn get_as<T: DeserializeOwned>(&self, name: &str) -> Result<Option<T>, StateError> {
        self.get(name)
            .map(|v| T::deserialize(v).map_err(|e| StateError::codec("variable", e)))
            .transpose()
    }

    /// The variable `name` with its scope and flag.
    pub fn variable(&self, name: &str) -> Option<&Variable> {
        self.vars.get(name)
    }

    /// All variables, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&str, &Variable)> {
        self.vars.iter().map(|(k, v)| (k.as_str(), v))
    }

    /// Number of variables.
    pub fn len(&self) -> usize {
        self.vars.len()
    }

    /// Whether there are no variables.
    pub fn is_empty(&self) -> bool {
        self.vars.is_empty()
    }

    /// The most recent refused writes (at most [`REJECTED_WRITES_MAX`], oldest first).
    pub fn rejected(&self) -> &[RejectedWrite] {
        &self.rejected
    }

    /// How many writes were refused in total, including those no longer in [`Self::rejected`].
    pub fn rejected_total(&self) -> u64 {
        self.rejected_total
    }

    /// An update setting `name` to `value` in `scope` (an existing variable keeps its type and
    /// metadata).
    ///
    /// # Errors
    /// [`VarError::ReadOnly`] if `name` is read-only in this snapshot; [`VarError::WrongType`]
    /// if `value` is not of its declared type.
    pub fn set(
        &self,
        name: impl Into<String>,
        value: impl Into<Value>,
        scope: Scope,
    ) -> Result<VarUpdate, VarError> {
        let name = name.into();
        let value = value.into();
        self.check_writable(&name)?;
        if let Some(v) = self.vars.get(&name)
            && !v.ty.admits(&value)
        {
            let found = VarType::of(&value);
            return Err(VarError::WrongType { name, expected: v.ty, found });
        }
        Ok(VarUpdate::Set { name, value, scope })
    }

    /// An update defining `name` whole (creating or redefining it): value, scope, flag, type
    /// and metadata.
    ///
    /// # Errors
    /// [`VarError::ReadOnly`] if `name` exists and is read-only in this snapshot;
    /// [`VarError::WrongType`] if the value is not of the variable's type;
    /// [`VarError::TooMuchMetadata`] over [`VAR_METADATA_ENTRIES_MAX`] entries.
    pub fn define(
        &self,
        name: impl Into<String>,
        variable: Variable,
    ) -> Result<VarUpdate, VarError> {
        let name = name.into();
        self.check_writable(&name)?;
        variable.check(&name)?;
        Ok(VarUpdate::Define { name, variable })
    }

    /// An update declaring `name` (creating or redefining it) with a read-only flag.
    ///
    /// # Errors
    /// [`VarError::ReadOnly`] if `name` exists and is read-only in this snapshot.
    pub fn declare(
        &self,
        name: impl Into<String>,
        value: impl Into<Value>,
        scope: Scope,
        read_only: bool,
    ) -> Result<VarUpdate, VarError> {
        let name = name.into();
        self.check_writable(&name)?;
        Ok(VarUpdate::Declare { name, value: value.into(), scope, read_only })
    }

    /// An update deleting `name`.
    ///
    /// # Errors
    /// [`VarError::ReadOnly`] if `name` is read-only in this snapshot.
    pub fn delete(&self, name: impl Into<String>) -> Result<VarUpdate, VarError> {
        let name = name.into();
        self.check_writable(&name)?;
        Ok(VarUpdate::Delete { name })
    }

    /// The variables a sub-workflow starts with: the `Global` and `Thread` ones, with their
    /// flags, types and metadata.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Scope, State, Variables};
    /// let mut vars = Variables::new();
    /// vars.apply(vars.set("g", 1, Scope::Global).unwrap());
    /// vars.apply(vars.set("l", 2, Scope::Loop).unwrap());
    /// let child = vars.for_subgraph();
    /// assert!(child.get("g").is_some() && child.get("l").is_none());
    /// ```
    pub fn for_subgraph(&self) -> Self {
        Self {
            vars: self
                .vars
                .iter()
                .filter(|(_, v)| matches!(v.scope, Scope::Global | Scope::Thread))
                .map(|(k, v)| (k.clone(), v.clone()))
                .collect(),
            rejected: Vec::new(),
            rejected_total: 0,
        }
    }

    /// An update that copies every writable variable of `scope` (whole: value, type, metadata)
    /// into another `Variables`, e.g. a sub-workflow's globals back into its parent.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Scope, State, Variables};
    /// let mut child = Variables::new();
    /// child.apply(child.set("found", 3, Scope::Global).unwrap());
    /// let mut parent = Variables::new();
    /// parent.apply(child.export_scope(Scope::Global));
    /// assert_eq!(parent.get_as::<u32>("found").unwrap(), Some(3));
    /// ```
    pub fn export_scope(&self, scope: Scope) -> VarUpdate {
        VarUpdate::Batch(
            self.vars
                .iter()
                .filter(|(_, v)| v.scope == scope && !v.read_only)
                .map(|(k, v)| VarUpdate::Define { name: k.clone(), variable: v.clone() })
                .collect(),
        )
    }

    fn check_writable(&self, name: &str) -> Result<(), VarError> {
        match self.vars.get(name) {
            Some(v) if v.read_only => Err(VarError::ReadOnly { name: name.to_owned() }),
            _ => Ok(()),
        }
    }

    fn is_read_only(&self, name: &str) -> bool {
        self.vars.get(name).is_some_and(|v| v.read_only)
    }

    fn reject(&mut self, name: String, op: VarOp) {
        if self.rejected.len() >= REJECTED_WRITES_MAX {
            self.rejected.remove(0);
        }
        self.rejected.push(RejectedWrite { name, op });
        self.rejected_total = self.rejected_total.saturating_add(1);
    }
}

impl State for Variables {
    type Update = VarUpdate;

    fn apply(&mut self, update: VarUpdate) {
        // A batch is flattened with an explicit stack rather than recursion: updates come from
        // the log, and nesting depth there is not ours to bound.
        let mut stack = vec![update];
        while let Some(update) = stack.pop() {
            match update {
                VarUpdate::Set { name, value, scope } => {
                    let old = self.vars.get(&name);
                    if old.is_some_and(|v| v.read_only || !v.ty.admits(&value)) {
                        self.reject(name, VarOp::Set);
                    } else {
                        let (ty, metadata) =
                            old.map(|v| (v.ty, v.metadata.clone())).unwrap_or_default();
                        let read_only = false;
                        let variable = Variable { value, scope, read_only, ty, metadata };
                        self.vars.insert(name, variable);
                    }
                }
                VarUpdate::Delete { name } => {
                    if self.is_read_only(&name) {
                        self.reject(name, VarOp::Delete);
                    } else {
                        self.vars.remove(&name);
                    }
                }
                VarUpdate::Declare { name, value, scope, read_only } => {
                    if self.is_read_only(&name) {
                        self.reject(name, VarOp::Declare);
                    } else {
                        let variable = Variable { read_only, ..Variable::new(value, scope) };
                        self.vars.insert(name, variable);
                    }
                }
                VarUpdate::Define { name, variable } => {
                    if self.is_read_only(&name) || variable.check(&name).is_err() {
                        self.reject(name, VarOp::Define);
                    } else {
                        self.vars.insert(name, variable);
                    }
                }
                VarUpdate::ClearScope(scope) => self.vars.retain(|_, v| v.scope != scope),
                VarUpdate::Batch(updates) => stack.extend(updates.into_iter().rev()),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn declared() -> Variables {
        let mut v = Variables::new();
        v.apply(VarUpdate::Batch(vec![
            VarUpdate::Declare {
                name: "ro".into(),
                value: json!(1),
                scope: Scope::Global,
                read_only: true,
            },
            VarUpdate::Set { name: "rw".into(), value: json!(2), scope: Scope::Loop },
        ]));
        v
    }

    #[test]
    fn builders_refuse_read_only_writes() {
        let v = declared();
        let refused = VarError::ReadOnly { name: "ro".into() };
        assert_eq!(v.set("ro", 5, Scope::Global), Err(refused.clone()));
        assert_eq!(v.delete("ro"), Err(refused.clone()));
        assert_eq!(v.declare("ro", 5, Scope::Global, false), Err(refused));
        assert!(v.set("rw", 5, Scope::Loop).is_ok());
    }

    #[test]
    fn apply_ignores_and_records_read_only_writes() {
        let mut v = declared();
        v.apply(VarUpdate::Set { name: "ro".into(), value: json!(9), scope: Scope::Global });
        v.apply(VarUpdate::Delete { name: "ro".into() });
        assert_eq!(v.get("ro"), Some(&json!(1)));
        assert_eq!(
            v.rejected(),
            [
                RejectedWrite { name: "ro".into(), op: VarOp::Set },
                RejectedWrite { name: "ro".into(), op: VarOp::Delete }
            ]
        );
        assert_eq!(v.rejected_total(), 2);
    }

    #[test]
    fn rejected_list_is_bounded_but_counted() {
        let mut v = declared();
        let n = REJECTED_WRITES_MAX + 5;
        for _ in 0..n {
            v.apply(VarUpdate::Delete { name: "ro".into() });
        }
        assert_eq!(v.rejected().len(), REJECTED_WRITES_MAX);
        assert_eq!(v.rejected_total(), n as u64);
    }

    #[test]
    fn clear_scope_removes_read_only_of_that_scope_only() {
        let mut v = declared();
        v.apply(VarUpdate::ClearScope(Scope::Loop));
        assert!(v.get("rw").is_none());
        assert!(v.get("ro").is_some());
        v.apply(VarUpdate::ClearScope(Scope::Global));
        assert!(v.is_empty());
    }

    #[test]
    fn batch_applies_in_order() {
        let mut v = Variables::new();
        v.apply(VarUpdate::Batch(vec![
            VarUpdate::Set { name: "x".into(), value: json!(1), scope: Scope::Thread },
            VarUpdate::Batch(vec![VarUpdate::Set {
                name: "x".into(),
                value: json!(2),
                scope: Scope::Thread,
            }]),
            VarUpdate::Set { name: "x".into(), value: json!(3), scope: Scope::Thread },
        ]));
        assert_eq!(v.get("x"), Some(&json!(3)));
    }

    #[test]
    fn types_and_metadata_are_kept_by_set_and_enforced_twice() {
        let mut v = Variables::new();
        let n = Variable::new(json!(1), Scope::Thread).of_type(VarType::Number).meta("unit", "s");
        v.apply(v.define("n", n).unwrap());
        v.apply(v.set("n", 2, Scope::Thread).unwrap());
        let kept = v.variable("n").unwrap();
        assert_eq!(
            (kept.ty, &kept.value, &kept.metadata["unit"]),
            (VarType::Number, &json!(2), &json!("s"))
        );
        let wrong = VarError::WrongType {
            name: "n".into(),
            expected: VarType::Number,
            found: VarType::String,
        };
        assert_eq!(v.set("n", "two", Scope::Thread), Err(wrong));
        v.apply(VarUpdate::Set { name: "n".into(), value: json!("two"), scope: Scope::Thread });
        assert_eq!(v.get("n"), Some(&json!(2)));
        assert_eq!(v.rejected(), [RejectedWrite { name: "n".into(), op: VarOp::Set }]);
        let bad = Variable::new(json!("x"), Scope::Thread).of_type(VarType::Boolean);
        assert_eq!(v.define("b", bad.clone()).unwrap_err().code(), "wrong_type");
        v.apply(VarUpdate::Define { name: "b".into(), variable: bad });
        assert!(v.get("b").is_none());
        let mut big = Variable::new(json!(1), Scope::Thread);
        for i in 0..=VAR_METADATA_ENTRIES_MAX {
            big = big.meta(format!("k{i}"), i);
        }
        assert_eq!(v.define("big", big).unwrap_err().code(), "metadata");
        // A variable of a state written before types existed reads as Any, without metadata.
        let old: Variable =
            serde_json::from_value(json!({"value": 1, "scope": "Thread", "read_only": false}))
                .unwrap();
        assert_eq!((old.ty, old.metadata.len()), (VarType::Any, 0));
        assert_eq!(serde_json::to_value(&old).unwrap().get("type"), None);
    }

    #[test]
    fn round_trips_through_json_with_flags() {
        let v = declared();
        let back: Variables = serde_json::from_value(serde_json::to_value(&v).unwrap()).unwrap();
        assert_eq!(back, v);
        assert!(back.variable("ro").unwrap().read_only);
    }
}
