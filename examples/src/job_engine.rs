//! A job engine: many small jobs through one Cairn engine, at most four at a time, with retries
//! and a watchdog per attempt, and the result of each job read back from its thread.
//!
//! Every job is a thread of the one-node `job` workflow. The `work` node's policy says how the
//! engine treats trouble: an attempt that runs past [`JOB_TIMEOUT_MS`] is cancelled and counts
//! as a failure; a retryable failure (a timeout included) is tried again, up to
//! [`MAX_ATTEMPTS`] attempts; a permanent failure ends the job at once. The jobs carry the faults
//! they will meet ([`Faults`]), so each job's fate is known in advance and the run can be
//! checked: the counts per outcome are a function of the job list alone.
//!
//! Concurrency is the engine's: `Engine::builder(..).concurrency(4)` drives at most four threads
//! at once, and a gauge inside the node records the most attempts ever in flight together.

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use cairn::dsl::{Ctx, NodeOutput, NodePolicy, RetryPolicy, State, Workflow};
use cairn::event::Body;
use cairn::{END, Engine, NodeError, START, StartOptions, ThreadStatus};
use serde::{Deserialize, Serialize};

/// Threads the engine drives at once.
pub const CONCURRENCY: usize = 4;
/// Jobs the example runs.
pub const JOBS: u32 = 200;
/// Attempts per job, the first included.
pub const MAX_ATTEMPTS: u32 = 3;
/// The watchdog per attempt. A healthy attempt is a few microseconds of arithmetic, so this is
/// orders of magnitude of slack; a hanging attempt costs this much of a worker's time.
pub const JOB_TIMEOUT_MS: u64 = 250;
/// Wait between attempts.
pub const BACKOFF_MS: u64 = 5;

/// Trouble a job will meet, by attempt: first it hangs (`hang_attempts` attempts), then it fails
/// with a retryable error (`fail_attempts` attempts), then it succeeds; unless `fatal`, which
/// fails the first attempt with a permanent error.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Faults {
    /// Attempts that hang until the watchdog cancels them.
    pub hang_attempts: u32,
    /// Attempts after those that fail with a retryable error.
    pub fail_attempts: u32,
    /// Fail at once with a permanent error (bad input).
    pub fatal: bool,
}

/// One job: its input, its faults and, once done, its result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Job number.
    pub n: u32,
    /// What to work on: the job computes the Collatz stopping time of this number.
    pub input: u64,
    /// The faults it meets.
    pub faults: Faults,
    /// The result, once computed.
    pub result: Option<u64>,
}

impl State for Job {
    type Update = u64;
    fn apply(&mut self, result: u64) {
        self.result = Some(result);
    }
}

/// How one job ended, read from its thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct JobRow {
    /// Job number.
    pub n: u32,
    /// Final status of its thread.
    pub status: ThreadStatus,
    /// Attempts made.
    pub attempts: u32,
    /// Attempts the watchdog cut short.
    pub timeouts: u32,
    /// The result, if it completed.
    pub result: Option<u64>,
    /// The error that ended it, if it failed.
    pub error: Option<String>,
    /// The outcome's category (see [`outcome`]).
    pub outcome: &'static str,
}

/// What a run of the example did.
#[derive(Debug, Clone)]
pub struct Summary {
    /// Every job, by number.
    pub rows: Vec<JobRow>,
    /// Jobs per final status.
    pub by_status: BTreeMap<ThreadStatus, usize>,
    /// Jobs per outcome category.
    pub by_outcome: BTreeMap<&'static str, usize>,
    /// The most attempts that were in flight at the same moment.
    pub max_in_flight: usize,
}

/// The faults of job `n` in the example's job list: one job in ten fails once, one in 25 hangs
/// once, one in 40 always hangs, one in 50 has bad input, one in 50 fails every attempt. The
/// residues are chosen so that no job is in two groups.
pub fn faults(n: u32) -> Faults {
    let none = Faults::default();
    match n {
        _ if n % 10 == 1 => Faults { fail_attempts: 1, ..none },
        _ if n % 25 == 2 => Faults { hang_attempts: 1, ..none },
        _ if n % 40 == 5 => Faults { hang_attempts: MAX_ATTEMPTS, ..none },
        _ if n % 50 == 8 => Faults { fatal: true, ..none },
        _ if n % 50 == 9 => Faults { fail_attempts: MAX_ATTEMPTS, ..none },
        _ => none,
    }
}

/// The category of a finished job: `"first_try"`, `"after_retry"`, `"after_timeout"`,
/// `"failed_timeout"`, `"failed_fatal"`, `"failed_retries"`, or `"other"`.
pub fn outcome(
    status: ThreadStatus,
    attempts: u32,
    timeouts: u32,
    last_error_fatal: bool,
) -> &'static str {
    match status {
        ThreadStatus::Completed if attempts == 1 => "first_try",
        ThreadStatus::Completed if timeouts > 0 => "after_timeout",
        ThreadStatus::Completed => "after_retry",
        ThreadStatus::Failed if last_error_fatal => "failed_fatal",
        ThreadStatus::Failed if timeouts == attempts => "failed_timeout",
        ThreadStatus::Failed => "failed_retries",
        _ => "other",
    }
}

/// Counts attempts in flight and remembers the most at once.
#[derive(Debug, Default)]
pub struct Gauge {
    now: AtomicUsize,
    max: AtomicUsize,
}

impl Gauge {
    /// Counts one attempt in flight until the guard drops (also when the watchdog drops the
    /// attempt's future).
    pub fn enter(self: &Arc<Self>) -> GaugeGuard {
        let now = self.now.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        GaugeGuard(self.clone())
    }

    /// The most attempts in flight at once so far.
    pub fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }
}

/// One attempt in flight; see [`Gauge::enter`].
#[derive(Debug)]
pub struct GaugeGuard(Arc<Gauge>);

impl Drop for GaugeGuard {
    fn drop(&mut self) {
        self.0.now.fetch_sub(1, Ordering::SeqCst);
    }
}

/// The Collatz stopping time of `n` (steps to reach 1): the job's actual work.
pub fn collatz_steps(mut n: u64) -> u64 {
    let mut steps = 0;
    while n > 1 {
        n = if n.is_multiple_of(2) { n / 2 } else { 3 * n + 1 };
        steps += 1;
    }
    steps
}

/// The `job` workflow: one `work` node with a timeout and retries.
///
/// # Errors
/// Never for this definition.
pub fn workflow(gauge: Arc<Gauge>) -> Result<Workflow<Job>, cairn::dsl::BuildError> {
    let policy = NodePolicy::default()
        .retry(RetryPolicy::fixed(MAX_ATTEMPTS, BACKOFF_MS).non_retryable("bad_input"))
        .timeout_ms(JOB_TIMEOUT_MS);
    Workflow::<Job>::builder("job", 1)
        .node_with(
            "work",
            move |job: Arc<Job>, ctx: Ctx| {
                let gauge = gauge.clone();
                async move {
                    let _in_flight = gauge.enter();
                    let attempt = ctx.attempt();
                    let f = job.faults;
                    if f.fatal {
                        return Err(NodeError::fatal("input rejected").with_code("bad_input"));
                    }
                    if attempt <= f.hang_attempts {
                        // A stuck dependency: nothing happens until the watchdog gives up.
                        ctx.cancelled().await;
                        return Err(NodeError::Cancelled);
                    }
                    if attempt <= f.hang_attempts + f.fail_attempts {
                        return Err(NodeError::retryable(format!(
                            "upstream busy (attempt {attempt})"
                        )));
                    }
                    Ok(NodeOutput::update(collatz_steps(job.input)))
                }
            },
            policy,
        )
        .edge(START, "work")
        .edge("work", END)
        .build()
}

/// Runs [`JOBS`] jobs at [`CONCURRENCY`] and reads back how each ended.
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    let gauge = Arc::new(Gauge::default());
    let wf = workflow(gauge.clone())?;
    let engine = Engine::builder(db).workflow(&wf).concurrency(CONCURRENCY).open().await?;
    let mut handles = Vec::new();
    for n in 0..JOBS {
        let job = Job { n, input: 1_000 + u64::from(n), faults: faults(n), result: None };
        handles.push(engine.start(&wf, job, StartOptions::id(format!("job-{n:03}"))).await?);
    }
    let mut rows = Vec::new();
    for (n, handle) in (0..JOBS).zip(&handles) {
        let outcome = handle.finished().await?;
        rows.push(row(&engine, n, handle.id(), outcome)?);
    }
    engine.shutdown().await;
    let mut by_status = BTreeMap::new();
    let mut by_outcome = BTreeMap::new();
    for r in &rows {
        *by_status.entry(r.status).or_default() += 1;
        *by_outcome.entry(r.outcome).or_default() += 1;
    }
    Ok(Summary { rows, by_status, by_outcome, max_in_flight: gauge.max() })
}

/// One job's row, from its events (attempts and timeouts) and its outcome.
fn row(
    engine: &Engine,
    n: u32,
    id: &cairn::ThreadId,
    outcome: cairn::Outcome<Job>,
) -> anyhow::Result<JobRow> {
    let mut attempts = 0;
    let mut timeouts = 0;
    let mut last_error_fatal = false;
    for event in engine.store().read_since(id, cairn::Seq(0), 10_000).wait()? {
        match cairn::blocking::decode(engine.store().as_ref(), event)?.body {
            Body::NodeStarted { attempt, .. } | Body::NodeCompleted { attempt, .. } => {
                attempts = attempts.max(attempt)
            }
            Body::NodeFailed { error, .. } => {
                timeouts += u32::from(matches!(error, NodeError::Timeout { .. }));
                last_error_fatal = error.code() == Some("bad_input");
            }
            _ => {}
        }
    }
    let result = outcome.output.as_ref().and_then(|job| job.result);
    // The thread keeps its last error also when a later attempt succeeded: report it only for
    // jobs it ended.
    let error = if outcome.status == ThreadStatus::Completed { None } else { outcome.error };
    Ok(JobRow {
        n,
        status: outcome.status,
        attempts,
        timeouts,
        result,
        error,
        outcome: self::outcome(outcome.status, attempts, timeouts, last_error_fatal),
    })
}
