//! The correlation index (`docs/format.md` §2.2): which events carry which correlation id,
//! across every thread of a database.
//!
//! An event carries a correlation id when its [`NewEvent::correlation`](crate::NewEvent) is set
//! (a kind-7 record), or, for a `message` event written before format v2 (a kind-1 record), when
//! the engine's JSON body names one (`{"type":"message","message":{"correlation_id":..}}`):
//! [`of`] is the one place that decides, for the index's writer, its migration, prune and
//! verify alike.
//!
//! Invariant: every event that carries a correlation id has exactly one [`CorrelationEntry`],
//! keyed `(correlation, lsn)`, written in the commit of its event and removed in the commit that
//! prunes it; no entry exists without its event.

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::event::{Event, EventKind};
use crate::ids::{Lsn, PayloadRef, Seq, ThreadId};

/// One entry of the correlation index: the event at `lsn` (`thread`'s `seq`, written at `at_ms`)
/// carries `correlation`. Stored as a kind-8 record under the key `(correlation, lsn)`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CorrelationEntry {
    /// The correlation id.
    pub correlation: String,
    /// The event's lsn.
    pub lsn: u64,
    /// The event's thread.
    pub thread: ThreadId,
    /// The event's seq in its thread.
    pub seq: u64,
    /// The event's time (engine clock, ms).
    pub at_ms: u64,
}

impl CorrelationEntry {
    /// The entry of `event` for `correlation`.
    pub(crate) fn of_event(event: &Event, correlation: String) -> CorrelationEntry {
        CorrelationEntry {
            correlation,
            lsn: event.bookmark.lsn.0,
            thread: event.thread.clone(),
            seq: event.bookmark.seq.0,
            at_ms: event.bookmark.at_ms,
        }
    }

    /// Checks that `event` is the one this entry points at (thread, seq, lsn, and the
    /// correlation id when the record carries one).
    ///
    /// # Errors
    /// [`Error::Corrupted`] in table `correlations`, located at the entry's thread and seq.
    pub(crate) fn check_event(&self, event: &Event) -> Result<(), Error> {
        let mismatch = if event.thread != self.thread
            || event.bookmark.seq.0 != self.seq
            || event.bookmark.lsn.0 != self.lsn
        {
            Some(format!(
                "entry ({:?}, lsn {}) points at ({}, {}) but lsn {} holds the event of ({}, {})",
                self.correlation,
                self.lsn,
                self.thread,
                self.seq,
                event.bookmark.lsn,
                event.thread,
                event.bookmark.seq
            ))
        } else {
            match &event.correlation {
                Some(c) if *c != self.correlation => Some(format!(
                    "entry ({:?}, lsn {}) points at an event carrying {c:?}",
                    self.correlation, self.lsn
                )),
                // A legacy (kind-1) message event: its id is in its body, which verify checks.
                None if event.kind != EventKind::Message => Some(format!(
                    "entry ({:?}, lsn {}) points at a {} event that carries no correlation id",
                    self.correlation, self.lsn, event.kind
                )),
                _ => None,
            }
        };
        match mismatch {
            None => Ok(()),
            Some(detail) => Err(corrupted(Some(&self.thread), Some(Seq(self.seq)), detail)),
        }
    }
}

/// Which events of one correlation id a read returns; `None` fields do not filter.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CorrelationQuery {
    /// The correlation id.
    pub correlation: String,
    /// Only events of this thread.
    pub thread: Option<ThreadId>,
    /// Only events written at or after this time (engine clock, ms).
    pub from_ms: Option<u64>,
    /// Only events written at or before this time.
    pub to_ms: Option<u64>,
}

impl CorrelationQuery {
    /// Every event carrying `correlation`.
    ///
    /// # Examples
    /// ```
    /// let query = cairn_storage::CorrelationQuery::new("order-7");
    /// assert!(query.thread.is_none());
    /// ```
    pub fn new(correlation: impl Into<String>) -> CorrelationQuery {
        CorrelationQuery {
            correlation: correlation.into(),
            thread: None,
            from_ms: None,
            to_ms: None,
        }
    }

    /// Whether `entry` passes the thread and time filters (read from the entry, not its event).
    pub(crate) fn admits(&self, entry: &CorrelationEntry) -> bool {
        self.thread.as_ref().is_none_or(|t| *t == entry.thread)
            && self.from_ms.is_none_or(|f| entry.at_ms >= f)
            && self.to_ms.is_none_or(|t| entry.at_ms <= t)
    }

    /// The first lsn a read after `after` looks at.
    pub(crate) fn start(after: Lsn) -> u64 {
        after.0.saturating_add(1)
    }
}

/// The correlation id `event` carries: its record's, or for a `message` event without one (a
/// kind-1 record of format v1) the one its engine JSON body names. `payload` reads the body of
/// an event whose bytes are in a payload.
///
/// A legacy body that is not the engine's JSON, or whose payload cannot be read, names none
/// (logged): the event itself is reported by the reads and verify checks that meet it.
pub(crate) fn of(
    event: &Event,
    payload: impl FnOnce(&PayloadRef) -> Result<Vec<u8>, Error>,
) -> Option<String> {
    if event.correlation.is_some() {
        return event.correlation.clone();
    }
    if event.kind != EventKind::Message {
        return None;
    }
    let owned;
    let body = match (&event.payload, event.data.is_empty()) {
        (Some(r), true) => match payload(r) {
            Ok(bytes) => {
                owned = bytes;
                owned.as_slice()
            }
            Err(error) => {
                tracing::warn!(%error, lsn = event.bookmark.lsn.0, "a message body is unreadable");
                return None;
            }
        },
        _ => event.data.as_slice(),
    };
    legacy(body)
}

/// The `message.correlation_id` of an engine `message` body (`docs/format.md` §10).
fn legacy(body: &[u8]) -> Option<String> {
    #[derive(Deserialize)]
    struct Body {
        message: Option<Inner>,
    }
    #[derive(Deserialize)]
    struct Inner {
        correlation_id: Option<String>,
    }
    let body: Body = serde_json::from_slice(body).ok()?;
    body.message?.correlation_id.filter(|c| crate::event::check_correlation(c).is_ok())
}

/// An error of the correlation index, located.
pub(crate) fn corrupted(thread: Option<&ThreadId>, seq: Option<Seq>, detail: String) -> Error {
    Error::Corrupted {
        table: crate::codec::table::CORRELATIONS,
        thread: thread.cloned(),
        seq,
        detail,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::Bookmark;

    fn message(data: &str) -> Event {
        Event::sample(Bookmark { seq: Seq(2), lsn: Lsn(9), at_ms: 5 }, data.as_bytes().to_vec())
    }

    #[test]
    fn a_legacy_message_body_names_its_correlation_id_and_nothing_else_does() {
        let none = |_: &PayloadRef| -> Result<Vec<u8>, Error> { Err(Error::Closed) };
        let body = r#"{"type":"message","task":{"node":"n"},"message":{"role":"a",
            "content":"x","correlation_id":"c-1","to":null}}"#;
        assert_eq!(of(&message(body), none).as_deref(), Some("c-1"));
        let without = r#"{"type":"message","message":{"role":"a","correlation_id":null}}"#;
        assert_eq!(of(&message(without), none), None);
        assert_eq!(of(&message("not json"), none), None);
        let mut other = message(body);
        other.kind = EventKind::Progress;
        assert_eq!(of(&other, none), None, "only message bodies are read");
        let mut stored = message("not json");
        stored.correlation = Some("c-2".into());
        assert_eq!(of(&stored, none).as_deref(), Some("c-2"), "the record's id comes first");
    }

    #[test]
    fn an_entry_checks_the_event_it_points_at() {
        let mut event = message("{}");
        event.correlation = Some("c".into());
        let entry = CorrelationEntry::of_event(&event, "c".into());
        assert!(entry.check_event(&event).is_ok());
        let mut other = event.clone();
        other.correlation = Some("d".into());
        assert!(entry.check_event(&other).is_err());
        let mut moved = event.clone();
        moved.bookmark.seq = Seq(3);
        assert!(entry.check_event(&moved).is_err());
        let mut plain = event;
        plain.correlation = None;
        plain.kind = EventKind::Progress;
        assert!(entry.check_event(&plain).is_err());
    }
}
