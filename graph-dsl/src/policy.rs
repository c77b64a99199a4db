//! Per-node policies (retries, timeout, checkpoints, tags, version, loop bound) and per-workflow
//! settings (budgets, checkpoint policy).
//!
//! Policies are plain data with builder methods; `build()` checks their ranges and reports every
//! value out of range as a [`Problem`](crate::Problem).

use serde::{Deserialize, Serialize};

use crate::Recovery;
use crate::limits::{
    BACKOFF_MS_MAX, BACKOFF_MULTIPLIER_MAX, LOOP_BOUND_MAX, NAME_BYTES_MAX, RETRY_ATTEMPTS_MAX,
    TAGS_MAX,
};

/// How often and how patiently a failed node is attempted again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RetryPolicy {
    /// Attempts in total, the first included (>= 1; 1 means no retry).
    pub max_attempts: u32,
    /// Wait before the second attempt.
    pub initial_backoff_ms: u64,
    /// Longest wait between attempts.
    pub max_backoff_ms: u64,
    /// Growth of the wait per attempt (>= 1.0).
    pub multiplier: f64,
    /// Fraction of the wait that is randomised away (0..=1), drawn from recorded randomness.
    pub jitter: f64,
    /// Error codes ([`NodeError::code`](crate::NodeError::code)) that are never retried.
    pub non_retryable: Vec<String>,
}

impl Default for RetryPolicy {
    /// A single attempt: retrying a side effect must be a decision, not a default.
    fn default() -> Self {
        Self::none()
    }
}

impl RetryPolicy {
    /// One attempt, no retry.
    ///
    /// # Examples
    /// ```
    /// assert_eq!(cairn_dsl::RetryPolicy::none().max_attempts, 1);
    /// ```
    pub fn none() -> Self {
        Self {
            max_attempts: 1,
            initial_backoff_ms: 0,
            max_backoff_ms: 0,
            multiplier: 1.0,
            jitter: 0.0,
            non_retryable: Vec::new(),
        }
    }

    /// Up to `max_attempts` attempts, waiting `initial_backoff_ms`, then twice as long each time,
    /// at most `max_backoff_ms`; no jitter.
    ///
    /// # Examples
    /// ```
    /// let p = cairn_dsl::RetryPolicy::exponential(4, 100, 250);
    /// assert_eq!([p.backoff_ms(1, 0.0), p.backoff_ms(2, 0.0), p.backoff_ms(3, 0.0)], [100, 200, 250]);
    /// ```
    pub fn exponential(max_attempts: u32, initial_backoff_ms: u64, max_backoff_ms: u64) -> Self {
        Self {
            max_attempts,
            initial_backoff_ms,
            max_backoff_ms,
            multiplier: 2.0,
            jitter: 0.0,
            non_retryable: Vec::new(),
        }
    }

    /// Up to `max_attempts` attempts, waiting `backoff_ms` between them.
    ///
    /// # Examples
    /// ```
    /// let p = cairn_dsl::RetryPolicy::fixed(3, 50);
    /// assert_eq!(p.backoff_ms(2, 0.0), 50);
    /// ```
    pub fn fixed(max_attempts: u32, backoff_ms: u64) -> Self {
        Self {
            max_attempts,
            initial_backoff_ms: backoff_ms,
            max_backoff_ms: backoff_ms,
            multiplier: 1.0,
            jitter: 0.0,
            non_retryable: Vec::new(),
        }
    }

    /// Sets the growth factor of the wait.
    #[must_use]
    pub fn multiplier(mut self, multiplier: f64) -> Self {
        self.multiplier = multiplier;
        self
    }

    /// Sets the fraction of each wait that is randomised away.
    #[must_use]
    pub fn jitter(mut self, jitter: f64) -> Self {
        self.jitter = jitter;
        self
    }

    /// Adds an error code that is never retried.
    #[must_use]
    pub fn non_retryable(mut self, code: impl Into<String>) -> Self {
        self.non_retryable.push(code.into());
        self
    }

    /// The wait in ms after failed attempt number `attempt` (1-based; 0 is read as 1), given a
    /// random `jitter_unit` in `[0, 1)` that the engine draws from recorded randomness.
    ///
    /// `min(max, initial * multiplier^(attempt-1))`, minus `jitter * jitter_unit` of it. Only
    /// IEEE multiplications are used (no `powf`), so the result is the same on every machine and
    /// a replay recomputes the same wait. Inputs out of range are clamped, never a panic.
    ///
    /// # Examples
    /// ```
    /// let p = cairn_dsl::RetryPolicy::exponential(5, 1_000, 60_000).jitter(0.5);
    /// assert_eq!(p.backoff_ms(3, 0.0), 4_000);
    /// assert_eq!(p.backoff_ms(3, 0.5), 3_000);
    /// ```
    pub fn backoff_ms(&self, attempt: u32, jitter_unit: f64) -> u64 {
        let max = self.max_backoff_ms.max(self.initial_backoff_ms) as f64;
        let multiplier = if self.multiplier.is_finite() { self.multiplier.max(1.0) } else { 1.0 };
        let mut wait = self.initial_backoff_ms as f64;
        for _ in 1..attempt.max(1) {
            if wait >= max {
                break;
            }
            wait *= multiplier;
        }
        let wait = wait.min(max);
        let jitter = clamp_unit(self.jitter) * clamp_unit(jitter_unit);
        // `as` saturates and maps NaN to 0, so no input can make this panic.
        (wait - wait * jitter) as u64
    }

    /// Range problems of this policy, as human-readable details (empty when valid).
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.max_attempts == 0 {
            out.push("retry.max_attempts is 0; it must be at least 1".to_owned());
        }
        if self.max_attempts > RETRY_ATTEMPTS_MAX {
            out.push(format!(
                "retry.max_attempts {} exceeds {RETRY_ATTEMPTS_MAX}",
                self.max_attempts
            ));
        }
        if self.initial_backoff_ms > self.max_backoff_ms {
            out.push(format!(
                "retry.initial_backoff_ms {} exceeds retry.max_backoff_ms {}",
                self.initial_backoff_ms, self.max_backoff_ms
            ));
        }
        if self.max_backoff_ms > BACKOFF_MS_MAX {
            out.push(format!(
                "retry.max_backoff_ms {} exceeds {BACKOFF_MS_MAX}",
                self.max_backoff_ms
            ));
        }
        if !(self.multiplier >= 1.0 && self.multiplier <= BACKOFF_MULTIPLIER_MAX) {
            out.push(format!(
                "retry.multiplier {} is outside 1.0..={BACKOFF_MULTIPLIER_MAX}",
                self.multiplier
            ));
        }
        if !(0.0..=1.0).contains(&self.jitter) {
            out.push(format!("retry.jitter {} is outside 0.0..=1.0", self.jitter));
        }
        for code in &self.non_retryable {
            if code.is_empty() || code.len() > NAME_BYTES_MAX {
                out.push(format!(
                    "retry.non_retryable code {code:?} must be 1..={NAME_BYTES_MAX} bytes"
                ));
            }
        }
        out
    }
}

fn clamp_unit(x: f64) -> f64 {
    if x.is_nan() { 0.0 } else { x.clamp(0.0, 1.0) }
}

/// How the engine runs one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodePolicy {
    /// Retries.
    pub retry: RetryPolicy,
    /// Watchdog per attempt; `None` means no timeout.
    pub timeout_ms: Option<u64>,
    /// Take a checkpoint after this node completes.
    pub checkpoint_after: bool,
    /// Completing this node completes a phase: the engine takes a phase checkpoint.
    pub phase: bool,
    /// Free-form labels (for checkpoints, events, pictures).
    pub tags: Vec<String>,
    /// The node's code version; bump it when the code changes meaningfully (it is part of the
    /// workflow's fingerprint).
    pub version: u32,
    /// How many times the node may be entered per thread (set by
    /// [`WorkflowBuilder::loop_bound`](crate::WorkflowBuilder::loop_bound)); every cycle must
    /// pass through a node that has one.
    pub max_visits: Option<u32>,
    /// What happens when the node fails for good (retries spent): see [`Recovery`]. Absent in
    /// policies written before it existed ([`Recovery::Fail`]).
    #[serde(default, skip_serializing_if = "Recovery::is_fail")]
    pub on_failure: Recovery,
    /// The recovery of a failure of a given kind, which takes precedence over `on_failure`
    /// for that kind (`NodePolicy::on_failure_of`). Absent in policies written before it
    /// existed (none).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub on_failure_by_kind: std::collections::BTreeMap<crate::FailureKind, Recovery>,
}

impl Default for NodePolicy {
    fn default() -> Self {
        Self {
            retry: RetryPolicy::none(),
            timeout_ms: None,
            checkpoint_after: false,
            phase: false,
            tags: Vec::new(),
            version: 1,
            max_visits: None,
            on_failure: Recovery::Fail,
            on_failure_by_kind: std::collections::BTreeMap::new(),
        }
    }
}

impl NodePolicy {
    /// Sets the retry policy.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodePolicy, RetryPolicy};
    /// let p = NodePolicy::default().retry(RetryPolicy::exponential(3, 100, 2_000)).timeout_ms(5_000);
    /// assert_eq!(p.retry.max_attempts, 3);
    /// assert_eq!(p.timeout_ms, Some(5_000));
    /// ```
    #[must_use]
    pub fn retry(mut self, retry: RetryPolicy) -> Self {
        self.retry = retry;
        self
    }

    /// Sets the per-attempt timeout.
    #[must_use]
    pub fn timeout_ms(mut self, timeout_ms: u64) -> Self {
        self.timeout_ms = Some(timeout_ms);
        self
    }

    /// Asks for a checkpoint after this node.
    #[must_use]
    pub fn checkpoint_after(mut self, on: bool) -> Self {
        self.checkpoint_after = on;
        self
    }

    /// Marks this node as the end of a phase (a phase checkpoint follows it).
    #[must_use]
    pub fn phase(mut self, on: bool) -> Self {
        self.phase = on;
        self
    }

    /// Adds a tag.
    #[must_use]
    pub fn tag(mut self, tag: impl Into<String>) -> Self {
        self.tags.push(tag.into());
        self
    }

    /// Sets the node's code version.
    #[must_use]
    pub fn version(mut self, version: u32) -> Self {
        self.version = version;
        self
    }

    /// Sets what happens when the node fails for good (see [`Recovery`]).
    #[must_use]
    pub fn on_failure(mut self, recovery: Recovery) -> Self {
        self.on_failure = recovery;
        self
    }

    /// Sets what happens when the node fails for good with a failure of `kind` (see
    /// [`FailureKind`](crate::FailureKind)), instead of `on_failure`; other kinds keep
    /// `on_failure`.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{FailureKind, NodePolicy, Recovery};
    /// let p = NodePolicy::default()
    ///     .timeout_ms(1_000)
    ///     .on_failure_of(FailureKind::Timeout, Recovery::RestoreAndRetry);
    /// assert_eq!(p.recovery_for(FailureKind::Timeout), &Recovery::RestoreAndRetry);
    /// assert_eq!(p.recovery_for(FailureKind::Other), &Recovery::Fail);
    /// ```
    #[must_use]
    pub fn on_failure_of(mut self, kind: crate::FailureKind, recovery: Recovery) -> Self {
        self.on_failure_by_kind.insert(kind, recovery);
        self
    }

    /// The recovery of a failure of `kind`: the one set for the kind, else `on_failure`.
    pub fn recovery_for(&self, kind: crate::FailureKind) -> &Recovery {
        self.on_failure_by_kind.get(&kind).unwrap_or(&self.on_failure)
    }

    /// Bounds how often the node may be entered per thread.
    #[must_use]
    pub fn max_visits(mut self, max_visits: u32) -> Self {
        self.max_visits = Some(max_visits);
        self
    }

    pub(crate) fn problems(&self) -> Vec<String> {
        let mut out = self.retry.problems();
        if self.timeout_ms == Some(0) {
            out.push("timeout_ms is 0; use None for no timeout".to_owned());
        }
        match self.max_visits {
            Some(0) => out.push("max_visits is 0; the node could never run".to_owned()),
            Some(n) if n > LOOP_BOUND_MAX => {
                out.push(format!("max_visits {n} exceeds {LOOP_BOUND_MAX}"));
            }
            _ => {}
        }
        if self.tags.len() > TAGS_MAX {
            out.push(format!("{} tags exceed {TAGS_MAX}", self.tags.len()));
        }
        for tag in &self.tags {
            if tag.is_empty() || tag.len() > NAME_BYTES_MAX {
                out.push(format!("tag {tag:?} must be 1..={NAME_BYTES_MAX} bytes"));
            }
        }
        out
    }
}

/// Limits on one thread's consumption. The engine warns at `warn_fraction` of each limit and stops
/// the thread cleanly at the limit.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Budgets {
    /// Steps.
    pub max_steps: Option<u64>,
    /// Tool calls.
    pub max_tool_calls: Option<u64>,
    /// Model tokens.
    pub max_tokens: Option<u64>,
    /// Cost in millionths of the currency unit.
    pub max_cost_micros: Option<u64>,
    /// Wall-clock duration of the thread.
    pub max_wall_ms: Option<u64>,
    /// Fraction of a limit at which a warning event is emitted (0 < f <= 1).
    pub warn_fraction: f64,
}

impl Default for Budgets {
    fn default() -> Self {
        Self {
            max_steps: None,
            max_tool_calls: None,
            max_tokens: None,
            max_cost_micros: None,
            max_wall_ms: None,
            warn_fraction: 0.8,
        }
    }
}

impl Budgets {
    /// Sets the step limit.
    ///
    /// # Examples
    /// ```
    /// let b = cairn_dsl::Budgets::default().max_steps(100).max_tokens(50_000);
    /// assert_eq!((b.max_steps, b.max_tokens), (Some(100), Some(50_000)));
    /// ```
    #[must_use]
    pub fn max_steps(mut self, n: u64) -> Self {
        self.max_steps = Some(n);
        self
    }

    /// Sets the tool-call limit.
    #[must_use]
    pub fn max_tool_calls(mut self, n: u64) -> Self {
        self.max_tool_calls = Some(n);
        self
    }

    /// Sets the token limit.
    #[must_use]
    pub fn max_tokens(mut self, n: u64) -> Self {
        self.max_tokens = Some(n);
        self
    }

    /// Sets the cost limit (micros).
    #[must_use]
    pub fn max_cost_micros(mut self, n: u64) -> Self {
        self.max_cost_micros = Some(n);
        self
    }

    /// Sets the wall-clock limit.
    #[must_use]
    pub fn max_wall_ms(mut self, n: u64) -> Self {
        self.max_wall_ms = Some(n);
        self
    }

    /// Sets the warning fraction.
    #[must_use]
    pub fn warn_fraction(mut self, f: f64) -> Self {
        self.warn_fraction = f;
        self
    }

    pub(crate) fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        let limits = [
            ("max_steps", self.max_steps),
            ("max_tool_calls", self.max_tool_calls),
            ("max_tokens", self.max_tokens),
            ("max_cost_micros", self.max_cost_micros),
            ("max_wall_ms", self.max_wall_ms),
        ];
        for (name, value) in limits {
            if value == Some(0) {
                out.push(format!("budgets.{name} is 0; the thread could not start"));
            }
        }
        if !(self.warn_fraction > 0.0 && self.warn_fraction <= 1.0) {
            out.push(format!("budgets.warn_fraction {} is outside (0.0, 1.0]", self.warn_fraction));
        }
        out
    }
}

/// When the engine takes periodic checkpoints (either condition triggers one).
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointPolicy {
    /// Every this many steps.
    pub every_steps: Option<u64>,
    /// Every this many milliseconds (engine clock, checked at step boundaries).
    pub every_ms: Option<u64>,
}

impl CheckpointPolicy {
    pub(crate) fn problems(&self) -> Vec<String> {
        let mut out = Vec::new();
        if self.every_steps == Some(0) {
            out.push("checkpoint.every_steps is 0; use None to disable".to_owned());
        }
        if self.every_ms == Some(0) {
            out.push("checkpoint.every_ms is 0; use None to disable".to_owned());
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_caps_and_jitters() {
        let p = RetryPolicy::exponential(10, 100, 1_000).jitter(1.0);
        let waits: Vec<u64> = (1..=6).map(|a| p.backoff_ms(a, 0.0)).collect();
        assert_eq!(waits, [100, 200, 400, 800, 1_000, 1_000]);
        assert_eq!(p.backoff_ms(0, 0.0), 100);
        assert_eq!(p.backoff_ms(3, 0.25), 300);
        assert_eq!(p.backoff_ms(u32::MAX, 0.0), 1_000);
    }

    #[test]
    fn backoff_never_panics_on_hostile_values() {
        let p = RetryPolicy {
            max_attempts: 0,
            initial_backoff_ms: u64::MAX,
            max_backoff_ms: 0,
            multiplier: f64::NAN,
            jitter: f64::INFINITY,
            non_retryable: Vec::new(),
        };
        assert_eq!(p.backoff_ms(5, f64::NAN), u64::MAX);
        let q = RetryPolicy::exponential(3, 1, u64::MAX).multiplier(f64::MAX);
        assert_eq!(q.backoff_ms(4, 0.0), u64::MAX);
    }

    #[test]
    fn range_problems_are_reported() {
        assert!(RetryPolicy::exponential(3, 10, 20).problems().is_empty());
        assert_eq!(RetryPolicy::exponential(0, 10, 20).problems().len(), 1);
        assert_eq!(RetryPolicy::exponential(1, 30, 20).problems().len(), 1);
        assert_eq!(RetryPolicy::fixed(2, 5).multiplier(0.5).jitter(-0.1).problems().len(), 2);
        assert_eq!(NodePolicy::default().timeout_ms(0).problems().len(), 1);
        assert_eq!(Budgets::default().warn_fraction(0.0).problems().len(), 1);
        assert_eq!(Budgets::default().max_steps(0).problems().len(), 1);
    }
}
