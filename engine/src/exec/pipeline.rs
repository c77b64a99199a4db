//! A thread's batches between their submission to storage and their durable commit.
//!
//! A runner does not wait for one step's commit before it computes the next step: node bodies
//! are deterministic functions of the state (their side effects go through the context, which
//! records them), so computing ahead of durability changes nothing a crash can observe. Up to
//! [`limits::PIPELINE_BATCHES_MAX`] batches of one thread are in flight; storage commits them in
//! submission order, groups them into as few durable commits as it can, and each carries a
//! [`Guard::LastSeq`] so that a rejected batch takes every later
//! one with it instead of shifting their seqs.
//!
//! What must not run ahead is anything a crash could make visible or repeat: before a tool
//! call, a lock, a retry or a child thread is written, and before the runner reports a step,
//! parks or ends the thread, it [`settle`](Pipeline::settle)s: waits until every batch in
//! flight is durable. So a tool never runs on a step that could still be lost, and nothing is
//! acknowledged (handles, watchers, the step hook) before the commit that holds it.
//!
//! The pipeline is also the thread's one write path while it runs: every batch of its runner and
//! of its tasks (tool calls, retries, locks, progress) goes through [`Pipeline::submit`] (or
//! [`Pipeline::submit_refusable`]), which adds the lease renewal and the `LastSeq` guard on the
//! last event submitted before it, under one lock, so storage receives the thread's batches in
//! the order their guards expect and nothing of the thread is written beside it. A batch that
//! storage may refuse as a matter of course (a lock that another thread holds) keeps the lock
//! until its outcome is known: a refused batch must not leave the next batch's guard expecting
//! its events.
//!
//! Each running thread has one acknowledger ([`super::acknowledge`]), polled in the runner's
//! task beside it, that waits for its batches in submission order, checks the seqs storage
//! assigned, and reports each closed step as soon as it is durable (not when the runner next
//! looks: a runner may be waiting on a long node meanwhile).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cairn_storage::{
    Appended, Batch, Guard, LeaseOp, Pending, RunnerOps, Seq, Store, ThreadId, WriteIntent,
};
use tokio::sync::watch;

use super::acknowledge::{AckState, Acked, Acknowledger, Deferred, HandedOver, InFlight};
use super::shell::Shell;
use crate::core::decide::Tail;
use crate::error::Error;
use crate::limits;
use crate::telemetry::metrics::Metrics;

/// The batches of one thread in flight, shared by its runner and its tasks.
pub(crate) struct Pipeline {
    thread: ThreadId,
    /// To the acknowledger; bounded, so a runner more than [`limits::PIPELINE_BATCHES_MAX`] batches
    /// ahead of the disk waits.
    handed: Arc<HandedOver>,
    /// Batches handed to the acknowledger so far.
    submitted: AtomicU64,
    acked: Arc<AckState>,
    /// The same, as published to waiters outside the runner's task (see
    /// [`Acknowledger::beside`]).
    published: watch::Receiver<Acked>,
    store: Arc<dyn Store>,
    /// The lease owner name of this engine, renewed by every batch.
    owner: std::sync::Arc<str>,
    /// How long each renewal makes the lease last.
    lease_ttl_ms: u64,
    /// The write path's state; held while a batch is handed to storage (and, for a refusable
    /// batch, until its outcome is known).
    port: tokio::sync::Mutex<Port>,
    /// The storage write intent announcing the runner's next batch while it computes it (see
    /// [`Pipeline::intend`]).
    intent: std::sync::Mutex<Option<WriteIntent>>,
    /// Counts the checkpoints its batches write (`cairn_checkpoints_total{kind}`).
    metrics: Metrics,
}

/// What the write path knows of the thread's log.
#[derive(Debug, Clone, Copy)]
struct Port {
    /// The seq of the last event submitted.
    last_seq: u64,
    /// The log since the last checkpoint, as submitted (what a restore folds on top of it).
    tail: Tail,
}

impl Pipeline {
    /// A pipeline for `thread`, whose log ends at `last_seq` with `tail_events` events after
    /// its latest checkpoint, and its acknowledger, which the caller runs beside the runner
    /// ([`Acknowledger::beside`]): until it does, nothing submitted is acknowledged.
    pub fn start(
        shell: &Shell,
        thread: &ThreadId,
        last_seq: u64,
        tail_events: u64,
    ) -> (Pipeline, Acknowledger) {
        // A file's writer takes a runner's batches together (see `acknowledge`); a shared
        // database's queueing may wait on the network, so each batch is queued as it comes.
        let defers = shell.store.shared().is_none().then(|| shell.store.clone());
        let handed = Arc::new(HandedOver::new(defers));
        let acked = Arc::new(AckState::default());
        let (published_tx, published) = watch::channel(Acked::default());
        let acknowledger = Acknowledger {
            acks: shell.acks.clone(),
            metrics: shell.metrics.clone(),
            thread: thread.clone(),
            handed: handed.clone(),
            acked: acked.clone(),
            published: Some(published_tx),
        };
        let pipeline = Pipeline {
            thread: thread.clone(),
            handed,
            submitted: AtomicU64::new(0),
            acked,
            published,
            store: shell.store.clone(),
            owner: shell.owner.clone(),
            lease_ttl_ms: shell.config.lease_ttl_ms,
            port: tokio::sync::Mutex::new(Port {
                last_seq,
                // The bytes of a tail written before this runner are not known; the events are.
                tail: Tail { events: tail_events, bytes: 0 },
            }),
            intent: std::sync::Mutex::new(None),
            metrics: shell.metrics.clone(),
        };
        (pipeline, acknowledger)
    }

    /// Announces the runner's next batches to storage while the runner computes them, so that
    /// a group commit holding this thread's earlier batches (or its creation) may wait for them
    /// rather than commit without them (see [`cairn_storage::WriteIntent`]). `intent` is one
    /// taken earlier (by `start`, before the creation was queued); `None` takes a new one if
    /// none is held. Withdrawn when the runner settles (it then waits for the disk: nothing
    /// more comes until the group commits) and when the pipeline goes.
    pub fn intend(&self, intent: Option<WriteIntent>) {
        let Ok(mut held) = self.intent.lock() else { return };
        if held.is_none() {
            *held = intent.or_else(|| self.store.intend_write());
        }
    }

    /// Hands over a new thread's creation (`batch`, made at `now_ms`, which takes the lease and
    /// ends at the seq the pipeline started at) as the first batch in flight: deferred with the
    /// runner's first batches where the store takes them together, else queued now.
    ///
    /// # Errors
    /// Storage errors of queueing it.
    pub async fn hand_creation(&self, batch: Batch, now_ms: u64) -> Result<(), Error> {
        let at = std::time::Instant::now();
        if self.handed.defers() {
            self.submitted.fetch_add(1, Ordering::SeqCst);
            let creation = Deferred { batch, first_seq: 1, step: None, at, at_ms: now_ms };
            self.handed.defer(creation);
            return Ok(());
        }
        let pending = self.store.append_async(batch).await?;
        self.push(InFlight { pending, first_seq: 1, step: None, at }).await
    }

    /// Submits a batch of the runner's (its events predicted from `first_seq`, closing `step`
    /// if any) and hands it to the acknowledger: deferred where the store takes batches
    /// together, else queued now; waits while [`limits::PIPELINE_BATCHES_MAX`] are in flight.
    ///
    /// # Errors
    /// As [`Pipeline::submit`] and [`Pipeline::push`].
    pub async fn submit_step(
        &self,
        batch: Batch,
        now_ms: u64,
        first_seq: u64,
        step: Option<u64>,
    ) -> Result<(), Error> {
        if !self.handed.defers() {
            // Boxed: a shared database's step waits on the network anyway, and a file's step
            // future (and the runner's that holds it) stays smaller by the submit's await. The
            // box holds the submit alone: with the push after it, it took 1,064 bytes, past
            // the 1,024 from which glibc's allocator sweeps its free lists at each allocation.
            let submitted = Box::pin(self.submit(batch, now_ms, Some(first_seq)));
            let (pending, first_seq) = submitted.await?;
            let at = std::time::Instant::now();
            return self.push(InFlight { pending, first_seq, step, at }).await;
        }
        self.room().await?;
        let mut port = self.port.lock().await;
        let (batch, next) = self.prepare(&port, batch, now_ms, Some(first_seq))?;
        let first_seq = next.advance(&mut port);
        self.submitted.fetch_add(1, Ordering::SeqCst);
        let at = std::time::Instant::now();
        self.handed.defer(Deferred { batch, first_seq, step, at, at_ms: now_ms });
        Ok(())
    }

    /// Withdraws the intent [`Pipeline::intend`] holds, if any.
    fn withdraw(&self) {
        let taken = self.intent.lock().ok().and_then(|mut held| held.take());
        drop(taken);
    }

    /// Waits until the first `batches` batches handed to the acknowledger are durable (a
    /// creation handed over before the runner's batches: once it is durable, the thread
    /// exists, whatever becomes of the batches after it). Does not borrow the pipeline.
    ///
    /// # Errors
    /// The first failure among those batches; [`Error::ShutDown`] if the engine stopped
    /// meanwhile.
    pub fn durable_through(
        &self,
        batches: u64,
    ) -> impl std::future::Future<Output = Result<(), Error>> + Send + 'static {
        let mut acked = self.published.clone();
        async move {
            let seen = acked.wait_for(|a| a.batches >= batches || a.failed.is_some()).await;
            let Ok(seen) = seen else { return Err(Error::ShutDown) };
            match &seen.failed {
                Some(e) if seen.batches < batches => Err(e.clone().into()),
                _ => Ok(()),
            }
        }
    }

    /// Hands `batch` (events of this thread, and whatever else it carries) to storage, with the
    /// lease renewal (unless the batch acquires the lease) and `Guard::LastSeq` on the last event
    /// submitted before it. `expected_first` is the seq the caller gave the batch's first event,
    /// if it predicted one (the runner does; tasks learn their seqs from the commit). Returns
    /// the storage ticket and the seq of the batch's first event.
    ///
    /// Renewing checks that the lease is still this runner's (nobody took it over) and extends
    /// it, so a step or a tool call longer than the lease's ttl does not strand the thread.
    ///
    /// # Errors
    /// [`Error::Invalid`] if `expected_first` is not the next seq (an earlier batch of the
    /// thread failed, and every later one would be rejected); storage errors.
    pub async fn submit(
        &self,
        batch: Batch,
        now_ms: u64,
        expected_first: Option<u64>,
    ) -> Result<(Pending, u64), Error> {
        let mut port = self.port.lock().await;
        let (batch, next) = self.prepare(&port, batch, now_ms, expected_first)?;
        // After the runner's deferred batches, which its guard expects.
        self.handed.flush();
        let pending = self.store.append_async(batch).await?;
        Ok((pending, next.advance(&mut port)))
    }

    /// The lease a batch renewed `since` ago (real time) is refused as this engine's: `None`
    /// while it lasts (`since` under the ttl), else the error a takeover gives.
    pub fn lease_lapsed(&self, thread: &ThreadId, since: std::time::Duration) -> Option<Error> {
        (since >= std::time::Duration::from_millis(self.lease_ttl_ms)).then(|| {
            let owner = self.owner.to_string();
            cairn_storage::Error::LeaseNotHeld { thread: thread.clone(), owner }.into()
        })
    }

    /// The lock table as stored (read only: which of several locks asked for at once others
    /// hold, when storage refused them).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn locks(&self) -> Result<Vec<cairn_storage::LockRecord>, Error> {
        Ok(self.store.locks().await?)
    }

    /// The log submitted since the thread's latest checkpoint.
    pub async fn tail(&self) -> Tail {
        self.port.lock().await.tail
    }

    /// [`Pipeline::submit`] without waiting: `None` if the write path is busy (another batch is
    /// being handed over, or a refusable one awaits its outcome, or storage's queue is full:
    /// the batch is then dropped, queued nowhere). For writes that may come later (progress
    /// reports), from sync code.
    pub fn try_submit(&self, batch: Batch, now_ms: u64) -> Option<Result<(Pending, u64), Error>> {
        use futures::FutureExt;
        let mut port = self.port.try_lock().ok()?;
        let (batch, next) = match self.prepare(&port, batch, now_ms, None) {
            Ok(prepared) => prepared,
            Err(e) => return Some(Err(e)),
        };
        self.handed.flush();
        // Queued now or not at all: this caller must not wait for room.
        match self.store.append_async(batch).now_or_never()? {
            Ok(pending) => Some(Ok((pending, next.advance(&mut port)))),
            Err(e) => Some(Err(e.into())),
        }
    }

    /// Submits a batch that storage may refuse as a matter of course (a lock another thread
    /// holds) and waits for its outcome, holding the write path meanwhile, so that a refused
    /// batch leaves the chain of guards as it was.
    ///
    /// # Errors
    /// The refusal or failure of the batch; as [`Pipeline::submit`].
    pub async fn submit_refusable(&self, batch: Batch, now_ms: u64) -> Result<Appended, Error> {
        let mut port = self.port.lock().await;
        let before = *port;
        let (batch, next) = self.prepare(&port, batch, now_ms, None)?;
        self.handed.flush();
        let pending = self.store.append_async(batch).await?;
        next.advance(&mut port);
        match pending.wait().await {
            Ok(appended) => Ok(appended),
            Err(e) => {
                *port = before;
                Err(e.into())
            }
        }
    }

    /// `batch` as storage is to receive it after the last batch submitted (`port`): with the
    /// lease renewal and the `LastSeq` guard (its [`RunnerOps`]); and how the write path moves
    /// once it is queued.
    fn prepare(
        &self,
        port: &Port,
        mut batch: Batch,
        now_ms: u64,
        expected_first: Option<u64>,
    ) -> Result<(Batch, Next), Error> {
        assert!(batch.runner.is_none(), "a batch's runner operations are the pipeline's");
        let takes = batch.leases.iter().any(|l| matches!(l, LeaseOp::Acquire { .. }));
        let renews = batch.leases.iter().any(|l| matches!(l, LeaseOp::Renew { .. }));
        let lease = (!takes && !renews).then(|| LeaseOp::Renew {
            thread: self.thread.clone(),
            owner: self.owner.clone(),
            now_ms,
            ttl_ms: self.lease_ttl_ms,
        });
        let first = port.last_seq + 1;
        if let Some(expected) = expected_first
            && expected != first
        {
            return Err(Error::Invalid(format!(
                "thread {}: the next batch starts at seq {expected}, but the log goes on at \
                 {first} (an earlier batch failed)",
                self.thread
            )));
        }
        let guard = Guard::LastSeq { thread: self.thread.clone(), seq: Seq(port.last_seq) };
        batch.runner = Some(Box::new(RunnerOps { guard, lease }));
        for checkpoint in &batch.checkpoints {
            self.metrics.checkpoint(checkpoint.kind);
        }
        let events = batch.events.len() as u64;
        let bytes = batch_bytes(&batch);
        let checkpointed = !batch.checkpoints.is_empty();
        Ok((batch, Next { first, events, bytes, checkpointed }))
    }

    /// Hands a submitted batch to the acknowledger, waiting while [`limits::PIPELINE_BATCHES_MAX`]
    /// are in flight.
    ///
    /// # Errors
    /// An earlier batch's failure (the runner must stop: its context is ahead of the log).
    pub async fn push(&self, batch: InFlight) -> Result<(), Error> {
        self.room().await?;
        self.submitted.fetch_add(1, Ordering::SeqCst);
        self.handed.push(batch);
        Ok(())
    }

    /// Waits while [`limits::PIPELINE_BATCHES_MAX`] batches are in flight (handed over or
    /// deferred, which it hands over first).
    ///
    /// # Errors
    /// An earlier batch's failure; [`Error::ShutDown`] if the engine stopped meanwhile.
    async fn room(&self) -> Result<(), Error> {
        let room = self.acked.wait_until(|| {
            if let Some(e) = self.acked.failed() {
                return Some(Err(e.into()));
            }
            if self.handed.in_flight() < limits::PIPELINE_BATCHES_MAX {
                return Some(Ok(()));
            }
            // The acknowledger takes the next batch up as soon as it has acknowledged one.
            self.handed.flush();
            None
        });
        room.await.unwrap_or(Err(Error::ShutDown))
    }

    /// Waits until every batch submitted so far is durable.
    ///
    /// # Errors
    /// The first failed batch's error; [`Error::ShutDown`] if the engine stopped meanwhile.
    pub async fn settle(&self) -> Result<(), Error> {
        // The intent goes first: the writer, woken by the hand-over, then finds nothing more
        // to wait for from this runner (an idle writer is not nudged by the withdrawal).
        self.withdraw();
        self.handed.flush();
        let target = self.submitted.load(Ordering::SeqCst);
        let seen = self.acked.wait_for(|a| a.batches >= target || a.failed.is_some()).await;
        let Ok(seen) = seen else { return Err(Error::ShutDown) };
        match &seen.failed {
            Some(e) => {
                tracing::debug!(thread = %self.thread, error = %e, "a batch in flight failed");
                Err(e.clone().into())
            }
            None => Ok(()),
        }
    }
}

/// How the write path moves once a prepared batch is queued.
struct Next {
    /// The seq of the batch's first event.
    first: u64,
    events: u64,
    bytes: u64,
    checkpointed: bool,
}

impl Next {
    /// Moves `port` past the queued batch; the seq of its first event.
    fn advance(self, port: &mut Port) -> u64 {
        port.last_seq += self.events;
        // A checkpoint covers the thread's log up to the end of its own batch.
        port.tail = if self.checkpointed {
            Tail::default()
        } else {
            Tail { events: port.tail.events + self.events, bytes: port.tail.bytes + self.bytes }
        };
        self.first
    }
}

/// What a batch adds to the log a restore reads: event bodies, summaries, payloads.
fn batch_bytes(batch: &Batch) -> u64 {
    let events: usize = batch.events.iter().map(|e| e.data.len() + e.summary.len()).sum();
    let payloads: usize = batch.payloads.iter().map(Vec::len).sum();
    (events + payloads) as u64
}
