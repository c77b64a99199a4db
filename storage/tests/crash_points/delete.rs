//! A crash inside a whole-thread delete: the thread is whole or gone, never part of it.
//!
//! The workload's batches are written and closed cleanly; that image is the start of every
//! case. A case opens it on a [`FaultBackend`] armed at op `n`, deletes `order-1` (forced: it
//! is unfinished; it has events, a payload, checkpoints and correlation entries), closes, and
//! reopens what the disk would hold. Checked: `verify()` is clean; the other threads read as
//! before; `order-1` is either whole (its record, every event, every checkpoint) or gone (none
//! of them, nor its payload), and gone for certain when the delete was acknowledged.

use cairn_storage::{Append, Catalog, Maintenance, ThreadLog};
use cairn_storage::{CheckpointFilter, DeleteOptions, Page, RedbStore, Seq};
use cairn_storage_testkit::fault::{CrashModel, Fault, FaultBackend};

use crate::workload::{THREADS, clean_run, options, thread};

/// What a thread holds, as counted from the store.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Held {
    events: usize,
    checkpoints: usize,
}

fn held(store: &RedbStore, t: usize) -> Option<Held> {
    store.thread(&thread(t)).wait().ok()??;
    let events = store.read_since(&thread(t), Seq(0), 10_000).wait().ok()?.len();
    let filter = CheckpointFilter { thread: Some(thread(t)), ..CheckpointFilter::default() };
    let checkpoints =
        store.list_checkpoints(&filter, Page { limit: 1_000, offset: 0 }).wait().ok()?.len();
    Some(Held { events, checkpoints })
}

/// The image of the clean workload, closed; and what each thread held in it.
fn start() -> (Vec<u8>, Vec<Held>) {
    let clean = clean_run();
    let backend = FaultBackend::new();
    let controller = backend.controller();
    let store = RedbStore::with_backend(backend, options()).expect("create");
    for batch in &clean.batches {
        store.append(batch.clone()).and_then(|p| p.wait_blocking()).expect("append");
    }
    let before = (0..THREADS.len()).map(|t| held(&store, t).expect("a whole thread")).collect();
    store.close().expect("close");
    (controller.durable_image(), before)
}

/// Runs the delete on `backend`; whether it was acknowledged.
fn delete(backend: FaultBackend) -> bool {
    let Ok(store) = RedbStore::with_backend(backend, options()) else { return false };
    let acked = store
        .delete_thread(&thread(0), DeleteOptions { force: true })
        .and_then(|p| p.wait_blocking())
        .is_ok_and(|d| d.is_some());
    let _ = store.close();
    acked
}

/// Every crash point of the delete under the models within redb's contract: (cases, problems).
pub(crate) fn crash_in_delete() -> (u64, Vec<String>) {
    let (image, before) = start();
    let probe = FaultBackend::from_image(image.clone());
    let counter = probe.controller();
    assert!(delete(probe), "the clean delete is acknowledged");
    let ops = counter.mutations();
    let models =
        [CrashModel::Kill, CrashModel::LoseUnsynced, CrashModel::TornWrite, CrashModel::FailedSync];
    let (mut cases, mut problems) = (0, Vec::new());
    for model in models {
        for op in 0..ops {
            cases += 1;
            let backend = FaultBackend::from_image(image.clone());
            let controller = backend.controller();
            controller.arm(Fault::at(op, model).with_seed(op));
            let acked = delete(backend);
            let label = format!("{model} at op {op}");
            let store = match RedbStore::with_backend(
                FaultBackend::from_image(controller.crash_image()),
                options(),
            ) {
                Ok(store) => store,
                Err(e) => {
                    problems.push(format!("{label}: reopen failed: {e}"));
                    continue;
                }
            };
            match store.verify() {
                Ok(report) if report.is_clean() => {}
                Ok(report) => problems.push(format!("{label}: verify: {:?}", report.problems)),
                Err(e) => problems.push(format!("{label}: verify failed: {e}")),
            }
            for (t, was) in before.iter().enumerate().skip(1) {
                if held(&store, t).as_ref() != Some(was) {
                    problems.push(format!("{label}: {} changed", THREADS[t]));
                }
            }
            match held(&store, 0) {
                None if store.thread(&thread(0)).wait().ok().flatten().is_none() => {}
                Some(whole) if whole == before[0] && !acked => {}
                other => problems.push(format!(
                    "{label}: order-1 is {other:?} (acknowledged: {acked}), neither whole nor gone"
                )),
            }
            let _ = store.close();
        }
    }
    (cases, problems)
}
