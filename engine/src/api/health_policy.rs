//! What an engine does about what its health passes find (the fault handling of the research
//! agent's design): by default it only reports; with a [`HealthPolicy`] it also acts, and says
//! so (a warning in the trace, and for a thread, the reason recorded with its end or pause).
//!
//! - A stuck thread (Running, its record unmoved for longer than the watchdog): cancel it (its
//!   running node sees its cancellation token and has the cancel grace to stop; the thread
//!   ends Cancelled with the reason `watchdog: no step for N ms`), or pause it (at its next
//!   step boundary: a node hung for good never reaches one, so a pause that has not taken
//!   within [`PAUSE_WAIT`] is left to finish on its own).
//!   Or retry it: the node attempts it is running end as their timeout would, and their
//!   nodes' retry policies go on (the next attempt, or the node fails with the timeout when
//!   none is left); the failed attempt and the retry are in the thread's log, as a timeout's.
//! - A lock held past its time to live (its holder neither renewed nor released it): release
//!   it. Anyone could take it already; releasing it clears it from reports and listings.
//! - A budget that runs out already pauses its thread (the engine's budgets), so a policy has
//!   nothing to add there; raising it is an operator's call (`Engine::set_budgets`).

use std::time::Duration;

use cairn_storage::{Batch, LockOp};

use super::builder::EngineBuilder;
use super::engine::Engine;
use crate::telemetry::HealthReport;

/// How long a health pass waits for a stuck thread's pause to take.
pub const PAUSE_WAIT: Duration = Duration::from_secs(5);

pub use crate::config::{ExpiredLockAction, HealthPolicy, StuckAction};

impl EngineBuilder {
    /// Makes the engine's health passes act on what they find (default: report only).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), cairn::Error> {
    /// use cairn::{ExpiredLockAction, HealthPolicy, StuckAction};
    /// let engine = cairn::Engine::builder("cairn.db")
    ///     .watchdog_ms(15 * 60 * 1000)
    ///     .health_policy(HealthPolicy {
    ///         stuck: StuckAction::Cancel,
    ///         expired_locks: ExpiredLockAction::Release,
    ///     })
    ///     .open()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn health_policy(mut self, policy: HealthPolicy) -> Self {
        self.config.health_policy = policy;
        self
    }
}

impl Engine {
    /// Fails the node attempts the runner of `thread` in this engine is running now as their
    /// timeout would ([`StuckAction::Retry`]).
    fn retry_attempts(&self, thread: &str) -> Result<&'static str, crate::Error> {
        let id = cairn_storage::ThreadId::new(thread)?;
        if crate::coord::retry_attempts_here(self.shell.coord.as_ref(), &id) {
            Ok("told to retry the node attempts it runs")
        } else {
            Err(crate::Error::Invalid(format!("no runner of this engine drives {thread}")))
        }
    }

    /// Carries out the engine's [`HealthPolicy`] on `report`; what it did, one line each.
    pub async fn act_on_health(&self, report: &HealthReport) -> Vec<String> {
        let policy = self.shell.config.health_policy;
        let mut done = Vec::new();
        for stuck in &report.stuck {
            if let Some(hook) = &self.shell.on_stuck {
                hook(&self.shell, stuck).await;
                done.push(format!("thread {} reported to the on_stuck hook", stuck.thread));
            }
            let reason = format!("watchdog: no step for {} ms", stuck.idle_ms);
            let outcome = match policy.stuck {
                StuckAction::Report => continue,
                StuckAction::Cancel => {
                    self.cancel(&stuck.thread, &reason).await.map(|()| "cancelled")
                }
                StuckAction::Retry => self.retry_attempts(&stuck.thread),
                StuckAction::Pause => {
                    match tokio::time::timeout(PAUSE_WAIT, self.pause(&stuck.thread)).await {
                        Ok(result) => result.map(|()| "paused"),
                        Err(_) => Ok("asked to pause (not taken yet)"),
                    }
                }
            };
            match outcome {
                Ok(what) => done.push(format!("thread {} {what} ({reason})", stuck.thread)),
                // It ended or moved meanwhile: nothing to do.
                Err(e) => tracing::debug!(thread = %stuck.thread, error = %e, "health policy"),
            }
        }
        if policy.expired_locks == ExpiredLockAction::Release {
            for lock in &report.expired {
                let op = LockOp::Release { name: lock.name.clone(), owner: lock.holder.clone() };
                match self.write(Batch { locks: vec![op], ..Batch::default() }).await {
                    Ok(_) => done.push(format!(
                        "lock {} of {} released ({} ms past its time to live)",
                        lock.name, lock.holder, lock.expired_ms
                    )),
                    Err(e) => tracing::debug!(lock = %lock.name, error = %e, "health policy"),
                }
            }
        }
        for line in &done {
            tracing::warn!(action = %line, "health policy acted");
        }
        done
    }
}
