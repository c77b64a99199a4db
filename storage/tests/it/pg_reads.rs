//! The reads, awaited: on both backends they answer what the same reads waited for answer; on PostgreSQL they are awaited, so a slow server (a proxy holding each
//! query of the reader connections) suspends the reading task and not the runtime: a task on
//! the same `current_thread` runtime keeps ticking, where a sync read stops it (and is counted).

use cairn_storage::{Catalog, Maintenance, ThreadLog};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cairn_storage::{
    Batch, CheckpointFilter, CheckpointKind, Durability, LockOp, Lsn, NewSignal, Page, PayloadRef,
    PgStore, Seq, Store, ThreadFilter, Wake,
};
use cairn_storage_testkit::pg_cluster::Cluster;
use cairn_storage_testkit::pg_proxy::Proxy;

use crate::common::*;

/// A thread with events (one with its body in a payload), a checkpoint, a signal and a lock.
fn fill(store: &impl Store) -> PayloadRef {
    create_thread(store, "t", 3);
    let body = b"{\"big\":true}".to_vec();
    let r = PayloadRef::of(&body);
    let mut offloaded = event("t", 4);
    offloaded.payload = Some(r);
    offloaded.data = Vec::new();
    let batch = Batch {
        events: vec![offloaded],
        payloads: vec![body],
        checkpoints: vec![checkpoint("t", CheckpointKind::Manual, &["x"])],
        signals: vec![NewSignal::new(tid("t"), "go", b"1".to_vec(), 0).unwrap()],
        locks: vec![LockOp::Acquire { name: "l".into(), owner: "t".into(), now_ms: 0, ttl_ms: 9 }],
        wakes: vec![(tid("t"), Wake::At(0))],
        ..Batch::default()
    };
    append(store, batch);
    create_thread(store, "u", 1);
    r
}

/// Every async read against its sync twin on `store`.
async fn same_answers(store: &impl Store, payload: PayloadRef) {
    let t = tid("t");
    assert_eq!(store.thread(&t).await.unwrap(), store.thread(&t).wait().unwrap());
    assert!(store.thread(&tid("none")).await.unwrap().is_none());
    assert_eq!(
        store.read_since(&t, Seq(1), 10).await.unwrap(),
        store.read_since(&t, Seq(1), 10).wait().unwrap()
    );
    assert_eq!(
        store.read_range(&t, Seq(2), Seq(3)).await.unwrap(),
        store.read_range(&t, Seq(2), Seq(3)).wait().unwrap()
    );
    assert!(store.read_range(&t, Seq(3), Seq(2)).await.unwrap().is_empty());
    assert_eq!(
        store.read_all_since(Lsn(0), 100).await.unwrap(),
        store.read_all_since(Lsn(0), 100).wait().unwrap()
    );
    assert_eq!(store.payload(&payload).await.unwrap(), b"{\"big\":true}".to_vec());
    let latest = store.latest_checkpoint_at_or_before(&t, Seq(99)).await.unwrap();
    assert_eq!(latest, store.latest_checkpoint_at_or_before(&t, Seq(99)).wait().unwrap());
    let cp = latest.expect("a checkpoint");
    assert_eq!(store.checkpoint(cp.id).await.unwrap(), Some(cp.clone()));
    assert_eq!(store.checkpoint_covering(&t, cp.covers.seq).await.unwrap(), Some(cp.id));
    let filter = CheckpointFilter { thread: Some(t.clone()), ..CheckpointFilter::default() };
    assert_eq!(
        store.list_checkpoints(&filter, Page::default()).await.unwrap(),
        store.list_checkpoints(&filter, Page::default()).wait().unwrap()
    );
    let all = ThreadFilter::default();
    assert_eq!(
        store.list_threads(&all, Page::default()).await.unwrap(),
        store.list_threads(&all, Page::default()).wait().unwrap()
    );
    let after = store.list_threads_after(&all, Some(&t), 10).await.unwrap();
    assert_eq!(after, store.list_threads_after(&all, Some(&t), 10).wait().unwrap());
    assert_eq!(after.iter().map(|r| r.id.as_str()).collect::<Vec<_>>(), ["u"]);
    assert_eq!(store.signals(&t, 0, 10).await.unwrap(), store.signals(&t, 0, 10).wait().unwrap());
    assert_eq!(store.locks().await.unwrap(), store.locks().wait().unwrap());
    let workflows = ["wf".to_owned()];
    if let Some(db) = store.shared() {
        assert_eq!(
            db.due_threads(&workflows, 0, None, 10).await.unwrap(),
            db.due_threads(&workflows, 0, None, 10).wait().unwrap()
        );
    }
}

#[test]
fn async_reads_answer_as_the_sync_reads_on_redb_and_on_postgres() {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (_dir, _path, redb) = open_fast();
    let payload = fill(&redb);
    rt.block_on(same_answers(&redb, payload));
    let Some(cluster) = Cluster::start("async_reads_answer_as_the_sync_reads") else { return };
    let pg = PgStore::connect(&cluster.new_database(), Durability::Immediate).expect("connect");
    let payload = fill(&pg);
    rt.block_on(same_answers(&pg, payload));
    // The 11 sync twins above ran on the runtime, and were counted; the async reads were not.
    assert_eq!(pg.blocking_reads(), 11);
}

/// The longest pause of a task ticking every `tick` while `reads` run on the same
/// `current_thread` runtime.
fn longest_pause(reads: impl std::future::Future<Output = ()>) -> Duration {
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let stop = Arc::new(AtomicBool::new(false));
        let ticking = stop.clone();
        let ticker = tokio::spawn(async move {
            let mut gap = Duration::ZERO;
            while !ticking.load(Ordering::SeqCst) {
                let at = Instant::now();
                tokio::time::sleep(Duration::from_millis(5)).await;
                gap = gap.max(at.elapsed());
            }
            gap
        });
        tokio::task::yield_now().await;
        reads.await;
        stop.store(true, Ordering::SeqCst);
        ticker.await.unwrap()
    })
}

#[test]
fn a_slow_postgres_read_suspends_its_task_not_the_runtime() {
    let Some(cluster) = Cluster::start("a_slow_postgres_read_suspends_its_task") else { return };
    let url = cluster.new_database();
    let proxy = Proxy::start(&cluster).expect("proxy");
    let store = PgStore::connect(&proxy.url(&url), Durability::Immediate).expect("connect");
    create_thread(&store, "t", 2);
    // Long enough that a loaded machine's scheduling stalls (tens of ms, once 150 ms under a
    // load of 15 on 2 cores) stay far below the half of it the awaited reads may pause for.
    let delay = Duration::from_millis(800);
    proxy.delay_queries("cairn-reader", delay);
    let t = tid("t");

    let started = Instant::now();
    let awaited = longest_pause(async {
        for _ in 0..3 {
            assert!(store.thread(&t).await.unwrap().is_some());
        }
    });
    assert!(started.elapsed() >= delay * 3, "the reads were slowed");
    assert!(awaited < delay / 2, "awaited reads stopped the runtime for {awaited:?}");
    assert_eq!(store.blocking_reads(), 0);

    // The sync read on the same runtime stops it for the delay, and is counted.
    let blocked = longest_pause(async {
        assert!(store.thread(&t).wait().unwrap().is_some());
    });
    assert!(blocked >= delay, "a sync read stopped the runtime for {blocked:?} only");
    assert_eq!(store.blocking_reads(), 1);
}

/// A thread deleted while its log is being read reads as whole or as unknown, never as a gap:
/// the record and the events come from one snapshot. The reader's queries are held 400 ms each
/// and the deletion commits 600 ms in, where a record read apart from its events (one query,
/// then another) had the record and then found the events gone: "seq 3 of t is missing".
#[test]
fn a_log_read_across_a_deletion_is_whole_or_unknown_never_a_gap() {
    let Some(cluster) = Cluster::start("a_log_read_across_a_deletion") else { return };
    let url = cluster.new_database();
    let proxy = Proxy::start(&cluster).expect("proxy");
    let store = PgStore::connect(&proxy.url(&url), Durability::Immediate).expect("connect");
    create_thread(&store, "t", 3);
    proxy.delay_queries("cairn-reader", Duration::from_millis(400));
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let read = rt.block_on(async {
        let reading = tokio::spawn(store.read_since(&tid("t"), Seq(2), 10));
        tokio::time::sleep(Duration::from_millis(600)).await;
        let options = cairn_storage::DeleteOptions { force: true };
        let deleted = store.delete_thread(&tid("t"), options).unwrap().wait().await.unwrap();
        assert!(deleted.is_some(), "the thread was deleted during the read");
        reading.await.unwrap()
    });
    match read {
        Ok(events) => assert_eq!(events.iter().map(|e| e.bookmark.seq.0).collect::<Vec<_>>(), [3]),
        Err(cairn_storage::Error::UnknownThread(_)) => {}
        Err(e) => panic!("a deletion read as {e}"),
    }
}

/// Reads of thread records asked at once share queries: 40 of them, through a proxy that holds
/// each query of the readers 300 ms, are answered within a few holds (one query at a time for
/// each of the 4 reader connections took 10), each with its own thread's record, the missing
/// and the repeated ids too.
#[test]
fn thread_reads_asked_together_share_their_queries() {
    let Some(cluster) = Cluster::start("thread_reads_asked_together") else { return };
    let url = cluster.new_database();
    let proxy = Proxy::start(&cluster).expect("proxy");
    let store = PgStore::connect(&proxy.url(&url), Durability::Immediate).expect("connect");
    for n in 0..20 {
        create_thread(&store, &format!("t{n}"), 1);
    }
    let delay = Duration::from_millis(300);
    proxy.delay_queries("cairn-reader", delay);
    // Stored ones (each twice) and missing ones, interleaved.
    let ids: Vec<String> = (0..40).map(|n| format!("t{}", n % 30)).collect();
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let started = Instant::now();
    let answers =
        rt.block_on(futures::future::join_all(ids.iter().map(|id| store.thread(&tid(id)))));
    let took = started.elapsed();
    for (id, answer) in ids.iter().zip(answers) {
        let record = answer.unwrap_or_else(|e| panic!("read of {id}: {e}"));
        let stored = id[1..].parse::<u32>().unwrap() < 20;
        assert_eq!(record.map(|r| r.id.as_str().to_owned()), stored.then(|| id.clone()), "{id}");
    }
    assert!(took >= delay, "the reads were held ({took:?})");
    assert!(took < delay * 6, "40 reads took {took:?}: they did not share queries");
}

/// A thread record that does not decode fails its own read, not the reads that shared its
/// query.
#[test]
fn a_damaged_thread_record_fails_its_read_alone() {
    let Some(cluster) = Cluster::start("a_damaged_thread_record_fails_alone") else { return };
    let url = cluster.new_database();
    let store = PgStore::connect(&url, Durability::Immediate).expect("connect");
    create_thread(&store, "good", 1);
    create_thread(&store, "bad", 1);
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin
        .batch_execute("UPDATE cairn_threads SET record = '\\x00ff'::bytea WHERE id = 'bad'")
        .unwrap();
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    for _ in 0..3 {
        let (good, bad, none) = rt.block_on(async {
            futures::join!(
                store.thread(&tid("good")),
                store.thread(&tid("bad")),
                store.thread(&tid("none"))
            )
        });
        assert_eq!(good.unwrap().expect("stored").id.as_str(), "good");
        assert!(matches!(bad, Err(cairn_storage::Error::Corrupted { .. })), "{bad:?}");
        assert!(none.unwrap().is_none());
    }
}
