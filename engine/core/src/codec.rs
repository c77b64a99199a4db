//! Between the engine's [`Body`] and storage's records: encoding, payload offload, decoding.
//!
//! An event body is binary in the record's data (`binary.rs`, `docs/format.md` §10); logs written
//! before format v6 hold JSON bodies, which read forever (`tag_first.rs` and serde's decoder).
//! JSON is for the edges (the endpoint, the CLI, bundles), which serialise the decoded [`Body`].
//! A body whose encoding is larger than [`limits::INLINE_VALUE_BYTES_MAX`] goes whole into the
//! content-addressed payload table; the record keeps an empty data field and the payload
//! reference. Decoding reverses that and checks the payload's hash (storage does), so a damaged
//! payload is an error, never wrong data.

use cairn_storage::{Batch, Bookmark, Event, NewEvent, PayloadRef, ThreadId};

use crate::error::Error;
use crate::event::Body;
use crate::limits;

mod binary;
mod tag_first;
mod value;
mod wire;

pub use binary::BINARY_V1;

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
/// [`Error::Codec`] if the body does not encode ([`encode_body`]).
pub fn push_event(
    batch: &mut Batch,
    thread: &ThreadId,
    body: &Body,
    at_ms: u64,
) -> Result<(), Error> {
    let bytes = encode_body(body)?;
    let (data, payload) = if bytes.len() > limits::INLINE_VALUE_BYTES_MAX {
        let hash = *blake3::hash(&bytes).as_bytes();
        let r = PayloadRef { hash, len: bytes.len() as u64 };
        batch.payloads.push(bytes);
        (Vec::new(), Some(r))
    } else {
        (bytes, None)
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
    let body = decode_body(&mut bytes).map_err(|e| {
        let detail = match e {
            Error::Codec(detail) => detail,
            e => e.to_string(),
        };
        record_error(format!("event body does not decode: {detail}"))
    })?;
    Ok(Recorded { bookmark: event.bookmark, thread: event.thread, body })
}

/// The bytes of `body` as the engine stores them: its binary form ([`BINARY_V1`] first).
///
/// # Errors
/// [`Error::Codec`] if a part does not serialise (a bug in a user update's `Serialize`) or a
/// JSON value in it nests deeper than any reader reads (128 arrays or objects).
///
/// # Examples
/// ```
/// use cairn_core::codec::{BINARY_V1, decode_body, encode_body};
/// use cairn_core::event::Body;
///
/// let body = Body::Recovered { action: "resumed".into() };
/// let mut bytes = encode_body(&body)?;
/// assert_eq!(bytes[0], BINARY_V1);
/// assert_eq!(decode_body(&mut bytes)?, body);
/// // A body an older build wrote, as JSON, reads the same.
/// let mut json = br#"{"type":"recovered","action":"resumed"}"#.to_vec();
/// assert_eq!(decode_body(&mut json)?, body);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub fn encode_body(body: &Body) -> Result<Vec<u8>, Error> {
    let mut out = Vec::with_capacity(64);
    binary::encode(body, &mut out)?;
    Ok(out)
}

/// Decodes a stored body, binary ([`BINARY_V1`] first) or JSON (what builds before format v6
/// wrote). `bytes` is scratch space for the JSON decoder and is left as it was.
///
/// # Errors
/// [`Error::Codec`] (saying why) if the bytes are neither.
pub fn decode_body(bytes: &mut [u8]) -> Result<Body, Error> {
    if bytes.first() == Some(&BINARY_V1) {
        return binary::decode(bytes).map_err(|m| Error::Codec(m.0.to_owned()));
    }
    match tag_first::decode(bytes) {
        Some(body) => Ok(body),
        // The general decoder of a body's JSON: any variant, its fields in any order.
        None => Ok(serde_json::from_slice(bytes)?),
    }
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
