//! Handles to threads: await a result, read status, stream events. A handle from a typed
//! start ([`Engine::start`]) knows its workflow's state type `S` and decodes results as one
//! (`api/typed.rs`); one from a start by name ([`Engine::start_json`]) is [`Untyped`].

use std::marker::PhantomData;

use cairn_storage::{Scope, Seq, Subscription, ThreadId, ThreadRecord, ThreadStatus};
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::api::engine::Engine;
pub use crate::api::outcome::Outcome;
use crate::api::outcome::{Typing, Untyped};
use crate::coord::{Ended, Seen};
use crate::core::codec::Recorded;
use crate::core::event::Body;
use crate::error::Error;

/// A handle to one thread of an [`Engine`]. `S` is its workflow's state type when the handle
/// came from a typed start ([`Engine::start`]): its results are `S`s. [`Untyped`] (from
/// [`Engine::start_json`], [`Engine::thread`]) gives them as JSON, or as any type asked for.
pub struct ThreadHandle<S = Untyped> {
    pub(crate) engine: Engine,
    id: ThreadId,
    /// The thread's status channel, subscribed by the `start` that created it before its
    /// runner began: a wait started after the thread ended still gets the end its runner
    /// published, without reading the thread back.
    seen: Option<tokio::sync::watch::Receiver<Seen>>,
    _state: PhantomData<fn() -> S>,
}

impl<S> Clone for ThreadHandle<S> {
    fn clone(&self) -> Self {
        let (engine, id, seen) = (self.engine.clone(), self.id.clone(), self.seen.clone());
        Self { engine, id, seen, _state: PhantomData }
    }
}

impl<S> std::fmt::Debug for ThreadHandle<S> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ThreadHandle").field("id", &self.id).finish()
    }
}

impl ThreadHandle {
    pub(crate) fn new(engine: Engine, id: ThreadId) -> Self {
        Self { engine, id, seen: None, _state: PhantomData }
    }
}

impl<S> ThreadHandle<S> {
    /// This handle, waiting on `seen` (the channel its start subscribed) when there is one.
    pub(crate) fn watching(mut self, seen: Option<tokio::sync::watch::Receiver<Seen>>) -> Self {
        self.seen = seen;
        self
    }

    /// The same thread, its results read as `T` (`Untyped`: as JSON).
    pub(crate) fn retyped<T>(self) -> ThreadHandle<T> {
        let Self { engine, id, seen, _state } = self;
        ThreadHandle { engine, id, seen, _state: PhantomData }
    }

    /// This handle without its state type: results as JSON, or as any type asked for.
    pub fn untyped(self) -> ThreadHandle {
        self.retyped()
    }

    /// The thread's id.
    pub fn id(&self) -> &ThreadId {
        &self.id
    }

    /// Its stored status.
    ///
    /// # Errors
    /// Storage errors; [`Error::UnknownThread`].
    pub async fn status(&self) -> Result<ThreadStatus, Error> {
        let store = self.engine.store().as_ref();
        Ok(crate::exec::fetch::record(store, &self.id).await?.status)
    }

    /// Waits until the thread stops running (ends, or parks waiting for something) and reports
    /// how it stands. A thread waiting in a queue has not run yet: this waits on.
    ///
    /// # Errors
    /// Storage errors; [`Error::ShutDown`] if the engine shut down first. When the thread's
    /// runner stops without ending or parking it (a commit failed: the disk is full, an I/O
    /// error), at once the error it stopped with, e.g. `Error::Storage(DiskFull { .. })`: the
    /// thread stays as its log says, and is driven on when the store recovers (see
    /// `docs/reliability.md`, "A failed commit"). [`cairn_storage::Error::Unavailable`] (as
    /// [`Error::Storage`]), naming the cause, once the store's database (on a server) has not
    /// answered for [`cairn_storage::limits::PG_WRITE_WAIT_UNAVAILABLE_MAX`]: the thread goes on
    /// once it answers again, and a wait then finds it as it stands. [`Error::Codec`] when a
    /// typed handle's output does not decode as its state type. On a queue with flow control
    /// (`docs/queues.md`), [`Error::Debounced`] when a later start of its key superseded it,
    /// [`Error::Batched`] when a batch run took it (each names the thread to wait for).
    pub async fn wait(&self) -> Result<Outcome<S::Output>, Error>
    where
        S: Typing,
    {
        let outcome = self
            .wait_until(|s| {
                !matches!(s, ThreadStatus::Running | ThreadStatus::Created | ThreadStatus::Queued)
            })
            .await?;
        if outcome.status == ThreadStatus::Cancelled
            && let Some(taken) = self.taken_by().await?
        {
            return Err(taken);
        }
        S::outcome(outcome)
    }

    /// The start that took this one's place on a queue with flow control: as
    /// [`Error::Debounced`] (a later start of its key superseded it) or [`Error::Batched`] (a
    /// batch run took it, its input among the run's); `None` for any other thread.
    ///
    /// # Errors
    /// Storage errors; [`Error::UnknownThread`].
    pub async fn taken_by(&self) -> Result<Option<Error>, Error> {
        let store = self.engine.store().as_ref();
        let record = crate::exec::fetch::record(store, &self.id).await?;
        let thread = self.id.to_string();
        Ok(taken_by(&record).map(|(label, by)| {
            if label == SUPERSEDED_BY_LABEL {
                Error::Debounced { thread, by }
            } else {
                Error::Batched { thread, into: by }
            }
        }))
    }

    /// Waits until the thread ends (completed, failed, cancelled, timed out).
    ///
    /// # Errors
    /// As [`ThreadHandle::wait`].
    pub async fn finished(&self) -> Result<Outcome<S::Output>, Error>
    where
        S: Typing,
    {
        S::outcome(self.wait_until(ThreadStatus::is_terminal).await?)
    }

    async fn wait_until(&self, done: impl Fn(ThreadStatus) -> bool) -> Result<Outcome, Error> {
        let mut rx = match &self.seen {
            // A runner that stopped published its error on it, and its channel went: a later
            // wait starts afresh from the stored status (the thread may be driven again).
            Some(seen) if seen.borrow().stopped.is_none() => seen.clone(),
            _ => self.engine.shell.coord.watch(&self.id).await?,
        };
        let waited = self.wait_on(&mut rx, done).await;
        drop(rx);
        self.engine.shell.coord.unwatch_if_unused(&self.id);
        waited
    }

    /// [`ThreadHandle::wait_until`] on `rx`. The channel may still show a status the thread
    /// has left (a parked thread woken by a signal is Running in the store before the wake is
    /// published): the stored outcome is read back, and when it is not `done` yet, the wait
    /// goes on from the next publication (`wait_for` marked the value it returned as seen, so
    /// one published since the read back is not missed).
    async fn wait_on(
        &self,
        rx: &mut tokio::sync::watch::Receiver<Seen>,
        done: impl Fn(ThreadStatus) -> bool,
    ) -> Result<Outcome, Error> {
        let shutdown = self.engine.shell.tasks.stopping().clone();
        let mut database = self.engine.store().metrics().map(|m| m.database_changes());
        let mut refusals = self.engine.store().refusals();
        loop {
            let seen = tokio::select! {
                biased;
                r = rx.wait_for(|s| done(s.status) || s.stopped.is_some()) => {
                    let seen = r.map_err(|_| Error::ShutDown)?;
                    if let Some(stopped) = &seen.stopped {
                        // Its runner stopped (a failed commit) and nothing drives it now.
                        return Err(Error::clone(stopped));
                    }
                    seen.ended.clone()
                }
                () = shutdown.cancelled() => return Err(Error::ShutDown),
                e = unavailable(database.as_mut()) => return Err(e.into()),
                cause = refused(refusals.as_mut()) => return Err(Error::Storage(cause)),
            };
            // Ended by a runner of this engine, which published how: nothing to read back.
            if let Some(ended) = seen {
                let Ended { status, output, error } = &*ended;
                return Ok(Outcome {
                    status: *status,
                    output: output.clone(),
                    error: error.clone(),
                });
            }
            let outcome = self.json_outcome().await?;
            if done(outcome.status) {
                return Ok(outcome);
            }
            tokio::select! {
                r = rx.changed() => r.map_err(|_| Error::ShutDown)?,
                () = shutdown.cancelled() => return Err(Error::ShutDown),
                e = unavailable(database.as_mut()) => return Err(e.into()),
                cause = refused(refusals.as_mut()) => return Err(Error::Storage(cause)),
            }
        }
    }

    /// How the thread stands now (without waiting). On PostgreSQL the reads are awaited: no
    /// runtime worker waits for the server.
    ///
    /// # Errors
    /// Storage errors; [`Error::UnknownThread`].
    pub async fn outcome(&self) -> Result<Outcome<S::Output>, Error>
    where
        S: Typing,
    {
        S::outcome(self.json_outcome().await?)
    }

    /// [`ThreadHandle::outcome`], its output as JSON.
    async fn json_outcome(&self) -> Result<Outcome, Error> {
        let store = self.engine.store().as_ref();
        let record = crate::exec::fetch::record(store, &self.id).await?;
        let output = if record.status == ThreadStatus::Completed {
            self.completed_output(&record).await?
        } else {
            None
        };
        Ok(outcome_of(&record, output))
    }

    /// The output of a completed thread: the `Output` event of the batch that completed it,
    /// found among its last events (a restore, which decodes a whole snapshot, only when
    /// something was appended after the completion since).
    async fn completed_output(&self, record: &ThreadRecord) -> Result<Option<Value>, Error> {
        let store = self.engine.store().as_ref();
        // A pruned thread's stored log starts at `first_seq` (possibly after its last event:
        // then its checkpoint holds the output).
        if let Some(last) = record.last.filter(|l| l.seq >= record.first_seq) {
            let from = Seq(last.seq.0.saturating_sub(OUTPUT_TAIL).max(record.first_seq.0).max(1));
            for event in store.read_range(&self.id, from, last.seq).await?.into_iter().rev() {
                if let Body::Output { output } =
                    crate::exec::fetch::decode(store, event).await?.body
                {
                    return Ok(Some(output));
                }
            }
        }
        let wf = self.engine.shell.registry.workflow_for(record)?;
        let ctx = crate::exec::fetch::restore(store, &wf, &self.id, None).await?;
        Ok(ctx.meta.output)
    }

    /// Waits until the thread ends and returns its output (the final state) as JSON; what
    /// [`ThreadHandle::output`] decodes.
    pub(crate) async fn json_output(&self) -> Result<Value, Error> {
        let outcome = self.wait_until(ThreadStatus::is_terminal).await?;
        match outcome.output {
            Some(v) if outcome.status == ThreadStatus::Completed => Ok(v),
            _ => Err(Error::WrongStatus {
                thread: self.id.to_string(),
                status: outcome.status,
                detail: format!(
                    "no output{}",
                    outcome.error.map(|e| format!(": {e}")).unwrap_or_default()
                ),
            }),
        }
    }

    /// The thread's events after seq `after`: history first, then live, each once, in order.
    ///
    /// # Errors
    /// Storage errors.
    pub fn events(&self, after: u64) -> Result<EventStream, Error> {
        self.engine.subscribe(Scope::Thread(self.id.clone()), after)
    }
}

impl ThreadHandle {
    /// Waits until the thread ends and decodes its output (the final state) as `T`. A thread that
    /// parks (waits for input, sleeps, pauses) is waited for until it is resumed and ends; use
    /// [`ThreadHandle::wait`] to return at a park. (A typed handle's `output` returns its state
    /// type: no `T` to name.)
    ///
    /// # Errors
    /// [`Error::WrongStatus`] if the thread ends other than completed; codec errors.
    pub async fn output<T: DeserializeOwned>(&self) -> Result<T, Error> {
        Ok(serde_json::from_value(self.json_output().await?)?)
    }
}

/// Decoded events of a subscription.
pub struct EventStream {
    engine: Engine,
    sub: Subscription,
}

impl EventStream {
    /// The next event, waiting for it if needed.
    ///
    /// # Errors
    /// Storage errors; [`Error::Record`] for an event that does not decode.
    pub async fn next(&mut self) -> Result<Recorded, Error> {
        let event = self.sub.next().await?;
        crate::exec::fetch::decode_announced(self.engine.store().as_ref(), event).await
    }

    /// The next event if one is committed already (its read awaited; no wait for a commit).
    ///
    /// # Errors
    /// As [`EventStream::next`].
    pub async fn try_next(&mut self) -> Result<Option<Recorded>, Error> {
        match self.sub.try_next().await? {
            Some(event) => {
                let store = self.engine.store().as_ref();
                Ok(Some(crate::exec::fetch::decode_announced(store, event).await?))
            }
            None => Ok(None),
        }
    }
}

impl Engine {
    /// Subscribes to one thread (after a seq) or to all threads (after an lsn): history, then
    /// live events, with no gap between the two.
    ///
    /// # Errors
    /// Storage errors.
    pub fn subscribe(&self, scope: Scope, after: u64) -> Result<EventStream, Error> {
        let sub = self.store().subscribe(scope, after)?;
        Ok(EventStream { engine: self.clone(), sub })
    }
}

/// Completes with the failure that makes the store refuse writes, once it does (at once if it
/// does now): no thread of this engine moves until it recovers, so a wait ends with it. Never,
/// for a store that never refuses writes as a whole.
async fn refused(
    refusals: Option<&mut tokio::sync::watch::Receiver<Option<cairn_storage::Error>>>,
) -> cairn_storage::Error {
    if let Some(refusals) = refusals
        && let Ok(cause) = refusals.wait_for(Option::is_some).await
        && let Some(cause) = cause.clone()
    {
        return cause;
    }
    std::future::pending().await
}

/// Events of the completing batch after `Output`: status, lock releases, checkpoint.
const OUTPUT_TAIL: u64 = 8;

/// The outcome a thread's `record` and its `output` (if it completed) make.
fn outcome_of(record: &ThreadRecord, output: Option<Value>) -> Outcome {
    let summary: Value = serde_json::from_slice(&record.summary).unwrap_or(Value::Null);
    let error = summary.get("last_error").and_then(Value::as_str).map(str::to_owned);
    Outcome { status: record.status, output, error }
}

/// Resolves once the store's database (on a server) has not answered for as long as writes
/// wait for it ([`cairn_storage::limits::PG_WRITE_WAIT_UNAVAILABLE_MAX`]): a waiter then hears
/// why instead of waiting through the outage (the thread goes on once the database is back).
/// Never for a store without a server (`None`).
async fn unavailable(
    changes: Option<
        &mut tokio::sync::watch::Receiver<Option<cairn_storage::telemetry::DatabaseState>>,
    >,
) -> cairn_storage::Error {
    match changes {
        Some(changes) => {
            let after = cairn_storage::limits::PG_WRITE_WAIT_UNAVAILABLE_MAX;
            cairn_storage::telemetry::unavailable_for(changes, after).await
        }
        None => std::future::pending().await,
    }
}

/// The label a superseded debounced start carries: the start that superseded it.
pub const SUPERSEDED_BY_LABEL: &str = crate::core::child_start::SUPERSEDED_BY_LABEL;

/// The label a start taken by a batch run carries: the batch run.
pub const BATCHED_INTO_LABEL: &str = crate::core::child_start::BATCHED_INTO_LABEL;

/// The start that took over `record`'s place, if a debounced start superseded it or a batch
/// run took it: `(label, thread)`.
pub(crate) fn taken_by(record: &ThreadRecord) -> Option<(&'static str, String)> {
    if record.status != ThreadStatus::Cancelled {
        return None;
    }
    [SUPERSEDED_BY_LABEL, BATCHED_INTO_LABEL]
        .into_iter()
        .find_map(|label| record.labels.get(label).map(|t| (label, t.clone())))
}
