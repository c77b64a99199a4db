//! The `store_ops` check: arbitrary operation sequences against a `RedbStore` on an in-memory
//! disk, with every answer compared against a plain in-memory model.
//!
//! Invalid operations (an append to a thread that does not exist, a prune with another thread's
//! checkpoint) are issued too: they must fail and change nothing. Sequence numbers are predicted
//! exactly; lsns and checkpoint ids are store-assigned, so the model records the ones the store
//! returns and checks only that they increase.

use std::collections::BTreeMap;

use arbitrary::Arbitrary;
use cairn_storage_testkit::fault::{FaultBackend, FaultController};
use cairn_storage::{Append, Catalog, Maintenance, ThreadLog};
use cairn_storage::{
    Appended, Batch, Bookmark, Checkpoint, CheckpointId, CheckpointKind, CheckpointMeta, Event,
    EventKind, EventStatus, Lsn, NewCheckpoint, NewEvent, Options, RedbStore, Seq, ThreadId,
    ThreadRecord, WorkflowRef,
};

/// Threads the operations spread over (few, so that operations collide).
const THREADS: u8 = 4;

/// One operation; small integers are mapped onto valid ranges by the runner.
#[derive(Debug, Clone, Arbitrary)]
pub enum Op {
    /// Upsert thread `thread`'s record.
    CreateThread {
        /// Thread number.
        thread: u8,
    },
    /// Append `events` events (mod 8) of `data_len` bytes (mod 1024), optionally with a
    /// checkpoint of that many snapshot bytes (mod 4096).
    Append {
        /// Thread number.
        thread: u8,
        /// Event count.
        events: u8,
        /// Data bytes per event.
        data_len: u16,
        /// Snapshot bytes of a checkpoint saved in the same batch.
        checkpoint: Option<u16>,
    },
    /// `read_since(thread, after, limit)`.
    ReadSince {
        /// Thread number.
        thread: u8,
        /// Exclusive start seq.
        after: u16,
        /// Page size (mod 50, plus 1).
        limit: u16,
    },
    /// `read_all_since(after, limit)`.
    ReadAll {
        /// Exclusive start lsn.
        after: u16,
        /// Page size (mod 50, plus 1).
        limit: u16,
    },
    /// `latest_checkpoint_at_or_before(thread, seq)`.
    LatestCheckpoint {
        /// Thread number.
        thread: u8,
        /// Seq bound.
        seq: u16,
    },
    /// Delete an existing checkpoint (even `pick`) or a missing one (odd).
    DeleteCheckpoint {
        /// Which.
        pick: u16,
    },
    /// Prune `thread` up to an existing checkpoint (possibly another thread's).
    Prune {
        /// Thread number.
        thread: u8,
        /// Which checkpoint.
        pick: u16,
    },
    /// Close and reopen from the durable image.
    Reopen,
    /// `verify()` plus the store-maintained fields of every thread record.
    Verify,
}

/// The model: what the store must hold.
#[derive(Debug, Default)]
struct Model {
    /// Per thread: first stored seq, last bookmark, stored events.
    threads: BTreeMap<u8, ModelThread>,
    checkpoints: BTreeMap<CheckpointId, Checkpoint>,
    last_lsn: u64,
    last_checkpoint: u64,
}

#[derive(Debug)]
struct ModelThread {
    first_seq: u64,
    last: Option<Bookmark>,
    events: Vec<Event>,
}

/// Runs `ops` against a fresh store and the model.
///
/// # Panics
///
/// When the store and the model disagree, or the store panics: both are bugs.
pub fn run(ops: &[Op]) {
    let (mut store, mut controller) = open(FaultBackend::new());
    let mut model = Model::default();
    for op in ops {
        match *op {
            Op::CreateThread { thread } => create(&store, &mut model, thread % THREADS),
            Op::Append { thread, events, data_len, checkpoint } => append(
                &store,
                &mut model,
                thread % THREADS,
                events % 8,
                usize::from(data_len % 1024),
                checkpoint.map(|c| usize::from(c % 4096)),
            ),
            Op::ReadSince { thread, after, limit } => {
                read_since(&store, &model, thread % THREADS, u64::from(after), limit);
            }
            Op::ReadAll { after, limit } => read_all(&store, &model, u64::from(after), limit),
            Op::LatestCheckpoint { thread, seq } => {
                latest(&store, &model, thread % THREADS, u64::from(seq));
            }
            Op::DeleteCheckpoint { pick } => delete(&store, &mut model, pick),
            Op::Prune { thread, pick } => prune(&store, &mut model, thread % THREADS, pick),
            Op::Reopen => {
                store.close().expect("close");
                (store, controller) = open(FaultBackend::from_image(controller.durable_image()));
            }
            Op::Verify => verify(&store, &model),
        }
    }
    verify(&store, &model);
}

fn open(backend: FaultBackend) -> (RedbStore, FaultController) {
    let controller = backend.controller();
    let store = RedbStore::with_backend(backend, Options::default()).expect("open on memory");
    (store, controller)
}

fn thread_id(n: u8) -> ThreadId {
    ThreadId::new(format!("fuzz-{n}")).expect("valid id")
}

fn workflow() -> WorkflowRef {
    WorkflowRef { id: "fuzz".into(), version: 1, fingerprint: "fp".into() }
}

fn create(store: &RedbStore, model: &mut Model, n: u8) {
    let batch =
        Batch { threads: vec![ThreadRecord::new(thread_id(n), workflow(), 1)], ..Batch::default() };
    store.append(batch).and_then(|p| p.wait_blocking()).expect("thread upsert");
    model.threads.entry(n).or_insert(ModelThread { first_seq: 1, last: None, events: Vec::new() });
}

fn append(
    store: &RedbStore,
    model: &mut Model,
    n: u8,
    count: u8,
    data_len: usize,
    checkpoint: Option<usize>,
) {
    let id = thread_id(n);
    let events: Vec<NewEvent> = (0..count)
        .map(|i| NewEvent {
            thread: id.clone(),
            kind: EventKind::Progress,
            node: (i % 2 == 0).then(|| format!("node-{i}")),
            status: EventStatus::Info,
            summary: format!("event {i}"),
            payload: None,
            data: vec![i; data_len],
            at_ms: u64::from(i) + 10,
            correlation: None,
        })
        .collect();
    let checkpoints: Vec<NewCheckpoint> = checkpoint
        .map(|len| NewCheckpoint {
            thread: id.clone(),
            workflow: workflow(),
            kind: CheckpointKind::Manual,
            snapshot: vec![n; len],
            meta: CheckpointMeta { tags: vec![format!("t{n}")], ..CheckpointMeta::default() },
            created_at_ms: 7,
        })
        .into_iter()
        .collect();
    let batch =
        Batch { events: events.clone(), checkpoints: checkpoints.clone(), ..Batch::default() };
    let result = store.append(batch).and_then(|p| p.wait_blocking());

    if events.is_empty() && checkpoints.is_empty() {
        assert_eq!(result.expect("an empty batch commits"), Appended::default());
        return;
    }
    let Some(thread) = model.threads.get_mut(&n) else {
        assert!(result.is_err(), "append to unknown thread {n} must fail: {result:?}");
        return;
    };
    if events.is_empty() && !checkpoints.is_empty() && thread.last.is_none() {
        // A checkpoint must cover an event; with none stored or appended the batch is refused.
        assert!(result.is_err(), "checkpoint of an empty thread must fail: {result:?}");
        return;
    }
    let appended = result.expect("valid append");
    assert_eq!(appended.bookmarks.len(), events.len());
    let first_seq = thread.last.map_or(1, |b| b.seq.0 + 1);
    for ((new, bookmark), seq) in events.into_iter().zip(&appended.bookmarks).zip(first_seq..) {
        assert_eq!(bookmark.seq, Seq(seq), "seqs are gap-free");
        assert!(bookmark.lsn.0 > model.last_lsn, "lsns increase");
        assert_eq!(bookmark.at_ms, new.at_ms);
        model.last_lsn = bookmark.lsn.0;
        thread.last = Some(*bookmark);
        thread.events.push(Event {
            bookmark: *bookmark,
            thread: new.thread,
            kind: new.kind,
            node: new.node,
            status: new.status,
            summary: new.summary,
            payload: new.payload,
            data: new.data,
            correlation: new.correlation,
        });
    }
    assert_eq!(appended.checkpoints.len(), checkpoints.len());
    for (new, id) in checkpoints.into_iter().zip(&appended.checkpoints) {
        assert!(id.0 > model.last_checkpoint, "checkpoint ids increase");
        model.last_checkpoint = id.0;
        let covers = thread.last.expect("checked above");
        model.checkpoints.insert(
            *id,
            Checkpoint {
                id: *id,
                thread: new.thread,
                workflow: new.workflow,
                covers,
                created_at_ms: new.created_at_ms,
                kind: new.kind,
                snapshot: new.snapshot,
                meta: new.meta,
            },
        );
    }
}

fn read_since(store: &RedbStore, model: &Model, n: u8, after: u64, limit: u16) {
    let limit = usize::from(limit % 50) + 1;
    let result = store.read_since(&thread_id(n), Seq(after), limit).wait();
    let Some(thread) = model.threads.get(&n) else {
        assert!(result.is_err(), "read of unknown thread {n}: {result:?}");
        return;
    };
    if after + 1 < thread.first_seq {
        assert!(
            matches!(result, Err(cairn_storage::Error::Pruned { first_available, .. }) if first_available == Seq(thread.first_seq)),
            "read before first_seq: {result:?}"
        );
        return;
    }
    let expected: Vec<&Event> =
        thread.events.iter().filter(|e| e.bookmark.seq.0 > after).take(limit).collect();
    let found = result.expect("read_since");
    assert_eq!(found.iter().collect::<Vec<_>>(), expected, "read_since({n}, {after}, {limit})");
}

fn read_all(store: &RedbStore, model: &Model, after: u64, limit: u16) {
    let limit = usize::from(limit % 50) + 1;
    let mut expected: Vec<&Event> = model
        .threads
        .values()
        .flat_map(|t| &t.events)
        .filter(|e| e.bookmark.lsn.0 > after)
        .collect();
    expected.sort_by_key(|e| e.bookmark.lsn);
    expected.truncate(limit);
    let found = store.read_all_since(Lsn(after), limit).wait().expect("read_all_since");
    assert_eq!(found.iter().collect::<Vec<_>>(), expected, "read_all_since({after}, {limit})");
}

fn latest(store: &RedbStore, model: &Model, n: u8, seq: u64) {
    let result = store.latest_checkpoint_at_or_before(&thread_id(n), Seq(seq)).wait();
    if !model.threads.contains_key(&n) {
        assert!(matches!(result, Ok(None) | Err(_)), "unknown thread: {result:?}");
        return;
    }
    let expected = model
        .checkpoints
        .values()
        .filter(|c| c.thread == thread_id(n) && c.covers.seq.0 <= seq)
        .max_by_key(|c| (c.covers.seq, c.id));
    assert_eq!(result.expect("latest checkpoint").as_ref(), expected, "latest({n}, {seq})");
}

fn delete(store: &RedbStore, model: &mut Model, pick: u16) {
    let ids: Vec<CheckpointId> = model.checkpoints.keys().copied().collect();
    let id = if pick.is_multiple_of(2) && !ids.is_empty() {
        ids[usize::from(pick / 2) % ids.len()]
    } else {
        CheckpointId(1_000_000 + u64::from(pick))
    };
    let existed = store.delete_checkpoint(id).and_then(|p| p.wait_blocking()).expect("delete");
    assert_eq!(existed, model.checkpoints.remove(&id).is_some(), "delete {id}");
    assert!(!store.checkpoint_exists(id).wait().expect("exists"), "deleted {id} still exists");
}

fn prune(store: &RedbStore, model: &mut Model, n: u8, pick: u16) {
    let ids: Vec<CheckpointId> = model.checkpoints.keys().copied().collect();
    let Some(&keep) = ids.get(usize::from(pick) % ids.len().max(1)) else {
        return;
    };
    let result = store.prune(&thread_id(n), keep).and_then(|p| p.wait_blocking());
    let info = &model.checkpoints[&keep];
    if info.thread != thread_id(n) {
        assert!(result.is_err(), "prune of {n} with another thread's checkpoint: {result:?}");
        return;
    }
    let pruned = result.expect("valid prune");
    let covers = info.covers.seq.0;
    let thread = model.threads.get_mut(&n).expect("a checkpoint's thread exists");
    let before = thread.events.len();
    thread.events.retain(|e| e.bookmark.seq.0 > covers);
    assert_eq!(pruned.events, (before - thread.events.len()) as u64, "events pruned");
    thread.first_seq = thread.first_seq.max(covers + 1);
    assert_eq!(pruned.first_seq, Seq(thread.first_seq));
    let doomed: Vec<CheckpointId> = model
        .checkpoints
        .values()
        .filter(|c| c.thread == thread_id(n) && c.id < keep)
        .map(|c| c.id)
        .collect();
    assert_eq!(pruned.checkpoints, doomed.len() as u64, "checkpoints pruned");
    for id in doomed {
        model.checkpoints.remove(&id);
    }
}

fn verify(store: &RedbStore, model: &Model) {
    let report = store.verify().expect("verify runs");
    assert!(report.is_clean(), "verify: {:?}", report.problems);
    let stored_events: usize = model.threads.values().map(|t| t.events.len()).sum();
    assert_eq!(report.events, stored_events as u64, "events counted by verify");
    assert_eq!(report.checkpoints, model.checkpoints.len() as u64, "checkpoints counted");
    for (n, thread) in &model.threads {
        let record = store.thread(&thread_id(*n)).wait().expect("thread").expect("thread exists");
        assert_eq!(record.last, thread.last, "thread {n} last");
        assert_eq!(record.first_seq, Seq(thread.first_seq), "thread {n} first_seq");
    }
    for checkpoint in model.checkpoints.values() {
        assert_eq!(
            store.checkpoint(checkpoint.id).wait().expect("checkpoint").as_ref(),
            Some(checkpoint)
        );
    }
}
