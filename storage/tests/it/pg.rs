//! The storage contract on PostgreSQL, against a real server (`pg_cluster.rs`): the model test
//! shared with redb, group commits that reject one batch alone, locks and leases, damage in
//! `bytea` found by reads and by verify, and two stores (two processes' worth of writers) on one
//! database whose global log never skips an event.

use cairn_storage::{Append, Backend, Catalog, Maintenance, ThreadLog};
use std::sync::Arc;

use cairn_storage::{
    Batch, Durability, Error, Guard, LeaseOp, LockOp, Lsn, PgStore, Scope, Seq, Store,
};
use proptest::test_runner::{Config, RngSeed};

use crate::common::*;
use crate::model::{Model, Op, apply, compare, op};
use cairn_storage_testkit::pg_cluster::Cluster;

fn store(cluster: &Cluster) -> (String, PgStore) {
    let url = cluster.new_database();
    let store = PgStore::connect(&url, Durability::Immediate).expect("connect");
    (url, store)
}

#[test]
fn the_postgres_store_matches_the_model() {
    let Some(cluster) = Cluster::start("the_postgres_store_matches_the_model") else { return };
    let config = Config {
        cases: 12,
        rng_seed: RngSeed::Fixed(0xCA12_2024),
        failure_persistence: None,
        ..Config::default()
    };
    proptest::test_runner::TestRunner::new(config)
        .run(&proptest::collection::vec(op(), 1..40), |ops| {
            let (url, mut store) = store(&cluster);
            let mut model = Model::default();
            for op in &ops {
                apply(&store, &mut model, op);
                if matches!(op, Op::Reopen) {
                    drop(store);
                    store = PgStore::connect(&url, Durability::Immediate).expect("reconnect");
                    compare(&store, &model);
                }
            }
            compare(&store, &model);
            Ok(())
        })
        .expect("the model holds");
}

#[test]
fn a_failing_batch_is_rejected_alone_and_its_group_commits() {
    let Some(cluster) = Cluster::start("a_failing_batch_is_rejected_alone") else { return };
    let (_, store) = store(&cluster);
    create_thread(&store, "a", 2);
    // Queued together, so the writer takes them in one group commit.
    let good = store.append(Batch { events: vec![event("a", 3)], ..Batch::default() }).unwrap();
    let bad = store
        .append(Batch {
            events: vec![event("a", 4)],
            guards: vec![Guard::LastSeq { thread: tid("a"), seq: Seq(1) }],
            ..Batch::default()
        })
        .unwrap();
    let after = store.append(Batch { events: vec![event("a", 5)], ..Batch::default() }).unwrap();
    assert_eq!(good.wait_blocking().unwrap().bookmarks[0].seq, Seq(3));
    assert!(matches!(bad.wait_blocking(), Err(Error::GuardFailed { .. })));
    assert_eq!(after.wait_blocking().unwrap().bookmarks[0].seq, Seq(4), "no seq was lost");
    let seqs: Vec<u64> = store
        .read_since(&tid("a"), Seq(0), 10)
        .wait()
        .unwrap()
        .iter()
        .map(|e| e.bookmark.seq.0)
        .collect();
    assert_eq!(seqs, vec![1, 2, 3, 4]);
    assert!(store.verify().unwrap().is_clean());
}

#[test]
fn locks_and_leases_fence_their_owners() {
    let Some(cluster) = Cluster::start("locks_and_leases_fence_their_owners") else { return };
    let (_, store) = store(&cluster);
    create_thread(&store, "t", 1);
    // Leases run on the database's clock: the `now_ms` an engine gives is replaced by it, so
    // one whose clock is far ahead cannot take a live lease over.
    let lease = |owner: &str, now_ms| LeaseOp::Acquire {
        thread: tid("t"),
        owner: owner.into(),
        now_ms,
        ttl_ms: 400,
    };
    let take =
        |op| store.append(Batch { leases: vec![op], ..Batch::default() }).unwrap().wait_blocking();
    take(lease("w1", 0)).expect("first owner");
    let expires = store.thread(&tid("t")).wait().unwrap().unwrap().lease.unwrap().expires_at_ms;
    assert!(expires > 1_600_000_000_000, "the expiry is the database's time + ttl: {expires}");
    assert!(
        matches!(take(lease("w2", u64::MAX / 2)), Err(Error::LeaseHeld { .. })),
        "a clock far ahead does not make a live lease expired"
    );
    let renew = LeaseOp::Renew { thread: tid("t"), owner: "w1".into(), now_ms: 0, ttl_ms: 400 };
    take(renew).expect("owner renews");
    std::thread::sleep(std::time::Duration::from_millis(500));
    take(lease("w2", 0)).expect("an expired lease is taken over, whatever the caller's clock");
    let stale = LeaseOp::Renew { thread: tid("t"), owner: "w1".into(), now_ms: 0, ttl_ms: 400 };
    assert!(matches!(take(stale), Err(Error::LeaseNotHeld { .. })), "the old owner is fenced");
    // Resource locks too: a clock far ahead does not expire a live lock.
    let lock_at = |owner: &str, now_ms| LockOp::Acquire {
        name: "file".into(),
        owner: owner.into(),
        now_ms,
        ttl_ms: 10_000,
    };
    let lock = |owner: &str| lock_at(owner, 0);
    let op =
        |op| store.append(Batch { locks: vec![op], ..Batch::default() }).unwrap().wait_blocking();
    op(lock("a")).expect("free lock");
    let held = store.locks().wait().unwrap()[0].expires_at_ms;
    assert!(held > 1_600_000_000_000, "the lock's expiry is the database's time + ttl: {held}");
    assert!(matches!(op(lock_at("b", u64::MAX / 2)), Err(Error::LockHeld { .. })));
    assert!(matches!(op(lock("b")), Err(Error::LockHeld { .. })));
    op(LockOp::ReleaseAll { owner: "a".into() }).expect("release");
    op(lock("b")).expect("released lock");
    assert_eq!(store.locks().wait().unwrap().len(), 1);
}

#[test]
fn damage_in_bytea_is_found_by_reads_and_verify() {
    let Some(cluster) = Cluster::start("damage_in_bytea_is_found") else { return };
    let (url, store) = store(&cluster);
    create_thread(&store, "t", 3);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute(
            // Byte 30 of the second frame of the row (seqs 1 to 3): past the first frame's
            // header, body (its length at bytes 2 to 5) and CRC.
            "UPDATE cairn_event_batches SET frames = set_byte(frames, 40 + get_byte(frames, 2) \
             + 256 * get_byte(frames, 3), get_byte(frames, 40 + get_byte(frames, 2) \
             + 256 * get_byte(frames, 3)) # 4) WHERE first_seq = 1 AND last_seq = 3",
        )
        .unwrap();
    assert!(matches!(store.read_since(&tid("t"), Seq(0), 10).wait(), Err(Error::Corrupted { .. })));
    let report = store.verify().unwrap();
    assert_eq!(report.problems.len(), 1, "{:?}", report.problems);
    assert_eq!(report.problems[0].table, "events");
}

#[test]
fn two_stores_on_one_database_never_let_the_log_skip_an_event() {
    let Some(cluster) = Cluster::start("two_stores_never_skip") else { return };
    let (url, first) = store(&cluster);
    let second = PgStore::connect(&url, Durability::Immediate).expect("second store");
    for t in ["a", "b"] {
        create_thread(&first, t, 0);
    }
    let writers: Vec<_> = [(first.clone(), "a"), (second.clone(), "b")]
        .into_iter()
        .map(|(store, t)| {
            std::thread::spawn(move || {
                for n in 1..=200 {
                    append(&store, Batch { events: vec![event(t, n)], ..Batch::default() });
                }
            })
        })
        .collect();
    // A reader follows the global log by cursor while both write: it must see every event
    // once, each thread's in seq order (a late commit behind its cursor would be missing).
    let mut cursor = Lsn(0);
    let mut seen: std::collections::BTreeMap<String, Vec<u64>> = Default::default();
    let reader: Arc<dyn Store> = Arc::new(second.clone());
    let mut count = 0;
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    while count < 400 {
        assert!(std::time::Instant::now() < deadline, "the reader saw {count} of 400");
        for e in reader.read_all_since(cursor, 100).wait().unwrap() {
            assert!(e.bookmark.lsn > cursor, "the log went backwards");
            cursor = e.bookmark.lsn;
            seen.entry(e.thread.to_string()).or_default().push(e.bookmark.seq.0);
            count += 1;
        }
    }
    for t in ["a", "b"] {
        assert_eq!(seen[t], (1..=200).collect::<Vec<_>>(), "thread {t} as the reader saw it");
    }
    for w in writers {
        w.join().unwrap();
    }
    for t in ["a", "b"] {
        assert_eq!(first.read_since(&tid(t), Seq(0), 1000).wait().unwrap().len(), 200);
    }
    assert!(first.verify().unwrap().is_clean());
}

#[test]
fn a_subscription_sees_every_event_once_in_order() {
    let Some(cluster) = Cluster::start("a_subscription_sees_every_event") else { return };
    let (_, store) = store(&cluster);
    create_thread(&store, "t", 0);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut sub = store.subscribe(Scope::Thread(tid("t")), 0).unwrap();
    let writer = {
        let store = store.clone();
        std::thread::spawn(move || {
            for n in 1..=50 {
                append(&store, Batch { events: vec![event("t", n)], ..Batch::default() });
            }
        })
    };
    rt.block_on(async {
        for n in 1..=50 {
            let e = sub.next().await.unwrap();
            assert_eq!(e.bookmark.seq, Seq(n));
        }
    });
    writer.join().unwrap();
}

/// Why the log's lsn is not a plain sequence: with one, a transaction that takes a number and
/// commits late lets a reader past its event. This shows the skip with raw SQL, then the same
/// race between two stores: one whose group is written but not committed (its COMMIT held by a
/// proxy) while another commits after it. The store's reads stop below the older transaction
/// (the xmin watermark), so a reader's cursor never passes the event that commits late.
#[test]
fn a_late_commit_skips_a_naive_sequence_but_not_the_stores_log() {
    let Some(cluster) = Cluster::start("a_late_commit_skips_a_naive_sequence") else { return };
    let (url, fast_store) = store(&cluster);
    let connect = || postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let (mut slow, mut fast, mut reader) = (connect(), connect(), connect());
    reader
        .batch_execute("CREATE SEQUENCE naive; CREATE TABLE naive_log (lsn bigint PRIMARY KEY)")
        .unwrap();
    let mut slow_tx = slow.transaction().unwrap();
    slow_tx.execute("INSERT INTO naive_log SELECT nextval('naive')", &[]).unwrap();
    fast.batch_execute("INSERT INTO naive_log SELECT nextval('naive')").unwrap();
    let seen: Vec<i64> = reader
        .query("SELECT lsn FROM naive_log WHERE lsn > 0", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    assert_eq!(seen, vec![2], "the reader's cursor moves to 2 while 1 is not committed");
    slow_tx.commit().unwrap();
    let behind: i64 =
        reader.query_one("SELECT count(*) FROM naive_log WHERE lsn <= 2", &[]).unwrap().get(0);
    assert_eq!(behind, 2, "1 commits behind the cursor: a reader at 2 never sees it");

    // The stores: `slow` writes through a proxy that holds its COMMIT.
    let proxy = cairn_storage_testkit::pg_proxy::Proxy::start(&cluster).unwrap();
    let slow_store = PgStore::connect(&proxy.url(&url), Durability::Immediate).unwrap();
    create_thread(&fast_store, "f", 0);
    create_thread(&fast_store, "s", 0);
    let held = proxy.hold_next_commit("cairn-writer");
    let late =
        slow_store.append(Batch { events: vec![event("s", 1)], ..Batch::default() }).unwrap();
    assert!(held.wait_reached(std::time::Duration::from_secs(10)), "the slow group is written");
    let early = append(&fast_store, Batch { events: vec![event("f", 1)], ..Batch::default() });
    // What a naive reader of `lsn > cursor` would see now: the early commit only...
    let naive: Vec<i64> = reader
        .query("SELECT last_lsn FROM cairn_event_batches ORDER BY first_lsn", &[])
        .unwrap()
        .iter()
        .map(|r| r.get(0))
        .collect();
    let early_lsn = early.bookmarks[0].lsn;
    assert_eq!(naive.last().copied(), Some(i64::try_from(early_lsn.0).unwrap()));
    // ...and the store's reader: nothing at or above the transaction still running.
    let before = fast_store.read_all_since(Lsn(0), 100).wait().unwrap();
    assert!(
        before.iter().all(|e| e.bookmark.lsn < early_lsn),
        "the early commit is held back while an older transaction runs: {:?}",
        before.iter().map(|e| e.bookmark.lsn).collect::<Vec<_>>()
    );
    let cursor = before.last().map_or(Lsn(0), |e| e.bookmark.lsn);
    held.release();
    let late = late.wait_blocking().unwrap();
    assert!(late.bookmarks[0].lsn < early_lsn, "the held transaction is the older one");
    let after: Vec<(Lsn, String)> = fast_store
        .read_all_since(cursor, 100)
        .wait()
        .unwrap()
        .iter()
        .map(|e| (e.bookmark.lsn, e.thread.to_string()))
        .collect();
    assert_eq!(
        after,
        vec![(late.bookmarks[0].lsn, "s".to_owned()), (early_lsn, "f".to_owned())],
        "from the cursor: the late commit, then the early one; nothing skipped"
    );
}

/// A group's transaction takes its id when it begins and then locks the thread rows it
/// writes; a younger transaction may write one of them first. Its lsns would then sort below
/// the events it follows in that thread: the group runs again in a new transaction instead,
/// and a thread's lsns rise with its seqs.
#[test]
fn a_group_that_a_younger_writer_overtook_runs_again_and_lsns_rise_with_seqs() {
    let Some(cluster) = Cluster::start("a_group_a_younger_writer_overtook") else { return };
    let (url, young) = store(&cluster);
    let old = PgStore::connect(&url, Durability::Immediate).unwrap();
    create_thread(&young, "a-first", 0);
    create_thread(&young, "b-second", 0);
    // A session holds the first row, so the old store's group, which writes both threads,
    // takes its transaction id and waits there.
    let mut holder = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let mut hold = holder.transaction().unwrap();
    hold.execute("SELECT 1 FROM cairn_threads WHERE id = 'a-first' FOR UPDATE", &[]).unwrap();
    let both =
        Batch { events: vec![event("a-first", 1), event("b-second", 1)], ..Batch::default() };
    let waiting = old.append(both).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    // Meanwhile a younger transaction writes the second thread and commits.
    let overtaking =
        append(&young, Batch { events: vec![event("b-second", 1)], ..Batch::default() });
    hold.commit().unwrap();
    // The old group's seq 1 of b-second is taken now: it runs again, plans seq 2, and the
    // assigned lsns follow the younger writer's.
    let done = waiting.wait_blocking().unwrap();
    assert_eq!(done.bookmarks[1].seq, Seq(2));
    assert!(done.bookmarks[1].lsn > overtaking.bookmarks[0].lsn);
    let events = young.read_since(&tid("b-second"), Seq(0), 10).wait().unwrap();
    let lsns: Vec<Lsn> = events.iter().map(|e| e.bookmark.lsn).collect();
    assert!(lsns.windows(2).all(|w| w[0] < w[1]), "lsns rise with seqs: {lsns:?}");
    assert!(young.verify().unwrap().is_clean());
}

/// A connection the server drops (`pg_terminate_backend`, a restart, the network) fails what
/// was on it, and the store reconnects: the next append and read succeed, nothing is lost.
#[test]
fn a_dropped_connection_fails_its_group_and_the_store_reconnects() {
    let Some(cluster) = Cluster::start("a_dropped_connection_reconnects") else { return };
    let (url, store) = store(&cluster);
    create_thread(&store, "t", 2);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    let killed: i64 = admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = current_database() AND pid <> pg_backend_pid()",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(killed >= 5, "the writer's and the readers' connections: {killed}");
    let first = store.append(Batch { events: vec![event("t", 3)], ..Batch::default() }).unwrap();
    let outcome = first.wait_blocking();
    let mut next = 3;
    match outcome {
        // The group on the dropped connection failed and wrote nothing...
        Err(Error::Storage { .. }) => {}
        // ...unless the writer noticed the drop before it (then it reconnected first).
        Ok(_) => next = 4,
        Err(e) => panic!("unexpected {e:?}"),
    }
    let again = store.append(Batch { events: vec![event("t", next)], ..Batch::default() }).unwrap();
    assert_eq!(again.wait_blocking().unwrap().bookmarks[0].seq, Seq(next));
    // Reader connections were dropped too: a read that meets one runs again on a fresh one.
    for _ in 0..8 {
        assert_eq!(store.read_since(&tid("t"), Seq(0), 10).wait().unwrap().len(), next as usize);
    }
    assert!(store.verify().unwrap().is_clean());
}

/// A subscription on a store that writes nothing (another process's, say) hears the commits of
/// the store that writes, through LISTEN/NOTIFY, and follows them without polling.
#[test]
fn a_subscription_follows_the_commits_of_another_store() {
    let Some(cluster) = Cluster::start("a_subscription_follows_another_store") else { return };
    let (url, writer) = store(&cluster);
    let reader = PgStore::connect(&url, Durability::Immediate).expect("second store");
    create_thread(&writer, "t", 0);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let mut sub = reader.subscribe(Scope::All, 0).unwrap();
    let mut heard = reader.shared().expect("a shared store announces commits").commits();
    let feeder = std::thread::spawn(move || {
        for n in 1..=20 {
            append(&writer, Batch { events: vec![event("t", n)], ..Batch::default() });
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
    });
    rt.block_on(async {
        let deadline = std::time::Duration::from_secs(5);
        for n in 1..=20u64 {
            let e =
                tokio::time::timeout(deadline, sub.next()).await.expect("heard in time").unwrap();
            assert_eq!(e.bookmark.seq, Seq(n));
        }
        // The other store's commits move the reader's view of remote commits.
        assert!(*heard.borrow_and_update() >= 1);
    });
    feeder.join().unwrap();
}

/// A COMMIT whose answer never comes (the connection drops after the writer sent it) is
/// resolved by the transaction's status on a fresh connection: committed after all, the
/// batch is acknowledged (its events are in the log once); never reached the server (nothing
/// of it committed), the group runs again on a fresh connection and is acknowledged then, its
/// events in the log once. The store goes on either way. The cuts are made by a proxy on the
/// wire, at the writer's COMMIT.
#[test]
fn a_commit_cut_off_from_its_answer_is_resolved_by_the_transaction_status() {
    use cairn_storage_testkit::pg_proxy::{Cut, Proxy};
    let Some(cluster) = Cluster::start("a_commit_cut_off_is_resolved") else { return };
    let url = cluster.new_database();
    let proxy = Proxy::start(&cluster).expect("proxy");
    let store = PgStore::connect(&proxy.url(&url), Durability::Immediate).expect("connect");
    create_thread(&store, "t", 1);
    let one = |n: u64| Batch { events: vec![event("t", n)], ..Batch::default() };

    // Committed, answer lost: acknowledged after all.
    proxy.cut_next_commit("cairn-writer", Cut::AfterAnswer);
    let acked = store.append(one(2)).unwrap().wait_blocking();
    assert_eq!(proxy.cuts(), 1, "the proxy cut the writer's COMMIT");
    assert_eq!(acked.expect("committed, so acknowledged").bookmarks[0].seq, Seq(2));

    // Never reached the server: nothing of it committed, so it ran again, once.
    proxy.cut_next_commit("cairn-writer", Cut::BeforeCommit);
    let rerun = store.append(one(3)).unwrap().wait_blocking();
    assert_eq!(proxy.cuts(), 2);
    assert_eq!(rerun.expect("run again on a fresh connection").bookmarks[0].seq, Seq(3));

    // Sent, then cut at once: either outcome, told truly.
    proxy.cut_next_commit("cairn-writer", Cut::AfterCommit);
    let either = store.append(one(4)).unwrap().wait_blocking();
    assert_eq!(proxy.cuts(), 3);
    let next = if either.is_ok() { 5 } else { 4 };
    let stored = store.read_since(&tid("t"), Seq(0), 10).wait().unwrap();
    assert_eq!(stored.len() as u64, next - 1, "the log holds exactly what was acknowledged");
    assert_eq!(
        store.append(one(next)).unwrap().wait_blocking().unwrap().bookmarks[0].seq,
        Seq(next)
    );
    assert!(store.verify().unwrap().is_clean());
}

/// A store dropped while its writer still commits the last write it accepted: the write is
/// answered truly. The writer's thread keeps the store's runtime until then: its commit's
/// answer was lost, so it asks for the transaction's status on a fresh connection, which that
/// runtime drives (the thread used to panic there, the runtime shut down under it, and the
/// write's answer was dropped).
#[test]
fn a_write_accepted_before_its_store_is_dropped_is_answered_after_a_lost_commit_answer() {
    use cairn_storage_testkit::pg_proxy::{Cut, Proxy};
    let Some(cluster) = Cluster::start("a_write_accepted_before_its_store_is_dropped") else {
        return;
    };
    let url = cluster.new_database();
    let proxy = Proxy::start(&cluster).expect("proxy");
    let store = PgStore::connect(&proxy.url(&url), Durability::Immediate).expect("connect");
    create_thread(&store, "t", 1);
    proxy.cut_next_commit("cairn-writer", Cut::AfterAnswer);
    let pending = store.append(Batch { events: vec![event("t", 2)], ..Batch::default() }).unwrap();
    drop(store);
    let acked = pending.wait_blocking().expect("committed, so acknowledged");
    assert_eq!(acked.bookmarks[0].seq, Seq(2));
    assert_eq!(proxy.cuts(), 1, "the proxy cut the writer's COMMIT");
    let reopened = PgStore::connect(&url, Durability::Immediate).expect("connect");
    assert_eq!(reopened.read_since(&tid("t"), Seq(0), 10).wait().unwrap().len(), 2);
}

/// A thread delete whose COMMIT is cut on the wire: before it reaches the server nothing of it
/// committed, so it runs again on a fresh connection (the thread is gone once, the delete
/// acknowledged); cut right after sending, it is whole or gone as the answer says; with the
/// answer lost after the commit it is gone and the delete acknowledged.
#[test]
fn a_thread_delete_cut_at_its_commit_leaves_the_thread_whole_or_gone() {
    use cairn_storage::{DeleteOptions, ThreadStatus};
    use cairn_storage_testkit::pg_proxy::{Cut, Proxy};
    let Some(cluster) = Cluster::start("a_thread_delete_cut_at_its_commit") else { return };
    let url = cluster.new_database();
    let proxy = Proxy::start(&cluster).expect("proxy");
    let store = PgStore::connect(&proxy.url(&url), Durability::Immediate).expect("connect");
    let finished = |id: &str| {
        create_thread(&store, id, 5);
        let mut record = store.thread(&tid(id)).wait().unwrap().unwrap();
        record.status = ThreadStatus::Completed;
        append(&store, Batch { threads: vec![record], ..Batch::default() });
    };
    let delete = |id: &str| store.delete_thread(&tid(id), DeleteOptions::default()).unwrap();
    let whole = |id: &str| {
        store.thread(&tid(id)).wait().unwrap().is_some()
            && store.read_since(&tid(id), Seq(0), 10).wait().unwrap().len() == 5
    };
    let gone = |id: &str| {
        store.thread(&tid(id)).wait().unwrap().is_none()
            && matches!(store.read_since(&tid(id), Seq(0), 10).wait(), Err(Error::UnknownThread(_)))
    };
    for id in ["a", "b", "c"] {
        finished(id);
    }
    proxy.cut_next_commit("cairn-writer", Cut::BeforeCommit);
    assert!(delete("a").wait_blocking().expect("run again").is_some(), "deleted by the rerun");
    assert!(gone("a"));
    proxy.cut_next_commit("cairn-writer", Cut::AfterCommit);
    let either = delete("b").wait_blocking();
    assert!(if either.is_ok() { gone("b") } else { whole("b") }, "{either:?}");
    proxy.cut_next_commit("cairn-writer", Cut::AfterAnswer);
    assert!(delete("c").wait_blocking().expect("acknowledged after all").is_some());
    assert!(gone("c"));
    assert_eq!(proxy.cuts(), 3);
    assert!(store.verify().unwrap().is_clean());
}

/// Writers commit at once: an append whose batch puts a payload another thread's event already
/// stored (so it does not write it again), and the deletion of that other thread, the only one
/// referring to it so far. The append's group is held at its COMMIT (proxy) while the deletion
/// runs: the deletion waits on the payload row the append holds, then sees the append's event
/// and keeps the payload; nothing refers to a payload that is gone.
#[test]
fn a_thread_deletion_keeps_a_payload_an_append_in_flight_refers_to() {
    use cairn_storage::{DeleteOptions, PayloadRef, ThreadStatus};
    use cairn_storage_testkit::pg_proxy::Proxy;
    let Some(cluster) = Cluster::start("a_thread_deletion_keeps_a_payload") else { return };
    let url = cluster.new_database();
    let proxy = Proxy::start(&cluster).expect("proxy");
    let appender = PgStore::connect(&proxy.url(&url), Durability::Immediate).expect("connect");
    let deleter = PgStore::connect(&url, Durability::Immediate).expect("connect");
    let bytes = b"a payload two threads refer to".to_vec();
    let with_payload = |thread: &str| {
        let mut e = event(thread, 1);
        e.payload = Some(PayloadRef::of(&bytes));
        Batch { events: vec![e], payloads: vec![bytes.clone()], ..Batch::default() }
    };
    create_thread(&deleter, "old", 0);
    append(&deleter, with_payload("old"));
    let mut record = deleter.thread(&tid("old")).wait().unwrap().unwrap();
    record.status = ThreadStatus::Completed;
    append(&deleter, Batch { threads: vec![record], ..Batch::default() });
    create_thread(&appender, "new", 0);
    let held = proxy.hold_next_commit("cairn-writer");
    let pending = appender.append(with_payload("new")).unwrap();
    assert!(held.wait_reached(std::time::Duration::from_secs(10)), "the append is written");
    let deleting = deleter.delete_thread(&tid("old"), DeleteOptions::default()).unwrap();
    std::thread::sleep(std::time::Duration::from_millis(300));
    held.release();
    pending.wait_blocking().expect("the append commits");
    let deleted = deleting.wait_blocking().expect("the delete commits").expect("it was there");
    assert_eq!((deleted.events, deleted.payloads), (1, 0), "the new thread's event keeps it");
    assert_eq!(deleter.payload(&PayloadRef::of(&bytes)).wait().unwrap(), bytes);
    assert!(deleter.verify().unwrap().is_clean());
}

/// A decorator that only marks its roles `Forward*` carries what PostgreSQL declares it offers
/// (the shared database, its metrics) and its async queueing: a wrapper cannot make a shared
/// database look like a file of this process's own.
#[test]
fn a_decorator_carries_what_postgres_offers() {
    use cairn_storage::{Decorates, ForwardAppend, ForwardCatalog, ForwardLog, ForwardMaintenance};

    struct Wrapped(Arc<dyn Store>);
    impl Decorates for Wrapped {
        fn inner(&self) -> &dyn Store {
            &*self.0
        }
    }
    impl ForwardAppend for Wrapped {}
    impl ForwardLog for Wrapped {}
    impl ForwardCatalog for Wrapped {}
    impl ForwardMaintenance for Wrapped {}
    impl Store for Wrapped {}

    let Some(cluster) = Cluster::start("a_decorator_carries_what_postgres_offers") else { return };
    let (_, pg) = store(&cluster);
    let wrapped = Wrapped(Arc::new(pg));
    assert!(wrapped.shared().is_some(), "the shared database is carried");
    assert!(wrapped.metrics().is_some(), "the writer's metrics are carried");
    assert!(wrapped.intend_write().is_none() && wrapped.refusals().is_none());
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let batch = Batch { events: vec![event("t", 1)], ..Batch::default() };
    create_thread(&wrapped, "t", 0);
    rt.block_on(async { wrapped.append_async(batch).await.unwrap().wait().await.unwrap() });
    assert_eq!(wrapped.read_since(&tid("t"), Seq(0), 10).wait().unwrap().len(), 1);
}
