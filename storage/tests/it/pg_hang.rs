//! A network that hangs instead of failing, under the PostgreSQL store: a proxy that silently
//! stops passing bytes both ways (`Proxy::blackhole`: a half-open connection, a partition,
//! nothing closed). The store must give up what does not answer within its deadlines (set
//! short through the URL, as a user would), say the database is unreachable, keep its async
//! callers suspended rather than blocked while its writer waits, and go on by itself once the
//! network is back.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use cairn_storage::{Append, Backend, Maintenance, ThreadLog};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cairn_storage::{Batch, Durability, PgStore, Seq};
use cairn_storage_testkit::pg_cluster::Cluster;
use cairn_storage_testkit::pg_proxy::Proxy;

use crate::common::*;

/// Deadlines through the URL: connections open within 1 s; statements end on the server
/// after 500 ms, so the client gives an unanswered one up after 1 s.
const TIMEOUTS: &str = "connect_timeout=1&options=-c%20statement_timeout%3D500";

/// How long the network stays silent: past every deadline above, several times over.
const SILENT: Duration = Duration::from_secs(4);

/// Appends queued while the writer is stalled: more than its queue (1024) and a group (256)
/// hold, so the last ones wait for room.
const APPENDS: u64 = 1_600;

/// The ticker's period.
const TICK: Duration = Duration::from_millis(10);

fn proxied(cluster: &Cluster, proxy: &Proxy) -> String {
    format!("{}?{TIMEOUTS}", proxy.url(&cluster.new_database()))
}

/// A connection attempt into a network that says nothing ends within the connect timeout
/// (tokio-postgres bounds only the socket's connect: the startup would wait for ever).
#[test]
fn connecting_into_a_silent_network_fails_within_the_connect_timeout() {
    let Some(cluster) = Cluster::start("pg_hang_connect") else { return };
    let proxy = Proxy::start(&cluster).expect("proxy");
    let url = proxied(&cluster, &proxy);
    proxy.blackhole();
    let started = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(PgStore::connect(&url, Durability::Immediate).map(drop));
    });
    let outcome = rx.recv_timeout(Duration::from_secs(10));
    let took = started.elapsed();
    proxy.resume();
    eprintln!("PG_HANG connect_into_silence took_ms={}", took.as_millis());
    let outcome = outcome.expect("connect came back (it hung)");
    assert!(outcome.is_err(), "connected through a silent network?");
    assert!(took < Duration::from_secs(4), "connect took {took:?} with connect_timeout=1");
}

/// The writer's connection goes silent mid-group. The store notices within its deadlines
/// (`database()` unreachable), the writer keeps reconnecting while [`APPENDS`] appends pile
/// up: once its queue is full, `append_async` waits for room suspended, so a ticker on the
/// same `current_thread` runtime keeps ticking. Once the network is back every append commits,
/// none twice, and the store says the database answers again.
#[test]
fn a_silent_database_is_noticed_and_appends_wait_for_room_without_blocking_their_thread() {
    let Some(cluster) = Cluster::start("pg_hang_store") else { return };
    let proxy = Proxy::start(&cluster).expect("proxy");
    let store = PgStore::connect(&proxied(&cluster, &proxy), Durability::Immediate).unwrap();
    create_thread(&store, "t", 1);
    assert_eq!(store.database().map(|d| d.reachable), Some(true));
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let (queued, stop) = (Arc::new(AtomicU64::new(0)), Arc::new(AtomicBool::new(false)));
    rt.block_on(async {
        let ticker = tokio::spawn(ticker(stop.clone()));
        proxy.blackhole();
        let silent = Instant::now();
        let appender = {
            let (store, queued) = (store.clone(), queued.clone());
            tokio::spawn(async move {
                let mut pending = Vec::new();
                for n in 0..APPENDS {
                    // One event every 100 appends, the rest empty: the thread's log says how
                    // many of those committed.
                    let batch = if n % 100 == 0 {
                        Batch { events: vec![event("t", 2 + n / 100)], ..Batch::default() }
                    } else {
                        Batch::default()
                    };
                    pending.push(store.append_async(batch).await.expect("queued"));
                    queued.fetch_add(1, Ordering::SeqCst);
                }
                pending
            })
        };
        let mut noticed = None;
        let mut sync_append = None;
        while silent.elapsed() < SILENT {
            if noticed.is_none() && store.database().is_some_and(|d| !d.reachable) {
                noticed = Some(silent.elapsed());
            }
            // The queue full by now: the sync append, called on the runtime's thread, leaves
            // its write to wait in a task of the store's rather than block this thread.
            if sync_append.is_none() && silent.elapsed() > SILENT / 2 {
                let started = Instant::now();
                let pending = store.append(Batch::default()).expect("queued");
                sync_append = Some((pending, started.elapsed()));
            }
            tokio::time::sleep(TICK).await;
        }
        let (sync_pending, sync_took) = sync_append.expect("a sync append while silent");
        let queued_while_silent = queued.load(Ordering::SeqCst);
        proxy.resume();
        let resumed = Instant::now();
        let pending = tokio::time::timeout(Duration::from_secs(30), appender)
            .await
            .expect("every append queued once the network was back")
            .unwrap();
        for p in pending {
            tokio::time::timeout(Duration::from_secs(30), p.wait())
                .await
                .expect("answered")
                .expect("committed once the network was back");
        }
        tokio::time::timeout(Duration::from_secs(30), sync_pending.wait())
            .await
            .expect("answered")
            .expect("the sync append committed too");
        let recovered = resumed.elapsed();
        stop.store(true, Ordering::SeqCst);
        let max_gap = ticker.await.unwrap();
        eprintln!(
            "PG_HANG store noticed_ms={} queued_while_silent={queued_while_silent}/{APPENDS} \
             sync_append_ms={} recovered_ms={} max_tick_gap_ms={}",
            noticed.map_or(-1, |d| d.as_millis() as i64),
            sync_took.as_millis(),
            recovered.as_millis(),
            max_gap.as_millis()
        );
        let noticed = noticed.expect("the store never said the database was unreachable");
        assert!(noticed < Duration::from_secs(3), "noticed after {noticed:?}");
        assert!(
            queued_while_silent < APPENDS,
            "every append was queued while the writer was stalled: none waited for room"
        );
        assert!(sync_took < Duration::from_millis(200), "a sync append blocked {sync_took:?}");
        assert!(
            max_gap < Duration::from_millis(500),
            "the ticker stopped for {max_gap:?}: an append blocked the runtime's thread"
        );
    });
    let events = store.read_since(&tid("t"), Seq(0), 100).wait().unwrap();
    let seqs: Vec<u64> = events.iter().map(|e| e.bookmark.seq.0).collect();
    assert_eq!(seqs, (1..=1 + APPENDS / 100).collect::<Vec<_>>(), "each event once, in order");
    assert_eq!(store.database().map(|d| d.reachable), Some(true), "answers again");
    assert!(store.verify().unwrap().is_clean());
}

/// Ticks every [`TICK`] until `stop`; the longest time between two ticks.
async fn ticker(stop: Arc<AtomicBool>) -> Duration {
    let mut interval = tokio::time::interval(TICK);
    interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    interval.tick().await;
    let mut last = Instant::now();
    let mut max_gap = Duration::ZERO;
    while !stop.load(Ordering::SeqCst) {
        interval.tick().await;
        max_gap = max_gap.max(last.elapsed());
        last = Instant::now();
    }
    max_gap
}

/// `verify`, a long series of statements each waited for on a blocked thread, gives up within
/// its deadlines when the network goes silent (its connection given up, an error returned,
/// not a thread hung), and works again on fresh connections once the network is back.
#[test]
fn verify_into_a_silent_network_fails_within_its_deadlines_and_works_after() {
    let Some(cluster) = Cluster::start("pg_hang_verify") else { return };
    let proxy = Proxy::start(&cluster).expect("proxy");
    let store = PgStore::connect(&proxied(&cluster, &proxy), Durability::Immediate).unwrap();
    create_thread(&store, "t", 3);
    assert!(store.verify().unwrap().is_clean());
    proxy.blackhole();
    let started = Instant::now();
    let (tx, rx) = std::sync::mpsc::channel();
    let verifying = store.clone();
    std::thread::spawn(move || {
        let _ = tx.send(verifying.verify().map(|r| r.is_clean()));
    });
    let outcome = rx.recv_timeout(Duration::from_secs(15));
    let took = started.elapsed();
    proxy.resume();
    eprintln!("PG_HANG verify_into_silence took_ms={} outcome={outcome:?}", took.as_millis());
    let outcome = outcome.expect("verify came back (it hung)");
    assert!(outcome.is_err(), "verified through a silent network?");
    // Two connections, each given up after the answer deadline (1 s), and a connect (1 s).
    assert!(took < Duration::from_secs(6), "verify took {took:?}");
    // Meanwhile the store's check said the database was gone (reads are refused at once while
    // it is: `Error::Unavailable`); it says so no longer within a check or two.
    let resumed = Instant::now();
    while store.database().is_some_and(|d| !d.reachable) {
        assert!(resumed.elapsed() < Duration::from_secs(10), "the database never answered again");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(store.verify().unwrap().is_clean(), "verify works again on fresh connections");
}
