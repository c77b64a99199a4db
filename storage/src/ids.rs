//! Identifiers and positions: [`ThreadId`], [`Seq`], [`Lsn`], [`Bookmark`], [`PayloadRef`],
//! [`CheckpointId`].
//!
//! Invariants: a `ThreadId` is 1..=[`THREAD_ID_BYTES_MAX`] bytes without control characters,
//! checked at construction and on decode; `Seq` counts a thread's events from 1 with no gaps;
//! `Lsn` counts commits' events across the store from 1, strictly increasing.

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::limits::THREAD_ID_BYTES_MAX;

/// The id of a thread (one run of one workflow version on one input).
///
/// The text is shared: a clone (every record, event, map key and message that names the
/// thread holds one) counts a reference instead of copying the text. Compared as its text;
/// two clones of one id compare equal without reading it.
#[derive(Debug, Clone, Eq)]
pub struct ThreadId(Arc<str>);

/// Hashed as its text: equal ids hash alike, whether clones of one or made apart.
impl std::hash::Hash for ThreadId {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl PartialEq for ThreadId {
    fn eq(&self, other: &ThreadId) -> bool {
        Arc::ptr_eq(&self.0, &other.0) || self.0 == other.0
    }
}

impl Ord for ThreadId {
    fn cmp(&self, other: &ThreadId) -> std::cmp::Ordering {
        if Arc::ptr_eq(&self.0, &other.0) {
            return std::cmp::Ordering::Equal;
        }
        self.0.cmp(&other.0)
    }
}

impl PartialOrd for ThreadId {
    fn partial_cmp(&self, other: &ThreadId) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

/// Serialised as its text, borrowed: the same bytes as a `String` of it.
impl Serialize for ThreadId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
    }
}

/// Deserialised from a string, checked as [`ThreadId::new`] checks it; the text is copied once,
/// into the shared allocation (not through a `String` first).
impl<'de> Deserialize<'de> for ThreadId {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<ThreadId, D::Error> {
        struct Text;
        impl serde::de::Visitor<'_> for Text {
            type Value = ThreadId;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a thread id")
            }
            fn visit_str<E: serde::de::Error>(self, id: &str) -> Result<ThreadId, E> {
                ThreadId::checked(id).map_err(E::custom)
            }
        }
        deserializer.deserialize_str(Text)
    }
}

impl ThreadId {
    /// Validates and wraps an id.
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] past [`THREAD_ID_BYTES_MAX`] bytes; [`Error::Invalid`] when empty
    /// or containing a control character.
    ///
    /// # Examples
    ///
    /// ```
    /// use cairn_storage::ThreadId;
    /// let id = ThreadId::new("order-42")?;
    /// assert_eq!(id.as_str(), "order-42");
    /// assert!(ThreadId::new("").is_err());
    /// assert!(ThreadId::new("a\nb").is_err());
    /// # Ok::<(), cairn_storage::Error>(())
    /// ```
    pub fn new(id: impl Into<String>) -> Result<ThreadId, Error> {
        ThreadId::checked(&id.into())
    }

    /// Validates `id` and copies it into a new shared text.
    fn checked(id: &str) -> Result<ThreadId, Error> {
        crate::limits::check("THREAD_ID_BYTES_MAX", id.len(), THREAD_ID_BYTES_MAX)?;
        if id.is_empty() {
            return Err(Error::Invalid { detail: "thread id is empty".into() });
        }
        if id.chars().any(char::is_control) {
            return Err(Error::Invalid { detail: format!("thread id {id:?} has a control char") });
        }
        Ok(ThreadId(Arc::from(id)))
    }

    /// The id as text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ThreadId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl TryFrom<String> for ThreadId {
    type Error = Error;

    fn try_from(id: String) -> Result<ThreadId, Error> {
        ThreadId::new(id)
    }
}

impl From<ThreadId> for String {
    fn from(id: ThreadId) -> String {
        id.0.to_string()
    }
}

impl std::str::FromStr for ThreadId {
    type Err = Error;

    fn from_str(s: &str) -> Result<ThreadId, Error> {
        ThreadId::new(s)
    }
}

/// A position in one thread's event log: 1 for the first event, no gaps.
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
pub struct Seq(pub u64);

/// A position in the store-wide event order: 1 for the first event ever appended, strictly
/// increasing across commits and threads (gaps appear only where events were pruned).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
pub struct Lsn(pub u64);

/// The store-assigned id of a checkpoint; increasing, never reused (even after deletion).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Default, Serialize, Deserialize,
)]
pub struct CheckpointId(pub u64);

macro_rules! display_u64 {
    ($($t:ident),+) => {$(
        impl fmt::Display for $t {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                fmt::Display::fmt(&self.0, f)
            }
        }
    )+};
}
display_u64!(Seq, Lsn, CheckpointId);

/// Where an event sits: its thread-local `seq`, its store-wide `lsn`, and its time `at_ms` (ms
/// from the engine's clock). Reads "since" a bookmark exclude it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Bookmark {
    /// Position in the thread.
    pub seq: Seq,
    /// Position in the store.
    pub lsn: Lsn,
    /// Engine clock time of the event, in ms.
    pub at_ms: u64,
}

impl fmt::Display for Bookmark {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "seq {} lsn {} at {} ms", self.seq, self.lsn, self.at_ms)
    }
}

/// A reference to a content-addressed payload: the blake3 hash of its bytes and their length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub struct PayloadRef {
    /// blake3 of the payload bytes.
    pub hash: [u8; 32],
    /// Length of the payload in bytes.
    pub len: u64,
}

impl PayloadRef {
    /// The reference for `bytes`.
    ///
    /// # Examples
    ///
    /// ```
    /// use cairn_storage::PayloadRef;
    /// let r = PayloadRef::of(b"hello");
    /// assert_eq!(r.len, 5);
    /// assert_eq!(r.to_string().len(), 64);
    /// ```
    pub fn of(bytes: &[u8]) -> PayloadRef {
        PayloadRef { hash: *blake3::hash(bytes).as_bytes(), len: bytes.len() as u64 }
    }
}

impl fmt::Display for PayloadRef {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        for byte in self.hash {
            write!(f, "{byte:02x}")?;
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::ThreadId;

    #[test]
    fn a_thread_id_serialises_as_the_text_it_holds() {
        let id = ThreadId::new("order-42").expect("a valid id");
        let text = String::from("order-42");
        assert_eq!(serde_json::to_vec(&id).ok(), serde_json::to_vec(&text).ok());
        assert_eq!(postcard::to_allocvec(&id).ok(), postcard::to_allocvec(&text).ok());
        let back: ThreadId = serde_json::from_slice(b"\"order-42\"").expect("decodes");
        assert_eq!(back, id);
        let escaped: ThreadId = serde_json::from_slice(b"\"order-\\u0034\"").expect("decodes");
        assert_eq!(escaped.as_str(), "order-4");
        let back: ThreadId =
            postcard::from_bytes(&postcard::to_allocvec(&id).expect("encodes")).expect("decodes");
        assert_eq!(back, id);
    }

    /// A decoded id is checked as a constructed one is: empty, too long or with a control
    /// character is an error, not a thread id.
    #[test]
    fn a_decoded_thread_id_is_checked() {
        assert!(serde_json::from_slice::<ThreadId>(b"\"\"").is_err());
        assert!(serde_json::from_slice::<ThreadId>(b"\"a\\nb\"").is_err());
        let long = format!("\"{}\"", "x".repeat(crate::limits::THREAD_ID_BYTES_MAX + 1));
        assert!(serde_json::from_slice::<ThreadId>(long.as_bytes()).is_err());
        assert!(postcard::from_bytes::<ThreadId>(&postcard::to_allocvec("").expect("e")).is_err());
    }

    /// Ids compare, order and hash as their text, whether clones of one id or made apart.
    #[test]
    fn thread_ids_compare_as_their_text() {
        use std::hash::BuildHasher;
        let id = |s: &str| ThreadId::new(s).expect("an id");
        let (a, b, z) = (id("order-1"), id("order-1"), id("order-2"));
        let hasher = std::collections::hash_map::RandomState::new();
        assert_eq!(a, b);
        assert_eq!(a.cmp(&b), std::cmp::Ordering::Equal);
        assert_eq!(hasher.hash_one(&a), hasher.hash_one(&b));
        assert_eq!(a, a.clone());
        assert_eq!(a.cmp(&a.clone()), std::cmp::Ordering::Equal);
        assert_ne!(a, z);
        assert_eq!(a.cmp(&z), "order-1".cmp("order-2"));
        assert_eq!(z.cmp(&a.clone()), std::cmp::Ordering::Greater);
    }

    /// A clone shares the text instead of copying it (an id is cloned into every record, event
    /// and map key that names its thread: the writer's and the runner's most frequent copy).
    #[test]
    fn a_cloned_thread_id_shares_its_text() {
        let id = ThreadId::new("order-42").expect("a valid id");
        let clone = id.clone();
        assert!(std::ptr::eq(id.as_str(), clone.as_str()));
    }
}
