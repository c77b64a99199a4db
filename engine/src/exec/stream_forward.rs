//! Stream chunks across engines on a database several processes share (`docs/endpoint.md`,
//! "Streams across engines"): the chunks a task writes here reach readers of the thread in
//! other processes, through the database's driver messages (PostgreSQL NOTIFY).
//!
//! - **Sending.** A chunk written by a task this engine runs is cut into parts whose messages
//!   fit [`cairn_storage::limits::DRIVER_MESSAGE_BYTES_MAX`] (4 KiB, a NOTIFY payload), queued
//!   whole or not at all on a queue of [`STREAM_FORWARD_QUEUE_MAX`] parts (a writer never
//!   waits: past it the chunk is dropped for the other processes and counted in a warning), and
//!   sent in order by one task, each send under a deadline of [`STREAM_FORWARD_SEND_MS`].
//! - **Receiving.** Every engine hears every message; one that holds the thread's live stream
//!   (somebody here reads it) puts each whole chunk of another engine into it, where its readers
//!   take it as a chunk written here (tagged with its step and node, numbered in this engine's
//!   buffer, bounded as every buffer is: a reader behind it gets a gap). Parts are put back
//!   together per sending engine (one chunk at a time: its parts arrive in order, sent by one
//!   task), at most [`STREAM_FORWARD_SENDERS_MAX`] senders at once.
//!
//! Chunks are ephemeral here as everywhere: a message lost (a listener reconnecting, a queue
//! full) loses its chunk for the other processes; the task's end and the thread's end are read
//! from the log, durable, by every reader.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cairn_storage::{DriverMessage, Store, ThreadId};
use tokio::sync::{broadcast, mpsc};
use tokio_util::sync::CancellationToken;

use super::streams::LiveStream;
use crate::limits::{STREAM_FORWARD_QUEUE_MAX, STREAM_FORWARD_SEND_MS, STREAM_FORWARD_SENDERS_MAX};
use crate::tasks::Tasks;

/// What a stream chunk's message starts with.
const PREFIX: &str = "chunk ";

/// One part of one chunk, as sent.
#[derive(Debug)]
struct Part {
    thread: ThreadId,
    message: String,
}

/// This engine's sending half: the queue of parts and what it is known by.
#[derive(Debug)]
pub(crate) struct StreamForward {
    queue: mpsc::Sender<Part>,
    /// This engine instance (a sender's parts are put back together per instance, and an
    /// engine skips its own chunks, which its readers got from memory).
    origin: String,
    /// Numbers this engine's chunks.
    next: AtomicU64,
    /// Chunks dropped for a full queue.
    dropped: AtomicU64,
}

impl StreamForward {
    /// Sends the chunk `json` (the value's JSON text) of `thread`'s task at `step` of `node`
    /// to the other processes, or drops it when the queue lacks room for all its parts.
    pub fn send(&self, thread: &ThreadId, step: u64, node: &str, json: &str) {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        let pieces = split(json, part_room(&self.origin, node));
        if self.queue.capacity() < pieces.len() {
            let dropped = self.dropped.fetch_add(1, Ordering::Relaxed) + 1;
            tracing::warn!(%thread, dropped, "a stream chunk not forwarded: the queue is full");
            return;
        }
        let parts = pieces.len();
        for (i, piece) in pieces.into_iter().enumerate() {
            let message = format!(
                "{PREFIX}{} {id} {i} {parts} {step} {} {node}{piece}",
                self.origin,
                node.len()
            );
            // Room was checked above; only another writer racing for the last places fails
            // here, and the receiver then drops the incomplete chunk.
            if self.queue.try_send(Part { thread: thread.clone(), message }).is_err() {
                return;
            }
        }
    }
}

/// Bytes of the chunk's JSON one message holds after its header (at most 20 digits per number).
fn part_room(origin: &str, node: &str) -> usize {
    let header = PREFIX.len() + origin.len() + node.len() + 5 * 21 + node.len().to_string().len();
    cairn_storage::limits::DRIVER_MESSAGE_BYTES_MAX.saturating_sub(header).max(64)
}

/// `json` cut into pieces of at most `room` bytes, at character boundaries.
fn split(json: &str, room: usize) -> Vec<&str> {
    let mut pieces = Vec::new();
    let mut rest = json;
    while rest.len() > room {
        let mut end = room;
        while !rest.is_char_boundary(end) {
            end -= 1;
        }
        let (piece, after) = rest.split_at(end);
        pieces.push(piece);
        rest = after;
    }
    pieces.push(rest);
    pieces
}

/// Starts forwarding for `store`'s database when several processes share it (`None`
/// otherwise): the task sending the parts this engine (`owner`) queues, and the task that
/// hears the other engines' chunks and puts each into the stream `existing` finds (a stream
/// somebody here holds). Both run on `tasks` until the engine stops.
pub(crate) fn start(
    store: &Arc<dyn Store>,
    tasks: &Tasks,
    owner: &str,
    existing: impl Fn(&ThreadId) -> Option<Arc<LiveStream>> + Send + 'static,
) -> Option<Arc<StreamForward>> {
    let heard = store.shared()?.driver_messages();
    let (queue, parts) = mpsc::channel(STREAM_FORWARD_QUEUE_MAX);
    let origin = owner.replace(' ', "_");
    let forward = Arc::new(StreamForward {
        queue,
        origin: origin.clone(),
        next: AtomicU64::new(0),
        dropped: AtomicU64::new(0),
    });
    let stopping = tasks.stopping().clone();
    tasks.spawn(send_parts(store.clone(), parts, stopping.clone()));
    tasks.spawn(hear_chunks(existing, heard, origin, stopping));
    Some(forward)
}

/// Sends the queued parts in order, each under a deadline, until the engine stops.
async fn send_parts(
    store: Arc<dyn Store>,
    mut parts: mpsc::Receiver<Part>,
    stopping: CancellationToken,
) {
    loop {
        let part = tokio::select! {
            part = parts.recv() => part,
            () = stopping.cancelled() => return,
        };
        let (Some(part), Some(db)) = (part, store.shared()) else { return };
        let sent = db.tell_driver(&part.thread, &part.message);
        match tokio::time::timeout(Duration::from_millis(STREAM_FORWARD_SEND_MS), sent).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(thread = %part.thread, error = %e, "a stream chunk not forwarded");
            }
            Err(_) => tracing::warn!(thread = %part.thread, "forwarding a stream chunk timed out"),
        }
    }
}

/// A chunk being put back together: its id, the parts so far, how many there are.
struct Partial {
    id: u64,
    parts: usize,
    json: String,
    got: usize,
}

/// Hears the other engines' chunks and puts each whole one into the thread's live stream,
/// when somebody here reads it.
async fn hear_chunks(
    existing: impl Fn(&ThreadId) -> Option<Arc<LiveStream>>,
    mut heard: broadcast::Receiver<DriverMessage>,
    origin: String,
    stopping: CancellationToken,
) {
    let mut partial: HashMap<String, Partial> = HashMap::new();
    loop {
        let message = tokio::select! {
            m = heard.recv() => m,
            () = stopping.cancelled() => return,
        };
        let m = match message {
            Ok(m) => m,
            Err(broadcast::error::RecvError::Lagged(n)) => {
                tracing::warn!(lost = n, "stream chunks from other engines dropped (fell behind)");
                continue;
            }
            Err(broadcast::error::RecvError::Closed) => return,
        };
        let Some(chunk) = parse(&m.message) else { continue };
        if chunk.origin == origin {
            continue;
        }
        let Some(live) = existing(&m.thread) else { continue };
        if let Some((json, step, node)) = assemble(&mut partial, chunk)
            && let Ok(value) = serde_json::from_str(&json)
        {
            live.push_forwarded(step, &node, value, json.len());
        }
    }
}

/// One message of a chunk, read.
struct Heard<'a> {
    origin: &'a str,
    id: u64,
    part: usize,
    parts: usize,
    step: u64,
    node: &'a str,
    piece: &'a str,
}

/// Reads a chunk message; `None` for any other message, or one that does not read.
fn parse(message: &str) -> Option<Heard<'_>> {
    let rest = message.strip_prefix(PREFIX)?;
    let mut fields = rest.splitn(7, ' ');
    let origin = fields.next()?;
    let id = fields.next()?.parse().ok()?;
    let part = fields.next()?.parse().ok()?;
    let parts = fields.next()?.parse().ok()?;
    let step = fields.next()?.parse().ok()?;
    let node_len: usize = fields.next()?.parse().ok()?;
    let tail = fields.next()?;
    if !tail.is_char_boundary(node_len.min(tail.len())) || node_len > tail.len() {
        return None;
    }
    let (node, piece) = tail.split_at(node_len);
    Some(Heard { origin, id, part, parts, step, node, piece })
}

/// Adds `h` to its sender's chunk; the chunk's JSON, step and node once it is whole.
fn assemble(partial: &mut HashMap<String, Partial>, h: Heard<'_>) -> Option<(String, u64, String)> {
    if h.part == 0 {
        if h.parts == 1 {
            partial.remove(h.origin);
            return Some((h.piece.to_owned(), h.step, h.node.to_owned()));
        }
        if partial.len() >= STREAM_FORWARD_SENDERS_MAX && !partial.contains_key(h.origin) {
            partial.clear();
        }
        let p = Partial { id: h.id, parts: h.parts, json: h.piece.to_owned(), got: 1 };
        partial.insert(h.origin.to_owned(), p);
        return None;
    }
    let p = partial.get_mut(h.origin)?;
    if p.id != h.id || p.got != h.part || p.parts != h.parts {
        // A part lost: the chunk is dropped.
        partial.remove(h.origin);
        return None;
    }
    p.json.push_str(h.piece);
    p.got += 1;
    if p.got < p.parts {
        return None;
    }
    let whole = partial.remove(h.origin)?;
    Some((whole.json, h.step, h.node.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_large_chunk_is_cut_into_messages_that_fit_and_put_back_together() {
        let (queue, mut parts) = mpsc::channel(STREAM_FORWARD_QUEUE_MAX);
        let forward = StreamForward {
            queue,
            origin: "a-1".into(),
            next: AtomicU64::new(0),
            dropped: AtomicU64::new(0),
        };
        let thread = ThreadId::new("t").unwrap();
        let json = serde_json::to_string(&"é".repeat(6_000)).unwrap();
        forward.send(&thread, 3, "draft", &json);
        let mut partial = HashMap::new();
        let mut whole = None;
        let mut n = 0;
        while let Ok(part) = parts.try_recv() {
            assert!(part.message.len() <= cairn_storage::limits::DRIVER_MESSAGE_BYTES_MAX);
            n += 1;
            whole = assemble(&mut partial, parse(&part.message).unwrap());
        }
        assert!(n >= 3, "{n} parts");
        assert_eq!(whole, Some((json, 3, "draft".to_owned())));
        assert!(parse("pause").is_none());
    }
}
