//! One-call helpers and proptest strategies.

use cairn_dsl::{State, Workflow};
use cairn_storage_testkit::fault::CrashModel;
use proptest::strategy::Strategy;
use serde::Serialize;

use crate::case::{Cases, CrashCase, SECOND_CRASH_MODELS, SecondCrash};
use crate::harness::CrashHarness;
use crate::summary::Summary;

/// Crash-tests `workflow` on `input` and panics with a readable report (each failing case with
/// the `CAIRN_CRASH_CASE=...` that replays it) if any case fails. Returns the summary, whose
/// [`Summary::line`] is worth printing.
///
/// Call it from a plain `#[test]`. For effects, scripted input or engine settings, build a
/// [`CrashHarness`] and call [`CrashHarness::sweep`] instead.
///
/// # Panics
/// If the uninterrupted run does not finish or is not deterministic, or any case fails.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use cairn_testkit::{Cases, assert_crash_safe};
/// use cairn::{NodeOutput, Replace, Workflow, END, START};
///
/// let wf = Workflow::<Replace<u64>>::builder("inc", 1)
///     .node("inc", |s: Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(s.0 + 1)) })
///     .edge(START, "inc")
///     .edge("inc", END)
///     .build()
///     .expect("valid workflow");
/// let summary = assert_crash_safe(&wf, 41, Cases::Random { count: 5, seed: 7 });
/// assert_eq!(summary.lost_acked, 0);
/// ```
pub fn assert_crash_safe<S: State>(
    workflow: &Workflow<S>,
    input: impl Serialize,
    cases: impl Into<Cases>,
) -> Summary {
    let harness = CrashHarness::new(workflow, input)
        .unwrap_or_else(|e| panic!("crash test of {}: {e}", workflow.id()));
    assert_sweep(&harness, cases.into())
}

/// Runs `cases` on `harness` and panics with the failure report if any case fails.
///
/// # Panics
/// As [`assert_crash_safe`].
pub fn assert_sweep(harness: &CrashHarness, cases: Cases) -> Summary {
    let summary = harness.sweep(cases).unwrap_or_else(|e| panic!("crash test: {e}"));
    assert!(
        summary.is_clean(),
        "{} of {} crash cases failed\n{}\n{}",
        summary.failures.len(),
        summary.cases,
        summary.line("crash_test"),
        summary.failure_report(10)
    );
    summary
}

/// Any crash model.
///
/// # Examples
/// ```
/// use proptest::prelude::*;
/// use cairn_testkit::any_crash_model;
/// proptest!(|(model in any_crash_model())| {
///     prop_assert!(!model.as_str().is_empty());
/// });
/// ```
pub fn any_crash_model() -> impl Strategy<Value = CrashModel> {
    proptest::sample::select(CrashModel::ALL.to_vec())
}

/// A crash point (a mutating op index) in a run of `ops` ops.
pub fn crash_point(ops: u64) -> impl Strategy<Value = u64> {
    0..ops.max(1)
}

/// A whole crash case in a run of `ops` ops: any model, any op, any seed, and in about one
/// case in three a second crash during recovery. Shrinks toward earlier ops, simpler models and
/// no second crash.
///
/// # Examples
/// ```
/// use proptest::prelude::*;
/// use cairn_testkit::crash_case;
/// proptest!(ProptestConfig::with_cases(16), |(case in crash_case(100))| {
///     prop_assert!(case.op < 100);
/// });
/// ```
pub fn crash_case(ops: u64) -> impl Strategy<Value = CrashCase> {
    let second = proptest::option::weighted(
        1.0 / 3.0,
        (0..ops.max(1) + 16, proptest::sample::select(SECOND_CRASH_MODELS.to_vec()))
            .prop_map(|(op, model)| SecondCrash { op, model }),
    );
    (crash_point(ops), any_crash_model(), proptest::num::u64::ANY, second)
        .prop_map(|(op, model, seed, then)| CrashCase { op, model, seed, then })
}
