//! Record bodies: the only module that names postcard.
//!
//! Each record is the postcard encoding of its public type (fields in declaration order; enums as
//! their explicit discriminants; `Vec<u8>` fields as a varint length and raw bytes), wrapped in a
//! [`frame`]. Changing a field's type or order changes the format and needs a new
//! format version (`docs/format.md`); the golden-bytes tests below pin v1.
//!
//! Decoders take untrusted bytes: every failure is [`Error::Corrupted`] naming the table (callers
//! add the thread and seq they read it under), never a panic, never a partial value.

use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::checkpoint::CheckpointInfo;
use crate::correlation::CorrelationEntry;
use crate::error::Error;
use crate::event::Event;
use crate::frame::{self, RecordKind};
use crate::ids::{CheckpointId, Seq, ThreadId};
use crate::limits::RECORD_BYTES_MAX;
use crate::lock::LockRecord;
use crate::lsns::SeqChunk;
use crate::queue_wire;
use crate::signal::Signal;
use crate::thread::ThreadRecord;

/// Table names, shared by the codec's errors and the redb tables.
pub mod table {
    /// Format marker, version and counters.
    pub const META: &str = "cairn_meta";
    /// The global log: batch frames (runs of one thread's events) by their last lsn.
    pub const EVENTS: &str = "events";
    /// Each thread's seq -> lsn chunks, by (thread, first seq).
    pub const SEQ_INDEX: &str = "seq_index";
    /// Thread records by id.
    pub const THREADS: &str = "threads";
    /// Checkpoint metadata by id.
    pub const CHECKPOINTS: &str = "checkpoints";
    /// Checkpoint snapshots by id.
    pub const SNAPSHOTS: &str = "checkpoint_snapshots";
    /// Every secondary index of a redb file, as key-prefixed entries (format v6): checkpoints by
    /// thread, by workflow and by tag, threads by status and by label.
    pub const INDEX: &str = "index";
    /// Payload bytes by blake3 hash.
    pub const PAYLOADS: &str = "payloads";
    /// Lock records by name.
    pub const LOCKS: &str = "locks";
    /// The correlation index: entries by (correlation id, lsn) (format v2).
    pub const CORRELATIONS: &str = "correlations";
    /// The signal inbox: signals by (thread, n) (format v3).
    pub const SIGNALS: &str = "signals";
    /// Named queues: limits and counts by name (format v4).
    pub const QUEUES: &str = "queues";
    /// Queue members by thread (format v4).
    pub const QUEUE_MEMBERS: &str = "queue_members";
    /// Index (queue, key, rank, thread) of the waiting members (format v4).
    pub const QUEUE_WAITING: &str = "queue_waiting";
    /// Index (queue, dedup key, thread) of the members with a dedup key (format v4).
    pub const QUEUE_DEDUP: &str = "queue_dedup";
    /// Index (label key, label value, thread) of every thread's labels (PostgreSQL's
    /// `cairn_thread_labels`; a redb file keeps these in [`INDEX`] since format v6).
    pub const THREADS_BY_LABEL: &str = "threads_by_label";
    /// Index (status, thread) of every thread's status (PostgreSQL's; a redb file keeps these
    /// in [`INDEX`] since format v6).
    pub const THREADS_BY_STATUS: &str = "threads_by_status";
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
            RecordKind::SeqChunk => table::SEQ_INDEX,
            RecordKind::CorrelatedEvent => table::EVENTS,
            RecordKind::CorrelationEntry => table::CORRELATIONS,
            RecordKind::Signal => table::SIGNALS,
            RecordKind::Queue => table::QUEUES,
            RecordKind::QueueMember => table::QUEUE_MEMBERS,
            RecordKind::EventBatch => table::EVENTS,
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
///     correlation: None,
/// };
/// let bytes = codec::encode_event(&event)?;
/// assert_eq!(codec::decode_event(&bytes)?, event);
/// # Ok::<(), cairn_storage::Error>(())
/// ```
pub fn encode_event(event: &Event) -> Result<Vec<u8>, Error> {
    encode_view(&crate::event::EventView::of_event(event), event.correlation.as_ref())
}

/// The record of `new` placed at `bookmark`: the bytes [`encode_event`] makes of the event
/// it becomes, without building that event (a writer that keeps the batch, to plan it again,
/// encodes its events from it: `pg/write.rs`).
pub(crate) fn encode_new_event(
    new: &crate::event::NewEvent,
    bookmark: crate::ids::Bookmark,
) -> Result<Vec<u8>, Error> {
    encode_view(&crate::event::EventView::of(new, bookmark), new.correlation.as_ref())
}

/// An event's record: kind 1, or kind 7 with its correlation id after the fields.
fn encode_view(
    view: &crate::event::EventView<'_>,
    correlation: Option<&String>,
) -> Result<Vec<u8>, Error> {
    // The variable-length fields plus room for the fixed ones: one allocation, no regrowth.
    let hint = 64
        + view.thread.as_str().len()
        + view.node.map_or(0, str::len)
        + view.summary.len()
        + view.data.len();
    match correlation {
        None => encode(RecordKind::Event, view, hint),
        Some(correlation) => {
            encode(RecordKind::CorrelatedEvent, &(view, correlation), hint + correlation.len())
        }
    }
}

/// Decodes and validates an event record.
///
/// # Errors
///
/// [`Error::Corrupted`] for any frame, body or field failure.
pub fn decode_event(bytes: &[u8]) -> Result<Event, Error> {
    // The events table holds kind 1, or kind 7 for an event with a correlation id; the kind byte
    // only picks the decoder: the frame check (CRC included) is the decoder's.
    let event = if bytes.get(frame::KIND_OFFSET) == Some(&RecordKind::CorrelatedEvent.to_repr()) {
        let (mut event, correlation): (Event, String) = decode(RecordKind::CorrelatedEvent, bytes)?;
        if let Err(e) = crate::event::check_correlation(&correlation) {
            return Err(corrupted(RecordKind::CorrelatedEvent, e.to_string()));
        }
        event.correlation = Some(correlation);
        event
    } else {
        decode::<Event>(RecordKind::Event, bytes)?
    };
    if event.bookmark.seq.0 == 0 || event.bookmark.lsn.0 == 0 {
        return Err(corrupted(RecordKind::Event, "seq and lsn start at 1".into()));
    }
    Ok(event)
}

/// Encodes an entry of the correlation index.
///
/// # Errors
///
/// [`Error::LimitExceeded`] past [`RECORD_BYTES_MAX`] (never for entries the store writes).
pub fn encode_correlation(entry: &CorrelationEntry) -> Result<Vec<u8>, Error> {
    encode(RecordKind::CorrelationEntry, entry, 48 + entry.correlation.len())
}

/// Decodes and validates an entry of the correlation index.
///
/// # Errors
///
/// [`Error::Corrupted`] for any frame, body or field failure.
pub fn decode_correlation(bytes: &[u8]) -> Result<CorrelationEntry, Error> {
    let entry: CorrelationEntry = decode(RecordKind::CorrelationEntry, bytes)?;
    if entry.seq == 0 || entry.lsn == 0 {
        return Err(corrupted(RecordKind::CorrelationEntry, "seq and lsn start at 1".into()));
    }
    if let Err(e) = crate::event::check_correlation(&entry.correlation) {
        return Err(corrupted(RecordKind::CorrelationEntry, e.to_string()));
    }
    Ok(entry)
}

/// Encodes a signal of a thread's inbox.
///
/// # Errors
///
/// [`Error::LimitExceeded`] past [`RECORD_BYTES_MAX`] (never for signals within
/// [`crate::limits::SIGNAL_BYTES_MAX`]).
///
/// # Examples
///
/// ```
/// use cairn_storage::{codec, Signal, ThreadId};
/// let signal = Signal {
///     thread: ThreadId::new("order-7")?,
///     n: 1,
///     name: "payment".into(),
///     at_ms: 5,
///     data: br#"{"amount":30}"#.to_vec(),
/// };
/// let bytes = codec::encode_signal(&signal)?;
/// assert_eq!(codec::decode_signal(&bytes)?, signal);
/// # Ok::<(), cairn_storage::Error>(())
/// ```
pub fn encode_signal(signal: &Signal) -> Result<Vec<u8>, Error> {
    encode(RecordKind::Signal, signal, 48 + signal.name.len() + signal.data.len())
}

/// Decodes and validates a signal of a thread's inbox.
///
/// # Errors
///
/// [`Error::Corrupted`] for any frame, body or field failure.
pub fn decode_signal(bytes: &[u8]) -> Result<Signal, Error> {
    let signal: Signal = decode(RecordKind::Signal, bytes)?;
    if signal.n == 0 {
        return Err(corrupted(RecordKind::Signal, "signal numbers start at 1".into()));
    }
    if let Err(e) = crate::signal::check_name(&signal.name) {
        return Err(corrupted(RecordKind::Signal, e.to_string()));
    }
    Ok(signal)
}

/// Encodes a thread record (with an empty seq-index tail: see [`crate::lsns`]).
///
/// # Errors
///
/// [`Error::LimitExceeded`] past [`RECORD_BYTES_MAX`].
pub fn encode_thread(record: &ThreadRecord) -> Result<Vec<u8>, Error> {
    encode_stored_thread(record, &[])
}

/// Decodes and validates a thread record (its seq-index tail is checked and dropped).
///
/// # Errors
///
/// [`Error::Corrupted`] for any frame, body or field failure.
pub fn decode_thread(bytes: &[u8]) -> Result<ThreadRecord, Error> {
    decode_stored_thread(bytes).map(|stored| stored.record)
}

/// A thread record as stored: the record, then the lsns of its newest events that are not yet in
/// a [`SeqChunk`] (fewer than [`SEQ_CHUNK_LEN`](crate::lsns::SEQ_CHUNK_LEN) after every commit).
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct StoredThread {
    pub(crate) record: ThreadRecord,
    pub(crate) tail: Vec<u64>,
}

impl Clone for StoredThread {
    /// A copy whose tail has room for a full chunk: a batch plans on a copy and appends its
    /// events' lsns to it, which would otherwise grow a tail copied to its length.
    fn clone(&self) -> Self {
        let mut tail = Vec::with_capacity(crate::lsns::SEQ_CHUNK_LEN.max(self.tail.len()));
        tail.extend_from_slice(&self.tail);
        StoredThread { record: self.record.clone(), tail }
    }
}

impl StoredThread {
    /// The seq of the tail's first lsn (one past the last seq when the tail is empty).
    pub(crate) fn tail_start(&self) -> u64 {
        let last = self.record.last.map_or(0, |b| b.seq.0);
        // Decoding checked tail.len() <= last + 1 - first_seq, so this cannot underflow.
        (last + 1).saturating_sub(self.tail.len() as u64)
    }
}

#[derive(Serialize)]
struct StoredThreadRef<'a> {
    record: &'a ThreadRecord,
    #[serde(with = "crate::lsns::deltas")]
    tail: &'a [u64],
}

#[derive(serde::Deserialize)]
struct StoredThreadOwned {
    record: ThreadRecord,
    #[serde(with = "crate::lsns::deltas")]
    tail: Vec<u64>,
}

/// Encodes a thread record with its seq-index tail.
pub(crate) fn encode_stored_thread(record: &ThreadRecord, tail: &[u64]) -> Result<Vec<u8>, Error> {
    let hint = 128 + record.summary.len() + 10 * tail.len();
    encode(RecordKind::Thread, &StoredThreadRef { record, tail }, hint)
}

/// Decodes a stored thread record and checks its fields and its tail against each other.
pub(crate) fn decode_stored_thread(bytes: &[u8]) -> Result<StoredThread, Error> {
    let StoredThreadOwned { record, tail } = decode(RecordKind::Thread, bytes)?;
    if record.first_seq.0 == 0 {
        return Err(corrupted(RecordKind::Thread, "first_seq is 0".into()));
    }
    let last_seq = record.last.map_or(0, |b| b.seq.0);
    let Some(after_last) = last_seq.checked_add(1).filter(|next| *next >= record.first_seq.0)
    else {
        return Err(corrupted(
            RecordKind::Thread,
            format!("last seq {last_seq} is before first_seq {}", record.first_seq),
        ));
    };
    if tail.len() as u64 > after_last - record.first_seq.0 {
        return Err(corrupted(
            RecordKind::Thread,
            format!(
                "a tail of {} lsns is longer than seqs {}..={last_seq}",
                tail.len(),
                record.first_seq
            ),
        ));
    }
    if let (Some(&lsn), Some(last)) = (tail.last(), record.last)
        && lsn != last.lsn.0
    {
        return Err(corrupted(
            RecordKind::Thread,
            format!("the tail ends at lsn {lsn}, the last bookmark has lsn {}", last.lsn),
        ));
    }
    Ok(StoredThread { record, tail })
}

/// Encodes a chunk of a thread's seq index.
///
/// # Errors
///
/// [`Error::LimitExceeded`] past [`RECORD_BYTES_MAX`] (never for chunks the store writes).
pub fn encode_seq_chunk(chunk: &SeqChunk) -> Result<Vec<u8>, Error> {
    encode(RecordKind::SeqChunk, chunk, 32 + 10 * chunk.lsns.len())
}

/// Decodes and validates a chunk of a thread's seq index.
///
/// # Errors
///
/// [`Error::Corrupted`] for any frame, body or field failure (an empty chunk, seq 0, lsns that
/// do not strictly increase).
pub fn decode_seq_chunk(bytes: &[u8]) -> Result<SeqChunk, Error> {
    let chunk: SeqChunk = decode(RecordKind::SeqChunk, bytes)?;
    if chunk.first_seq == 0 || chunk.lsns.is_empty() {
        return Err(corrupted(RecordKind::SeqChunk, "an empty chunk or seq 0".into()));
    }
    if chunk.first_seq.checked_add(chunk.lsns.len() as u64).is_none() {
        return Err(corrupted(RecordKind::SeqChunk, "the chunk's seqs overflow".into()));
    }
    Ok(chunk)
}

/// Encodes checkpoint metadata.
///
/// # Errors
///
/// [`Error::LimitExceeded`] past [`RECORD_BYTES_MAX`].
pub fn encode_checkpoint(info: &CheckpointInfo) -> Result<Vec<u8>, Error> {
    encode(RecordKind::Checkpoint, info, 256)
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
    encode(RecordKind::Snapshot, &SnapshotRef { id: id.0, snapshot }, snapshot.len() + 32)
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
    encode(RecordKind::Lock, lock, 128)
}

/// Decodes a lock record.
///
/// # Errors
///
/// [`Error::Corrupted`] for any frame or body failure.
pub fn decode_lock(bytes: &[u8]) -> Result<LockRecord, Error> {
    decode(RecordKind::Lock, bytes)
}

/// Encodes a queue's limits and counts.
///
/// # Errors
///
/// [`Error::LimitExceeded`] past [`RECORD_BYTES_MAX`].
pub fn encode_queue(queue: &crate::queue::QueueState) -> Result<Vec<u8>, Error> {
    let hint = 64 + queue.name.len() + 24 * queue.keys.len();
    match queue_wire::split_queue(queue) {
        (v4, None, _) => encode(RecordKind::Queue, &v4, hint),
        (v4, Some(trailer), None) => {
            encode(RecordKind::Queue, &(v4, queue_wire::TRAILER_V1, trailer), hint * 2)
        }
        (v4, Some(trailer), Some(fair)) => {
            let body = (v4, queue_wire::TRAILER_V1, trailer, queue_wire::FAIRNESS_V1, fair);
            encode(RecordKind::Queue, &body, hint * 3)
        }
    }
}

/// Decodes a queue's limits and counts.
///
/// # Errors
///
/// [`Error::Corrupted`] for any frame or body failure.
pub fn decode_queue(bytes: &[u8]) -> Result<crate::queue::QueueState, Error> {
    let kind = RecordKind::Queue;
    let (v4, trailer, rest) = decode_trailed_rest(kind, bytes)?;
    let fair = match rest.split_first() {
        None => None,
        Some((&queue_wire::FAIRNESS_V1, rest)) => {
            let (fair, rest) = postcard::take_from_bytes(rest)
                .map_err(|e| corrupted(kind, format!("fairness part does not decode: {e}")))?;
            if !rest.is_empty() {
                return Err(corrupted(kind, format!("{} trailing body bytes", rest.len())));
            }
            Some(fair)
        }
        Some((tag, _)) => return Err(corrupted(kind, format!("unknown trailer part tag {tag}"))),
    };
    let q = queue_wire::join_queue(v4, trailer, fair);
    match queue_wire::check_queue(&q) {
        Some(detail) => Err(corrupted(RecordKind::Queue, detail)),
        None => Ok(q),
    }
}

/// Encodes a thread's place in a queue.
///
/// # Errors
///
/// [`Error::LimitExceeded`] past [`RECORD_BYTES_MAX`].
pub fn encode_queue_member(member: &crate::queue::QueueMember) -> Result<Vec<u8>, Error> {
    let hint = 64 + member.queue.len() + member.key.len();
    match queue_wire::split_member(member) {
        (v4, None) => encode(RecordKind::QueueMember, &v4, hint),
        (v4, Some(trailer)) => {
            let hint = hint + 32 * member.batch_of.len();
            encode(RecordKind::QueueMember, &(v4, queue_wire::TRAILER_V1, trailer), hint)
        }
    }
}

/// Decodes a thread's place in a queue.
///
/// # Errors
///
/// [`Error::Corrupted`] for any frame or body failure.
pub fn decode_queue_member(bytes: &[u8]) -> Result<crate::queue::QueueMember, Error> {
    let (v4, trailer) = decode_trailed(RecordKind::QueueMember, bytes)?;
    Ok(queue_wire::join_member(v4, trailer))
}

/// Decodes a v4 body and its optional trailer (`queue_wire.rs`): the trailer's defaults when
/// the body ends with the v4 part.
fn decode_trailed<V: DeserializeOwned, T: DeserializeOwned + Default>(
    kind: RecordKind,
    bytes: &[u8],
) -> Result<(V, T), Error> {
    let (v4, trailer, rest) = decode_trailed_rest(kind, bytes)?;
    if !rest.is_empty() {
        return Err(corrupted(kind, format!("{} trailing body bytes", rest.len())));
    }
    Ok((v4, trailer))
}

/// [`decode_trailed`], answering the bytes after the trailer (empty without one) for the
/// caller to read or refuse.
fn decode_trailed_rest<V: DeserializeOwned, T: DeserializeOwned + Default>(
    kind: RecordKind,
    bytes: &[u8],
) -> Result<(V, T, &[u8]), Error> {
    let body = frame::decode(bytes, kind).map_err(|e| corrupted(kind, e.to_string()))?;
    let (v4, rest) = postcard::take_from_bytes::<V>(body)
        .map_err(|e| corrupted(kind, format!("body does not decode: {e}")))?;
    let Some((&tag, rest)) = rest.split_first() else { return Ok((v4, T::default(), rest)) };
    if tag != queue_wire::TRAILER_V1 {
        return Err(corrupted(kind, format!("unknown trailer tag {tag}")));
    }
    let (trailer, rest) = postcard::take_from_bytes::<T>(rest)
        .map_err(|e| corrupted(kind, format!("trailer does not decode: {e}")))?;
    Ok((v4, trailer, rest))
}

/// Checks that a record agrees with the key it was read under: `mismatch`, when it does not,
/// says how, as a [`Error::Corrupted`] in `table` (of `thread`, at `seq`).
pub(crate) fn key_agrees(
    mismatch: Option<String>,
    table: &'static str,
    thread: Option<&ThreadId>,
    seq: Option<Seq>,
) -> Result<(), Error> {
    match mismatch {
        None => Ok(()),
        Some(detail) => Err(Error::Corrupted { table, thread: thread.cloned(), seq, detail }),
    }
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

/// Encodes `value` as a frame of `kind`; `hint` is the expected body size (a wrong guess costs a
/// reallocation, nothing else).
pub(crate) fn encode<T: Serialize>(
    kind: RecordKind,
    value: &T,
    hint: usize,
) -> Result<Vec<u8>, Error> {
    let out = frame::begin(kind, hint.min(kind.body_max()));
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

pub(crate) fn decode<T: DeserializeOwned>(kind: RecordKind, bytes: &[u8]) -> Result<T, Error> {
    let body = frame::decode(bytes, kind).map_err(|e| corrupted(kind, e.to_string()))?;
    let (value, rest) = postcard::take_from_bytes::<T>(body)
        .map_err(|e| corrupted(kind, format!("body does not decode: {e}")))?;
    if !rest.is_empty() {
        return Err(corrupted(kind, format!("{} trailing body bytes", rest.len())));
    }
    Ok(value)
}

pub(crate) fn corrupted(kind: RecordKind, detail: String) -> Error {
    Error::corrupted(kind.table(), detail)
}

/// Encodes `events`, a run of one thread (same thread, seq and lsn each one above the last), as
/// one batch frame.
///
/// # Errors
///
/// [`Error::Invalid`] for an empty slice or one that is not a run; [`Error::LimitExceeded`] past
/// [`RECORD_BYTES_MAX`].
///
/// # Examples
///
/// ```
/// use cairn_storage::{codec, Bookmark, Event, EventKind, EventStatus, Lsn, Seq, ThreadId};
/// let event = |seq: u64| Event {
///     bookmark: Bookmark { seq: Seq(seq), lsn: Lsn(seq + 10), at_ms: 5 },
///     thread: ThreadId::new("t").expect("id"),
///     kind: EventKind::Message,
///     node: None,
///     status: EventStatus::Info,
///     summary: String::new(),
///     payload: None,
///     data: b"{}".to_vec(),
///     correlation: None,
/// };
/// let run = [event(1), event(2)];
/// let framed = codec::encode_event_batch(&run)?;
/// assert_eq!(codec::decode_event_batch(&framed)?, run);
/// assert!(codec::encode_event_batch(&[event(1), event(3)]).is_err(), "not a run");
/// # Ok::<(), cairn_storage::Error>(())
/// ```
pub fn encode_event_batch(events: &[Event]) -> Result<Vec<u8>, Error> {
    let (body, hint) = crate::event_batch::body_of(events)?;
    encode(RecordKind::EventBatch, &body, hint)
}

/// Decodes and validates a batch frame into its events, in order.
///
/// # Errors
///
/// [`Error::Corrupted`] (table `events`) for any frame, body or field failure: no events, seq or
/// lsn 0, seqs or lsns past `u64::MAX`, an invalid correlation id.
pub fn decode_event_batch(bytes: &[u8]) -> Result<Vec<Event>, Error> {
    let batch = decode(RecordKind::EventBatch, bytes)?;
    crate::event_batch::events_of(batch).map_err(|detail| corrupted(RecordKind::EventBatch, detail))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ids::{Bookmark, Lsn};
    use crate::thread::{ThreadRecord, WorkflowRef};

    fn event() -> Event {
        Event::sample(Bookmark { seq: Seq(1), lsn: Lsn(1), at_ms: 0 }, Vec::new())
    }

    /// A new event encoded in place is byte for byte the event it becomes, encoded (and as the
    /// derived `Serialize` of `Event` encodes it): with and without a node, a payload, data and
    /// a correlation id.
    #[test]
    fn a_new_event_encodes_in_place_as_the_event_it_becomes() {
        let payload = crate::ids::PayloadRef::of(b"body");
        for (node, payload, data, correlation) in [
            (None, None, Vec::new(), None),
            (Some("fetch"), None, b"{\"n\":1}".to_vec(), None),
            (Some("fetch"), Some(payload), Vec::new(), Some("order-7")),
            (None, None, vec![0u8; 300], Some("c")),
        ] {
            let new = crate::event::NewEvent {
                thread: ThreadId::new("t-1").expect("id"),
                kind: crate::event::EventKind::NodeCompleted,
                node: node.map(str::to_owned),
                status: crate::event::EventStatus::Success,
                summary: "done".into(),
                payload,
                data,
                at_ms: 1_700_000_000_123,
                correlation: correlation.map(str::to_owned),
            };
            let bookmark = Bookmark { seq: Seq(7), lsn: Lsn(300), at_ms: new.at_ms };
            let event = Event::from_new(new.clone(), bookmark.seq, bookmark.lsn);
            let in_place = encode_new_event(&new, bookmark).expect("encode in place");
            assert_eq!(in_place, encode_event(&event).expect("encode"), "{new:?}");
            // The view serializes as `Event`'s own derive does, field for field.
            let derived = match &event.correlation {
                None => encode(RecordKind::Event, &event, 0),
                Some(c) => encode(RecordKind::CorrelatedEvent, &(&event, c), 0),
            };
            assert_eq!(in_place, derived.expect("encode the event itself"), "{new:?}");
            assert_eq!(decode_event(&in_place).expect("decode"), event);
        }
    }

    #[test]
    fn an_event_with_a_correlation_id_is_kind_7_and_one_without_is_kind_1_as_in_v1() {
        let plain = encode_event(&event()).expect("encode");
        assert_eq!(plain[frame::KIND_OFFSET], 1);
        let mut correlated = event();
        correlated.correlation = Some("c-1".into());
        let framed = encode_event(&correlated).expect("encode");
        assert_eq!(framed[frame::KIND_OFFSET], 7);
        // The kind-1 body, then the id ("c-1": length 3, then its bytes).
        let body = frame::decode(&framed, RecordKind::CorrelatedEvent).expect("frame");
        let plain_body = frame::decode(&plain, RecordKind::Event).expect("frame");
        assert_eq!(&body[..plain_body.len()], plain_body);
        assert_eq!(&body[plain_body.len()..], &[3, b'c', b'-', b'1']);
        assert_eq!(decode_event(&framed).expect("decode"), correlated);
        // An empty id or a control character in a valid frame: refused.
        for bad in ["", "a\nb"] {
            let mut body = plain_body.to_vec();
            body.push(u8::try_from(bad.len()).expect("short"));
            body.extend_from_slice(bad.as_bytes());
            assert!(decode_event(&reframe(RecordKind::CorrelatedEvent, &body)).is_err(), "{bad:?}");
        }
        let entry = CorrelationEntry {
            correlation: "c-1".into(),
            lsn: 1,
            thread: ThreadId::new("t").expect("id"),
            seq: 1,
            at_ms: 0,
        };
        let framed = encode_correlation(&entry).expect("encode");
        assert_eq!(framed[frame::KIND_OFFSET], 8);
        assert_eq!(decode_correlation(&framed).expect("decode"), entry);
        assert!(decode_event(&framed).is_err(), "an entry is not an event");
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
    fn lsn_lists_are_deltas_and_must_strictly_increase() {
        let chunk = SeqChunk {
            thread: ThreadId::new("t").expect("id"),
            first_seq: 33,
            lsns: vec![5, 6, 70, 1_000_000],
        };
        let framed = encode_seq_chunk(&chunk).expect("encode");
        let body = frame::decode(&framed, RecordKind::SeqChunk).expect("frame").to_vec();
        // thread "t", first_seq 33, 4 lsns as deltas 5, 1, 64, 999_930 (a 3-byte varint).
        assert_eq!(body, [1, b't', 33, 4, 5, 1, 64, 0xfa, 0x83, 0x3d]);
        assert_eq!(decode_seq_chunk(&framed).expect("decode"), chunk);
        for bad in [
            vec![1, b't', 33, 2, 5, 0],          // a zero delta
            vec![1, b't', 0, 1, 5],              // seq 0
            vec![1, b't', 33, 0],                // no lsns
            vec![1, b't', 33, 0xff, 0xff, 0x03], // more than LSN_LIST_MAX
            vec![1, b't', 33, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 2],
        ] {
            assert!(decode_seq_chunk(&reframe(RecordKind::SeqChunk, &bad)).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn a_thread_tail_must_fit_the_record() {
        let workflow = WorkflowRef { id: "w".into(), version: 1, fingerprint: "f".into() };
        let mut record = ThreadRecord::new(ThreadId::new("t").expect("id"), workflow, 0);
        record.last = Some(Bookmark { seq: Seq(3), lsn: Lsn(9), at_ms: 0 });
        let stored = decode_stored_thread(&encode_stored_thread(&record, &[4, 9]).expect("encode"));
        assert_eq!(stored.expect("decode").tail_start(), 2);
        // Longer than the thread's seqs, or ending elsewhere than the last bookmark: refused.
        assert!(
            decode_stored_thread(&encode_stored_thread(&record, &[1, 2, 4, 9]).expect("e"))
                .is_err()
        );
        assert!(decode_stored_thread(&encode_stored_thread(&record, &[4, 8]).expect("e")).is_err());
        // The public decoder drops the tail; the public encoder writes an empty one.
        let framed = encode_stored_thread(&record, &[9]).expect("encode");
        assert_eq!(decode_thread(&framed).expect("decode"), record);
        assert!(
            decode_stored_thread(&encode_thread(&record).expect("e")).expect("d").tail.is_empty()
        );
    }

    #[test]
    fn a_record_of_another_kind_is_refused() {
        let framed = encode_event(&event()).expect("encode");
        assert!(matches!(decode_thread(&framed), Err(Error::Corrupted { table: "threads", .. })));
    }
}
