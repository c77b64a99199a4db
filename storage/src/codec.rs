//! Record bodies: the only module that names postcard.
//!
//! Each record is the postcard encoding of its public type (fields in declaration order; enums as
//! their explicit discriminants; `Vec<u8>` fields as a varint length and raw bytes), wrapped in a
//! [`frame`](crate::frame). Changing a field's type or order changes the format and needs a new
//! format version (`docs/format.md`); the golden-bytes tests below pin v1.
//!
//! Decoders take untrusted bytes: every failure is [`Error::Corrupted`] naming the table (callers
//! add the thread and seq they read it under), never a panic, never a partial value.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::frame::{self, RecordKind};
use crate::limits::RECORD_BYTES_MAX;
use crate::{CheckpointId, CheckpointInfo, Error, Event, LockRecord, Seq, ThreadId, ThreadRecord};

/// Table names, shared by the codec's errors and the redb tables.
pub mod table {
    /// Format marker, version and counters.
    pub const META: &str = "cairn_meta";
    /// Events by (thread, seq).
    pub const EVENTS: &str = "events";
    /// (thread, seq) by lsn.
    pub const LSN_INDEX: &str = "lsn_index";
    /// Thread records by id.
    pub const THREADS: &str = "threads";
    /// Checkpoint metadata by id.
    pub const CHECKPOINTS: &str = "checkpoints";
    /// Checkpoint snapshots by id.
    pub const SNAPSHOTS: &str = "checkpoint_snapshots";
    /// Index (thread, covers seq, id).
    pub const CHECKPOINTS_BY_THREAD: &str = "checkpoints_by_thread";
    /// Index (workflow id, id).
    pub const CHECKPOINTS_BY_WORKFLOW: &str = "checkpoints_by_workflow";
    /// Index (tag, id).
    pub const CHECKPOINTS_BY_TAG: &str = "checkpoints_by_tag";
    /// Payload bytes by blake3 hash.
    pub const PAYLOADS: &str = "payloads";
    /// Lock records by name.
    pub const LOCKS: &str = "locks";
    /// Not a table: redb's own structures (page headers, B-tree pages, the allocator state),
    /// named in [`Error::Corrupted`](crate::Error::Corrupted) when redb panicked on them.
    pub const REDB: &str = "redb";
}

impl RecordKind {
    /// The table records of this kind live in.
    pub const fn table(self) -> &'static str {
        match self {
            RecordKind::Event => table::EVENTS,
            RecordKind::Thread => table::THREADS,
            RecordKind::Checkpoint => table::CHECKPOINTS,
            RecordKind::Snapshot => table::SNAPSHOTS,
            RecordKind::Lock => table::LOCKS,
        }
    }
}

/// Encodes an event record.
///
/// # Errors
///
/// [`Error::LimitExceeded`] past [`RECORD_BYTES_MAX`].
///
/// # Examples
///
/// ```
/// use cairn_storage::{codec, Bookmark, Event, EventKind, EventStatus, Lsn, Seq, ThreadId};
/// let event = Event {
///     bookmark: Bookmark { seq: Seq(1), lsn: Lsn(1), at_ms: 5 },
///     thread: ThreadId::new("t")?,
///     kind: EventKind::NodeStarted,
///     node: Some("fetch".into()),
///     status: EventStatus::Info,
///     summary: "started".into(),
///     payload: None,
///     data: b"{}".to_vec(),
/// };
/// let bytes = codec::encode_event(&event)?;
/// assert_eq!(codec::decode_event(&bytes)?, event);
/// # Ok::<(), cairn_storage::Error>(())
/// ```
pub fn encode_event(event: &Event) -> Result<Vec<u8>, Error> {
    encode(RecordKind::Event, event)
}

/// Decodes and validates an event record.
///
/// # Errors
///
/// [`Error::Corrupted`] for any frame, body or field failure.
pub fn decode_event(bytes: &[u8]) -> Result<Event, Error> {
    let event: Event = decode(RecordKind::Event, bytes)?;
    if event.bookmark.seq.0 == 0 || event.bookmark.lsn.0 == 0 {
        return Err(corrupted(RecordKind::Event, "seq and lsn start at 1".into()));
    }
    Ok(event)
}

/// Encodes a thread record.
///
/// # Errors
///
/// [`Error::LimitExceeded`] past [`RECORD_BYTES_MAX`].
pub fn encode_thread(record: &ThreadRecord) -> Result<Vec<u8>, Error> {
    encode(RecordKind::Thread, record)
}

/// Decodes and validates a thread record.
///
/// # Errors
///
/// [`Error::Corrupted`] for any frame, body or field failure.
pub fn decode_thread(bytes: &[u8]) -> Result<ThreadRecord, Error> {
    let record: ThreadRecord = decode(RecordKind::Thread, bytes)?;
    if record.first_seq.0 == 0 {
        return Err(corrupted(RecordKind::Thread, "first_seq is 0".into()));
    }
    let last_seq = record.last.map_or(0, |b| b.seq.0);
    if last_seq.checked_add(1).is_none_or(|next| next < record.first_seq.0) {
        return Err(corrupted(
            RecordKind::Thread,
            format!("last seq {last_seq} is before first_seq {}", record.first_seq),
        ));
    }
    Ok(record)
}

/// Encodes checkpoint metadata.
///
/// # Errors
///
/// [`Error::LimitExceeded`] past [`RECORD_BYTES_MAX`].
pub fn encode_checkpoint(info: &CheckpointInfo) -> Result<Vec<u8>, Error> {
    encode(RecordKind::Checkpoint, info)
}

/// Decodes and validates checkpoint metadata.
///
/// # Errors
///
/// [`Error::Corrupted`] for any frame, body or field failure.
pub fn decode_checkpoint(bytes: &[u8]) -> Result<CheckpointInfo, Error> {
    let info: CheckpointInfo = decode(RecordKind::Checkpoint, bytes)?;
    if info.covers.seq.0 == 0 || info.id.0 == 0 {
        return Err(corrupted(RecordKind::Checkpoint, "id and covered seq start at 1".into()));
    }
    Ok(info)
}

/// Encodes a checkpoint's snapshot bytes together with its id.
///
/// # Errors
///
/// None in practice (snapshots are bounded by [`crate::limits::SNAPSHOT_BYTES_MAX`] up front).
pub fn encode_snapshot(id: CheckpointId, snapshot: &[u8]) -> Result<Vec<u8>, Error> {
    encode(RecordKind::Snapshot, &SnapshotRef { id: id.0, snapshot })
}

/// Decodes a snapshot record into its checkpoint id and bytes.
///
/// # Errors
///
/// [`Error::Corrupted`] for any frame or body failure.
pub fn decode_snapshot(bytes: &[u8]) -> Result<(CheckpointId, Vec<u8>), Error> {
    let record: SnapshotOwned = decode(RecordKind::Snapshot, bytes)?;
    Ok((CheckpointId(record.id), record.snapshot))
}

/// Encodes a lock record.
///
/// # Errors
///
/// [`Error::LimitExceeded`] past [`RECORD_BYTES_MAX`].
pub fn encode_lock(lock: &LockRecord) -> Result<Vec<u8>, Error> {
    encode(RecordKind::Lock, lock)
}

/// Decodes a lock record.
///
/// # Errors
///
/// [`Error::Corrupted`] for any frame or body failure.
pub fn decode_lock(bytes: &[u8]) -> Result<LockRecord, Error> {
    decode(RecordKind::Lock, bytes)
}

/// Adds the thread and seq a record was read under to a [`Error::Corrupted`].
pub(crate) fn locate(error: Error, thread: Option<&ThreadId>, seq: Option<Seq>) -> Error {
    match error {
        Error::Corrupted { table, detail, thread: None, seq: None } => {
            Error::Corrupted { table, thread: thread.cloned(), seq, detail }
        }
        other => other,
    }
}

#[derive(Serialize)]
struct SnapshotRef<'a> {
    id: u64,
    #[serde(with = "crate::bytes_serde")]
    snapshot: &'a [u8],
}

#[derive(serde::Deserialize)]
struct SnapshotOwned {
    id: u64,
    #[serde(with = "crate::bytes_serde")]
    snapshot: Vec<u8>,
}

fn encode<T: Serialize>(kind: RecordKind, value: &T) -> Result<Vec<u8>, Error> {
    let out = frame::begin(kind, 64);
    let out = postcard::to_extend(value, out)
        .map_err(|e| Error::Invalid { detail: format!("cannot encode {kind} record: {e}") })?;
    let body_len = out.len() - frame::HEADER_LEN;
    if body_len > kind.body_max() {
        let limit =
            if kind == RecordKind::Snapshot { "SNAPSHOT_BYTES_MAX" } else { "RECORD_BYTES_MAX" };
        return Err(Error::LimitExceeded {
            limit,
            value: body_len as u64,
            max: kind.body_max() as u64,
        });
    }
    debug_assert!(kind == RecordKind::Snapshot || body_len <= RECORD_BYTES_MAX);
    Ok(frame::finish(out))
}

fn decode<T: DeserializeOwned>(kind: RecordKind, bytes: &[u8]) -> Result<T, Error> {
    let body = frame::decode(bytes, kind).map_err(|e| corrupted(kind, e.to_string()))?;
    let (value, rest) = postcard::take_from_bytes::<T>(body)
        .map_err(|e| corrupted(kind, format!("body does not decode: {e}")))?;
    if !rest.is_empty() {
        return Err(corrupted(kind, format!("{} trailing body bytes", rest.len())));
    }
    Ok(value)
}

fn corrupted(kind: RecordKind, detail: String) -> Error {
    Error::Corrupted { table: kind.table(), thread: None, seq: None, detail }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{Bookmark, EventKind, EventStatus, Lsn, ThreadRecord, WorkflowRef};

    fn event() -> Event {
        Event {
            bookmark: Bookmark { seq: Seq(1), lsn: Lsn(1), at_ms: 0 },
            thread: ThreadId::new("t").expect("id"),
            kind: EventKind::Message,
            node: None,
            status: EventStatus::Info,
            summary: String::new(),
            payload: None,
            data: Vec::new(),
        }
    }

    fn reframe(kind: RecordKind, body: &[u8]) -> Vec<u8> {
        frame::encode(kind, body)
    }

    #[test]
    fn trailing_body_bytes_are_refused() {
        let framed = encode_event(&event()).expect("encode");
        let mut body = frame::decode(&framed, RecordKind::Event).expect("frame").to_vec();
        body.push(0);
        let result = decode_event(&reframe(RecordKind::Event, &body));
        assert!(
            matches!(result, Err(Error::Corrupted { detail, .. }) if detail.contains("trailing"))
        );
    }

    #[test]
    fn field_rules_are_checked_after_the_crc() {
        let mut zero = event();
        zero.bookmark.seq = Seq(0);
        let framed = encode_event(&zero).expect("encode");
        assert!(matches!(decode_event(&framed), Err(Error::Corrupted { table: "events", .. })));

        let workflow = WorkflowRef { id: "w".into(), version: 1, fingerprint: "f".into() };
        let mut record = ThreadRecord::new(ThreadId::new("t").expect("id"), workflow, 0);
        record.first_seq = Seq(5);
        let framed = encode_thread(&record).expect("encode");
        assert!(matches!(decode_thread(&framed), Err(Error::Corrupted { table: "threads", .. })));
    }

    #[test]
    fn an_invalid_thread_id_or_kind_in_a_valid_frame_is_refused() {
        let framed = encode_event(&event()).expect("encode");
        let body = frame::decode(&framed, RecordKind::Event).expect("frame").to_vec();
        // Body: seq, lsn, at_ms (one byte each), then the thread id "t" (length 1, 't'), then
        // the kind (16 = message).
        assert_eq!(&body[3..6], &[1, b't', 16]);
        let mut control = body.clone();
        control[4] = b'\n';
        assert!(decode_event(&reframe(RecordKind::Event, &control)).is_err());
        let mut kind = body;
        kind[5] = 99;
        assert!(decode_event(&reframe(RecordKind::Event, &kind)).is_err());
    }

    #[test]
    fn a_record_of_another_kind_is_refused() {
        let framed = encode_event(&event()).expect("encode");
        assert!(matches!(decode_thread(&framed), Err(Error::Corrupted { table: "threads", .. })));
    }
}
