//! T1 crash points: the three canonical workflows and `nested` (a sub-workflow and a map node)
//! crashed at every I/O op under every crash
//! model (plus a double crash at every op), and random cases on top, through the same
//! `cairn_testkit` users get. Must be zero: lost_acked, acked_not_durable, diverged,
//! repeated/missing/unexpected effects, duplicate commits, untyped errors, verify problems,
//! hangs, panics.

use cairn_testkit::{Cases, CrashHarness, Summary};

use crate::env::{report, seed, size};
use crate::workflows::{canonical, nested_harness};

/// The canonical three and `nested` (sub-workflows and map nodes).
fn harnesses() -> Vec<(&'static str, CrashHarness)> {
    let mut all = canonical();
    all.push(("nested", nested_harness()));
    all
}

fn sweep_one(name: &str, cases: impl Fn(u64) -> Cases) -> Summary {
    let (_, harness) =
        harnesses().into_iter().find(|(n, _)| *n == name).expect("a crash-point workflow");
    let ops = harness.reference().expect("uninterrupted run").ops.len() as u64;
    harness.sweep(cases(ops)).expect("sweep")
}

fn assert_clean(test: &str, summary: &Summary) {
    report(&summary.line(test));
    assert!(summary.is_clean(), "{}", summary.failure_report(10));
    assert!(summary.fired > 0, "{test}: no fault fired; the sweep tested nothing");
}

#[test]
fn t1_linear_every_op_every_model() {
    let summary = sweep_one("linear", |_| Cases::Every);
    assert_clean("T1_crash_points_linear", &summary);
}

#[test]
fn t1_fan_out_every_op_every_model() {
    let summary = sweep_one("fan_out", |_| Cases::Every);
    assert_clean("T1_crash_points_fan_out", &summary);
}

#[test]
fn t1_human_timer_every_op_every_model() {
    let summary = sweep_one("human_timer", |_| Cases::Every);
    assert_clean("T1_crash_points_human_timer", &summary);
}

/// A parent driving a sub-workflow child and a map node, crashed at every op (inside the
/// child, inside a map item, inside the join), and crashed again during recovery.
#[test]
fn t1_nested_every_op_every_model() {
    let summary = sweep_one("nested", |_| Cases::Every);
    assert_clean("T1_crash_points_nested", &summary);
}

/// Random cases (any model, any op, a third with a second crash during recovery), split over
/// the four workflows. `CAIRN_CRASH_SEED` replays a sweep; a failure prints its cases.
#[test]
fn t1_random_cases() {
    let total = size("CAIRN_REL_RANDOM_CASES", 1_000);
    let base = seed("CAIRN_CRASH_SEED", 0x7E57_C0DE);
    let mut all = Summary { seed: Some(base), ..Summary::default() };
    let workflows = harnesses();
    let n = workflows.len() as u64;
    for (i, (name, harness)) in workflows.into_iter().enumerate() {
        let count = total / n + u64::from((i as u64) < total % n);
        let summary = harness
            .sweep(Cases::Random { count, seed: base.wrapping_add(i as u64) })
            .expect("sweep");
        if !summary.is_clean() {
            report(&summary.line(&format!("T1_random_{name}")));
        }
        all.merge(summary);
    }
    all.seed = Some(base);
    assert_clean("T1_random", &all);
}
