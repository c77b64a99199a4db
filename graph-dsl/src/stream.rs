//! Streams to a client: values a node ([`Ctx::stream`]) or a tool ([`ToolCtx::stream`](crate::ToolCtx::stream))
//! writes while it runs, for readers watching the thread live (the tokens of a model's answer).
//! They are ephemeral: the engine keeps the latest of them in a bounded buffer in memory and
//! never in the log; what is durable is the node's result, which a reader gets from the log
//! when the step ends (the engine's `Engine::stream`, docs/endpoint.md).

use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::{Ctx, NodeError};

/// Where a tool's [`ToolCtx::stream`](crate::ToolCtx::stream) writes: the stream of the task
/// that called the tool (the engine makes it).
///
/// # Examples
/// ```
/// use cairn_dsl::{NodeError, StreamSink};
/// let sink = StreamSink::new(|v| if v.is_string() { Ok(()) } else { Err(NodeError::fatal("text only")) });
/// assert!(sink.write("token".into()).is_ok());
/// assert!(sink.write(1.into()).is_err());
/// ```
#[derive(Clone)]
pub struct StreamSink(Arc<dyn Fn(Value) -> Result<(), NodeError> + Send + Sync>);

impl StreamSink {
    /// A sink that hands each value to `write`.
    pub fn new(write: impl Fn(Value) -> Result<(), NodeError> + Send + Sync + 'static) -> Self {
        Self(Arc::new(write))
    }

    /// Writes `value`.
    ///
    /// # Errors
    /// What the sink refuses (the task's step ended, a chunk over the engine's size limit).
    pub fn write(&self, value: Value) -> Result<(), NodeError> {
        (self.0)(value)
    }
}

impl std::fmt::Debug for StreamSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StreamSink")
    }
}

impl Ctx {
    /// Writes `value` to the thread's live stream (a token, a partial answer): readers of the
    /// stream (`Engine::stream`, `GET /api/threads/{id}/stream`) get it at once, tagged with
    /// this node and step. Nothing is written to the log, and the writer never waits for a
    /// reader: the engine keeps the latest chunks in a bounded buffer and a reader that falls
    /// behind sees a gap. What survives a crash is only the node's result, which readers get
    /// when the step ends. A task that runs again (after a crash, a retry, a wait) streams
    /// again. Contexts without an engine (test doubles) drop the value.
    ///
    /// # Errors
    /// [`NodeError::Codec`] for a value that does not serialise; [`NodeError::Failed`] (code
    /// `stream`) after this task's attempt ended (a context kept past its node) or for a chunk
    /// over the engine's size limit.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeError};
    /// async fn answer(ctx: &Ctx, words: &[&str]) -> Result<String, NodeError> {
    ///     for word in words {
    ///         ctx.stream(word)?;
    ///     }
    ///     Ok(words.join(" "))
    /// }
    /// ```
    pub fn stream<T: Serialize>(&self, value: T) -> Result<(), NodeError> {
        let value = serde_json::to_value(value).map_err(|e| NodeError::codec("stream value", e))?;
        self.inner().stream(value)
    }
}
