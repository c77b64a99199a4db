//! The log on PostgreSQL as one row per run of a thread's events (format 6, `pg/events.rs`):
//! reads inside a row stay exact, a prune cuts a row, and a format-5 database (one row per
//! event) moves its log at connect, once with two stores connecting, and again after a
//! migration killed midway.

use std::time::{Duration, Instant};

use cairn_storage::{Append, Maintenance, ThreadLog};
use cairn_storage::{
    Batch, CheckpointKind, Durability, Event, Lsn, NewEvent, PG_FORMAT_VERSION, PgStore, Seq, codec,
};
use cairn_storage_testkit::pg_cluster::Cluster;

use crate::common::*;

/// (rows, events) of the log table.
fn rows_and_events(admin: &mut postgres::Client) -> (i64, i64) {
    let row = admin
        .query_one(
            "SELECT count(*)::bigint, coalesce(sum(last_seq - first_seq + 1), 0)::bigint \
             FROM cairn_event_batches",
            &[],
        )
        .unwrap();
    (row.get(0), row.get(1))
}

fn format(admin: &mut postgres::Client) -> i64 {
    admin
        .query_one("SELECT value FROM cairn_meta WHERE key = 'format_version'", &[])
        .unwrap()
        .get(0)
}

fn seqs(events: &[Event]) -> Vec<u64> {
    events.iter().map(|e| e.bookmark.seq.0).collect()
}

/// Every read of `thread` from every seq, at every limit up to 4, and of the global log from
/// every lsn, answers exactly what the whole log holds from there.
fn reads_are_exact(store: &PgStore, all: &[Event]) {
    for thread in ["a", "b"] {
        let mine: Vec<&Event> = all.iter().filter(|e| e.thread.as_str() == thread).collect();
        let first = mine.first().map_or(1, |e| e.bookmark.seq.0);
        for after in first - 1..=mine.len() as u64 + first {
            for limit in 1..=4 {
                let read = store.read_since(&tid(thread), Seq(after), limit).wait().unwrap();
                let want: Vec<u64> = mine
                    .iter()
                    .map(|e| e.bookmark.seq.0)
                    .filter(|s| *s > after)
                    .take(limit)
                    .collect();
                assert_eq!(seqs(&read), want, "{thread} after {after} limit {limit}");
            }
        }
    }
    for (i, event) in all.iter().enumerate() {
        let after = Lsn(event.bookmark.lsn.0 - 1);
        let read = store.read_all_since(after, 3).wait().unwrap();
        let want: Vec<&Event> = all[i..].iter().take(3).collect();
        assert_eq!(read.iter().collect::<Vec<_>>(), want, "after lsn {after}");
    }
}

#[test]
fn a_commits_events_of_one_thread_are_one_row_and_reads_inside_it_are_exact() {
    let Some(cluster) = Cluster::start("pg_events_rows") else { return };
    let url = cluster.new_database();
    let proxy = cairn_storage_testkit::pg_proxy::Proxy::start(&cluster).unwrap();
    let store = PgStore::connect(&proxy.url(&url), Durability::Immediate).unwrap();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    create_thread(&store, "a", 5);
    create_thread(&store, "b", 0);
    // One batch, the two threads interleaved: four runs.
    let batch = Batch {
        events: vec![event("a", 6), event("a", 7), event("b", 1), event("a", 8), event("b", 2)],
        ..Batch::default()
    };
    append(&store, batch);
    assert_eq!(rows_and_events(&mut admin), (5, 10));
    let all = store.read_all_since(Lsn(0), 100).wait().unwrap();
    assert_eq!(all.len(), 10);
    reads_are_exact(&store, &all);
    // A checkpoint inside a row: the prune cuts the row. The two batches are queued while the
    // writer's commit before them is held, so they are the next group: one run.
    let held = proxy.hold_next_commit("cairn-writer");
    let before = store.append(Batch { events: vec![event("a", 9)], ..Batch::default() }).unwrap();
    assert!(held.wait_reached(Duration::from_secs(10)), "the commit before is held");
    let saved = store
        .append(Batch {
            events: vec![event("b", 3)],
            checkpoints: vec![checkpoint("b", CheckpointKind::Periodic, &[])],
            ..Batch::default()
        })
        .unwrap();
    let later = store.append(Batch { events: vec![event("b", 4)], ..Batch::default() }).unwrap();
    held.release();
    before.wait_blocking().unwrap();
    let keep = saved.wait_blocking().unwrap().checkpoints[0];
    later.wait_blocking().unwrap();
    assert_eq!(rows_and_events(&mut admin), (7, 13), "b's 3 and 4 are one row");
    let pruned = store.prune(&tid("b"), keep).unwrap().wait_blocking().unwrap();
    assert_eq!((pruned.events, pruned.first_seq), (3, Seq(4)));
    assert_eq!(rows_and_events(&mut admin), (5, 10));
    let read = store.read_since(&tid("b"), Seq(3), 10).wait().unwrap();
    assert_eq!(seqs(&read), [4]);
    let all = store.read_all_since(Lsn(0), 100).wait().unwrap();
    reads_are_exact(&store, &all);
    let report = store.verify().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.events, 10);
}

/// A run of a few KiB is stored as it is, neither compressed nor moved out of its row
/// (`toast_tuple_target` at its maximum); a table made without the option gets it at connect.
#[test]
fn a_run_of_a_few_kib_stays_in_its_row_uncompressed_and_an_older_table_gets_the_option() {
    let Some(cluster) = Cluster::start("pg_events_inline") else { return };
    let url = cluster.new_database();
    let store = PgStore::connect(&url, Durability::Immediate).unwrap();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let options = |admin: &mut postgres::Client| -> Option<Vec<String>> {
        let sql = "SELECT reloptions FROM pg_class WHERE oid = 'cairn_event_batches'::regclass";
        admin.query_one(sql, &[]).unwrap().get(0)
    };
    assert_eq!(options(&mut admin), Some(vec!["toast_tuple_target=8160".to_owned()]));
    create_thread(&store, "a", 0);
    // About 6 KiB of frames that compress well: the default target (about 2 KiB) would have
    // the server compress the row.
    let big = |n: u64| NewEvent { data: vec![b'x'; 1500], ..event("a", n) };
    append(&store, Batch { events: (1..=4).map(big).collect(), ..Batch::default() });
    let row = admin
        .query_one(
            "SELECT octet_length(frames)::bigint, pg_column_compression(frames) \
             FROM cairn_event_batches WHERE thread = 'a'",
            &[],
        )
        .unwrap();
    let (bytes, compression): (i64, Option<String>) = (row.get(0), row.get(1));
    assert!(bytes > 6000, "the run's frames: {bytes} bytes");
    assert_eq!(compression, None, "the run is stored as it is");
    let all = store.read_since(&tid("a"), Seq(0), 10).wait().unwrap();
    assert_eq!(seqs(&all), [1, 2, 3, 4]);
    assert!(all.iter().all(|e| e.data.len() == 1500));
    drop(store);
    admin.batch_execute("ALTER TABLE cairn_event_batches RESET (toast_tuple_target)").unwrap();
    assert_eq!(options(&mut admin), None);
    let again = PgStore::connect(&url, Durability::Immediate).unwrap();
    assert_eq!(options(&mut admin), Some(vec!["toast_tuple_target=8160".to_owned()]));
    assert!(again.verify().unwrap().is_clean());
}

/// Verify checks the rows both ways: columns that claim more seqs than the frames hold, and
/// two rows claiming one lsn, are reported.
#[test]
fn verify_finds_a_row_whose_columns_disagree_with_its_frames() {
    let Some(cluster) = Cluster::start("pg_events_verify") else { return };
    let url = cluster.new_database();
    let store = PgStore::connect(&url, Durability::Immediate).unwrap();
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    create_thread(&store, "a", 3);
    create_thread(&store, "b", 2);
    admin
        .batch_execute(
            "UPDATE cairn_event_batches SET last_seq = last_seq + 1, last_lsn = last_lsn + 1 \
             WHERE thread = 'a'",
        )
        .unwrap();
    let problems = store.verify().unwrap().problems;
    assert!(problems.iter().any(|p| p.detail.contains("4 seqs")), "{problems:?}");
    assert!(store.read_since(&tid("a"), Seq(0), 10).wait().is_err());
    admin
        .batch_execute(
            "UPDATE cairn_event_batches SET last_seq = last_seq - 1, last_lsn = last_lsn - 1 \
             WHERE thread = 'a'; \
             UPDATE cairn_event_batches SET last_lsn = last_lsn + 1000000, \
             first_lsn = first_lsn - 1 WHERE thread = 'a'",
        )
        .unwrap();
    let problems = store.verify().unwrap().problems;
    assert!(problems.iter().any(|p| p.detail.contains("is not a run")), "{problems:?}");
}

/// Turns the database back into format 5: the log as one row per event in `cairn_events`.
fn back_to_format_5(admin: &mut postgres::Client, events: &[Event]) {
    admin
        .batch_execute(
            "CREATE TABLE cairn_events (lsn bigint PRIMARY KEY, thread text NOT NULL, \
             seq bigint NOT NULL, record bytea NOT NULL, UNIQUE (thread, seq))",
        )
        .unwrap();
    for e in events {
        let (lsn, seq) = (e.bookmark.lsn.0 as i64, e.bookmark.seq.0 as i64);
        let record = codec::encode_event(e).unwrap();
        admin
            .execute(
                "INSERT INTO cairn_events VALUES ($1, $2, $3, $4)",
                &[&lsn, &e.thread.as_str(), &seq, &record],
            )
            .unwrap();
    }
    admin
        .batch_execute(
            "DROP TABLE cairn_event_batches; \
             UPDATE cairn_meta SET value = 5 WHERE key = 'format_version'",
        )
        .unwrap();
}

/// A database with two threads' events over several commits, its whole log, and an admin
/// connection.
fn a_log(cluster: &Cluster) -> (String, Vec<Event>, postgres::Client) {
    let url = cluster.new_database();
    let store = PgStore::connect(&url, Durability::Immediate).unwrap();
    create_thread(&store, "a", 4);
    create_thread(&store, "b", 1);
    for _ in 0..3 {
        events(&store, "a", 3);
        events(&store, "b", 2);
    }
    let all = store.read_all_since(Lsn(0), 100).wait().unwrap();
    assert_eq!(all.len(), 20);
    drop(store);
    let admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    (url, all, admin)
}

/// After the migration: format 6, no per-event table, a row per commit's run, every read exact.
fn migrated(store: &PgStore, admin: &mut postgres::Client, all: &[Event]) {
    assert_eq!(format(admin), i64::from(PG_FORMAT_VERSION));
    let old: bool =
        admin.query_one("SELECT to_regclass('cairn_events') IS NULL", &[]).unwrap().get(0);
    assert!(old, "the per-event table is gone");
    assert_eq!(rows_and_events(admin), (8, 20));
    assert_eq!(store.read_all_since(Lsn(0), 100).wait().unwrap(), all);
    reads_are_exact(store, all);
    let report = store.verify().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.events, 20);
    // And it goes on: the next event takes the next seq.
    assert_eq!(events(store, "a", 1).bookmarks[0].seq, Seq(14));
}

#[test]
fn a_format_5_database_moves_its_log_once_with_two_stores_connecting() {
    let Some(cluster) = Cluster::start("pg_events_migrate") else { return };
    let (url, all, mut admin) = a_log(&cluster);
    back_to_format_5(&mut admin, &all);
    let (a, b) = std::thread::scope(|s| {
        let one = s.spawn(|| PgStore::connect(&url, Durability::Immediate));
        let two = s.spawn(|| PgStore::connect(&url, Durability::Immediate));
        (one.join().unwrap(), two.join().unwrap())
    });
    let (a, b) = (a.expect("the first store connects"), b.expect("the second store connects"));
    drop(b);
    migrated(&a, &mut admin, &all);
}

#[test]
fn a_migration_killed_midway_is_done_by_the_next_connect() {
    let Some(cluster) = Cluster::start("pg_events_migrate_killed") else { return };
    let (url, all, mut admin) = a_log(&cluster);
    back_to_format_5(&mut admin, &all);
    // A reader holding the old table keeps the migration at its last step, the table's drop,
    // after it has copied the rows.
    let mut reader = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut hold = reader.transaction().unwrap();
    hold.query("SELECT count(*) FROM cairn_events", &[]).unwrap();
    let killed = std::thread::scope(|s| {
        let connecting = s.spawn(|| PgStore::connect(&url, Durability::Immediate));
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let waiting = admin
                .query(
                    "SELECT pg_terminate_backend(pid) FROM pg_stat_activity \
                     WHERE query = 'DROP TABLE cairn_events' AND wait_event_type = 'Lock'",
                    &[],
                )
                .unwrap();
            if !waiting.is_empty() {
                break;
            }
            assert!(Instant::now() < deadline, "the migration never reached the drop");
            std::thread::sleep(Duration::from_millis(20));
        }
        connecting.join().unwrap()
    });
    assert!(killed.is_err(), "the connect whose migration was killed fails");
    hold.rollback().unwrap();
    assert_eq!(format(&mut admin), 5, "nothing of the migration was committed");
    assert_eq!(rows_and_events(&mut admin), (0, 0));
    let store = PgStore::connect(&url, Durability::Immediate).expect("the next connect migrates");
    migrated(&store, &mut admin, &all);
}
