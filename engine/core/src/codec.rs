//! Between the engine's [`Body`] and storage's records: encoding, payload offload, decoding.
//!
//! An event body is JSON in the record's data. A body whose JSON is larger than
//! [`limits::INLINE_VALUE_BYTES_MAX`] goes whole into the content-addressed payload table; the
//! record keeps an empty data field and the payload reference. Decoding reverses that and checks
//! the payload's hash (storage does), so a damaged payload is an error, never wrong data.

use cairn_storage::{Batch, Bookmark, Event, NewEvent, PayloadRef, ThreadId};

use crate::error::Error;
use crate::event::Body;
use crate::limits;

mod tag_first;

/// A decoded event: where it is in the log, and what it says.
#[derive(Debug, Clone, PartialEq)]
pub struct Recorded {
    /// Its bookmark.
    pub bookmark: Bookmark,
    /// Its thread.
    pub thread: ThreadId,
    /// Its body.
    pub body: Body,
}

/// Adds `body` as an event of `thread` to `batch`, offloading a large body to the payload table.
///
/// # Errors
/// [`Error::Codec`] if the body does not serialise (a bug in a user update's `Serialize`).
pub fn push_event(
    batch: &mut Batch,
    thread: &ThreadId,
    body: &Body,
    at_ms: u64,
) -> Result<(), Error> {
    let json = serde_json::to_vec(body)?;
    let (data, payload) = if json.len() > limits::INLINE_VALUE_BYTES_MAX {
        let hash = *blake3::hash(&json).as_bytes();
        let r = PayloadRef { hash, len: json.len() as u64 };
        batch.payloads.push(json);
        (Vec::new(), Some(r))
    } else {
        (json, None)
    };
    batch.events.push(NewEvent {
        thread: thread.clone(),
        kind: body.kind(),
        node: body.node().map(str::to_owned),
        status: body.status(),
        summary: summary_of(body),
        payload,
        data,
        at_ms,
        correlation: correlation_of(body),
    });
    Ok(())
}

/// The correlation id the store indexes for `body` (`docs/format.md` §2.2): a message's, when
/// it is one the index can key (1 to `CORRELATION_ID_BYTES_MAX` bytes, no control characters;
/// another is kept in the body only, and a trace finds it by a session's scan).
fn correlation_of(body: &Body) -> Option<String> {
    let Body::Message { message, .. } = body else { return None };
    let id = message.correlation_id.as_ref()?;
    let fits = !id.is_empty()
        && id.len() <= cairn_storage::limits::CORRELATION_ID_BYTES_MAX
        && !id.chars().any(char::is_control);
    fits.then(|| id.clone())
}

/// Decodes a stored event's body as stored; an offloaded body must have been loaded into the
/// event's `data` first (`cairn::blocking::decode` reads it from a store).
///
/// # Errors
/// [`Error::Record`] if the data is not a body this engine understands, or the body is
/// offloaded and was not loaded.
pub fn decode_loaded(event: Event) -> Result<Recorded, Error> {
    let record_error = |detail: String| Error::record(&event.thread, event.bookmark.seq.0, detail);
    if crate::restore::offloaded(&event).is_some() {
        return Err(record_error("the event's offloaded body was not loaded".into()));
    }
    let mut bytes = event.data;
    let body = match tag_first::decode(&mut bytes) {
        Some(body) => body,
        None => {
            body_of(&bytes).map_err(|e| record_error(format!("event body does not decode: {e}")))?
        }
    };
    Ok(Recorded { bookmark: event.bookmark, thread: event.thread, body })
}

/// The general decoder of a body's JSON: any variant, its fields in any order (what
/// [`tag_first`] does not take).
fn body_of(bytes: &[u8]) -> serde_json::Result<Body> {
    serde_json::from_slice(bytes)
}

/// The summary of `body` as the log stores it (cut to the storage limit).
pub fn summary_of(body: &Body) -> String {
    truncate(body.summary(), cairn_storage::limits::SUMMARY_BYTES_MAX)
}

/// Cuts `s` to at most `max` bytes on a char boundary (summaries are for people; the full
/// content is in the body).
fn truncate(mut s: String, max: usize) -> String {
    if s.len() > max {
        let mut end = max.saturating_sub(3);
        while !s.is_char_boundary(end) {
            end -= 1;
        }
        s.truncate(end);
        s.push_str("...");
    }
    s
}

#[cfg(test)]
mod tests {
    use super::truncate;

    #[test]
    fn truncate_respects_char_boundaries() {
        assert_eq!(truncate("héllo wörld".into(), 6), "hé...");
        assert_eq!(truncate("short".into(), 10), "short");
    }
}
