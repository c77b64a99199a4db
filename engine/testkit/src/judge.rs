//! One crash case from start to verdict: crash, recover (maybe crashing again), compare.

use std::collections::{BTreeMap, BTreeSet};

use cairn_storage::{Event, RedbStore, ThreadId};
use cairn_storage_testkit::fault::{CrashModel, Fault, FaultBackend};

use crate::case::CrashCase;
use crate::effects::Effect;
use crate::harness::{CrashHarness, Reference};
use crate::observe::{canonical, multiset, observe, read_all};
use crate::run::{Attempt, Stop, store_options};
use crate::summary::CaseReport;
use cairn::clock::ManualClock;

/// Recovery attempts before a case gives up: the first recovery (maybe crashed again), the
/// second, and one more for a database whose creation itself was crashed.
const ATTEMPTS: usize = 3;

/// Problems listed per case at most (the counters keep counting).
const PROBLEMS_MAX: usize = 12;

impl CrashHarness {
    pub(crate) async fn run_case(&self, reference: &Reference, case: &CrashCase) -> CaseReport {
        let mut report = CaseReport { case: Some(*case), ..CaseReport::default() };
        let clock = ManualClock::new(self.clock_start_ms);
        self.take_effects();

        // The run that meets the fault.
        let backend = self.fresh_disk();
        let controller = backend.controller();
        controller.arm(Fault::at(case.op, case.model).with_seed(case.seed));
        let first = self.attempt(backend, &clock).await;
        report.fired = controller.fired().is_some();
        let created = first.open_error.is_none();
        let mut acked = first.acked.clone();
        self.judge_first_run(case, &first, &mut report);
        drop(first);
        // Everything acknowledged must have been durable when the fault struck. Where the
        // recovery starts from exactly the durable image, the recovery check says the same.
        let recovers_durable =
            report.fired && matches!(case.model, CrashModel::LoseUnsynced | CrashModel::FailedSync);
        if !recovers_durable {
            let durable = controller.durable_image();
            report.acked_not_durable =
                count_missing(image_store(&durable).as_ref(), &acked, "durable image", &mut report);
        }
        let mut image = if report.fired && case.model.kills() {
            controller.crash_image()
        } else {
            // An error the process survived: it closes and reopens the same file.
            controller.live_image()
        };
        let mut before_effects = self.take_effects();

        // Recovery, crashing again if the case says so.
        let mut second = case.then;
        let mut last = None;
        for _ in 0..ATTEMPTS {
            let backend = if image.is_empty() {
                FaultBackend::new()
            } else {
                FaultBackend::from_image(image.clone())
            };
            let controller = backend.controller();
            let armed = second.take();
            if let Some(s) = armed {
                controller.arm(Fault::at(s.op, s.model).with_seed(case.seed.rotate_left(17)));
            }
            let attempt = self.attempt(backend, &clock).await;
            acked.extend(attempt.acked.iter().cloned());
            if armed.is_some() && controller.fired().is_some() {
                report.second_crash = true;
                drop(attempt);
                image = controller.crash_image();
                before_effects.extend(self.take_effects());
                continue;
            }
            if attempt.open_error.is_some() && !created && acked.is_empty() && !image.is_empty() {
                // The crash came while the database was being created: nothing was ever
                // acknowledged, so starting from an empty file loses nothing.
                image = Vec::new();
                continue;
            }
            last = Some(attempt);
            break;
        }
        let after_effects = self.take_effects();
        match last {
            Some(attempt) => {
                self.judge_recovery(
                    reference,
                    case,
                    &attempt,
                    &acked,
                    Executions { before: &before_effects, after: &after_effects },
                    &mut report,
                );
            }
            None => report.problem(format!("recovery did not settle in {ATTEMPTS} attempts")),
        }
        report.problems.truncate(PROBLEMS_MAX);
        report
    }

    /// The run that met the fault: a storage failure must have reached the engine as a storage
    /// error, and nothing may hang.
    fn judge_first_run(&self, case: &CrashCase, first: &Attempt, report: &mut CaseReport) {
        match &first.stop {
            Stop::Hung => {
                report.hung += 1;
                report.problem("the run with the fault hung");
            }
            Stop::Engine(e) => {
                report.untyped_errors += 1;
                report
                    .problem(format!("the run with the fault ended with a non-storage error: {e}"));
            }
            Stop::Finished(_) | Stop::StoreFailed => {}
        }
        let Some(failure) = &first.failure else { return };
        report.error = Some(failure.to_string());
        use cairn_storage::Error as E;
        if !matches!(
            failure,
            E::Storage { .. } | E::DiskFull { .. } | E::Poisoned { .. } | E::Closed
        ) {
            report.untyped_errors += 1;
            report.problem(format!("{}: the engine saw {failure}", case.model));
        }
        if matches!(failure, E::DiskFull { .. }) {
            report.disk_full_typed += 1;
        } else if case.model == CrashModel::DiskFull && report.fired {
            report.untyped_errors += 1;
            report.problem(format!("a full disk reached the engine as {failure}"));
        }
    }

    fn judge_recovery(
        &self,
        reference: &Reference,
        case: &CrashCase,
        attempt: &Attempt,
        acked: &[Event],
        effects: Executions<'_>,
        report: &mut CaseReport,
    ) {
        let outside_contract = !case.model.within_redb_contract();
        let outcome = match (&attempt.open_error, &attempt.stop) {
            (Some(e), _) if outside_contract => {
                report.unrecoverable += 1;
                tracing::debug!(error = %e, "garbage left an unopenable database (allowed)");
                return;
            }
            (Some(e), _) => {
                report.lost_acked += acked.len() as u64;
                report.problem(format!("reopen failed: {e}"));
                return;
            }
            (None, Stop::StoreFailed) if outside_contract => {
                report.unrecoverable += 1;
                return;
            }
            (None, Stop::Finished(outcome)) => outcome,
            (None, Stop::Hung) => {
                report.hung += 1;
                report.problem("recovery hung");
                return;
            }
            (None, other) => {
                report.problem(format!("recovery did not finish: {other} ({:?})", attempt.failure));
                return;
            }
        };
        let Some(store) = &attempt.store else { return };
        if *outcome != reference.outcome {
            report.diverged += 1;
            report.problem(format!(
                "outcome differs: {} / {:?} / {:?}, uninterrupted {} / {:?} / {:?}",
                outcome.status,
                outcome.output,
                outcome.error,
                reference.outcome.status,
                reference.outcome.output,
                reference.outcome.error
            ));
        }
        match observe(store, &self.thread) {
            Ok(view) => {
                report.duplicate_commits += view.duplicate_commits;
                if canonical(&view.tool_calls) != reference.tool_calls {
                    report.diverged += 1;
                    report.problem(format!(
                        "recorded tool calls differ: {} recorded, uninterrupted {}",
                        view.tool_calls.len(),
                        reference.tool_calls.len()
                    ));
                }
            }
            Err(e) => report.problem(format!("the recovered log does not read: {e}")),
        }
        report.lost_acked += count_missing(Some(store), acked, "recovered log", report);
        match cairn_storage::Maintenance::verify(store) {
            Ok(found) => {
                report.verify_problems += found.problems.len() as u64;
                for p in found.problems.iter().take(3) {
                    report.problem(format!(
                        "verify: {} {:?} {:?}: {}",
                        p.table, p.thread, p.seq, p.detail
                    ));
                }
            }
            Err(e) => {
                report.verify_problems += 1;
                report.problem(format!("verify failed: {e}"));
            }
        }
        if self.effects.is_some() {
            let recorded = attempt
                .before
                .as_ref()
                .map(|view| view.tool_calls.iter().map(|c| c.effect()).collect::<Vec<_>>())
                .unwrap_or_default();
            judge_effects(reference, &recorded, effects, report);
        }
    }
}

/// The tool executions of a case: those before the recovery that was judged (the first run's,
/// and any crashed recovery's), and that recovery's.
#[derive(Clone, Copy)]
struct Executions<'a> {
    before: &'a [Effect],
    after: &'a [Effect],
}

/// Compares executions with the uninterrupted run: recovery must run exactly the calls whose
/// results were not recorded (`after == clean - recorded`), and nothing else may appear.
fn judge_effects(
    reference: &Reference,
    recorded: &[Effect],
    effects: Executions<'_>,
    report: &mut CaseReport,
) {
    let Executions { before, after } = effects;
    let clean = multiset(reference.effects.iter().cloned());
    let recorded = multiset(recorded.iter().cloned());
    let after_m = multiset(after.iter().cloned());
    let keys: BTreeSet<&Effect> =
        clean.keys().chain(recorded.keys()).chain(after_m.keys()).collect();
    for key in keys {
        let c = clean.get(key).copied().unwrap_or(0);
        let r = recorded.get(key).copied().unwrap_or(0);
        let a = after_m.get(key).copied().unwrap_or(0);
        if r > c {
            report.unexpected_effects += r - c;
            report
                .problem(format!("{key:?} recorded {r} times, the uninterrupted run made it {c}"));
        }
        let due = c.saturating_sub(r);
        if a != due {
            let counter =
                if a > due { &mut report.repeated_effects } else { &mut report.missing_effects };
            *counter += a.abs_diff(due);
            report.problem(format!("{key:?} ran {a} times after recovery, {due} were due"));
        }
    }
    for effect in before {
        if !clean.contains_key(effect) {
            report.unexpected_effects += 1;
            report.problem(format!("{effect:?} ran before the crash; the clean run never did"));
        }
    }
    report.reexecuted += (before.len() as u64).saturating_sub(recorded.values().sum::<u64>());
}

/// A store on a copy of `image` (nothing if it does not open, or the image is empty).
fn image_store(image: &[u8]) -> Option<RedbStore> {
    if image.is_empty() {
        return None;
    }
    RedbStore::with_backend(FaultBackend::from_image(image.to_vec()), store_options()).ok()
}

/// Counts acknowledged events missing from (or different in) `store`.
fn count_missing(
    store: Option<&RedbStore>,
    acked: &[Event],
    place: &str,
    report: &mut CaseReport,
) -> u64 {
    if acked.is_empty() {
        return 0;
    }
    let Some(store) = store else {
        report
            .problem(format!("{} acknowledged events, but the {place} does not open", acked.len()));
        return acked.len() as u64;
    };
    let threads: BTreeSet<&ThreadId> = acked.iter().map(|e| &e.thread).collect();
    let mut found: BTreeMap<(&ThreadId, u64), Event> = BTreeMap::new();
    for thread in threads {
        match read_all(store, thread) {
            Ok(events) => {
                for event in events {
                    found.insert((thread, event.bookmark.seq.0), event);
                }
            }
            Err(e) => report.problem(format!("reading {thread} from the {place}: {e}")),
        }
    }
    let mut missing = 0;
    for event in acked {
        match found.get(&(&event.thread, event.bookmark.seq.0)) {
            Some(stored) if stored == event => {}
            Some(stored) => {
                missing += 1;
                report.problem(format!(
                    "acknowledged {} seq {} differs in the {place}: {:?} vs {:?}",
                    event.thread, event.bookmark.seq, stored.kind, event.kind
                ));
            }
            None => {
                missing += 1;
                report.problem(format!(
                    "acknowledged {} seq {} ({:?}) missing from the {place}",
                    event.thread, event.bookmark.seq, event.kind
                ));
            }
        }
    }
    missing
}
