//! One attempt of a harness run: open a store on a (possibly armed) simulated disk, open an
//! engine on it, start the thread (idempotently), and drive it until it ends, the store fails,
//! or the time limit passes.
//!
//! Driving is event-driven, never timed: the driver looks at the thread's stored status after
//! every acknowledged append and acts for the absent human (delivers the next scripted input
//! when the thread waits for one) and the absent wall clock (moves the manual clock to a durable
//! timer's due time when the thread sleeps, and to a retry's due time when one is scheduled).

use std::fmt;
use std::sync::Arc;

use cairn_storage::{Durability, Event, EventKind, Options, RedbStore, ThreadId, ThreadStatus};
use cairn_storage_testkit::fault::FaultBackend;

use crate::harness::CrashHarness;
use crate::observe::{LogView, observe, read_all};
use crate::recording::RecordingStore;
use cairn::Error;
use cairn::Outcome;
use cairn::clock::ManualClock;
use cairn::thread_ctx::Waiting;
use cairn::{Engine, StartOptions};

/// How an attempt ended.
#[derive(Debug, Clone)]
pub(crate) enum Stop {
    /// The thread stopped running (ended, or parked with nothing left to deliver).
    Finished(Outcome),
    /// Storage failed (the fault fired, or the disk holds damage).
    StoreFailed,
    /// Neither within the time limit.
    Hung,
    /// The engine returned an error that is not a storage failure.
    Engine(String),
}

impl fmt::Display for Stop {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Stop::Finished(o) => write!(f, "finished {} (error: {:?})", o.status, o.error),
            Stop::StoreFailed => f.write_str("storage failed"),
            Stop::Hung => f.write_str("hung (time limit)"),
            Stop::Engine(e) => write!(f, "engine error: {e}"),
        }
    }
}

/// What one attempt did and left.
pub(crate) struct Attempt {
    /// The store, still open, for inspection (None if it did not open).
    pub store: Option<RedbStore>,
    /// Why the store did not open.
    pub open_error: Option<cairn_storage::Error>,
    /// The thread's log as found at open, before the engine ran.
    pub before: Option<LogView>,
    /// How the run ended.
    pub stop: Stop,
    /// Events the store acknowledged during the attempt.
    pub acked: Vec<Event>,
    /// The first storage failure the engine saw.
    pub failure: Option<cairn_storage::Error>,
}

/// The store options of every harness run: acknowledged means durable.
pub(crate) fn store_options() -> Options {
    // A small page cache: the images are small, and a sweep opens thousands of them.
    Options { durability: Durability::Immediate, cache_bytes: 4 << 20, ..Options::default() }
}

impl CrashHarness {
    /// Opens a store on `backend`, runs the engine on it, and reports how that went.
    pub(crate) async fn attempt(&self, backend: FaultBackend, clock: &ManualClock) -> Attempt {
        // Storage failed before the engine could run.
        let failed = |store, open_error, failure| Attempt {
            store,
            open_error,
            before: None,
            stop: Stop::StoreFailed,
            acked: Vec::new(),
            failure,
        };
        let store = match RedbStore::with_backend(backend, store_options()) {
            Ok(store) => store,
            Err(e) => return failed(None, Some(e), None),
        };
        let before = match observe(&store, &self.thread) {
            Ok(view) => view,
            Err(Error::Storage(e)) => return failed(Some(store), None, Some(e)),
            Err(_) => return failed(Some(store), None, None),
        };
        let rec = Arc::new(RecordingStore::new(Arc::new(store.clone())));
        let stop = self.run_engine(&rec, clock).await;
        rec.settle().await;
        Attempt {
            store: Some(store),
            open_error: None,
            before: Some(before),
            stop,
            acked: rec.acked_events(),
            failure: rec.failure(),
        }
    }

    async fn run_engine(&self, rec: &Arc<RecordingStore>, clock: &ManualClock) -> Stop {
        let mut builder = Engine::with_store(rec.clone())
            .workflow_dyn(self.workflow.clone())
            .seed(self.seed)
            .clock(Arc::new(clock.clone()))
            .concurrency(4)
            // The judge reads whole logs (every acknowledged event, every recorded tool call):
            // the history policy would drop what it must find. `configure` may turn it on.
            .prune_history(false);
        if let Some(configure) = &self.configure {
            builder = configure(builder);
        }
        let engine = match builder.open().await {
            Ok(engine) => engine,
            Err(e) => return stopped_by(rec, &e),
        };
        let drive = self.start_and_drive(&engine, rec, clock);
        let stop = tokio::time::timeout(self.timeout, drive).await.unwrap_or(Stop::Hung);
        match stop {
            Stop::Finished(_) => engine.shutdown().await,
            _ => engine.crash().await,
        }
        stop
    }

    async fn start_and_drive(
        &self,
        engine: &Engine,
        rec: &RecordingStore,
        clock: &ManualClock,
    ) -> Stop {
        let options = StartOptions {
            thread_id: Some(self.thread.to_string()),
            version: Some(self.workflow.version()),
            ..StartOptions::default()
        };
        if let Err(e) = engine.start_json(self.workflow.id(), self.input.clone(), options).await {
            return stopped_by(rec, &e);
        }
        match self.drive(engine, rec, clock).await {
            Ok(outcome) => Stop::Finished(outcome),
            Err(e) => stopped_by(rec, &e),
        }
    }

    /// Acts for the human and the clock until the thread stops running.
    async fn drive(
        &self,
        engine: &Engine,
        rec: &RecordingStore,
        clock: &ManualClock,
    ) -> Result<Outcome, Error> {
        let mut appends = rec.watch_appends();
        let mut seen = 0;
        loop {
            appends.borrow_and_update();
            if rec.has_failed() {
                return Err(Error::ShutDown);
            }
            seen = advance_past_retries(rec, &self.thread, clock, seen);
            let record = engine
                .store()
                .thread(&self.thread)
                .wait()?
                .ok_or_else(|| Error::UnknownThread(self.thread.to_string()))?;
            match record.status {
                ThreadStatus::Running | ThreadStatus::Created => {}
                ThreadStatus::WaitingInput => {
                    runner_released(engine, &self.thread).await;
                    let given = count(&read_all(engine.store().as_ref(), &self.thread)?);
                    match self.human_inputs.get(given) {
                        Some(answer) => engine.send_input(self.thread.as_str(), answer).await?,
                        None => return engine.thread(self.thread.as_str()).await?.outcome().await,
                    }
                    continue;
                }
                ThreadStatus::Sleeping => {
                    runner_released(engine, &self.thread).await;
                    let wf = engine.workflow_of(&self.thread).await?;
                    let ctx =
                        cairn::blocking::restore(engine.store().as_ref(), &wf, &self.thread, None)?;
                    if let Some(Waiting::Timer { until_ms, .. }) = ctx.meta.waiting {
                        clock.set_ms(until_ms);
                    }
                }
                _ => return engine.thread(self.thread.as_str()).await?.outcome().await,
            }
            tokio::select! {
                changed = appends.changed() => {
                    if changed.is_err() {
                        return Err(Error::ShutDown);
                    }
                }
                () = rec.failed() => return Err(Error::ShutDown),
            }
        }
    }
}

/// Waits until no runner of this process holds `thread`.
///
/// A runner parks a thread (waiting for input, sleeping) by committing the new status and only
/// then releasing its claim, so for a moment the parked status is visible while the claim is
/// still held: `send_input` in that moment is refused ("a runner is driving it"), and a durable
/// timer that fires in that moment is not delivered. Call this before answering a thread or
/// moving the clock past its timer. The runner releases without waiting on anything, so the
/// wait (yielding to the runtime) is short.
///
/// # Examples
/// ```
/// # async fn f(engine: cairn::Engine) -> Result<(), cairn::Error> {
/// use cairn_testkit::runner_released;
/// let thread = cairn::ThreadId::new("t1")?;
/// runner_released(&engine, &thread).await;
/// engine.send_input("t1", "yes").await?;
/// # Ok(()) }
/// ```
pub async fn runner_released(engine: &Engine, thread: &ThreadId) {
    while engine.is_driven(thread) {
        tokio::task::yield_now().await;
    }
}

/// The stop an engine error means: a storage failure if the store saw one, else an engine bug.
fn stopped_by(rec: &RecordingStore, error: &Error) -> Stop {
    if rec.has_failed() || matches!(error, Error::Storage(_)) {
        Stop::StoreFailed
    } else {
        Stop::Engine(error.to_string())
    }
}

/// Human inputs the log shows delivered.
fn count(events: &[Event]) -> usize {
    events.iter().filter(|e| e.kind == EventKind::InputReceived).count()
}

/// Moves the clock to the due time of every retry scheduled since acknowledgement `seen`, so a
/// backoff does not wait for a clock nobody moves. Returns the new `seen`.
fn advance_past_retries(
    rec: &RecordingStore,
    thread: &ThreadId,
    clock: &ManualClock,
    seen: usize,
) -> usize {
    let fresh = rec.acked_since(seen);
    for event in &fresh {
        if event.kind != EventKind::RetryScheduled || &event.thread != thread {
            continue;
        }
        let body = cairn_core::codec::decode_body(&mut event.data.clone());
        if let Ok(cairn::event::Body::RetryScheduled { at_ms: at, .. }) = body {
            clock.set_ms(at);
        }
    }
    seen + fresh.len()
}
