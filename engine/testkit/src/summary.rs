//! What one crash case found ([`CaseReport`]) and what a sweep found ([`Summary`]).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::case::CrashCase;

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
    pub(crate) fn problem(&mut self, text: impl Into<String>) {
        self.problems.push(text.into());
    }
}

/// Names the counters a case reports and a sweep sums, once: a case with a `must_be_zero` one
/// above zero fails, an `informational` one does not. [`Summary`] has a field of each name, the
/// sum of the case's.
macro_rules! counters {
    ($n:literal; must_be_zero: $($zero:ident),+; informational: $($info:ident),+) => {
        /// The findings of a sweep of crash cases.
        #[derive(Debug, Clone, Default)]
        pub struct Summary {
            /// Cases run.
            pub cases: u64,
            /// Cases whose fault fired.
            pub fired: u64,
            /// Cases that crashed a second time during recovery.
            pub second_crashes: u64,
            $(#[doc = concat!("Sum of [`CaseReport::", stringify!($zero), "`].")]
            pub $zero: u64,)+
            $(#[doc = concat!("Sum of [`CaseReport::", stringify!($info), "`] (informational).")]
            pub $info: u64,)+
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

        /// The summed counters' names, in the order of [`Summary::line`].
        const COUNTERS: [&str; $n] = [$(stringify!($zero),)+ $(stringify!($info)),+];

        impl CaseReport {
            /// Whether every must-be-zero counter is zero.
            pub fn is_clean(&self) -> bool {
                self.problems.is_empty() $(&& self.$zero == 0)+
            }

            fn counts(&self) -> [u64; $n] {
                [$(self.$zero,)+ $(self.$info),+]
            }
        }

        impl Summary {
            fn counts(&self) -> [u64; $n] {
                [$(self.$zero,)+ $(self.$info),+]
            }

            fn add_counts(&mut self, counts: [u64; $n]) {
                let sums = [$(&mut self.$zero,)+ $(&mut self.$info),+];
                for (sum, n) in sums.into_iter().zip(counts) {
                    *sum += n;
                }
            }
        }
    };
}

counters! {
    14;
    must_be_zero: lost_acked, acked_not_durable, diverged, repeated_effects, missing_effects,
        unexpected_effects, duplicate_commits, untyped_errors, verify_problems, hung, panics;
    informational: unrecoverable, reexecuted, disk_full_typed
}

impl Summary {
    /// Adds one case's findings.
    pub fn add(&mut self, report: CaseReport) {
        self.cases += 1;
        self.fired += u64::from(report.fired);
        self.second_crashes += u64::from(report.second_crash);
        self.add_counts(report.counts());
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
        self.add_counts(other.counts());
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

    /// The one-line summary `RELIABILITY <test> key=value... verdict: ...` the suite prints: the
    /// counters, then [`Summary::verdict`].
    pub fn line(&self, test: &str) -> String {
        let mut line = format!(
            "RELIABILITY {test} cases={} fired={} second_crashes={}",
            self.cases, self.fired, self.second_crashes
        );
        for (name, n) in COUNTERS.iter().zip(self.counts()) {
            let _ = write!(line, " {name}={n}");
        }
        let _ = write!(line, " ops={} secs={:.1}", self.ops, self.secs);
        if let Some(seed) = self.seed {
            let _ = write!(line, " seed={seed:#x}");
        }
        let models: Vec<String> = self.per_model.iter().map(|(m, n)| format!("{m}={n}")).collect();
        let _ = write!(line, " per_model=[{}] verdict: {}", models.join(","), self.verdict());
        line
    }

    /// The sweep's verdict in words, for a reader who does not know the counters: `PASS` or
    /// `FAIL`, and why an informational counter above zero is expected.
    pub fn verdict(&self) -> String {
        let mut text = if self.is_clean() {
            "PASS: nothing acknowledged lost, no recorded effect repeated or missing, every \
             recovered run ended as the uninterrupted one"
                .to_owned()
        } else {
            format!(
                "FAIL: {} of {} cases failed (Summary::failure_report names each, with the \
                 CAIRN_CRASH_CASE that replays it)",
                self.failures.len(),
                self.cases
            )
        };
        if self.unrecoverable > 0 {
            // Only `garbage_unsynced` may end unrecoverable (`judge_recovery`).
            let _ = write!(
                text,
                "; {} unrecoverable, as expected: garbage_unsynced power losses (garbage over \
                 unsynced sectors, outside redb's media contract) left a database the engine \
                 refused with a storage error",
                self.unrecoverable
            );
        }
        if self.reexecuted > 0 {
            let _ = write!(
                text,
                "; {} reexecuted, as expected: tool calls a crash cut off before their result \
                 was recorded ran again (pass ToolCtx::idempotency_key to the service)",
                self.reexecuted
            );
        }
        text
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Every counter is summed by `add` and `merge` and named in the line, in its place.
    #[test]
    fn the_line_names_every_counter_summed() {
        let report = CaseReport {
            fired: true,
            lost_acked: 1,
            acked_not_durable: 2,
            diverged: 3,
            repeated_effects: 4,
            missing_effects: 5,
            unexpected_effects: 6,
            duplicate_commits: 7,
            untyped_errors: 8,
            verify_problems: 9,
            hung: 10,
            panics: 11,
            unrecoverable: 12,
            reexecuted: 13,
            disk_full_typed: 14,
            ..CaseReport::default()
        };
        assert!(!report.is_clean());
        let clean = CaseReport { unrecoverable: 1, reexecuted: 1, ..CaseReport::default() };
        assert!(clean.is_clean(), "informational counters do not fail a case");
        let mut summary = Summary::default();
        summary.add(report.clone());
        let mut other = Summary { ops: 5, ..Summary::default() };
        other.add(report);
        summary.merge(other);
        assert_eq!(
            summary.line("t"),
            "RELIABILITY t cases=2 fired=2 second_crashes=0 lost_acked=2 acked_not_durable=4 \
             diverged=6 repeated_effects=8 missing_effects=10 unexpected_effects=12 \
             duplicate_commits=14 untyped_errors=16 verify_problems=18 hung=20 panics=22 \
             unrecoverable=24 reexecuted=26 disk_full_typed=28 ops=5 secs=0.0 per_model=[] \
             verdict: FAIL: 2 of 2 cases failed (Summary::failure_report names each, with the \
             CAIRN_CRASH_CASE that replays it); 24 unrecoverable, as expected: garbage_unsynced \
             power losses (garbage over unsynced sectors, outside redb's media contract) left a \
             database the engine refused with a storage error; 26 reexecuted, as expected: tool \
             calls a crash cut off before their result was recorded ran again (pass \
             ToolCtx::idempotency_key to the service)"
        );
        assert_eq!(summary.failures.len(), 2);
    }

    /// A clean sweep's line ends with a verdict a newcomer reads without knowing the counters:
    /// PASS, and why its informational counters above zero are expected.
    #[test]
    fn a_clean_sweep_says_pass_and_why_unrecoverable_cases_are_expected() {
        let mut summary = Summary::default();
        summary.add(CaseReport { fired: true, unrecoverable: 1, ..CaseReport::default() });
        summary.add(CaseReport { fired: true, unrecoverable: 1, ..CaseReport::default() });
        summary.add(CaseReport { fired: true, ..CaseReport::default() });
        let line = summary.line("order");
        let verdict = line.split_once(" verdict: ").map(|(_, v)| v).unwrap_or_default();
        assert_eq!(
            verdict,
            "PASS: nothing acknowledged lost, no recorded effect repeated or missing, every \
             recovered run ended as the uninterrupted one; 2 unrecoverable, as expected: \
             garbage_unsynced power losses (garbage over unsynced sectors, outside redb's media \
             contract) left a database the engine refused with a storage error",
            "{line}"
        );
        let bare = Summary { cases: 3, ..Summary::default() };
        assert!(bare.line("t").ends_with(
            "verdict: PASS: nothing acknowledged lost, no recorded \
             effect repeated or missing, every recovered run ended as the uninterrupted one"
        ));
    }
}
