//! Crash safety beneath redb: crash a real workload at every I/O op under every crash model,
//! reopen from what the disk would hold, and check what survived.
//!
//! The workload is a fixed sequence of batches appended one at a time under
//! `Durability::Immediate` (events for several threads, thread-record updates, checkpoints,
//! payloads, a lock), so the op sequence, the bookmarks and the checkpoint ids are deterministic
//! and a clean run tells what every batch must look like. For each op index and each
//! [`CrashModel`] (three seeds per op for the models that draw random choices: the torn-write
//! cut and the reordered subset) the workload is re-run on a [`FaultBackend`] armed to fault
//! there; the crash image is reopened and checked:
//!
//! - every acknowledged batch (its `Pending` resolved `Ok`) is present byte for byte: events,
//!   checkpoints, payloads (`lost_acked` counts what is missing or different);
//! - the one unacknowledged batch in flight is wholly present or wholly absent
//!   (`partial_batches`), and nothing that was never appended appears (`wrong_data`);
//! - per-thread seqs are gap-free, the global feed agrees, `verify()` is clean, and the reopened
//!   store accepts the next append at the next seq;
//! - nothing panics.
//!
//! A deterministic sample of cases then crashes a second time during recovery (the reopen and
//! the first append after it) and checks the same again, plus that recovery never changes its
//! mind about the in-flight batch (`rolled_back`; redb 4.2.0 fixed such a double-crash bug).
//!
//! Models outside redb's media contract (`GarbageUnsynced`) may leave a database that no longer
//! opens: that is counted as `unopenable`, and is acceptable only as an error, never as wrong
//! data. A crash before the store was created (nothing acknowledged yet) may leave a file that is
//! not a database: counted as `before_create`.

use cairn_storage::Append;
use std::io::Write as _;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Instant;

#[path = "crash_points/check.rs"]
mod check;
#[path = "crash_points/workload.rs"]
mod workload;

use cairn_storage::{Batch, RedbStore};
use cairn_storage_testkit::fault::{CrashModel, Fault, FaultBackend};

use check::{check, continue_after_recovery};
use workload::{Clean, Expected, applicable, clean_run, options, run};

/// What the crash cases found, summed into the RELIABILITY line.
#[derive(Debug, Default, Clone, Copy)]
struct Tally {
    cases: u64,
    lost_acked: u64,
    partial_batches: u64,
    wrong_data: u64,
    rolled_back: u64,
    unopenable: u64,
    before_create: u64,
    panics: u64,
    second_crashes: u64,
}

/// Models a second crash during recovery is drawn from (within redb's contract, killing).
const SECOND_MODELS: [CrashModel; 4] = [
    CrashModel::Kill,
    CrashModel::LoseUnsynced,
    CrashModel::TornWrite,
    CrashModel::ReorderedUnsynced,
];

/// Seeds per op for the models that make random choices (the torn-write cut, the reordered
/// subset): each seed is a different disk state.
const SEEDS_PER_OP: u64 = 3;

/// One in this many first-crash cases also crashes during recovery.
const SECOND_CRASH_EVERY: u64 = 3;

fn one_case(
    clean: &Clean,
    model: CrashModel,
    op: u64,
    variant: u64,
    tally: &mut Tally,
    failures: &mut Vec<String>,
) {
    let seed = op.wrapping_mul(31).wrapping_add(model as u64).wrapping_add(variant << 32);
    let backend = FaultBackend::new();
    let controller = backend.controller();
    controller.arm(Fault::at(op, model).with_seed(seed));
    let first = run(backend, &clean.batches);
    let image = controller.crash_image();
    let must: Vec<&Expected> = clean.expected[..first.acked].iter().collect();
    let maybe: Vec<&Expected> = first.in_flight.map(|i| &clean.expected[i]).into_iter().collect();
    let label = format!("{model} at op {op} (seed {seed})");

    let reopened = RedbStore::with_backend(FaultBackend::from_image(image.clone()), options());
    let store = match reopened {
        Ok(store) => store,
        Err(_) if !first.created => {
            tally.before_create += 1;
            return;
        }
        Err(_) if !model.within_redb_contract() => {
            tally.unopenable += 1;
            return;
        }
        Err(e) => {
            tally.lost_acked += must.iter().map(|b| b.events.len() as u64).sum::<u64>();
            failures.push(format!("{label}: reopen failed: {e}"));
            return;
        }
    };
    let mut result = check(&store, &must, &maybe);
    continue_after_recovery(&store, &mut result.problems);
    let _ = store.close();
    tally.lost_acked += result.lost_acked;
    tally.partial_batches += u64::from(result.partial);
    tally.wrong_data += result.wrong_data;
    failures.extend(result.problems.iter().map(|p| format!("{label}: {p}")));

    // A crash before the database was created leaves nothing a second crash could lose.
    if first.created && op.is_multiple_of(SECOND_CRASH_EVERY) {
        let first_landed: Vec<(&Expected, bool)> =
            maybe.iter().copied().zip(result.landed.iter().copied()).collect();
        second_crash(&image, &must, &first_landed, seed, &label, tally, failures);
    }
}

/// Crashes again while recovering `image` (reopen + one append), then checks the second image:
/// the acknowledged batches (and the recovery append if it was acknowledged) are all there, the
/// recovery append is all-or-nothing if not, and the first crash's in-flight batches are exactly
/// as the first recovery found them (recovery never changes its mind).
fn second_crash(
    image: &[u8],
    must: &[&Expected],
    first_landed: &[(&Expected, bool)],
    seed: u64,
    label: &str,
    tally: &mut Tally,
    failures: &mut Vec<String>,
) {
    let recover = |backend: FaultBackend| -> Option<Expected> {
        let store = RedbStore::with_backend(backend, options()).ok()?;
        let continued = continue_after_recovery(&store, &mut Vec::new());
        let _ = store.close();
        continued
    };
    // Count the ops recovery makes, then crash at a seeded one of them. The clean recovery also
    // tells what the recovery append looks like when it lands.
    let probe = FaultBackend::from_image(image.to_vec());
    let counter = probe.controller();
    let probe_continued = recover(probe);
    let ops = counter.mutations();
    if ops == 0 {
        return;
    }
    let at = seed % ops;
    let model = SECOND_MODELS[(seed % SECOND_MODELS.len() as u64) as usize];
    let backend = FaultBackend::from_image(image.to_vec());
    let controller = backend.controller();
    controller.arm(Fault::at(at, model).with_seed(seed));
    let continued = recover(backend);
    tally.second_crashes += 1;
    let label = format!("{label}, then {model} at recovery op {at}");

    let reopened =
        RedbStore::with_backend(FaultBackend::from_image(controller.crash_image()), options());
    let store = match reopened {
        Ok(store) => store,
        Err(e) => {
            tally.lost_acked += must.iter().map(|b| b.events.len() as u64).sum::<u64>();
            failures.push(format!("{label}: reopen failed: {e}"));
            return;
        }
    };
    let mut must = must.to_vec();
    // In-flight batches of the first crash stay all-or-nothing; those the first recovery found
    // landed are durable now and must still be there (checked below as `rolled_back`).
    let mut maybe: Vec<&Expected> = first_landed.iter().map(|(batch, _)| *batch).collect();
    match (&continued, &probe_continued) {
        (Some(acked), _) => must.push(acked),
        (None, Some(unacked)) => maybe.push(unacked),
        (None, None) => {}
    }
    let result = check(&store, &must, &maybe);
    let _ = store.close();
    for ((_, landed_first), landed_now) in first_landed.iter().zip(&result.landed) {
        if landed_first != landed_now {
            tally.rolled_back += 1;
            failures.push(format!(
                "{label}: in-flight batch landed={landed_first} after the first recovery, \
                 {landed_now} after the second"
            ));
        }
    }
    tally.lost_acked += result.lost_acked;
    tally.partial_batches += u64::from(result.partial);
    tally.wrong_data += result.wrong_data;
    failures.extend(result.problems.iter().map(|p| format!("{label}: {p}")));
}

/// Counts panics on every thread (the store's writer thread included, where `catch_unwind` in
/// the test cannot see them) while still printing them.
fn count_panics() -> Arc<AtomicU64> {
    let count = Arc::new(AtomicU64::new(0));
    let seen = Arc::clone(&count);
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        seen.fetch_add(1, Ordering::Relaxed);
        previous(info);
    }));
    count
}

#[test]
fn crash_at_every_op_under_every_model() {
    let started = Instant::now();
    let panics = count_panics();
    let clean = clean_run();
    let mut tally = Tally::default();
    let mut failures = Vec::new();
    let mut per_model = Vec::new();
    for model in CrashModel::ALL {
        let ops = applicable(model, &clean.ops);
        // Models that draw random choices run with more than one seed per op.
        let variants = if matches!(model, CrashModel::TornWrite | CrashModel::ReorderedUnsynced) {
            SEEDS_PER_OP
        } else {
            1
        };
        per_model.push(format!("{model}={}", ops.len() as u64 * variants));
        for (op, variant) in ops.into_iter().flat_map(|op| (0..variants).map(move |v| (op, v))) {
            tally.cases += 1;
            let outcome = catch_unwind(AssertUnwindSafe(|| {
                let mut local = Tally::default();
                let mut local_failures = Vec::new();
                one_case(&clean, model, op, variant, &mut local, &mut local_failures);
                (local, local_failures)
            }));
            match outcome {
                Ok((local, local_failures)) => {
                    tally.lost_acked += local.lost_acked;
                    tally.partial_batches += local.partial_batches;
                    tally.wrong_data += local.wrong_data;
                    tally.rolled_back += local.rolled_back;
                    tally.unopenable += local.unopenable;
                    tally.before_create += local.before_create;
                    tally.second_crashes += local.second_crashes;
                    failures.extend(local_failures);
                }
                Err(_) => {
                    tally.panics += 1;
                    failures.push(format!("{model} at op {op} variant {variant}: panicked"));
                }
            }
        }
    }
    let secs = started.elapsed().as_secs_f64();
    let uncaught = panics.load(Ordering::Relaxed).saturating_sub(tally.panics);
    if uncaught > 0 {
        failures.push(format!("{uncaught} panics outside the test thread (see stderr)"));
        tally.panics += uncaught;
    }
    // Written to the stderr handle directly, not through `eprintln!`, so the line reaches the
    // CI log even though the test harness captures the output of passing tests.
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(
        stderr,
        "RELIABILITY crash_points cases={} lost_acked={} partial_batches={} wrong_data={} \
         rolled_back={} panics={} second_crashes={} unopenable={} before_create={} ops={} \
         sampled=none secs={secs:.1} per_model=[{}]",
        tally.cases,
        tally.lost_acked,
        tally.partial_batches,
        tally.wrong_data,
        tally.rolled_back,
        tally.panics,
        tally.second_crashes,
        tally.unopenable,
        tally.before_create,
        clean.ops.len(),
        per_model.join(","),
    );
    for failure in failures.iter().take(20) {
        let _ = writeln!(stderr, "  {failure}");
    }
    drop(stderr);
    assert!(failures.is_empty(), "{} failures (first 20 above)", failures.len());
    assert_eq!(
        (
            tally.lost_acked,
            tally.partial_batches,
            tally.wrong_data,
            tally.rolled_back,
            tally.panics
        ),
        (0, 0, 0, 0, 0)
    );
    assert!(tally.cases > 100, "the workload must exercise many crash points");
}

// I/O errors and a full disk without a crash: the failed write is an error, never an ack; the
// store refuses writes until reopened; after the fault clears, a reopen finds every acknowledged
// batch and accepts new ones.

/// Appends batches 0..n of the workload, all of which must be acknowledged.
fn append_acked(store: &RedbStore, batches: &[Batch]) {
    for batch in batches {
        store.append(batch.clone()).and_then(|p| p.wait_blocking()).expect("acknowledged");
    }
}

/// Reopens `image` and checks it holds exactly `acked` (as learned from a clean run) and
/// accepts the next append.
fn reopen_holds(image: Vec<u8>, clean: &Clean, acked: usize) {
    let store =
        RedbStore::with_backend(FaultBackend::from_image(image), options()).expect("reopen");
    let must: Vec<&Expected> = clean.expected[..acked].iter().collect();
    let mut result = check(&store, &must, &[]);
    assert!(continue_after_recovery(&store, &mut result.problems).is_some(), "append after reopen");
    store.close().expect("close");
    assert!(result.problems.is_empty(), "{:?}", result.problems);
}

#[test]
fn disk_full_fails_the_write_and_the_store_recovers_when_space_is_freed() {
    let clean = clean_run();
    let (before_big, big) = clean.batches.split_at(clean.batches.len() - 1);
    let backend = FaultBackend::new();
    let controller = backend.controller();
    let store = RedbStore::with_backend(backend, options()).expect("create");
    append_acked(&store, before_big);
    // The disk is full at the current size: the last batch needs the file to grow.
    controller.set_capacity(Some(controller.live_image().len() as u64));
    let full = store.append(big[0].clone()).and_then(|p| p.wait_blocking());
    assert!(
        matches!(full, Err(cairn_storage::Error::DiskFull { .. })),
        "a write the disk cannot hold is not acknowledged, and says why: {full:?}"
    );
    let refused = store.append(clean.batches[7].clone()).and_then(|p| p.wait_blocking());
    assert!(
        matches!(refused, Err(cairn_storage::Error::Poisoned { .. })),
        "after a failed commit the store refuses writes until reopened: {refused:?}"
    );
    let _ = store.close();
    // Space is freed; the process restarts on the file as the OS has it.
    controller.set_capacity(None);
    reopen_holds(controller.live_image(), &clean, before_big.len());
}

#[test]
fn io_errors_fail_the_write_and_the_store_recovers_after_reopen() {
    let clean = clean_run();
    for model in
        [CrashModel::IoErrorTransient, CrashModel::IoErrorPersistent, CrashModel::FailedSync]
    {
        let backend = FaultBackend::new();
        let controller = backend.controller();
        let store = RedbStore::with_backend(backend, options()).expect("create");
        append_acked(&store, &clean.batches[..3]);
        controller.arm(Fault::at(controller.mutations(), model));
        let failed = store.append(clean.batches[3].clone()).and_then(|p| p.wait_blocking());
        assert!(failed.is_err(), "{model}: the failed commit is not acknowledged: {failed:?}");
        let refused = store.append(clean.batches[4].clone()).and_then(|p| p.wait_blocking());
        assert!(
            matches!(refused, Err(cairn_storage::Error::Poisoned { .. })),
            "{model}: poisoned until reopened: {refused:?}"
        );
        let _ = store.close();
        controller.clear();
        // Power loss after the error: only what was durable survives, and that is every ack.
        reopen_holds(controller.crash_image(), &clean, 3);
    }
}

#[path = "crash_points/delete.rs"]
mod delete;

/// A whole-thread delete crashed at every op (`crash_points/delete.rs`): the thread is whole
/// or gone, the others untouched, verify clean.
#[test]
fn a_crash_inside_a_thread_delete_leaves_the_thread_whole_or_gone() {
    let (cases, problems) = delete::crash_in_delete();
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(stderr, "RELIABILITY crash_delete cases={cases} problems={}", problems.len());
    for problem in problems.iter().take(20) {
        let _ = writeln!(stderr, "  {problem}");
    }
    drop(stderr);
    assert!(problems.is_empty(), "{} problems (first 20 above)", problems.len());
    assert!(cases > 20, "the delete must span many crash points");
}
