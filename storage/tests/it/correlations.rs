//! The correlation index (`docs/format.md` §2.2, recovery rows 21 and 22): the migration of a v1
//! file at open, and an index that disagrees with the log.

use cairn_storage::{
    Batch, CorrelationQuery, Error, EventKind, Lsn, NewEvent, Options, PayloadRef, RedbStore,
};
use cairn_storage::{Maintenance, ThreadLog};
use redb::{ReadableTable, TableDefinition};

use crate::common::*;
use crate::raw;

const CORRELATIONS: TableDefinition<'_, (&str, u64), &[u8]> = TableDefinition::new("correlations");

/// A `message` event as a v1 build wrote it: the correlation id only in the engine's JSON body.
fn legacy_message(thread: &str, n: u64, correlation: &str) -> NewEvent {
    let mut e = event(thread, n);
    e.kind = EventKind::Message;
    e.data = format!(
        r#"{{"type":"message","task":{{"node":"n"}},"message":{{"role":"r","content":"m{n}","correlation_id":"{correlation}","to":null}}}}"#
    )
    .into_bytes();
    e
}

/// Makes the file at `path` look as a v1 build left it: no correlation index, format 1.
fn to_v1(path: &std::path::Path) {
    raw::write(path, |txn| {
        raw::rows_to_v6_tables(txn);
        txn.delete_table(CORRELATIONS).expect("delete the index");
        let mut meta = txn.open_table(raw::META).expect("meta");
        meta.insert("format_version", 1u16.to_le_bytes().as_slice()).expect("version 1");
    });
}

#[test]
fn a_v1_file_is_migrated_at_open_with_its_index_built_from_the_log() {
    let (_dir, path) = temp_db();
    let store = RedbStore::open(&path, fast()).expect("open");
    append(&store, Batch { threads: vec![thread_record("m")], ..Batch::default() });
    // 2,600 events (more than two migration batches of 1,024), every 10th a legacy message.
    for chunk in 0..26u64 {
        let events = (1..=100)
            .map(|i| {
                let n = chunk * 100 + i;
                if n.is_multiple_of(10) {
                    legacy_message("m", n, &format!("c-{}", n % 3))
                } else {
                    event("m", n)
                }
            })
            .collect();
        append(&store, Batch { events, ..Batch::default() });
    }
    // One whose body is in a payload.
    let body = legacy_message("m", 9_999, "c-big").data;
    let mut big = legacy_message("m", 9_999, "c-big");
    big.data = Vec::new();
    big.payload = Some(PayloadRef::of(&body));
    append(&store, Batch { events: vec![big], payloads: vec![body], ..Batch::default() });
    store.close().expect("close");
    to_v1(&path);
    assert_eq!(raw::format_version(&path), 1);

    // A read-only open builds the index in its private copy and leaves the file as it was.
    let before = std::fs::read(&path).expect("read");
    let snapshot = RedbStore::open_read_only(&path).expect("read-only open of v1");
    let found =
        snapshot.read_correlated(&CorrelationQuery::new("c-1"), Lsn(0), 1_000).wait().unwrap();
    assert_eq!(found.len(), 87, "n % 10 == 0 and n % 3 == 1 for n in 1..=2600");
    drop(snapshot);
    assert_eq!(std::fs::read(&path).expect("read"), before, "the file is untouched");

    let store = RedbStore::open(&path, fast()).expect("the v1 file opens");
    let all: usize = ["c-0", "c-1", "c-2", "c-big"]
        .iter()
        .map(|c| {
            store.read_correlated(&CorrelationQuery::new(*c), Lsn(0), 1_000).wait().unwrap().len()
        })
        .sum();
    assert_eq!(all, 261);
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    store.close().expect("close");
    assert_eq!(
        raw::format_version(&path),
        cairn_storage::FORMAT_VERSION,
        "migrated through every version"
    );
    // A crash part way: the index up to lsn 1_024 built and the place stored, the rest missing.
    raw::write(&path, |txn| {
        raw::rows_to_v6_tables(txn);
        let mut index = txn.open_table(CORRELATIONS).expect("index");
        let late: Vec<(String, u64)> = index
            .iter()
            .expect("iter")
            .map(|e| {
                let (k, _) = e.expect("entry");
                (k.value().0.to_owned(), k.value().1)
            })
            .filter(|(_, lsn)| *lsn > 1_024)
            .collect();
        assert!(!late.is_empty());
        for (c, lsn) in late {
            index.remove((c.as_str(), lsn)).expect("remove");
        }
        let mut meta = txn.open_table(raw::META).expect("meta");
        meta.insert("format_version", 1u16.to_le_bytes().as_slice()).expect("v1");
        meta.insert("correlations_built_to", 1_024u64.to_le_bytes().as_slice()).expect("place");
    });
    let store = RedbStore::open(&path, fast()).expect("resumes");
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    let big = store.read_correlated(&CorrelationQuery::new("c-big"), Lsn(0), 10).wait().unwrap();
    assert_eq!(big.len(), 1, "a body in a payload is read for its id");
    store.close().expect("close");
    assert_eq!(raw::format_version(&path), cairn_storage::FORMAT_VERSION);
}

#[test]
fn an_index_that_disagrees_with_the_log_fails_closed_and_verify_names_it() {
    let (_dir, path) = temp_db();
    let store = RedbStore::open(&path, Options::default()).expect("open");
    append(&store, Batch { threads: vec![thread_record("x")], ..Batch::default() });
    let mut message = event("x", 1);
    message.kind = EventKind::Message;
    message.correlation = Some("k".into());
    let lsn = append(&store, Batch { events: vec![message, event("x", 2)], ..Batch::default() })
        .bookmarks[0]
        .lsn
        .0;
    store.close().expect("close");
    // The entry moved to the next lsn (an event that carries no correlation id).
    raw::write(&path, |txn| {
        let mut index = txn.open_table(CORRELATIONS).expect("index");
        let bytes = index.remove(("k", lsn)).expect("remove").expect("was there").value().to_vec();
        let mut entry = cairn_storage::codec::decode_correlation(&bytes).expect("decode");
        entry.lsn += 1;
        entry.seq += 1;
        let framed = cairn_storage::codec::encode_correlation(&entry).expect("encode");
        index.insert(("k", lsn + 1), framed.as_slice()).expect("insert");
    });
    let store = RedbStore::open(&path, Options::default()).expect("open");
    let read = store.read_correlated(&CorrelationQuery::new("k"), Lsn(0), 10).wait();
    assert!(
        matches!(&read, Err(Error::Corrupted { table: "correlations", .. })),
        "fails closed: {read:?}"
    );
    assert_eq!(store.read_since(&tid("x"), cairn_storage::Seq(0), 10).wait().unwrap().len(), 2);
    let problems = store.verify().expect("verify").problems;
    let details: Vec<&str> =
        problems.iter().filter(|p| p.table == "correlations").map(|p| p.detail.as_str()).collect();
    assert_eq!(details.len(), 2, "{problems:?}");
    assert!(details.iter().any(|d| d.contains("points at no event carrying")), "{details:?}");
    assert!(details.iter().any(|d| d.contains("has no entry")), "{details:?}");
}

/// A PostgreSQL database of format 1 is migrated at connect: the index is built from the log
/// (more than one batch), ids in records and in legacy bodies alike, and the format becomes 2.
#[cfg(feature = "postgres")]
#[test]
fn a_format_1_postgres_database_is_migrated_at_connect() {
    use cairn_storage::{Durability, PgStore};
    use cairn_storage_testkit::pg_cluster::Cluster;
    let Some(cluster) = Cluster::start("a_format_1_postgres_database_is_migrated") else { return };
    let url = cluster.new_database();
    let store = PgStore::connect(&url, Durability::Immediate).expect("connect");
    append(&store, Batch { threads: vec![thread_record("m")], ..Batch::default() });
    for chunk in 0..11u64 {
        let events = (1..=100)
            .map(|i| {
                let n = chunk * 100 + i;
                let c = format!("c-{}", (n / 10) % 2);
                if n.is_multiple_of(10) { legacy_message("m", n, &c) } else { event("m", n) }
            })
            .collect();
        append(&store, Batch { events, ..Batch::default() });
    }
    let mut recorded = legacy_message("m", 5_000, "ignored-body-id");
    recorded.correlation = Some("c-new".into());
    append(&store, Batch { events: vec![recorded], ..Batch::default() });
    drop(store);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).expect("admin");
    admin
        .batch_execute(
            "DROP TABLE cairn_correlations; \
             UPDATE cairn_meta SET value = 1 WHERE key = 'format_version'",
        )
        .expect("back to format 1");

    let store = PgStore::connect(&url, Durability::Immediate).expect("a format-1 database opens");
    let count =
        |c: &str| store.read_correlated(&CorrelationQuery::new(c), Lsn(0), 1_000).wait().unwrap();
    assert_eq!((count("c-0").len(), count("c-1").len(), count("c-new").len()), (55, 55, 1));
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    let format: i64 = admin
        .query_one("SELECT value FROM cairn_meta WHERE key = 'format_version'", &[])
        .expect("format")
        .get(0);
    assert_eq!(format, i64::from(cairn_storage::PG_FORMAT_VERSION));
    let left = admin.query("SELECT 1 FROM cairn_meta WHERE key = 'correlations_built_to'", &[]);
    assert!(left.expect("query").is_empty(), "the migration's place is removed");
}
