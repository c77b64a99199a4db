//! [`CrashHarness`]: crash a workflow at every (or a random) I/O op under every crash model,
//! recover, and compare with an uninterrupted run.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use cairn_dsl::{DynWorkflow, State, Workflow};
use cairn_storage::{RedbStore, ThreadId};
use cairn_storage_testkit::fault::{FaultBackend, OpKind};
use serde::Serialize;
use serde_json::Value;

use crate::case::{Cases, CrashCase, case_seed};
use crate::effects::{Effect, Effects};
use crate::observe::{ToolCallRecord, canonical, multiset, observe};
use crate::run::{Stop, store_options};
use crate::summary::{CaseReport, Summary};
use cairn::EngineBuilder;
use cairn::Error;
use cairn::Outcome;
use cairn::clock::ManualClock;

/// Changes the engine builder of every run (checkpoint policy, concurrency, ...).
pub type Configure = Arc<dyn Fn(EngineBuilder) -> EngineBuilder + Send + Sync>;

/// The environment variable that replays one case: its value is a [`CrashCase`] text, as
/// printed by a failure (`CAIRN_CRASH_CASE=torn_write@17#2a`).
pub const ENV_CASE: &str = "CAIRN_CRASH_CASE";
/// The environment variable that overrides the seed of a random sweep (decimal or `0x` hex).
pub const ENV_SEED: &str = "CAIRN_CRASH_SEED";

/// Crash-tests one workflow on one input.
///
/// The harness first runs the workflow uninterrupted on a simulated disk
/// ([`FaultBackend`]) with `Durability::Immediate`, recording the I/O ops redb makes, the
/// outcome, the recorded tool calls and (with [`CrashHarness::effects`]) the side effects the
/// tools performed. That run is done twice: if the two differ the workflow is not deterministic
/// and crash tests would be meaningless, so [`CrashHarness::reference`] fails.
///
/// Each [`CrashCase`] then re-runs the workflow with a fault armed at one op, lets the engine
/// run into it, takes the disk image the fault leaves (or the live file, for I/O errors the
/// process survives), reopens it, lets recovery resume the thread to its end (crashing a second
/// time during recovery if the case says so), and checks:
///
/// - every event the store acknowledged is in the recovered log, byte for byte, and was in the
///   durable image when the fault struck (`lost_acked`, `acked_not_durable`);
/// - the outcome (status, final state, error) and the recorded tool calls equal the
///   uninterrupted run's (`diverged`), no tool result is recorded twice (`duplicate_commits`),
///   `verify()` is clean;
/// - with effects: no tool whose result was recorded before the crash runs again, nothing the
///   uninterrupted run did goes missing, nothing new appears (`repeated_effects`,
///   `missing_effects`, `unexpected_effects`); tools whose result was not yet recorded may run
///   twice (at least once in execution, exactly once in the log);
/// - a storage failure reaches the engine as a storage error, nothing panics or hangs.
///
/// Time is a [`ManualClock`] that moves only when the thread sleeps on a durable timer (to the
/// timer's due time) or schedules a retry (to its due time); ids and randomness come from the
/// engine seed. Human input is scripted ([`CrashHarness::human_inputs`]): whenever the thread
/// waits for input it gets the next answer, counted from the log, so a crash never skips or
/// repeats one.
///
/// Tools must be deterministic functions of their input for the comparison to mean anything
/// (as any test oracle must be); a node that reads time, randomness or ids through its context
/// is fine, they are recorded.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use cairn_testkit::{Cases, CrashHarness, Effects};
/// use cairn::{Ctx, NodeOutput, Replace, Workflow, END, START};
///
/// let fx = Effects::new();
/// let node_fx = fx.clone();
/// let wf = Workflow::<Replace<u64>>::builder("double", 1)
///     .node("double", move |s: Arc<Replace<u64>>, ctx: Ctx| {
///         let fx = node_fx.clone();
///         async move {
///             let v: u64 =
///                 fx.tool(&ctx, "double", s.0, |x: u64, _| async move { Ok(x * 2) }).await?;
///             Ok(NodeOutput::update(v))
///         }
///     })
///     .edge(START, "double")
///     .edge("double", END)
///     .build()
///     .expect("valid workflow");
/// let harness = CrashHarness::new(&wf, 21).expect("input").effects(&fx);
/// let summary = harness.sweep(Cases::Random { count: 5, seed: 1 }).expect("reference run");
/// assert!(summary.is_clean(), "{}", summary.failure_report(5));
/// ```
pub struct CrashHarness {
    pub(crate) workflow: Arc<DynWorkflow>,
    pub(crate) input: Value,
    pub(crate) thread: ThreadId,
    pub(crate) effects: Option<Effects>,
    pub(crate) human_inputs: Vec<Value>,
    pub(crate) seed: u64,
    pub(crate) clock_start_ms: u64,
    pub(crate) configure: Option<Configure>,
    pub(crate) timeout: Duration,
    reference: Mutex<Option<Arc<Reference>>>,
    template: std::sync::OnceLock<Vec<u8>>,
}

/// What the uninterrupted run did.
#[derive(Debug, Clone)]
pub struct Reference {
    /// The mutating I/O ops redb made, in order (crash points are indexes into this).
    pub ops: Vec<OpKind>,
    /// The length of the database file before the run (an empty database).
    pub start_len: u64,
    /// How the thread ended.
    pub outcome: Outcome,
    /// The tool calls recorded in its log, in canonical order.
    pub tool_calls: Vec<ToolCallRecord>,
    /// The side effects its tools performed (with [`CrashHarness::effects`]).
    pub effects: Vec<Effect>,
    /// Events in its log.
    pub events: usize,
}

impl std::fmt::Debug for CrashHarness {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrashHarness")
            .field("workflow", &format!("{} v{}", self.workflow.id(), self.workflow.version()))
            .field("thread", &self.thread)
            .field("seed", &self.seed)
            .finish_non_exhaustive()
    }
}

impl CrashHarness {
    /// A harness for `workflow` started on `input`.
    ///
    /// # Errors
    /// [`Error::Codec`] if the input does not serialise.
    pub fn new<S: State>(workflow: &Workflow<S>, input: impl Serialize) -> Result<Self, Error> {
        Ok(Self::new_dyn(workflow.erase(), serde_json::to_value(input)?))
    }

    /// A harness for a type-erased workflow and a JSON input.
    pub fn new_dyn(workflow: Arc<DynWorkflow>, input: Value) -> Self {
        Self {
            workflow,
            input,
            thread: ThreadId::new("crash-test").expect("a valid constant thread id"),
            effects: None,
            human_inputs: Vec::new(),
            seed: 0x00C0_FFEE,
            clock_start_ms: super::CLOCK_START_MS,
            configure: None,
            timeout: Duration::from_secs(30),
            reference: Mutex::new(None),
            template: std::sync::OnceLock::new(),
        }
    }

    /// Compares the side effects the workflow's tools record in `effects` (the harness clears
    /// it before each run).
    #[must_use]
    pub fn effects(mut self, effects: &Effects) -> Self {
        self.effects = Some(effects.clone());
        self
    }

    /// Answers, in order, for each time the thread waits for human input.
    #[must_use]
    pub fn human_inputs<T: Serialize>(mut self, answers: impl IntoIterator<Item = T>) -> Self {
        self.human_inputs = answers
            .into_iter()
            .map(|a| serde_json::to_value(a).unwrap_or_else(|e| Value::String(e.to_string())))
            .collect();
        self
    }

    /// The engine seed (ids and node randomness); default `0xC0FFEE`.
    #[must_use]
    pub fn seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// The thread id (default `crash-test`).
    ///
    /// # Errors
    /// [`Error::Storage`] if the id is not a valid thread id.
    pub fn thread_id(mut self, id: &str) -> Result<Self, Error> {
        self.thread = ThreadId::new(id)?;
        Ok(self)
    }

    /// Adjusts every engine the harness opens (e.g. `|b| b.checkpoint_every(Some(2), None)`).
    #[must_use]
    pub fn configure(
        mut self,
        f: impl Fn(EngineBuilder) -> EngineBuilder + Send + Sync + 'static,
    ) -> Self {
        self.configure = Some(Arc::new(f));
        self
    }

    /// The longest a run may take before it counts as hung (default 30 s).
    #[must_use]
    pub fn timeout(mut self, limit: Duration) -> Self {
        self.timeout = limit;
        self
    }

    /// The uninterrupted run (made once, on first use).
    ///
    /// # Errors
    /// [`Error::Invalid`] if the uninterrupted run does not finish, or two uninterrupted runs
    /// differ (the workflow is not deterministic).
    pub fn reference(&self) -> Result<Arc<Reference>, Error> {
        let mut slot = self.reference.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(found) = slot.as_ref() {
            return Ok(found.clone());
        }
        let first = self.block_on(self.reference_run())?;
        let second = self.block_on(self.reference_run())?;
        if first.outcome != second.outcome
            || first.tool_calls != second.tool_calls
            || multiset(first.effects.clone()) != multiset(second.effects.clone())
        {
            return Err(Error::Invalid(format!(
                "workflow {} is not deterministic: two uninterrupted runs differ \
                 (outcomes {:?} / {:?}); crash tests need tools that are functions of their input",
                self.workflow.id(),
                first.outcome,
                second.outcome
            )));
        }
        let found = Arc::new(first);
        *slot = Some(found.clone());
        Ok(found)
    }

    /// Runs one case.
    ///
    /// # Errors
    /// As [`CrashHarness::reference`].
    pub fn check(&self, case: &CrashCase) -> Result<CaseReport, Error> {
        let reference = self.reference()?;
        let outcome =
            catch_unwind(AssertUnwindSafe(|| self.block_on(self.run_case(&reference, case))));
        Ok(outcome.unwrap_or_else(|_| {
            let mut report = CaseReport { case: Some(*case), panics: 1, ..CaseReport::default() };
            report.problem("panicked");
            report
        }))
    }

    /// Runs a sweep of cases and sums up. `CAIRN_CRASH_CASE` in the environment replaces the
    /// sweep by that one case; `CAIRN_CRASH_SEED` replaces a random sweep's seed.
    ///
    /// # Errors
    /// As [`CrashHarness::reference`]; [`Error::Invalid`] for an unreadable environment value.
    pub fn sweep(&self, cases: Cases) -> Result<Summary, Error> {
        let started = Instant::now();
        let reference = self.reference()?;
        let mut summary = Summary { ops: reference.ops.len() as u64, ..Summary::default() };
        let list: Vec<CrashCase> = match (std::env::var(ENV_CASE).ok(), cases) {
            (Some(text), _) => {
                vec![text.parse().map_err(|e| Error::Invalid(format!("{ENV_CASE}: {e}")))?]
            }
            (None, Cases::Every) => CrashCase::every(&reference.ops, reference.start_len),
            (None, Cases::EveryWith(model)) => {
                CrashCase::every_with(model, &reference.ops, reference.start_len)
            }
            (None, Cases::Random { count, seed }) => {
                let seed = match std::env::var(ENV_SEED) {
                    Ok(text) => parse_seed(&text)?,
                    Err(_) => seed,
                };
                summary.seed = Some(seed);
                let ops = reference.ops.len() as u64;
                (0..count).map(|i| CrashCase::random(case_seed(seed, i), ops)).collect()
            }
        };
        for case in &list {
            summary.add(self.check(case)?);
        }
        summary.secs = started.elapsed().as_secs_f64();
        Ok(summary)
    }

    async fn reference_run(&self) -> Result<Reference, Error> {
        let clock = ManualClock::new(self.clock_start_ms);
        self.take_effects();
        let backend = self.fresh_disk();
        let controller = backend.controller();
        let start_len = controller.live_image().len() as u64;
        controller.record_ops(true);
        let attempt = self.attempt(backend, &clock).await;
        let outcome = match attempt.stop {
            Stop::Finished(outcome) => outcome,
            other => {
                return Err(Error::Invalid(format!(
                    "the uninterrupted run of {} did not finish: {other}",
                    self.workflow.id()
                )));
            }
        };
        let Some(store) = attempt.store else {
            return Err(Error::Invalid("the uninterrupted run's store did not open".into()));
        };
        let view = observe(&store, &self.thread)?;
        store.close()?;
        let ops =
            controller.ops().into_iter().filter(|op| !matches!(op, OpKind::Read { .. })).collect();
        Ok(Reference {
            ops,
            start_len,
            outcome,
            tool_calls: canonical(&view.tool_calls),
            effects: self.take_effects(),
            events: view.events.len(),
        })
    }

    /// A disk holding an empty Cairn database, as the file is before the workflow starts.
    ///
    /// Every run starts from a copy of it rather than from nothing: crashes while the database
    /// file itself is being created are `cairn-storage`'s concern (its crash-point suite covers
    /// them), and initialising a database for each of thousands of cases would dominate a sweep.
    pub(crate) fn fresh_disk(&self) -> FaultBackend {
        let image = self.template.get_or_init(|| {
            let backend = FaultBackend::new();
            let controller = backend.controller();
            match RedbStore::with_backend(backend, store_options()).and_then(RedbStore::close) {
                Ok(()) => controller.durable_image(),
                // Leave it empty: each run then creates the database itself (and reports any
                // error there).
                Err(_) => Vec::new(),
            }
        });
        if image.is_empty() { FaultBackend::new() } else { FaultBackend::from_image(image.clone()) }
    }

    pub(crate) fn take_effects(&self) -> Vec<Effect> {
        self.effects.as_ref().map(Effects::take).unwrap_or_default()
    }

    /// Runs `fut` on a fresh current-thread runtime (on a helper thread if the caller is
    /// inside a runtime already, where blocking on another would panic).
    fn block_on<T: Send>(&self, fut: impl Future<Output = T> + Send) -> T {
        let run = move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap_or_else(|e| panic!("the crash harness cannot start a runtime: {e}"));
            runtime.block_on(fut)
        };
        if tokio::runtime::Handle::try_current().is_ok() {
            std::thread::scope(|scope| {
                scope.spawn(run).join().unwrap_or_else(|p| std::panic::resume_unwind(p))
            })
        } else {
            run()
        }
    }
}

fn parse_seed(text: &str) -> Result<u64, Error> {
    let text = text.trim();
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    parsed.map_err(|_| Error::Invalid(format!("{ENV_SEED}={text} is not a number")))
}
