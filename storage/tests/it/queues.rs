//! Named queues in the store (`docs/format.md` §2.5, `docs/queues.md`): the admission
//! contract on both backends (limits against the stored counts, a slot released by the batch
//! that ends its thread, dedup, refusals), and the migration of a v3 file.

use cairn_storage::{Append, Catalog, Maintenance};
use cairn_storage::{
    Batch, Enqueue, Error, QueueLimits, QueueOp, Store, ThreadRecord, ThreadStatus,
};
use redb::{ReadableDatabase, ReadableTable, TableDefinition};

use crate::common::*;
use crate::raw;

fn queued(
    store: &dyn Store,
    id: &str,
    key: &str,
    priority: u8,
    dedup: Option<&str>,
) -> Result<(), Error> {
    let mut record = ThreadRecord::new(tid(id), workflow("w"), 0);
    record.status = ThreadStatus::Queued;
    let enqueue = Enqueue {
        priority,
        dedup: dedup.map(String::from),
        ..Enqueue::new(tid(id), "q".into(), key.into(), 0)
    };
    let batch = Batch {
        threads: vec![record],
        queues: vec![QueueOp::Enqueue(enqueue)],
        ..Batch::default()
    };
    store.append(batch)?.wait_blocking().map(drop)
}

fn admit(store: &dyn Store, now_ms: u64, max: usize) -> Vec<String> {
    let op = QueueOp::Admit { queue: "q".into(), now_ms, max, workflows: vec!["w".into()] };
    let done = store
        .append(Batch { queues: vec![op], ..Batch::default() })
        .unwrap()
        .wait_blocking()
        .unwrap();
    done.admitted.iter().map(ToString::to_string).collect()
}

fn end(store: &dyn Store, id: &str) {
    let mut record = store.thread(&tid(id)).wait().unwrap().unwrap();
    record.status = ThreadStatus::Completed;
    store
        .append(Batch { threads: vec![record], ..Batch::default() })
        .unwrap()
        .wait_blocking()
        .unwrap();
}

/// The contract every backend keeps.
fn admission_contract(store: &dyn Store) {
    let limits =
        QueueLimits { concurrency_max: Some(3), per_key_max: Some(2), ..QueueLimits::default() };
    let define = QueueOp::Define { name: "q".into(), limits };
    store
        .append(Batch { queues: vec![define], ..Batch::default() })
        .unwrap()
        .wait_blocking()
        .unwrap();
    assert!(matches!(queued(store, "x-1", "", 0, None), Ok(())));
    let unknown = Enqueue::new(tid("u"), "nope".into(), String::new(), 0);
    let mut record = ThreadRecord::new(tid("u"), workflow("w"), 0);
    record.status = ThreadStatus::Queued;
    let refused = store
        .append(Batch {
            threads: vec![record],
            queues: vec![QueueOp::Enqueue(unknown)],
            ..Batch::default()
        })
        .unwrap()
        .wait_blocking();
    assert!(matches!(refused, Err(Error::UnknownQueue(_))), "{refused:?}");
    assert!(store.thread(&tid("u")).wait().unwrap().is_none(), "a refused enqueue writes nothing");
    // Key a: 3 threads, key b: 2, one of them with a dedup key.
    for (id, key) in [("a-1", "a"), ("a-2", "a"), ("a-3", "a"), ("b-1", "b")] {
        queued(store, id, key, 0, None).unwrap();
    }
    queued(store, "b-2", "b", 0, Some("d")).unwrap();
    let dup = queued(store, "b-3", "b", 0, Some("d"));
    assert!(
        matches!(&dup, Err(Error::Duplicate { thread, .. }) if thread.as_str() == "b-2"),
        "{dup:?}"
    );
    // x-1 (key ""), then round robin between a and b, the global limit 3 first.
    assert_eq!(admit(store, 10, 100), ["x-1", "a-1", "b-1"]);
    assert_eq!(store.thread(&tid("a-1")).wait().unwrap().unwrap().status, ThreadStatus::Created);
    assert_eq!(store.thread(&tid("a-2")).wait().unwrap().unwrap().status, ThreadStatus::Queued);
    assert!(admit(store, 11, 100).is_empty(), "the global limit holds");
    end(store, "x-1");
    assert_eq!(admit(store, 12, 100), ["a-2"]);
    end(store, "b-1");
    // a has 2 running (its limit): b's next goes.
    assert_eq!(admit(store, 13, 100), ["b-2"]);
    end(store, "a-1");
    end(store, "b-2");
    // The dedup key is free once b-2 ended.
    queued(store, "b-3", "b", 0, Some("d")).unwrap();
    let q = &store.queues().wait().unwrap()[0];
    assert_eq!((q.running, q.waiting), (1, 2), "{q:?}");
    assert_eq!(q.keys["a"].running, 1);
    assert!(
        store.queue_member(&tid("a-1")).wait().unwrap().is_none(),
        "an ended thread left its queue"
    );
    assert_eq!(store.queue_member(&tid("a-3")).wait().unwrap().unwrap().admitted_at_ms, None);
    assert!(store.verify().unwrap().is_clean());
}

/// The writer skips the look for the queue place of an ending thread while it knows no thread
/// holds one (`redb/cache.rs`): a place taken after threads without one ended is still given
/// up when its thread ends (with the knowledge kept past the enqueue, it would stay taken).
#[test]
fn a_queue_place_taken_after_threads_without_one_ended_is_given_up_at_its_end() {
    let (_dir, _path, store) = open_fast();
    let plain = |id: &str| {
        let batch = Batch { threads: vec![thread_record(id)], ..Batch::default() };
        store.append(batch).unwrap().wait_blocking().unwrap();
        end(&store, id);
    };
    plain("p-1");
    let limits = QueueLimits { concurrency_max: Some(1), ..QueueLimits::default() };
    let define = QueueOp::Define { name: "q".into(), limits };
    store
        .append(Batch { queues: vec![define], ..Batch::default() })
        .unwrap()
        .wait_blocking()
        .unwrap();
    plain("p-2");
    queued(&store, "q-1", "", 0, None).unwrap();
    queued(&store, "q-2", "", 0, None).unwrap();
    assert_eq!(admit(&store, 10, 10), ["q-1"]);
    end(&store, "q-1");
    assert!(store.queue_member(&tid("q-1")).wait().unwrap().is_none(), "q-1 left its queue");
    assert_eq!(admit(&store, 11, 10), ["q-2"], "its place went to the next");
    end(&store, "q-2");
    plain("p-3");
    let q = &store.queues().wait().unwrap()[0];
    assert_eq!((q.running, q.waiting), (0, 0), "{q:?}");
    assert!(store.verify().unwrap().is_clean());
}

#[test]
fn admission_holds_the_limits_against_the_stored_counts_on_a_file() {
    let (_dir, _path, store) = open_fast();
    admission_contract(&store);
}

#[cfg(feature = "postgres")]
#[test]
fn admission_holds_the_limits_against_the_stored_counts_on_postgres() {
    use cairn_storage_testkit::pg_cluster::Cluster;
    let Some(cluster) = Cluster::start("queues_admission_contract") else { return };
    let url = cluster.new_database();
    let store =
        cairn_storage::PgStore::connect(&url, cairn_storage::Durability::Immediate).unwrap();
    admission_contract(&store);
}

#[test]
fn a_v3_file_is_migrated_to_v4_at_open() {
    const QUEUES: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("queues");
    const MEMBERS: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("queue_members");
    const WAITING: TableDefinition<'_, (&str, &str, u64, &str), ()> =
        TableDefinition::new("queue_waiting");
    const DEDUP: TableDefinition<'_, (&str, &str, &str), ()> = TableDefinition::new("queue_dedup");
    let (_dir, path) = temp_db();
    let store = cairn_storage::RedbStore::open(&path, fast()).expect("open");
    create_thread(&store, "m", 2);
    store.close().expect("close");
    raw::write(&path, |txn| {
        raw::rows_to_v6_tables(txn);
        txn.delete_table(QUEUES).expect("delete");
        txn.delete_table(MEMBERS).expect("delete");
        txn.delete_table(WAITING).expect("delete");
        txn.delete_table(DEDUP).expect("delete");
        let mut meta = txn.open_table(raw::META).expect("meta");
        meta.insert("format_version", 3u16.to_le_bytes().as_slice()).expect("version 3");
    });
    let version = |path: &std::path::Path| {
        let db = redb::Database::open(path).expect("raw open");
        let txn = db.begin_read().expect("read");
        let meta = txn.open_table(raw::META).expect("meta");
        let v = meta.get("format_version").expect("get").expect("present");
        u16::from_le_bytes(v.value().try_into().expect("2 bytes"))
    };
    assert_eq!(version(&path), 3);
    let before = std::fs::read(&path).expect("read");
    let snapshot = cairn_storage::RedbStore::open_read_only(&path).expect("read-only open of v3");
    assert!(snapshot.queues().wait().expect("no queues").is_empty());
    assert!(snapshot.verify().expect("verify").is_clean());
    drop(snapshot);
    assert_eq!(std::fs::read(&path).expect("read"), before, "the file is untouched");
    let store = cairn_storage::RedbStore::open(&path, fast()).expect("the v3 file opens");
    admission_contract(&store);
    store.close().expect("close");
    assert_eq!(version(&path), cairn_storage::FORMAT_VERSION);
}

#[test]
fn a_damaged_queue_record_fails_closed_and_verify_names_the_disagreements() {
    const QUEUES: TableDefinition<'_, &str, &[u8]> = TableDefinition::new("queues");
    const WAITING: TableDefinition<'_, (&str, &str, u64, &str), ()> =
        TableDefinition::new("queue_waiting");
    let (_dir, path) = temp_db();
    let store = cairn_storage::RedbStore::open(&path, fast()).expect("open");
    admission_contract(&store);
    store.close().expect("close");
    // A waiting entry removed: its member waits without one (counts still agree).
    raw::write(&path, |txn| {
        let mut waiting = txn.open_table(WAITING).expect("waiting");
        let first = waiting.first().expect("first").map(|(k, _)| {
            let (q, key, rank, thread) = k.value();
            (q.to_owned(), key.to_owned(), rank, thread.to_owned())
        });
        let (q, key, rank, thread) = first.expect("a waiting entry");
        waiting.remove((q.as_str(), key.as_str(), rank, thread.as_str())).expect("remove");
    });
    let store = cairn_storage::RedbStore::open(&path, fast()).expect("open");
    let report = store.verify().expect("verify");
    assert!(
        report
            .problems
            .iter()
            .any(|p| p.table == "queue_waiting" && p.detail.contains("not listed")),
        "{:?}",
        report.problems
    );
    store.close().expect("close");
    // One flipped bit in the queue record: reads and admission fail closed, verify names it.
    raw::write(&path, |txn| {
        let mut queues = txn.open_table(QUEUES).expect("queues");
        let mut bytes = queues.get("q").expect("get").expect("there").value().to_vec();
        let at = bytes.len() - 5;
        bytes[at] ^= 1;
        queues.insert("q", bytes.as_slice()).expect("insert");
    });
    let store = cairn_storage::RedbStore::open(&path, fast()).expect("open");
    assert!(matches!(store.queues().wait(), Err(Error::Corrupted { table: "queues", .. })));
    let op = QueueOp::Admit { queue: "q".into(), now_ms: 99, max: 10, workflows: vec!["w".into()] };
    let refused =
        store.append(Batch { queues: vec![op], ..Batch::default() }).unwrap().wait_blocking();
    assert!(matches!(refused, Err(Error::Corrupted { table: "queues", .. })), "{refused:?}");
    let report = store.verify().expect("verify");
    assert!(report.problems.iter().any(|p| p.table == "queues"), "{:?}", report.problems);
    // The log is unaffected.
    assert_eq!(store.thread(&tid("a-3")).wait().unwrap().unwrap().status, ThreadStatus::Queued);
}

/// `verify` on PostgreSQL checks the queue tables as on a file: a queue record whose counts
/// disagree with its members (rewritten whole, with a valid checksum, so only the counts are
/// wrong), a waiting entry removed, and a dedup entry without its member are each reported.
#[cfg(feature = "postgres")]
#[test]
fn verify_on_postgres_reports_queue_counts_that_disagree_with_the_members() {
    use cairn_storage_testkit::pg_cluster::Cluster;
    let Some(cluster) = Cluster::start("queues_verify_counts") else { return };
    let url = cluster.new_database();
    let store =
        cairn_storage::PgStore::connect(&url, cairn_storage::Durability::Immediate).unwrap();
    admission_contract(&store);
    assert!(store.verify().unwrap().is_clean());
    let mut sql = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    // One more running than its members, in all and for key "a".
    let mut q = store.queues().wait().unwrap().remove(0);
    q.running += 1;
    q.keys.get_mut("a").unwrap().running += 1;
    let bytes = cairn_storage::codec::encode_queue(&q).unwrap();
    sql.execute("UPDATE cairn_queues SET record = $1 WHERE name = 'q'", &[&bytes]).unwrap();
    let report = store.verify().unwrap();
    let about = |table: &str, words: &str| {
        report.problems.iter().any(|p| p.table == table && p.detail.contains(words))
    };
    assert!(about("queues", "queue q counts 2 running / 2 waiting"), "{:?}", report.problems);
    assert!(about("queues", "key \"a\" counts 2 running"), "{:?}", report.problems);
    // A waiting entry removed, and a dedup entry of no member.
    sql.execute("DELETE FROM cairn_queue_waiting WHERE thread = 'a-3'", &[]).unwrap();
    sql.execute(
        "INSERT INTO cairn_queue_dedup (queue, dedup, thread) VALUES ('q', 'stray', 'nobody')",
        &[],
    )
    .unwrap();
    let report = store.verify().unwrap();
    let about = |table: &str, words: &str| {
        report.problems.iter().any(|p| p.table == table && p.detail.contains(words))
    };
    assert!(about("queue_waiting", "not listed as waiting"), "{:?}", report.problems);
    assert!(about("queue_dedup", "without its member"), "{:?}", report.problems);
    assert!(about("queues", "queue q counts 2 running"), "{:?}", report.problems);
}
