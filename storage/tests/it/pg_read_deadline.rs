//! Every read of the PostgreSQL store has a deadline, whatever it waits for: the server's answer
//! (the answer deadline: a server that stops answering) and one of the store's reader
//! connections (`PG_READ_CONNECTION_WAIT_MAX`, or the answer deadline if shorter: connections
//! held by reads that were started and are no longer driven). A clean-clone CI run hung 20
//! minutes in a read that waited for a connection with no deadline.

use std::future::Future;
use std::pin::Pin;
use std::task::Poll;
use std::time::{Duration, Instant};

use cairn_storage::{Catalog, Durability, Error, PgStore, Reading, Signal};
use cairn_storage_testkit::pg_cluster::Cluster;
use cairn_storage_testkit::pg_proxy::Proxy;

use crate::common::*;

/// Statements end on the server after 500 ms, so a read's answer deadline (and its wait for a
/// connection, the shorter of the two) is 1 s; connections open within 1 s.
const TIMEOUTS: &str = "connect_timeout=1&options=-c%20statement_timeout%3D500";

/// A read's deadline with [`TIMEOUTS`].
const DEADLINE: Duration = Duration::from_secs(1);

/// The store's reader connections (`READERS` in `storage/src/pg/mod.rs`).
const READERS: usize = 4;

/// How long past its deadline a read may take to say so (a loaded machine).
const SLACK: Duration = Duration::from_millis(1_500);

/// Polls `reading` once, as a task that starts a read and then stops driving it does: it
/// takes a reader connection and sends its statement, and holds the connection from then on.
/// Whether it is pending (`false`: it was answered within the poll).
async fn start<T>(reading: &mut Reading<T>) -> bool {
    std::future::poll_fn(|cx| Poll::Ready(Pin::new(&mut *reading).poll(cx).is_pending())).await
}

/// `read`'s answer and how long it took, or a panic if it took more than 10 s (it hung).
async fn timed<T>(read: impl Future<Output = Result<T, Error>>) -> (Result<T, Error>, Duration) {
    let started = Instant::now();
    let answer = tokio::time::timeout(Duration::from_secs(10), read).await;
    (answer.expect("the read came back (it hung)"), started.elapsed())
}

/// Every reader connection held by a read nobody drives (the driver of a test blocked in a
/// sync wait inside the same task, as `crash_controls` was): a further read fails within its
/// wait for a connection with `Error::TimedOut` naming it, instead of waiting for ever. Once
/// the held reads are dropped, the same read answers (the control). The reads are of signals:
/// a read of a thread record is driven by the store's own task (`pg/lookups.rs`), never held.
#[test]
fn a_read_that_finds_every_connection_held_fails_within_its_wait_naming_itself() {
    let Some(cluster) = Cluster::start("pg_read_connection_wait") else { return };
    let url = format!("{}?{TIMEOUTS}", cluster.new_database());
    let store = PgStore::connect(&url, Durability::Immediate).expect("connect");
    create_thread(&store, "t", 1);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let signals = || store.signals(&tid("t"), 0, 10);
        let (first, _) = timed(signals()).await;
        assert!(first.expect("a read").is_empty(), "the control read before");
        // A read answered within its first poll (its thread was held up long enough for the
        // round trip, on a loaded machine) gave its connection back: another takes its place.
        let mut held: Vec<Reading<Vec<Signal>>> = Vec::with_capacity(READERS);
        let mut answered_at_once = 0;
        while held.len() < READERS {
            let mut reading = signals();
            if start(&mut reading).await {
                held.push(reading);
            } else {
                answered_at_once += 1;
                assert!(answered_at_once < 100, "every read answered at its first poll");
            }
        }
        let (refused, took) = timed(signals()).await;
        eprintln!("PG_READ_DEADLINE connection_wait took_ms={} {refused:?}", took.as_millis());
        let error = refused.expect_err("a read with every connection held");
        let Error::TimedOut { call, after_ms, .. } = &error else {
            panic!("not a timed-out read: {error:?}");
        };
        assert_eq!((*call, *after_ms), ("read signals", DEADLINE.as_millis() as u64), "{error}");
        assert!(error.is_transient(), "{error}");
        assert!(error.to_string().contains("read signals got no answer within 1000 ms"), "{error}");
        assert!(took >= DEADLINE && took < DEADLINE + SLACK, "{took:?}");
        drop(held);
        let (again, _) = timed(signals()).await;
        assert!(again.expect("a read once the connections are free").is_empty());
    });
}

/// A read into a network that stops answering (a half-open connection: the proxy passes
/// nothing, closes nothing) fails within its answer deadline, saying the database does not
/// answer; a read against the same database answers before and after (the controls).
#[test]
fn a_read_into_a_silent_network_fails_within_its_answer_deadline() {
    let Some(cluster) = Cluster::start("pg_read_silent") else { return };
    let proxy = Proxy::start(&cluster).expect("proxy");
    let url = format!("{}?{TIMEOUTS}", proxy.url(&cluster.new_database()));
    let store = PgStore::connect(&url, Durability::Immediate).expect("connect");
    create_thread(&store, "t", 1);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let (before, _) = timed(store.thread(&tid("t"))).await;
        assert!(before.expect("a read").is_some(), "the control read before");
        proxy.blackhole();
        let (silent, took) = timed(store.thread(&tid("t"))).await;
        proxy.resume();
        eprintln!("PG_READ_DEADLINE silent took_ms={} {silent:?}", took.as_millis());
        let error = silent.expect_err("a read through a silent network");
        // The read's own deadline, or the store's check of the database, noticed first: either
        // way the read says the database does not answer, and why.
        assert!(matches!(error, Error::Unavailable { .. }), "{error:?}");
        assert!(error.is_transient(), "{error}");
        assert!(took < DEADLINE + SLACK, "{took:?}");
        let resumed = Instant::now();
        loop {
            match store.thread(&tid("t")).await {
                Ok(record) => break assert!(record.is_some()),
                Err(e) => assert!(resumed.elapsed() < Duration::from_secs(10), "{e}"),
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    });
}
