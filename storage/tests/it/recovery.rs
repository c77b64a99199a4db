//! One test per row of the recovery decision table in `docs/format.md`.
//!
//! Each test builds a small store, closes it, damages the file the way the row describes (through
//! redb directly, see `raw`), reopens and checks the decision: fail closed with an error naming
//! the table, thread and seq; never skip; never return wrong data; `verify()` lists the damage.

use cairn_storage::{Append, Catalog, Maintenance, ThreadLog};
use std::path::Path;

use cairn_storage::{
    Batch, CheckpointId, CheckpointKind, Error, Lsn, PayloadRef, RedbStore, Scope, Seq,
};
use redb::ReadableTable;

use crate::common::*;
use crate::raw;

/// Threads "t" (5 events) and "u" (2 events), interleaved lsns; closed.
fn build(path: &Path) {
    let store = RedbStore::open(path, fast()).expect("open");
    create_thread(&store, "t", 0);
    create_thread(&store, "u", 0);
    // One event an append, so one a batch frame: damage to a frame is damage to one event.
    for thread in ["t", "t", "t", "u", "u", "t", "t"] {
        events(&store, thread, 1);
    }
    store.close().expect("close");
}

fn reopen(path: &Path) -> RedbStore {
    RedbStore::open_existing(path, fast()).expect("reopen")
}

fn assert_corrupted(
    result: Result<impl std::fmt::Debug, Error>,
    table: &str,
    thread: &str,
    seq: u64,
) {
    match result {
        Err(Error::Corrupted { table: t, thread: Some(th), seq: Some(Seq(s)), .. })
            if t == table && th.as_str() == thread && s == seq => {}
        other => panic!("expected Corrupted in {table} at ({thread}, {seq}), got {other:?}"),
    }
}

fn assert_verify_names(store: &RedbStore, table: &str, thread: &str, seq: u64) {
    let report = store.verify().expect("verify");
    assert!(
        report.problems.iter().any(|p| p.table == table
            && p.thread.as_ref().map(|t| t.as_str()) == Some(thread)
            && p.seq == Some(Seq(seq))),
        "verify did not name {table} ({thread}, {seq}): {:?}",
        report.problems
    );
}

#[test]
fn clean_tail_reopens_with_everything() {
    let (_dir, path) = temp_db();
    build(&path);
    let store = reopen(&path);
    assert_eq!(store.read_since(&tid("t"), Seq(0), 10).wait().expect("read").len(), 5);
    assert_eq!(store.read_all_since(Lsn(0), 10).wait().expect("feed").len(), 7);
    assert!(store.verify().expect("verify").is_clean());
    assert_eq!(events(&store, "u", 1).bookmarks[0].lsn, Lsn(8));
}

#[test]
fn torn_tail_or_uncommitted_transaction_is_rolled_back_whole() {
    use cairn_storage::{Durability, Options};
    use cairn_storage_testkit::fault::{CrashModel, Fault, FaultBackend};
    // Crash (power loss) at every mutating op of one 3-event batch's commit: after reopen the
    // batch is wholly present or wholly absent, and everything acknowledged before is there.
    let backend = FaultBackend::new();
    let disk = backend.controller();
    let store = RedbStore::with_backend(backend, Options::default()).expect("open");
    create_thread(&store, "t", 2);
    let base = disk.durable_image();
    drop(store);
    let ops = {
        let backend = FaultBackend::from_image(base.clone());
        let disk = backend.controller();
        let store = RedbStore::with_backend(backend, Options::default()).expect("open");
        let start = disk.mutations();
        events(&store, "t", 3);
        disk.mutations() - start
    };
    assert!(ops > 0);
    for op in 0..ops {
        for model in [CrashModel::LoseUnsynced, CrashModel::TornWrite, CrashModel::Kill] {
            let backend = FaultBackend::from_image(base.clone());
            let disk = backend.controller();
            let store = RedbStore::with_backend(
                backend,
                Options::default().with_durability(Durability::Immediate),
            )
            .expect("open");
            disk.arm(Fault::at(disk.mutations() + op, model));
            let acked = store
                .append(Batch {
                    events: (3..=5).map(|n| event("t", n)).collect(),
                    ..Batch::default()
                })
                .expect("queued")
                .wait_blocking()
                .is_ok();
            drop(store);
            let reopened = RedbStore::with_backend(
                FaultBackend::from_image(disk.crash_image()),
                Options::default(),
            )
            .expect("reopen after crash");
            let n = reopened.read_since(&tid("t"), Seq(0), 10).wait().expect("read").len();
            assert!(n == 2 || n == 5, "op {op} {model:?}: {n} events (a partial batch)");
            assert!(!acked || n == 5, "op {op} {model:?}: an acknowledged batch was lost");
            assert!(reopened.verify().expect("verify").is_clean());
        }
    }
}

#[test]
fn crc_mismatch_mid_log_fails_closed() {
    let (_dir, path) = temp_db();
    build(&path);
    let mut bytes = raw::event_bytes(&path, "t", 2);
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x04;
    raw::put_event_bytes(&path, "t", 2, &bytes);
    let store = reopen(&path);
    let t = tid("t");
    assert_eq!(store.read_since(&t, Seq(0), 1).wait().expect("before the damage").len(), 1);
    assert_corrupted(store.read_since(&t, Seq(0), 10).wait(), "events", "t", 2);
    assert_corrupted(store.read_since(&t, Seq(1), 1).wait(), "events", "t", 2);
    assert_eq!(store.read_since(&t, Seq(2), 10).wait().expect("after the damage").len(), 3);
    assert_corrupted(store.read_all_since(Lsn(0), 10).wait(), "events", "t", 2);
    assert_eq!(store.read_since(&tid("u"), Seq(0), 10).wait().expect("other thread").len(), 2);
    assert_verify_names(&store, "events", "t", 2);
    // A subscription stops at the damage instead of skipping it.
    let mut sub = store.subscribe(Scope::Thread(t), 0).expect("subscribe");
    let runtime = tokio::runtime::Builder::new_current_thread().build().expect("runtime");
    assert_corrupted(runtime.block_on(sub.try_next()), "events", "t", 2);
}

#[test]
fn crc_mismatch_at_the_tail_fails_closed_too() {
    // Inside redb a crash cannot tear a committed record (transactions are atomic), so a bad last
    // record is damage, not a torn write: it fails closed like the middle.
    let (_dir, path) = temp_db();
    build(&path);
    let mut bytes = raw::event_bytes(&path, "t", 5);
    let last = bytes.len() - 1;
    bytes[last] ^= 0x80;
    raw::put_event_bytes(&path, "t", 5, &bytes);
    let store = reopen(&path);
    assert_corrupted(store.read_since(&tid("t"), Seq(4), 10).wait(), "events", "t", 5);
    assert_verify_names(&store, "events", "t", 5);
}

#[test]
fn unknown_record_version_fails_closed() {
    let (_dir, path) = temp_db();
    build(&path);
    let bytes = raw::event_bytes(&path, "t", 3);
    let mut covered = bytes[..bytes.len() - 4].to_vec();
    covered[0] = 2;
    raw::put_event_bytes(&path, "t", 3, &raw::with_valid_crc(covered));
    let store = reopen(&path);
    let result = store.read_range(&tid("t"), Seq(3), Seq(3)).wait();
    assert!(
        matches!(&result, Err(Error::Corrupted { detail, .. }) if detail.contains("version 2")),
        "{result:?}"
    );
    assert_corrupted(result, "events", "t", 3);
}

#[test]
fn newer_format_is_refused_and_left_untouched() {
    let (_dir, path) = temp_db();
    build(&path);
    raw::write(&path, |txn| {
        let mut meta = txn.open_table(raw::META).expect("meta");
        let newer = cairn_storage::FORMAT_VERSION + 1;
        meta.insert("format_version", newer.to_le_bytes().as_slice()).expect("insert");
    });
    let before = std::fs::read(&path).expect("read file");
    for result in [
        RedbStore::open(&path, fast()).map(drop),
        RedbStore::open_existing(&path, fast()).map(drop),
        RedbStore::open_read_only(&path).map(drop),
    ] {
        let (found, supported) = (cairn_storage::FORMAT_VERSION + 1, cairn_storage::FORMAT_VERSION);
        assert!(
            matches!(result, Err(Error::NewerFormat { found: f, supported: s }) if f == found && s == supported),
            "{result:?}"
        );
    }
    assert_eq!(std::fs::read(&path).expect("read file"), before, "the file was written to");
}

#[test]
fn seq_gap_fails_closed() {
    let (_dir, path) = temp_db();
    build(&path);
    // The index still says seq 3 is at its lsn; the log lost the event.
    let lsn = raw::lsn_of(&path, "t", 3);
    raw::write(&path, |txn| {
        txn.open_table(raw::EVENTS).expect("events").remove(lsn).expect("remove");
    });
    let store = reopen(&path);
    let result = store.read_since(&tid("t"), Seq(0), 10).wait();
    assert!(
        matches!(&result, Err(Error::Corrupted { detail, .. }) if detail.contains("gap")),
        "{result:?}"
    );
    assert_corrupted(result, "events", "t", 3);
    // Reads on either side of the hole still work.
    assert_eq!(store.read_range(&tid("t"), Seq(4), Seq(5)).wait().expect("after").len(), 2);
    assert_eq!(store.read_range(&tid("t"), Seq(1), Seq(2)).wait().expect("before").len(), 2);
    assert_verify_names(&store, "events", "t", 3);
}

/// Thread "t" with 70 events (two full seq-index chunks and a tail of 6), interleaved with
/// thread "u" (one event after each of t's), so t's lsns are not consecutive; closed.
fn build_long(path: &Path) {
    let store = RedbStore::open(path, fast()).expect("open");
    create_thread(&store, "t", 0);
    create_thread(&store, "u", 0);
    for _ in 0..70 {
        events(&store, "t", 1);
        events(&store, "u", 1);
    }
    store.close().expect("close");
}

#[test]
fn a_missing_seq_index_chunk_fails_closed() {
    let (_dir, path) = temp_db();
    build_long(&path);
    raw::write(&path, |txn| {
        let mut index = txn.open_table(raw::SEQ_INDEX).expect("seq index");
        assert!(index.remove(("t", 33)).expect("remove").is_some(), "chunk 33..=64 exists");
    });
    let store = reopen(&path);
    let t = tid("t");
    let result = store.read_since(&t, Seq(30), 10).wait();
    assert!(
        matches!(&result, Err(Error::Corrupted { detail, .. }) if detail.contains("seq gap")),
        "{result:?}"
    );
    assert_corrupted(result, "seq_index", "t", 33);
    assert_eq!(store.read_since(&t, Seq(0), 32).wait().expect("the chunk before").len(), 32);
    assert_eq!(store.read_since(&t, Seq(64), 10).wait().expect("the tail").len(), 6);
    assert_eq!(store.read_all_since(Lsn(0), 1_000).wait().expect("the log is whole").len(), 140);
    assert_verify_names(&store, "seq_index", "t", 33);
}

#[test]
fn a_missing_tail_event_fails_closed() {
    let (_dir, path) = temp_db();
    build(&path);
    let lsn = raw::lsn_of(&path, "t", 5);
    raw::write(&path, |txn| {
        txn.open_table(raw::EVENTS).expect("events").remove(lsn).expect("remove");
    });
    let store = reopen(&path);
    assert_corrupted(store.read_since(&tid("t"), Seq(3), 10).wait(), "events", "t", 5);
    assert_verify_names(&store, "events", "t", 5);
}

#[test]
fn key_record_mismatch_fails_closed() {
    let (_dir, path) = temp_db();
    build(&path);
    let second = raw::event_bytes(&path, "t", 2);
    raw::put_event_bytes(&path, "t", 3, &second);
    let store = reopen(&path);
    let result = store.read_range(&tid("t"), Seq(3), Seq(3)).wait();
    assert!(
        matches!(&result, Err(Error::Corrupted { detail, .. }) if detail.contains("holds the record")),
        "{result:?}"
    );
    assert_corrupted(result, "events", "t", 3);
    // The global feed checks the log's key against the record's lsn.
    let feed = store.read_all_since(Lsn(0), 10).wait();
    assert!(
        matches!(&feed, Err(Error::Corrupted { table: "events", detail, .. }) if detail.contains("holds the record")),
        "{feed:?}"
    );
    // A record of another thread under this thread's lsn is caught the same way.
    drop(store);
    let other = raw::event_bytes(&path, "u", 1);
    raw::put_event_bytes(&path, "t", 1, &other);
    let store = reopen(&path);
    assert_corrupted(store.read_range(&tid("t"), Seq(1), Seq(1)).wait(), "events", "t", 1);
    assert_verify_names(&store, "events", "t", 1);
}

#[test]
fn seq_index_mismatch_fails_closed() {
    let (_dir, path) = temp_db();
    build_long(&path);
    // Point t's seq 2 at u's first event (its lsn lies between t's seqs 1 and 3, so the chunk
    // still rises and passes its own checks).
    let wrong = raw::lsn_of(&path, "u", 1);
    raw::write(&path, |txn| {
        let mut index = txn.open_table(raw::SEQ_INDEX).expect("seq index");
        let bytes = index.get(("t", 1)).expect("get").expect("chunk 1..=32").value().to_vec();
        let mut chunk = cairn_storage::codec::decode_seq_chunk(&bytes).expect("decode");
        chunk.lsns[1] = wrong;
        let framed = cairn_storage::codec::encode_seq_chunk(&chunk).expect("encode");
        index.insert(("t", 1), framed.as_slice()).expect("insert");
    });
    let store = reopen(&path);
    let t = tid("t");
    let result = store.read_range(&t, Seq(2), Seq(2)).wait();
    assert!(
        matches!(&result, Err(Error::Corrupted { detail, .. }) if detail.contains("holds the record of (u, 1)")),
        "{result:?}"
    );
    assert_corrupted(result, "events", "t", 2);
    assert_eq!(store.read_range(&t, Seq(3), Seq(40)).wait().expect("past it").len(), 38);
    // The global feed reads the log itself, which is intact.
    assert_eq!(store.read_all_since(Lsn(0), 1_000).wait().expect("feed").len(), 140);
    let report = store.verify().expect("verify");
    assert!(!report.is_clean());
    assert_verify_names(&store, "events", "t", 2);
    // A chunk stored under another key is caught as well.
    drop(store);
    raw::write(&path, |txn| {
        let mut index = txn.open_table(raw::SEQ_INDEX).expect("seq index");
        let bytes = index.remove(("t", 33)).expect("remove").expect("chunk").value().to_vec();
        index.insert(("t", 34), bytes.as_slice()).expect("insert");
    });
    let store = reopen(&path);
    let result = store.read_range(&t, Seq(34), Seq(34)).wait();
    assert!(
        matches!(&result, Err(Error::Corrupted { table: "seq_index", detail, .. }) if detail.contains("holds the chunk")),
        "{result:?}"
    );
}

#[test]
fn missing_payload_is_reported() {
    let (_dir, path) = temp_db();
    let store = RedbStore::open(&path, fast()).expect("open");
    create_thread(&store, "t", 0);
    let bytes = b"tool output".to_vec();
    let r = PayloadRef::of(&bytes);
    let mut with_payload = event("t", 1);
    with_payload.payload = Some(r);
    append(&store, Batch { events: vec![with_payload], payloads: vec![bytes], ..Batch::default() });
    store.close().expect("close");
    raw::write(&path, |txn| {
        txn.open_table(raw::PAYLOADS).expect("payloads").remove(&r.hash).expect("remove");
    });
    let store = reopen(&path);
    assert!(
        matches!(store.payload(&r).wait(), Err(Error::MissingPayload(missing)) if missing == r)
    );
    assert_eq!(
        store.read_since(&tid("t"), Seq(0), 10).wait().expect("event still reads")[0].payload,
        Some(r)
    );
    assert_verify_names(&store, "payloads", "t", 1);
    // A payload whose bytes changed is corruption, not data.
    drop(store);
    raw::write(&path, |txn| {
        txn.open_table(raw::PAYLOADS)
            .expect("payloads")
            .insert(&r.hash, b"tool outpuT".as_slice())
            .expect("insert");
    });
    let store = reopen(&path);
    assert!(matches!(store.payload(&r).wait(), Err(Error::Corrupted { table: "payloads", .. })));
}

#[test]
fn a_corrupt_thread_record_fails_closed_for_that_thread_only() {
    let (_dir, path) = temp_db();
    build(&path);
    raw::write(&path, |txn| {
        let mut index = txn.open_table(raw::INDEX).expect("index");
        let key = raw::thread_key("t");
        let mut bytes = index.get(key.as_slice()).expect("get").expect("present").value().to_vec();
        bytes[8] ^= 0x01;
        index.insert(key.as_slice(), bytes.as_slice()).expect("insert");
    });
    let store = reopen(&path);
    let result = store.thread(&tid("t")).wait();
    assert!(
        matches!(result, Err(Error::Corrupted { table: "threads", thread: Some(ref t), .. }) if t.as_str() == "t")
    );
    assert!(store.read_since(&tid("t"), Seq(0), 10).wait().is_err());
    let append_t =
        store.append(Batch { events: vec![event("t", 6)], ..Batch::default() }).expect("queued");
    assert!(matches!(append_t.wait_blocking(), Err(Error::Corrupted { table: "threads", .. })));
    assert_eq!(events(&store, "u", 1).bookmarks[0].seq, Seq(3));
    assert!(!store.verify().expect("verify").is_clean());
}

#[test]
fn a_corrupt_checkpoint_fails_closed_and_older_ones_still_load() {
    let (_dir, path) = temp_db();
    let store = RedbStore::open(&path, fast()).expect("open");
    create_thread(&store, "t", 2);
    let cp = |store: &RedbStore| {
        append(
            store,
            Batch {
                checkpoints: vec![checkpoint("t", CheckpointKind::Periodic, &[])],
                ..Batch::default()
            },
        )
        .checkpoints[0]
    };
    let older = cp(&store);
    events(&store, "t", 2);
    let newer = cp(&store);
    store.close().expect("close");
    raw::write(&path, |txn| {
        let mut index = txn.open_table(raw::INDEX).expect("index");
        let key = raw::snapshot_key(newer.0);
        let mut bytes = index.get(key.as_slice()).expect("get").expect("present").value().to_vec();
        let at = bytes.len() - 6;
        bytes[at] ^= 0x20;
        index.insert(key.as_slice(), bytes.as_slice()).expect("insert");
    });
    let store = reopen(&path);
    let result = store.checkpoint(newer).wait();
    assert!(
        matches!(result, Err(Error::Corrupted { table: "checkpoint_snapshots", seq: Some(Seq(id)), .. }) if id == newer.0)
    );
    assert!(store.latest_checkpoint_at_or_before(&tid("t"), Seq(9)).wait().is_err());
    let fallback = store
        .latest_checkpoint_at_or_before(&tid("t"), Seq(3))
        .wait()
        .expect("older")
        .expect("present");
    assert_eq!(fallback.id, older);
    let report = store.verify().expect("verify");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.table == "checkpoint_snapshots" && p.seq == Some(Seq(newer.0)))
    );
    assert!(store.checkpoint(CheckpointId(older.0)).wait().expect("older loads").is_some());
}

/// Thread "t": seqs 1..=6 in one append (one batch frame, lsns 1..=6), then "u" 1..=2 (lsns
/// 7..=8), then "t" 7..=9 (lsns 9..=11); closed.
fn build_batched(path: &Path) {
    let store = RedbStore::open(path, fast()).expect("open");
    create_thread(&store, "t", 0);
    create_thread(&store, "u", 0);
    events(&store, "t", 6);
    events(&store, "u", 2);
    events(&store, "t", 3);
    store.close().expect("close");
}

/// The log's keys (each batch frame's last lsn).
fn log_keys(path: &Path) -> Vec<u64> {
    let db = redb::Database::open(path).expect("raw open");
    let txn = redb::ReadableDatabase::begin_read(&db).expect("read");
    let table = txn.open_table(raw::EVENTS).expect("events");
    table.iter().expect("iter").map(|e| e.expect("entry").0.value()).collect()
}

#[test]
fn a_batch_frame_serves_a_read_at_every_position() {
    let (_dir, path) = temp_db();
    build_batched(&path);
    assert_eq!(log_keys(&path), [6, 8, 11], "one frame per append and thread");
    let store = reopen(&path);
    let t = tid("t");
    let all = store.read_since(&t, Seq(0), 100).wait().expect("read");
    let lsns: Vec<u64> = all.iter().map(|e| e.bookmark.lsn.0).collect();
    assert_eq!(lsns, [1, 2, 3, 4, 5, 6, 9, 10, 11]);
    for seq in 1..=9 {
        let one = store.read_range(&t, Seq(seq), Seq(seq)).wait().expect("one");
        assert_eq!(one, all[seq as usize - 1..seq as usize], "seq {seq}");
        let two = store.read_since(&t, Seq(seq - 1), 2).wait().expect("two");
        assert_eq!(two, all[seq as usize - 1..(seq as usize + 1).min(9)], "after {}", seq - 1);
    }
    let feed = store.read_all_since(Lsn(0), 100).wait().expect("feed");
    for after in 0..=11u64 {
        let rest = store.read_all_since(Lsn(after), 3).wait().expect("feed");
        let want: Vec<_> = feed.iter().filter(|e| e.bookmark.lsn.0 > after).take(3).collect();
        assert_eq!(rest.iter().collect::<Vec<_>>(), want, "after lsn {after}");
    }
    assert!(store.verify().expect("verify").is_clean());
}

#[test]
fn a_damaged_batch_frame_fails_closed_for_each_of_its_events() {
    let (_dir, path) = temp_db();
    build_batched(&path);
    let mut bytes = raw::event_bytes(&path, "t", 3);
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x10;
    raw::put_event_bytes(&path, "t", 3, &bytes);
    let store = reopen(&path);
    let t = tid("t");
    for seq in 1..=6 {
        assert_corrupted(store.read_range(&t, Seq(seq), Seq(seq)).wait(), "events", "t", seq);
    }
    assert_eq!(store.read_since(&t, Seq(6), 10).wait().expect("the next frame").len(), 3);
    assert_eq!(store.read_since(&tid("u"), Seq(0), 10).wait().expect("other thread").len(), 2);
    // The feed names the frame's owner through the index entry at its key.
    assert_corrupted(store.read_all_since(Lsn(0), 10).wait(), "events", "t", 6);
    assert_eq!(store.read_all_since(Lsn(6), 10).wait().expect("past it").len(), 5);
    let report = store.verify().expect("verify");
    assert_eq!(report.problems.len(), 1, "one problem for the frame: {:?}", report.problems);
    assert_verify_names(&store, "events", "t", 6);
}

#[test]
fn an_index_entry_past_its_frame_and_an_unindexed_event_are_found() {
    let (_dir, path) = temp_db();
    build_batched(&path);
    // The first frame loses its last event (t 6 at lsn 6): the index still points at lsn 6,
    // past the frame, which now ends at 5.
    let first = raw::event_bytes(&path, "t", 1);
    let mut frame = cairn_storage::codec::decode_event_batch(&first).expect("decode");
    frame.pop();
    let shorter = cairn_storage::codec::encode_event_batch(&frame).expect("encode");
    // And an event no index holds: u's seq 3 at lsn 12, past every frame.
    let mut stray = cairn_storage::codec::decode_event_batch(&raw::event_bytes(&path, "u", 2))
        .expect("decode")
        .remove(1);
    (stray.bookmark.seq, stray.bookmark.lsn) = (Seq(3), Lsn(12));
    let stray = cairn_storage::codec::encode_event_batch(&[stray]).expect("encode");
    raw::write(&path, |txn| {
        let mut log = txn.open_table(raw::EVENTS).expect("events");
        log.remove(6).expect("remove");
        log.insert(5, shorter.as_slice()).expect("insert");
        log.insert(12, stray.as_slice()).expect("insert");
    });
    let store = reopen(&path);
    let t = tid("t");
    let result = store.read_range(&t, Seq(6), Seq(6)).wait();
    assert!(
        matches!(&result, Err(Error::Corrupted { detail, .. }) if detail.contains("seq gap")),
        "{result:?}"
    );
    assert_corrupted(result, "events", "t", 6);
    assert_eq!(store.read_range(&t, Seq(1), Seq(5)).wait().expect("the rest").len(), 5);
    assert_verify_names(&store, "events", "t", 6);
    assert_verify_names(&store, "events", "u", 3);
    assert_eq!(store.verify().expect("verify").problems.len(), 2);
}
