//! The crash test's workload and what its clean run teaches: batches, their expected contents,
//! and the op sequence.

use cairn_storage::{Append, Maintenance, ThreadLog};
use std::collections::BTreeMap;

use cairn_storage::{
    Appended, Batch, Checkpoint, CheckpointKind, CheckpointMeta, Durability, Event, EventKind,
    EventStatus, LockOp, NewCheckpoint, NewEvent, Options, PayloadRef, RedbStore, ThreadId,
    ThreadRecord, ThreadStatus, WorkflowRef,
};
use cairn_storage_testkit::fault::{CrashModel, FaultBackend, OpKind};

/// The workload's threads.
pub(crate) const THREADS: [&str; 3] = ["order-1", "order-2", "order-3"];

pub(crate) fn thread(n: usize) -> ThreadId {
    ThreadId::new(THREADS[n]).expect("valid id")
}

pub(crate) fn workflow() -> WorkflowRef {
    WorkflowRef { id: "orders".into(), version: 3, fingerprint: "fp-orders-3".into() }
}

pub(crate) fn options() -> Options {
    Options { durability: Durability::Immediate, ..Options::default() }
}

/// Deterministic filler bytes, distinct per `tag`, so a record found in the wrong place shows.
pub(crate) fn bytes(tag: u64, len: usize) -> Vec<u8> {
    let mut state = tag.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            state.to_le_bytes()[0]
        })
        .collect()
}

pub(crate) fn event(t: usize, kind: EventKind, n: u64, data_len: usize) -> NewEvent {
    NewEvent {
        thread: thread(t),
        kind,
        node: (kind != EventKind::ThreadCreated).then(|| format!("node-{}", n % 4)),
        status: EventStatus::Success,
        summary: format!("{} #{n} on {}", kind.as_str(), THREADS[t]),
        payload: None,
        data: bytes(n, data_len),
        at_ms: 1_000 + n,
        // Messages carry a correlation id, so every crash point also covers the index.
        correlation: (kind == EventKind::Message).then(|| format!("corr-{}", n % 3)),
    }
}

pub(crate) fn checkpoint(t: usize, n: u64, snapshot_len: usize) -> NewCheckpoint {
    NewCheckpoint {
        thread: thread(t),
        workflow: workflow(),
        kind: CheckpointKind::Node,
        snapshot: bytes(10_000 + n, snapshot_len),
        meta: CheckpointMeta {
            creator: "crash-test".into(),
            description: format!("checkpoint {n}"),
            tags: vec!["crash".into(), format!("t{t}")],
            custom: BTreeMap::new(),
        },
        created_at_ms: 2_000 + n,
    }
}

pub(crate) fn record(t: usize, status: ThreadStatus, now_ms: u64) -> ThreadRecord {
    let mut record = ThreadRecord::new(thread(t), workflow(), 1_000);
    record.status = status;
    record.updated_at_ms = now_ms;
    record.labels.insert("tenant".into(), format!("tenant-{t}"));
    record
}

/// The workload: small and large events, multi-page checkpoints and payloads, thread updates
/// and a lock, spread so that commits of very different sizes are crashed.
pub(crate) fn workload() -> Vec<Batch> {
    let mut batches = Vec::new();
    // 0: create the three threads.
    batches.push(Batch {
        threads: (0..3).map(|t| record(t, ThreadStatus::Created, 1_000)).collect(),
        events: (0..3).map(|t| event(t, EventKind::ThreadCreated, t as u64, 40)).collect(),
        ..Batch::default()
    });
    // 1: a few steps on two threads, one with a payload.
    let payload = bytes(500, 3_000);
    let mut with_payload = event(0, EventKind::ToolReturned, 11, 64);
    with_payload.payload = Some(PayloadRef::of(&payload));
    batches.push(Batch {
        events: vec![
            event(0, EventKind::NodeStarted, 10, 120),
            with_payload,
            event(1, EventKind::NodeStarted, 12, 200),
        ],
        threads: vec![
            record(0, ThreadStatus::Running, 1_011),
            record(1, ThreadStatus::Running, 1_012),
        ],
        payloads: vec![payload],
        ..Batch::default()
    });
    // 2: a checkpoint spanning a few pages.
    batches.push(Batch {
        events: vec![event(0, EventKind::NodeCompleted, 20, 150)],
        checkpoints: vec![checkpoint(0, 21, 9_000)],
        ..Batch::default()
    });
    // 3: one big event (many pages in one write).
    batches.push(Batch {
        events: vec![event(2, EventKind::StateUpdated, 30, 24_000)],
        ..Batch::default()
    });
    // 4: many small events across threads (every other one a message with a correlation id, so
    // its index entry shares the commit), a status change, a lock.
    let kind =
        |i: usize| if i.is_multiple_of(2) { EventKind::Message } else { EventKind::Progress };
    batches.push(Batch {
        events: (0..24).map(|i| event(i % 3, kind(i), 40 + i as u64, 90)).collect(),
        threads: vec![record(2, ThreadStatus::WaitingInput, 1_064)],
        locks: vec![LockOp::Acquire {
            name: "inventory".into(),
            owner: "runner-a".into(),
            now_ms: 1_064,
            ttl_ms: 60_000,
        }],
        ..Batch::default()
    });
    // 5: a large checkpoint and a second payload.
    let payload = bytes(501, 40_000);
    let mut with_payload = event(1, EventKind::ToolReturned, 70, 32);
    with_payload.payload = Some(PayloadRef::of(&payload));
    batches.push(Batch {
        events: vec![with_payload],
        payloads: vec![payload],
        checkpoints: vec![checkpoint(1, 71, 70_000)],
        ..Batch::default()
    });
    // 6: completion of one thread with a final checkpoint.
    batches.push(Batch {
        events: vec![event(0, EventKind::StatusChanged, 80, 30)],
        threads: vec![record(0, ThreadStatus::Completed, 1_080)],
        checkpoints: vec![checkpoint(0, 81, 1_500)],
        ..Batch::default()
    });
    // 7: a last step.
    batches.push(Batch {
        events: vec![event(2, EventKind::InputReceived, 90, 500)],
        ..Batch::default()
    });
    // 8: a payload large enough to grow the file past redb's initial allocation, so that
    // crashes and a full disk hit the growth path (redb 4.2.0 fixed a crash-during-growth bug).
    let payload = bytes(502, 1_300_000);
    let mut with_payload = event(1, EventKind::ToolReturned, 95, 16);
    with_payload.payload = Some(PayloadRef::of(&payload));
    batches.push(Batch { events: vec![with_payload], payloads: vec![payload], ..Batch::default() });
    batches
}

/// What one batch must look like once committed, learned from the clean run.
#[derive(Debug, Clone, Default)]
pub(crate) struct Expected {
    pub(crate) events: Vec<Event>,
    pub(crate) checkpoints: Vec<Checkpoint>,
    pub(crate) payloads: Vec<(PayloadRef, Vec<u8>)>,
}

pub(crate) fn expected_of(batch: &Batch, appended: &Appended, store: &RedbStore) -> Expected {
    let events = batch
        .events
        .iter()
        .zip(&appended.bookmarks)
        .map(|(new, bookmark)| Event {
            bookmark: *bookmark,
            thread: new.thread.clone(),
            kind: new.kind,
            node: new.node.clone(),
            status: new.status,
            summary: new.summary.clone(),
            payload: new.payload,
            data: new.data.clone(),
            correlation: new.correlation.clone(),
        })
        .collect();
    let checkpoints = appended
        .checkpoints
        .iter()
        .map(|id| store.checkpoint(*id).wait().expect("read").expect("checkpoint just saved"))
        .collect();
    let payloads = batch.payloads.iter().map(|p| (PayloadRef::of(p), p.clone())).collect();
    Expected { events, checkpoints, payloads }
}

/// What happened during one (possibly crashed) run.
#[derive(Debug, Default)]
pub(crate) struct Run {
    /// `with_backend` returned `Ok` (the database exists durably).
    pub(crate) created: bool,
    /// Batches acknowledged, in order.
    pub(crate) acked: usize,
    /// The batch whose append failed, if any (its outcome is unknown).
    pub(crate) in_flight: Option<usize>,
}

pub(crate) fn run(backend: FaultBackend, batches: &[Batch]) -> Run {
    let Ok(store) = RedbStore::with_backend(backend, options()) else {
        return Run::default();
    };
    let mut run = Run { created: true, ..Run::default() };
    for (i, batch) in batches.iter().enumerate() {
        match store.append(batch.clone()).and_then(|p| p.wait_blocking()) {
            Ok(_) => run.acked += 1,
            Err(_) => {
                run.in_flight = Some(i);
                break;
            }
        }
    }
    let _ = store.close();
    run
}

pub(crate) struct Clean {
    pub(crate) batches: Vec<Batch>,
    pub(crate) expected: Vec<Expected>,
    pub(crate) ops: Vec<OpKind>,
}

pub(crate) fn clean_run() -> Clean {
    let batches = workload();
    let backend = FaultBackend::new();
    let controller = backend.controller();
    controller.record_ops(true);
    let store = RedbStore::with_backend(backend, options()).expect("clean create");
    let mut expected = Vec::new();
    for batch in &batches {
        let appended =
            store.append(batch.clone()).and_then(|p| p.wait_blocking()).expect("clean append");
        expected.push(expected_of(batch, &appended, &store));
    }
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "clean run verifies: {:?}", report.problems);
    store.close().expect("clean close");
    let ops =
        controller.ops().into_iter().filter(|op| !matches!(op, OpKind::Read { .. })).collect();
    Clean { batches, expected, ops }
}

/// The op indexes where `model` makes a distinct case: a torn write differs from a plain power
/// loss only on writes, a failed sync only on syncs, a full disk only where the file grows.
pub(crate) fn applicable(model: CrashModel, ops: &[OpKind]) -> Vec<u64> {
    let mut size = 0u64;
    let mut out = Vec::new();
    for (i, op) in ops.iter().enumerate() {
        let keep = match model {
            CrashModel::TornWrite => matches!(op, OpKind::Write { .. }),
            CrashModel::FailedSync => *op == OpKind::Sync,
            CrashModel::DiskFull => op.grows_past(size),
            _ => true,
        };
        match *op {
            OpKind::Write { offset, len } => size = size.max(offset + len),
            OpKind::SetLen { to, .. } => size = to,
            OpKind::Sync | OpKind::Read { .. } => {}
        }
        if keep {
            out.push(i as u64);
        }
    }
    out
}
