//! Shared helpers: ids, records and stores for the tests.

use std::path::PathBuf;

use cairn_storage::{
    Appended, Batch, CheckpointKind, CheckpointMeta, Durability, EventKind, EventStatus,
    NewCheckpoint, NewEvent, Options, RedbStore, Store, ThreadId, ThreadRecord, WorkflowRef,
};
use cairn_storage_testkit::fault::{CrashModel, Fault, FaultBackend};
use tempfile::TempDir;

pub fn tid(id: &str) -> ThreadId {
    ThreadId::new(id).expect("valid thread id")
}

pub fn workflow(id: &str) -> WorkflowRef {
    WorkflowRef { id: id.into(), version: 1, fingerprint: format!("fp-{id}").into() }
}

pub fn thread_record(id: &str) -> ThreadRecord {
    ThreadRecord::new(tid(id), workflow("wf"), 1_000)
}

pub fn event(thread: &str, n: u64) -> NewEvent {
    NewEvent {
        thread: tid(thread),
        kind: EventKind::StateUpdated,
        node: Some(format!("node-{}", n % 3)),
        status: EventStatus::Success,
        summary: format!("event {n} of {thread}"),
        payload: None,
        data: format!("{{\"n\":{n}}}").into_bytes(),
        at_ms: 1_000 + n,
        correlation: None,
    }
}

pub fn checkpoint(thread: &str, kind: CheckpointKind, tags: &[&str]) -> NewCheckpoint {
    NewCheckpoint {
        thread: tid(thread),
        workflow: workflow("wf"),
        kind,
        snapshot: format!("snapshot of {thread}").into_bytes(),
        meta: CheckpointMeta {
            creator: "test".into(),
            description: "a checkpoint".into(),
            tags: tags.iter().map(|t| t.to_string()).collect(),
            custom: [("k".to_string(), "v".to_string())].into(),
        },
        created_at_ms: 2_000,
    }
}

/// A temp dir and a database path inside it.
pub fn temp_db() -> (TempDir, PathBuf) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("cairn.db");
    (dir, path)
}

/// Options for tests that do not test durability: no fsync, so tests stay fast.
pub fn fast() -> Options {
    Options::default().with_durability(Durability::None)
}

pub fn open_fast() -> (TempDir, PathBuf, RedbStore) {
    let (dir, path) = temp_db();
    let store = RedbStore::open(&path, fast()).expect("open store");
    (dir, path, store)
}

/// Appends and waits, outside any runtime.
pub fn append(store: &impl Store, batch: Batch) -> Appended {
    store.append(batch).expect("queued").wait_blocking().expect("committed")
}

/// Creates `thread` with `events` events (seqs 1..=events).
pub fn create_thread(store: &impl Store, thread: &str, events: u64) -> Appended {
    let batch = Batch {
        threads: vec![thread_record(thread)],
        events: (1..=events).map(|n| event(thread, n)).collect(),
        ..Batch::default()
    };
    append(store, batch)
}

pub fn events(store: &impl Store, thread: &str, n: u64) -> Appended {
    let start = store.last_bookmark(&tid(thread)).wait().expect("read").map_or(0, |b| b.seq.0);
    let batch = Batch {
        events: (start + 1..=start + n).map(|k| event(thread, k)).collect(),
        ..Batch::default()
    };
    append(store, batch)
}

/// Opens `image` (a file an open migrates) with a crash at each of the open's writes, under
/// three crash models, and hands each crashed file, opened again, to `check`; returns the
/// number of writes and how many crashed opens failed and succeeded. Every crashed file must
/// open.
pub fn crash_each_write_of_open(
    image: &[u8],
    check: impl Fn(&RedbStore, u64, CrashModel),
) -> (u64, [u32; 2]) {
    let ops = {
        let backend = FaultBackend::from_image(image.to_vec());
        let disk = backend.controller();
        let store = RedbStore::with_backend(backend, fast()).expect("open migrates");
        drop(store);
        disk.mutations()
    };
    assert!(ops > 0);
    let mut outcomes = [0u32; 2];
    for op in 0..ops {
        for model in [CrashModel::LoseUnsynced, CrashModel::TornWrite, CrashModel::Kill] {
            let backend = FaultBackend::from_image(image.to_vec());
            let disk = backend.controller();
            disk.arm(Fault::at(op, model));
            let opened = RedbStore::with_backend(backend, fast()).map(drop);
            outcomes[usize::from(opened.is_ok())] += 1;
            let reopened =
                RedbStore::with_backend(FaultBackend::from_image(disk.crash_image()), fast())
                    .unwrap_or_else(|e| panic!("op {op} {model:?}: the file does not open: {e}"));
            check(&reopened, op, model);
        }
    }
    (ops, outcomes)
}
