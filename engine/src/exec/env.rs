//! What a thread's tasks are handed by its runner: the thread, its policy, its write path, and
//! the few engine services node code reaches (the clock, lock wake-ups, child threads).

use std::collections::BTreeSet;
use std::sync::Arc;

use cairn_dsl::{DynWorkflow, NodeError};
use cairn_storage::{Batch, Bookmark, ThreadId};
use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::pipeline::Pipeline;
use super::stop::StopSlot;
use crate::clock::Clock;
use crate::coord::Coordinator;
use crate::core::codec::{self, Recorded};
use crate::core::event::Body;
use crate::core::thread_ctx::ThreadCtx;
use crate::error::Error;
use crate::telemetry::metrics::Metrics;

/// How a child thread stood when its driver stopped, and its context then.
pub(crate) type ChildStop = (cairn_storage::ThreadStatus, ThreadCtx);

/// Runs sub-workflow child threads for a subgraph node (implemented over the engine's shell by
/// `child_run.rs`, so that tasks need not see the shell).
pub(crate) trait ChildThreads: Send + Sync {
    /// Creates child `id` of `wf` on `input` unless it exists, hands it `input_for_child` if it
    /// waits for input, drives it to its end or next park, and returns how it stands then.
    fn run(
        &self,
        id: ThreadId,
        wf: Arc<DynWorkflow>,
        input: Value,
        input_for_child: Option<Value>,
    ) -> BoxFuture<'static, Result<ChildStop, NodeError>>;

    /// Creates the child `id` a node starts at run time unless it exists, and has it driven
    /// (`child_start.rs`).
    fn start(
        self: Arc<Self>,
        id: ThreadId,
        start: cairn_dsl::ChildStart,
    ) -> BoxFuture<'static, Result<(), NodeError>>;

    /// Waits until the started child `id` ends and returns how (`child_start.rs`).
    fn join(
        self: Arc<Self>,
        id: ThreadId,
    ) -> BoxFuture<'static, Result<crate::core::child_start::ChildEnd, NodeError>>;

    /// How the started child `id` ended, or `None` while it runs (`child_start.rs`).
    fn ended(
        self: Arc<Self>,
        id: ThreadId,
    ) -> BoxFuture<'static, Result<Option<crate::core::child_start::ChildEnd>, NodeError>>;
}

/// What the runner knows about the thread that tasks need.
pub(crate) struct ThreadEnv {
    pub thread: ThreadId,
    pub wf: Arc<DynWorkflow>,
    /// Cancelled when the thread is cancelled or times out; tasks get child tokens.
    pub cancel: CancellationToken,
    /// Notified to fail the node attempts running now as a timeout would (the stuck action
    /// `StuckAction::Retry`).
    pub retry: Arc<tokio::sync::Notify>,
    /// Tool calls the thread made before this step (for the budget check).
    pub tool_calls_before: u64,
    /// Budgets in force.
    pub budgets: cairn_dsl::Budgets,
    /// Permissions tool calls may use.
    pub permissions: BTreeSet<String>,
    /// Depth of sub-workflow nesting of this thread.
    pub depth: usize,
    /// The seed of the thread's fresh draws (its recorded seed, or the engine's for an older
    /// thread that has none).
    pub seed: u64,
    /// The thread's one write path; batches not yet durable are settled before any write with
    /// effects.
    pub pipeline: Pipeline,
    /// The engine clock.
    pub clock: Arc<dyn Clock>,
    /// How long a cancelled node may run on before its future is dropped.
    pub cancel_grace_ms: u64,
    /// Lock releases (waiters for a held lock listen to them).
    pub coord: Arc<dyn Coordinator>,
    /// The child threads of subgraph nodes.
    pub children: Arc<dyn ChildThreads>,
    /// Where a task puts an engine error that must stop the runner (`stop.rs`).
    pub stop: StopSlot,
    /// The engine's metric handles.
    pub metrics: Metrics,
    /// The signals the step's tasks have received (`signals.rs`).
    pub signals: super::signal_cursor::SignalCursor,
    /// The keys the thread had published when the step began, which each of the step's tasks
    /// counts its own new keys on top of against `PUBLISHED_KEYS_PER_THREAD_MAX` (reset from
    /// the thread's state at each step's start; the tasks never change it).
    pub published: std::sync::Mutex<crate::core::published::PublishedKeys>,
    /// Whether the thread may hold locks: false only for a thread this runner drives from its
    /// creation until a task asks for one (then the end of the thread need not read the lock
    /// table to release them).
    pub may_hold_locks: std::sync::atomic::AtomicBool,
    /// The thread's live stream (`streams.rs`), held while the thread is driven here.
    pub stream: Arc<super::streams::LiveStream>,
}

impl ThreadEnv {
    /// The keys the thread had published when the step began (`published`), locked.
    pub(crate) fn published_keys(
        &self,
    ) -> std::sync::MutexGuard<'_, crate::core::published::PublishedKeys> {
        // Poisoning can only come from a panic between lines that do not panic; the set is
        // whole either way.
        self.published.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Waits until every batch the runner submitted is durable (before a tool call, a lock, a
    /// retry or a child thread, which must never rest on a step a crash could still lose).
    pub(crate) async fn settle(&self) -> Result<(), Error> {
        self.pipeline.settle().await
    }

    /// Appends events of the thread durably now (tool calls, retries), after settling; an
    /// acknowledgement that outlived the lease it renewed fences the runner
    /// ([`ThreadEnv::lease_held_since`]).
    pub(crate) async fn append_now(
        &self,
        bodies: Vec<Body>,
        at_ms: u64,
    ) -> Result<Vec<Recorded>, Error> {
        self.settle().await?;
        // Before the batch leaves: its commit renews the lease no earlier than this.
        let sent = std::time::Instant::now();
        let (pending, _) =
            self.pipeline.submit(self.batch_of(&bodies, at_ms)?, at_ms, None).await?;
        let appended = pending.wait().await?;
        self.lease_held_since(sent)?;
        Ok(self.zip_recorded(appended.bookmarks, bodies))
    }

    /// After a write sent at `sent` that renewed the lease (`append_now`, before a tool call or
    /// a retry): on a shared database, an acknowledgement that came back after the lease had
    /// lapsed (a network that hung, then resumed) does not let an effect start, since another
    /// engine may hold the thread by now and run the recorded call itself (with the same
    /// idempotency key). The runner stops as fenced; on a file nobody else can take the thread.
    /// Timed in real time, as the database's clock that the lease lapses on runs, never on the
    /// engine's clock (a manual one may jump, or stand still).
    ///
    /// # Errors
    /// [`cairn_storage::Error::LeaseNotHeld`] once the lease may have lapsed.
    pub(crate) fn lease_held_since(&self, sent: std::time::Instant) -> Result<(), Error> {
        if !self.coord.has_peers() {
            return Ok(());
        }
        self.pipeline.lease_lapsed(&self.thread, sent.elapsed()).map_or(Ok(()), Err)
    }

    /// A batch of the thread's events.
    pub(crate) fn batch_of(&self, bodies: &[Body], at_ms: u64) -> Result<Batch, Error> {
        let mut batch = Batch::default();
        for body in bodies {
            codec::push_event(&mut batch, &self.thread, body, at_ms)?;
        }
        Ok(batch)
    }

    /// The committed events: each body with the bookmark storage gave it.
    pub(crate) fn zip_recorded(
        &self,
        bookmarks: Vec<Bookmark>,
        bodies: Vec<Body>,
    ) -> Vec<Recorded> {
        assert_eq!(bookmarks.len(), bodies.len(), "storage returned one bookmark per event");
        bookmarks
            .into_iter()
            .zip(bodies)
            .map(|(bookmark, body)| Recorded { bookmark, thread: self.thread.clone(), body })
            .collect()
    }
}
