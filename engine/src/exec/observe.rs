//! A step as telemetry sees it: the `step` span around planning, running the tasks and
//! submitting the batch, and its time in `cairn_step_duration_seconds` (its commit is timed
//! apart, by the acknowledger: `cairn_commit_duration_seconds`).

use std::future::Future;
use std::sync::Arc;
use std::time::Instant;

use tracing::Instrument as _;

use super::env::ThreadEnv;

/// One step about to run.
pub(super) struct Step {
    env: Arc<ThreadEnv>,
    span: tracing::Span,
}

/// Step `n` of the thread of `env` (whose metrics are labelled with its workflow).
pub(super) fn step(env: Arc<ThreadEnv>, n: u64) -> Step {
    Step { env, span: tracing::debug_span!("step", step = n) }
}

impl Step {
    /// Runs the step's future inside its span and records its time.
    pub async fn run<F: Future>(self, step: F) -> F::Output {
        let started = Instant::now();
        let output = step.instrument(self.span).await;
        self.env.metrics.step_seconds.record(started.elapsed().as_secs_f64());
        self.env.metrics.steps.increment(1);
        output
    }
}
