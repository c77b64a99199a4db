//! Identifiers and positions: [`ThreadId`], [`Seq`], [`Lsn`], [`Bookmark`], [`PayloadRef`],
//! [`CheckpointId`].
//!
//! Invariants: a `ThreadId` is 1..=[`THREAD_ID_BYTES_MAX`] bytes without control characters,
//! checked at construction and on decode; `Seq` counts a thread's events from 1 with no gaps;
//! `Lsn` counts commits' events across the store from 1, strictly increasing.

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::Error;
use crate::limits::THREAD_ID_BYTES_MAX;

/// The id of a thread (one run of one workflow version on one input).
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct ThreadId(String);

/// Serialised as its text, borrowed: the same bytes as the `String` it holds (serde's
/// `into = "String"` cloned the id for every record and event that names it).
impl Serialize for ThreadId {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(&self.0)
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
        let id = id.into();
        crate::limits::check("THREAD_ID_BYTES_MAX", id.len(), THREAD_ID_BYTES_MAX)?;
        if id.is_empty() {
            return Err(Error::Invalid { detail: "thread id is empty".into() });
        }
        if id.chars().any(char::is_control) {
            return Err(Error::Invalid { detail: format!("thread id {id:?} has a control char") });
        }
        Ok(ThreadId(id))
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
        id.0
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
    }
}
