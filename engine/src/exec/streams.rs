//! The live streams of threads (`ctx.stream`, `ToolCtx::stream`): per thread, a bounded buffer
//! in memory of the latest chunks its tasks wrote, and a counter readers wait on.
//!
//! Nothing here is durable and nothing is written to the log. A writer never waits: past
//! [`STREAM_CHUNKS_MAX`] chunks or [`STREAM_BYTES_MAX`] bytes the oldest are dropped, and a reader
//! whose cursor is behind the oldest kept is told how many it missed. A thread's buffer lives
//! while its runner or a reader holds it ([`StreamHub`] keeps weak references), so a reader
//! that connects while a step runs gets the chunks still kept.

use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, Weak};

use cairn_dsl::NodeError;
use cairn_storage::ThreadId;
use serde_json::Value;
use tokio::sync::watch;

use super::stream_forward::StreamForward;
use crate::limits::{
    STREAM_BYTES_MAX, STREAM_CHUNK_BYTES_MAX, STREAM_CHUNKS_MAX, STREAM_MAP_SWEEP_AT,
};

/// One value a task wrote.
#[derive(Debug)]
pub(crate) struct Chunk {
    /// Its place in the thread's buffer, from 0 (counted since the buffer was made).
    pub index: u64,
    /// The step of the task that wrote it.
    pub step: u64,
    /// The task's node.
    pub node: String,
    /// The value.
    pub value: Value,
    /// Its JSON size.
    bytes: usize,
}

/// What a reader takes from a buffer at its cursor.
#[derive(Debug, Default)]
pub(crate) struct Taken {
    /// Chunks dropped before the reader got them.
    pub missed: u64,
    /// The chunks, in write order.
    pub chunks: Vec<Arc<Chunk>>,
}

#[derive(Debug, Default)]
struct Ring {
    chunks: VecDeque<Arc<Chunk>>,
    /// The index of the next chunk written.
    next: u64,
    bytes: usize,
}

impl Ring {
    /// The index of the oldest chunk kept (`next` when none is).
    fn first(&self) -> u64 {
        self.chunks.front().map_or(self.next, |c| c.index)
    }
}

/// One thread's live stream.
#[derive(Debug)]
pub(crate) struct LiveStream {
    ring: Mutex<Ring>,
    /// The index of the next chunk: readers wait for it to change.
    written: watch::Sender<u64>,
    /// Where the chunks this engine's tasks write go to reach other processes (a shared
    /// database, `stream_forward.rs`), with the thread's id.
    forward: Option<(Arc<StreamForward>, ThreadId)>,
}

impl LiveStream {
    fn new(forward: Option<(Arc<StreamForward>, ThreadId)>) -> Self {
        Self { ring: Mutex::new(Ring::default()), written: watch::Sender::new(0), forward }
    }

    /// Adds a chunk a task of this engine wrote (`json`, its JSON text), and forwards it to
    /// other processes on a shared database; never waits.
    fn push_local(&self, step: u64, node: &str, value: Value, json: &str) {
        if let Some((forward, thread)) = &self.forward {
            forward.send(thread, step, node, json);
        }
        self.push(step, node, value, json.len());
    }

    /// Adds a chunk another process's task wrote (`stream_forward.rs`); never waits.
    pub fn push_forwarded(&self, step: u64, node: &str, value: Value, bytes: usize) {
        self.push(step, node, value, bytes);
    }

    fn ring(&self) -> MutexGuard<'_, Ring> {
        // Poisoned only by a panic between two lines that do not panic; the ring stays valid.
        self.ring.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Adds a chunk, dropping the oldest past the bounds; never waits.
    fn push(&self, step: u64, node: &str, value: Value, bytes: usize) {
        let mut ring = self.ring();
        let index = ring.next;
        ring.next += 1;
        ring.bytes += bytes;
        ring.chunks.push_back(Arc::new(Chunk { index, step, node: node.to_owned(), value, bytes }));
        while ring.chunks.len() > STREAM_CHUNKS_MAX || ring.bytes > STREAM_BYTES_MAX {
            let Some(dropped) = ring.chunks.pop_front() else { break };
            ring.bytes -= dropped.bytes;
        }
        let next = ring.next;
        drop(ring);
        self.written.send_replace(next);
    }

    /// The cursor of a reader that wants every chunk still kept.
    pub fn oldest(&self) -> u64 {
        self.ring().first()
    }

    /// The cursor of a reader that wants only chunks written from now on.
    pub fn newest(&self) -> u64 {
        self.ring().next
    }

    /// A receiver that changes whenever a chunk is written.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.written.subscribe()
    }

    /// The chunks at `cursor` and after, up to the first of a step after `until_step`, and
    /// how many were dropped before `cursor` could get them; advances `cursor`.
    pub fn take(&self, cursor: &mut u64, until_step: u64) -> Taken {
        let ring = self.ring();
        let first = ring.first();
        let missed = first.saturating_sub(*cursor);
        *cursor = (*cursor).max(first);
        let skip = usize::try_from(*cursor - first).unwrap_or(usize::MAX);
        let chunks: Vec<_> =
            ring.chunks.iter().skip(skip).take_while(|c| c.step <= until_step).cloned().collect();
        *cursor += chunks.len() as u64;
        Taken { missed, chunks }
    }
}

/// The live streams of the threads this engine drives or someone reads.
#[derive(Debug, Default)]
pub(crate) struct StreamHub {
    streams: Mutex<Streams>,
    /// Set once, on a shared database: the streams made after carry it.
    forward: std::sync::OnceLock<Arc<StreamForward>>,
}

/// The map, and the size at which it next forgets the streams nobody holds: twice what the
/// last sweep kept (at least [`STREAM_MAP_SWEEP_AT`]), so sweeps cost O(1) a stream made.
#[derive(Debug, Default)]
struct Streams {
    by_thread: HashMap<ThreadId, Weak<LiveStream>>,
    sweep_at: usize,
}

impl StreamHub {
    /// `thread`'s live stream, made if nobody holds one.
    pub fn of(&self, thread: &ThreadId) -> Arc<LiveStream> {
        let mut streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(live) = streams.by_thread.get(thread).and_then(Weak::upgrade) {
            return live;
        }
        if streams.by_thread.len() >= streams.sweep_at.max(STREAM_MAP_SWEEP_AT) {
            streams.by_thread.retain(|_, w| w.strong_count() > 0);
            streams.sweep_at = 2 * streams.by_thread.len();
        }
        let forward = self.forward.get().map(|f| (f.clone(), thread.clone()));
        let live = Arc::new(LiveStream::new(forward));
        streams.by_thread.insert(thread.clone(), Arc::downgrade(&live));
        live
    }

    /// `thread`'s live stream if somebody holds it (a reader here, or its runner); never
    /// makes one.
    pub fn existing(&self, thread: &ThreadId) -> Option<Arc<LiveStream>> {
        let streams = self.streams.lock().unwrap_or_else(PoisonError::into_inner);
        streams.by_thread.get(thread).and_then(Weak::upgrade)
    }

    /// Forwards the chunks of the streams made from now on through `forward`; false if the
    /// hub forwards already (the engine opens once).
    pub fn forward_to(&self, forward: Arc<StreamForward>) -> bool {
        self.forward.set(forward).is_ok()
    }
}

/// What one attempt of one task writes through: its thread's stream, tagged with its step and
/// node, open until the attempt ends.
#[derive(Debug)]
pub(crate) struct TaskStream {
    live: Arc<LiveStream>,
    thread: ThreadId,
    step: u64,
    node: Arc<str>,
    open: AtomicBool,
}

impl TaskStream {
    pub fn new(live: Arc<LiveStream>, thread: ThreadId, step: u64, node: Arc<str>) -> Self {
        Self { live, thread, step, node, open: AtomicBool::new(true) }
    }

    /// Writes `value` to the thread's stream.
    ///
    /// # Errors
    /// A fatal [`NodeError`] (code `stream`) once the attempt ended, or for a value over
    /// [`STREAM_CHUNK_BYTES_MAX`] bytes of JSON.
    pub fn write(&self, value: Value) -> Result<(), NodeError> {
        if !self.open.load(Ordering::Acquire) {
            return Err(refused(format!(
                "the stream of node {} of thread {} closed when its step {} ended: a value \
                 written after its attempt ended reaches no reader",
                self.node, self.thread, self.step
            )));
        }
        let json = serde_json::to_string(&value).unwrap_or_default();
        let bytes = json.len();
        if bytes > STREAM_CHUNK_BYTES_MAX {
            return Err(refused(format!(
                "limit STREAM_CHUNK_BYTES_MAX exceeded: a chunk of {bytes} bytes, at most \
                 {STREAM_CHUNK_BYTES_MAX} (put a large value in the node's result)"
            )));
        }
        self.live.push_local(self.step, &self.node, value, &json);
        Ok(())
    }

    /// Ends the attempt's writes: later ones are refused.
    pub fn close(&self) {
        self.open.store(false, Ordering::Release);
    }
}

fn refused(message: String) -> NodeError {
    NodeError::Failed { code: Some("stream".into()), message, retryable: false }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_reader_behind_the_bound_sees_what_it_missed() {
        let live = LiveStream::new(None);
        let mut cursor = live.oldest();
        let total = STREAM_CHUNKS_MAX as u64 + 10;
        for i in 0..total {
            live.push(1, "n", Value::from(i), 2);
        }
        let taken = live.take(&mut cursor, u64::MAX);
        assert_eq!(taken.missed, 10);
        assert_eq!(taken.chunks.len(), STREAM_CHUNKS_MAX);
        assert_eq!(taken.chunks[0].value, Value::from(10));
        assert_eq!(cursor, total);
        live.push(2, "n", Value::from("late"), 6);
        live.push(3, "n", Value::from("later"), 7);
        let taken = live.take(&mut cursor, 2);
        assert_eq!((taken.missed, taken.chunks.len()), (0, 1));
    }

    #[test]
    fn a_closed_task_stream_refuses_writes() {
        let hub = StreamHub::default();
        let thread = ThreadId::new("t").unwrap();
        let task = TaskStream::new(hub.of(&thread), thread, 3, "draft".into());
        task.write(Value::from("a")).unwrap();
        task.close();
        let e = task.write(Value::from("b")).unwrap_err().to_string();
        assert!(e.contains("closed when its step 3 ended"), "{e}");
    }
}
