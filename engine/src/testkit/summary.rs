//! What one crash case found ([`CaseReport`]) and what a sweep found ([`Summary`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::testkit::case::CrashCase;

/// The findings of one crash case. Every counter but the informational ones must be zero.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CaseReport {
    /// The case.
    pub case: Option<CrashCase>,
    /// Whether the fault fired (an op past the end of the run does not).
    pub fired: bool,
    /// Whether a second crash fired during recovery.
    pub second_crash: bool,
    /// Acknowledged events missing or different after recovery.
    pub lost_acked: u64,
    /// Acknowledged events missing from the durable image at the time of the fault (an
    /// acknowledgement without a durable commit).
    pub acked_not_durable: u64,
    /// The recovered run's outcome (status, output, error) or recorded tool calls differ from
    /// the uninterrupted run's.
    pub diverged: u64,
    /// Executions of a tool whose result was recorded before the crash, or beyond what the
    /// uninterrupted run did.
    pub repeated_effects: u64,
    /// Effects of the uninterrupted run that never happened in the crashed one.
    pub missing_effects: u64,
    /// Effects the uninterrupted run never made.
    pub unexpected_effects: u64,
    /// A tool result recorded twice for one call.
    pub duplicate_commits: u64,
    /// Storage failures that reached the engine as something other than a storage error.
    pub untyped_errors: u64,
    /// `verify()` problems in the recovered database.
    pub verify_problems: u64,
    /// A run that neither finished nor failed within the time limit.
    pub hung: u64,
    /// A panic in the harness or the engine.
    pub panics: u64,
    /// Informational: the recovered database could not be used, with a storage error (allowed
    /// only for crash models outside redb's media contract: never wrong data, but maybe no data).
    pub unrecoverable: u64,
    /// Informational: tool executions that ran before the crash without their result being
    /// recorded, so they ran again (at least once in execution).
    pub reexecuted: u64,
    /// Informational: a full disk that reached the engine as `storage::Error::DiskFull`.
    pub disk_full_typed: u64,
    /// The first storage failure the engine saw in the run with the fault, as text.
    pub error: Option<String>,
    /// What went wrong, in words.
    pub problems: Vec<String>,
}

impl CaseReport {
    /// Whether every must-be-zero counter is zero.
    pub fn is_clean(&self) -> bool {
        self.problems.is_empty()
            && self.lost_acked
                + self.acked_not_durable
                + self.diverged
                + self.repeated_effects
                + self.missing_effects
                + self.unexpected_effects
                + self.duplicate_commits
                + self.untyped_errors
                + self.verify_problems
                + self.hung
                + self.panics
                == 0
    }

    pub(crate) fn problem(&mut self, text: impl Into<String>) {
        self.problems.push(text.into());
    }
}

/// The findings of a sweep of crash cases.
#[derive(Debug, Clone, Default)]
pub struct Summary {
    /// Cases run.
    pub cases: u64,
    /// Cases whose fault fired.
    pub fired: u64,
    /// Cases that crashed a second time during recovery.
    pub second_crashes: u64,
    /// Sum of [`CaseReport::lost_acked`].
    pub lost_acked: u64,
    /// Sum of [`CaseReport::acked_not_durable`].
    pub acked_not_durable: u64,
    /// Sum of [`CaseReport::diverged`].
    pub diverged: u64,
    /// Sum of [`CaseReport::repeated_effects`].
    pub repeated_effects: u64,
    /// Sum of [`CaseReport::missing_effects`].
    pub missing_effects: u64,
    /// Sum of [`CaseReport::unexpected_effects`].
    pub unexpected_effects: u64,
    /// Sum of [`CaseReport::duplicate_commits`].
    pub duplicate_commits: u64,
    /// Sum of [`CaseReport::untyped_errors`].
    pub untyped_errors: u64,
    /// Sum of [`CaseReport::verify_problems`].
    pub verify_problems: u64,
    /// Sum of [`CaseReport::hung`].
    pub hung: u64,
    /// Sum of [`CaseReport::panics`].
    pub panics: u64,
    /// Sum of [`CaseReport::unrecoverable`] (informational).
    pub unrecoverable: u64,
    /// Sum of [`CaseReport::reexecuted`] (informational).
    pub reexecuted: u64,
    /// Sum of [`CaseReport::disk_full_typed`] (informational).
    pub disk_full_typed: u64,
    /// Cases per first crash model.
    pub per_model: BTreeMap<&'static str, u64>,
    /// Mutating ops of the uninterrupted run.
    pub ops: u64,
    /// The random sweep's seed, if it was one.
    pub seed: Option<u64>,
    /// Wall time of the sweep in seconds.
    pub secs: f64,
    /// The failing cases and what went wrong in each.
    pub failures: Vec<CaseReport>,
}

impl Summary {
    /// Adds one case's findings.
    pub fn add(&mut self, report: CaseReport) {
        self.cases += 1;
        self.fired += u64::from(report.fired);
        self.second_crashes += u64::from(report.second_crash);
        self.lost_acked += report.lost_acked;
        self.acked_not_durable += report.acked_not_durable;
        self.diverged += report.diverged;
        self.repeated_effects += report.repeated_effects;
        self.missing_effects += report.missing_effects;
        self.unexpected_effects += report.unexpected_effects;
        self.duplicate_commits += report.duplicate_commits;
        self.untyped_errors += report.untyped_errors;
        self.verify_problems += report.verify_problems;
        self.hung += report.hung;
        self.panics += report.panics;
        self.unrecoverable += report.unrecoverable;
        self.reexecuted += report.reexecuted;
        self.disk_full_typed += report.disk_full_typed;
        if let Some(case) = report.case {
            *self.per_model.entry(case.model.as_str()).or_insert(0) += 1;
        }
        if !report.is_clean() {
            self.failures.push(report);
        }
    }

    /// Adds another summary's findings (for a suite made of several sweeps).
    pub fn merge(&mut self, other: Summary) {
        self.cases += other.cases;
        self.fired += other.fired;
        self.second_crashes += other.second_crashes;
        self.lost_acked += other.lost_acked;
        self.acked_not_durable += other.acked_not_durable;
        self.diverged += other.diverged;
        self.repeated_effects += other.repeated_effects;
        self.missing_effects += other.missing_effects;
        self.unexpected_effects += other.unexpected_effects;
        self.duplicate_commits += other.duplicate_commits;
        self.untyped_errors += other.untyped_errors;
        self.verify_problems += other.verify_problems;
        self.hung += other.hung;
        self.panics += other.panics;
        self.unrecoverable += other.unrecoverable;
        self.reexecuted += other.reexecuted;
        self.disk_full_typed += other.disk_full_typed;
        for (model, n) in other.per_model {
            *self.per_model.entry(model).or_insert(0) += n;
        }
        self.ops += other.ops;
        self.secs += other.secs;
        self.failures.extend(other.failures);
    }

    /// Whether no case failed.
    pub fn is_clean(&self) -> bool {
        self.failures.is_empty()
    }

    /// The one-line summary `RELIABILITY <test> key=value...` the suite prints.
    pub fn line(&self, test: &str) -> String {
        let mut line = format!(
            "RELIABILITY {test} cases={} fired={} second_crashes={} lost_acked={} \
             acked_not_durable={} diverged={} repeated_effects={} missing_effects={} \
             unexpected_effects={} duplicate_commits={} untyped_errors={} verify_problems={} \
             hung={} panics={} unrecoverable={} reexecuted={} disk_full_typed={} ops={} \
             secs={:.1}",
            self.cases,
            self.fired,
            self.second_crashes,
            self.lost_acked,
            self.acked_not_durable,
            self.diverged,
            self.repeated_effects,
            self.missing_effects,
            self.unexpected_effects,
            self.duplicate_commits,
            self.untyped_errors,
            self.verify_problems,
            self.hung,
            self.panics,
            self.unrecoverable,
            self.reexecuted,
            self.disk_full_typed,
            self.ops,
            self.secs,
        );
        if let Some(seed) = self.seed {
            let _ = write!(line, " seed={seed:#x}");
        }
        let models: Vec<String> = self.per_model.iter().map(|(m, n)| format!("{m}={n}")).collect();
        let _ = write!(line, " per_model=[{}]", models.join(","));
        line
    }

    /// A readable account of the first `max` failures, each with the case text that replays it
    /// (`CAIRN_CRASH_CASE=<case>`).
    pub fn failure_report(&self, max: usize) -> String {
        let mut out = String::new();
        for report in self.failures.iter().take(max) {
            let case = report.case.map(|c| c.to_string()).unwrap_or_default();
            let _ = writeln!(out, "case {case} (replay: CAIRN_CRASH_CASE={case}):");
            for problem in report.problems.iter().take(8) {
                let _ = writeln!(out, "    {problem}");
            }
        }
        if self.failures.len() > max {
            let _ = writeln!(out, "... and {} more failing cases", self.failures.len() - max);
        }
        if let Some(seed) = self.seed {
            let _ = writeln!(
                out,
                "sweep seed {seed:#x} (replay the sweep: CAIRN_CRASH_SEED={seed:#x})"
            );
        }
        out
    }
}
