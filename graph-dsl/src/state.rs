//! The user's state and its reducer.
//!
//! A node never mutates the state: it reads a snapshot and returns an update value. The engine
//! logs the update and applies it with [`State::apply`]. Because `apply` is a pure function of
//! (state, update), restoring a thread is "load a checkpoint, re-apply the logged updates", and it
//! gives back exactly the state the live run had.

use serde::{Deserialize, Serialize as SerializeDerive};
use serde::{Serialize, de::DeserializeOwned};

/// A workflow's state: a serialisable value changed only by applying [`State::Update`]s.
///
/// # Examples
/// ```
/// use cairn_dsl::State;
/// use serde::{Deserialize, Serialize};
///
/// #[derive(Clone, Default, Serialize, Deserialize)]
/// struct Notes { lines: Vec<String> }
///
/// #[derive(Clone, Serialize, Deserialize)]
/// enum NoteUpdate { Add(String), Clear }
///
/// impl State for Notes {
///     type Update = NoteUpdate;
///     fn apply(&mut self, update: NoteUpdate) {
///         match update {
///             NoteUpdate::Add(line) => self.lines.push(line),
///             NoteUpdate::Clear => self.lines.clear(),
///         }
///     }
/// }
///
/// let mut notes = Notes::default();
/// notes.apply(NoteUpdate::Add("hello".into()));
/// assert_eq!(notes.lines, ["hello"]);
/// ```
pub trait State: Clone + Serialize + DeserializeOwned + Send + Sync + 'static {
    /// A change to the state, small enough to log at every step.
    type Update: Clone + Serialize + DeserializeOwned + Send + Sync + 'static;

    /// Applies `update`. Must be pure and total: the same state and update always give the same
    /// result, and no update can fail (validate while building the update, not here), because
    /// restore re-applies logged updates and must reach the same state.
    fn apply(&mut self, update: Self::Update);
}

/// A ready-made state whose update replaces the whole value.
///
/// Serialises exactly as `T` does.
///
/// # Examples
/// ```
/// use cairn_dsl::{Replace, State};
/// let mut s = Replace(1_u32);
/// s.apply(7);
/// assert_eq!(s.0, 7);
/// ```
#[derive(
    Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, SerializeDerive, Deserialize,
)]
#[serde(transparent)]
pub struct Replace<T>(pub T);

impl<T> State for Replace<T>
where
    T: Clone + Serialize + DeserializeOwned + Send + Sync + 'static,
{
    type Update = T;

    fn apply(&mut self, update: T) {
        self.0 = update;
    }
}
