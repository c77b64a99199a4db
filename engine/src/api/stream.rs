//! Reading a thread's stream ([`Engine::stream`]): the chunks its tasks write while they run
//! (ephemeral, from memory) and, from the log, each task's end and the thread's end (durable).
//!
//! Semantics:
//! - **Chunks** ([`StreamItem::Chunk`]) are what `ctx.stream` and `ToolCtx::stream` wrote, in
//!   write order, tagged with their step and node. They live in memory only, in a buffer of the
//!   latest [`STREAM_CHUNKS_MAX`](crate::limits::STREAM_CHUNKS_MAX) chunks (and at most
//!   [`STREAM_BYTES_MAX`](crate::limits::STREAM_BYTES_MAX) bytes): a reader that falls behind
//!   it gets a [`StreamItem::Gap`] counting the chunks it missed, never a slower writer. A
//!   reader from the start gets the chunks still kept when it connects; one that resumes after
//!   a seq, only the chunks written from then on. A crash or a restart loses every chunk.
//! - **Closes** ([`StreamItem::Closed`]) are read from the log: each task's completion (its
//!   update) or failure, after the chunks of its step and before any chunk of a later step (a
//!   later step's chunks wait for the log's end of the step before it). They are what survives
//!   a crash: a reader that reconnects (to another engine, after a restart) gets the result of
//!   the step that streamed even though its chunks are gone.
//! - **The end** ([`StreamItem::Ended`]) is the thread's terminal status (with its output when
//!   it completed), the last item. A finished thread's stream gives its closes and its end at
//!   once, without waiting.

use std::collections::VecDeque;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use cairn_storage::{Scope, Subscription, ThreadId, ThreadStatus};
use futures::stream::BoxStream;
use serde::Serialize;
use serde_json::Value;
use tokio::sync::watch;

use super::engine::Engine;
use crate::core::codec::Recorded;
use crate::core::event::Body;
use crate::error::Error;
use crate::exec::streams::{LiveStream, Taken};

/// One item of a thread's stream, as [`Engine::stream`] reads it (and the endpoint's
/// `GET /api/threads/{id}/stream` sends it, as JSON tagged by `kind`).
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum StreamItem {
    /// A value a task wrote while it ran (ephemeral: never in the log).
    Chunk {
        /// Its place among the chunks written while this engine held the thread's stream.
        index: u64,
        /// The step of the task that wrote it.
        step: u64,
        /// The task's node.
        node: String,
        /// The value.
        value: Value,
    },
    /// Chunks dropped before this reader got them (it fell behind the bounded buffer).
    Gap {
        /// How many.
        missed: u64,
    },
    /// A task ended (durable: its event in the log): what a reader that lost the chunks gets.
    Closed {
        /// The seq of its event.
        seq: u64,
        /// The step.
        step: u64,
        /// The node.
        node: String,
        /// The task's update, when it completed with one.
        update: Option<Value>,
        /// Why it failed, when it did.
        error: Option<String>,
    },
    /// The thread ended (durable): the last item.
    Ended {
        /// The seq of its last event.
        seq: u64,
        /// Its terminal status.
        status: ThreadStatus,
        /// Its output (the final state), when it completed.
        output: Option<Value>,
    },
}

/// The items of a thread's stream, in order ([`Engine::stream`]); ends after
/// [`StreamItem::Ended`] or an error.
pub struct StreamReader(BoxStream<'static, Result<StreamItem, Error>>);

impl std::fmt::Debug for StreamReader {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StreamReader")
    }
}

impl futures::Stream for StreamReader {
    type Item = Result<StreamItem, Error>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.0.as_mut().poll_next(cx)
    }
}

impl Engine {
    /// Reads thread `id`'s stream from its start: the chunks its tasks write while they run
    /// (those still kept, then each as it comes), each task's end and the thread's end from
    /// the log; see the module docs of `api/stream.rs` (in docs/endpoint.md) for what survives
    /// a crash.
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; storage errors (the reader's items carry later ones).
    ///
    /// # Examples
    /// ```
    /// use futures::StreamExt as _;
    /// # async fn f(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// let mut items = engine.stream("t1").await?;
    /// while let Some(item) = items.next().await {
    ///     match item? {
    ///         cairn::StreamItem::Chunk { value, .. } => print!("{value}"),
    ///         cairn::StreamItem::Ended { status, .. } => println!(" ({status})"),
    ///         _ => {}
    ///     }
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn stream(&self, id: &str) -> Result<StreamReader, Error> {
        self.stream_after(id, 0).await
    }

    /// Reads thread `id`'s stream after the seq `after` (a reader's last [`StreamItem::Closed`]
    /// or [`StreamItem::Ended`] seq, when it reconnects): the closes and end after it, and
    /// the chunks written from now on. A reader past a finished thread's end gets its
    /// [`StreamItem::Ended`] again.
    ///
    /// # Errors
    /// As [`Engine::stream`].
    pub async fn stream_after(&self, id: &str, after: u64) -> Result<StreamReader, Error> {
        let id = ThreadId::new(id)?;
        let record = crate::exec::fetch::record(self.store().as_ref(), &id).await?;
        let live = self.shell.streams.of(&id);
        let cursor = if after == 0 { live.oldest() } else { live.newest() };
        let reader = Reader {
            engine: self.clone(),
            written: live.watch(),
            live,
            cursor,
            sub: self.store().subscribe(Scope::Thread(id.clone()), after)?,
            log_step: self.step_at(&id, after).await?,
            id,
            ended_before: record.status.is_terminal(),
            output: None,
            pending: VecDeque::new(),
            done: false,
        };
        Ok(StreamReader(Box::pin(futures::stream::unfold(reader, Reader::next))))
    }
}

/// A reader's place in the chunks and the log.
impl Engine {
    /// The last step ended at or before seq `after` of `id`, as a reader resuming there has
    /// read it: 0 from the start; from the event at `after` (a close at step `s` follows the
    /// end of step `s - 1`); any other event, or none, releases every chunk as it comes.
    async fn step_at(&self, id: &ThreadId, after: u64) -> Result<u64, Error> {
        if after == 0 {
            return Ok(0);
        }
        let seq = cairn_storage::Seq(after);
        let events = self.store().read_range(id, seq, seq).await?;
        let Some(event) = events.into_iter().next() else { return Ok(u64::MAX) };
        let store = self.store().as_ref();
        Ok(match crate::exec::fetch::decode(store, event).await?.body {
            Body::NodeCompleted { step, .. } | Body::NodeFailed { step, .. } => {
                step.saturating_sub(1)
            }
            Body::StepCompleted { step, .. } => step,
            _ => u64::MAX,
        })
    }
}

struct Reader {
    engine: Engine,
    id: ThreadId,
    live: Arc<LiveStream>,
    written: watch::Receiver<u64>,
    /// The next chunk this reader takes.
    cursor: u64,
    sub: Subscription,
    /// The thread had ended when the reader opened: once the log after it is read, the end.
    ended_before: bool,
    /// The last step whose end the reader has read from the log: chunks of a later step than
    /// the next one wait for it, so that across steps the order is the log's.
    log_step: u64,
    /// The thread's output, once its `Output` event is read.
    output: Option<Value>,
    pending: VecDeque<StreamItem>,
    done: bool,
}

impl Reader {
    async fn next(mut self) -> Option<(Result<StreamItem, Error>, Self)> {
        loop {
            if let Some(item) = self.pending.pop_front() {
                return Some((Ok(item), self));
            }
            if self.done {
                return None;
            }
            match self.step().await {
                Ok(()) => {}
                Err(e) => {
                    self.done = true;
                    return Some((Err(e), self));
                }
            }
        }
    }

    /// Queues what is there (events committed, then chunks), else waits for either.
    async fn step(&mut self) -> Result<(), Error> {
        if let Some(event) = self.sub.try_next().await? {
            return self.event(event).await;
        }
        if self.ended_before {
            return self.end_read().await;
        }
        self.written.borrow_and_update();
        if self.chunks(self.log_step.saturating_add(1)) {
            return Ok(());
        }
        tokio::select! {
            biased;
            _ = self.written.changed() => Ok(()),
            event = self.sub.next() => self.event(event?).await,
        }
    }

    /// Queues the chunks at the cursor up to those of `until_step` (and a gap before them);
    /// whether there were any.
    fn chunks(&mut self, until_step: u64) -> bool {
        let Taken { missed, chunks } = self.live.take(&mut self.cursor, until_step);
        if missed > 0 {
            self.pending.push_back(StreamItem::Gap { missed });
        }
        let any = missed > 0 || !chunks.is_empty();
        self.pending.extend(chunks.iter().map(|c| StreamItem::Chunk {
            index: c.index,
            step: c.step,
            node: c.node.clone(),
            value: c.value.clone(),
        }));
        any
    }

    /// Queues what a logged event says to a reader: a task's end after its step's chunks, the
    /// thread's end after every chunk.
    async fn event(&mut self, event: cairn_storage::Event) -> Result<(), Error> {
        let store = self.engine.store().as_ref();
        let Recorded { bookmark, body, .. } =
            crate::exec::fetch::decode_announced(store, event).await?;
        let seq = bookmark.seq.0;
        let closed = match body {
            Body::NodeCompleted { step, task, update, .. } => {
                StreamItem::Closed { seq, step, node: task.node.to_string(), update, error: None }
            }
            Body::NodeFailed { step, task, error, .. } => {
                let error = Some(error.to_string());
                StreamItem::Closed { seq, step, node: task.node.to_string(), update: None, error }
            }
            Body::StepCompleted { step, .. } => {
                self.log_step = self.log_step.max(step);
                return Ok(());
            }
            Body::Output { output } => {
                self.output = Some(output);
                return Ok(());
            }
            Body::StatusChanged { to, .. } if to.is_terminal() => {
                self.done = true;
                self.chunks(u64::MAX);
                StreamItem::Ended { seq, status: to, output: self.output.take() }
            }
            _ => return Ok(()),
        };
        if let StreamItem::Closed { step, .. } = &closed {
            self.chunks(*step);
        }
        self.pending.push_back(closed);
        Ok(())
    }

    /// The end of a thread that had ended when the reader opened, its log read: as its record
    /// and outcome say.
    async fn end_read(&mut self) -> Result<(), Error> {
        self.done = true;
        let handle = self.engine.thread(self.id.as_str()).await?;
        let outcome = handle.outcome().await?;
        let store = self.engine.store().as_ref();
        let record = crate::exec::fetch::record(store, &self.id).await?;
        let seq = record.last.map_or(0, |l| l.seq.0);
        let output = self.output.take().or(outcome.output);
        self.chunks(u64::MAX);
        self.pending.push_back(StreamItem::Ended { seq, status: outcome.status, output });
        Ok(())
    }
}
