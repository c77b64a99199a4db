//! A database that goes away under a running engine on PostgreSQL with the default deadlines
//! (the URL sets none): through a network that silently stops passing bytes
//! ([`Proxy::blackhole`]), and with the server stopped (`pg_ctl stop`) and started again.
//! Meanwhile the engine answers at once from what it knows: its health within a second, a read
//! that needs the database with `Unavailable` (HTTP 503) naming why, a caller waiting for a
//! thread with the same error; and once the database is back the threads go on by themselves,
//! every step once in their state, their logs without a gap or a duplicate.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::storage::{Backend, Maintenance, PgStore, Seq, ThreadId, ThreadLog};
use cairn::{Durability, Engine, StartOptions};
use cairn_storage_testkit::pg_cluster::Cluster;
use cairn_storage_testkit::pg_proxy::Proxy;
use serde_json::Value;

use crate::common::{Effects, Tally};
use crate::pg_hang::{NODES, THREADS, TICK, get, output_once_back, slow};
use crate::telemetry_recorder::TestRecorder;
use cairn_tools::serve::Serve as _;

/// The most the store may take to say a silent database is gone with its default deadlines:
/// its check every 1 s, unanswered for 2 s (`PG_CHECK_EVERY`, `PG_CHECK_ANSWER_MAX`), plus
/// room for a loaded machine. Before, the check ran every 5 s within the connect timeout
/// (10 s): 14 s.
const NOTICE_MAX: Duration = Duration::from_secs(5);

/// The most a health report may take, whatever the database does (its reads wait for it
/// `HEALTH_DATABASE_WAIT_MS`, 750 ms).
const HEALTH_MAX: Duration = Duration::from_secs(1);

/// The most a read that needs a database the engine knows is gone may take.
const REFUSED_MAX: Duration = Duration::from_secs(1);

/// How long the database is away: past the 5 s writes wait for it
/// (`PG_WRITE_WAIT_UNAVAILABLE_MAX`), so that every way of failing is taken.
const AWAY: Duration = Duration::from_secs(10);

/// `GET url` answered on a blocking thread (the runtime's workers stay free).
async fn ask(url: String) -> (u16, Value, Duration) {
    tokio::task::spawn_blocking(move || get(url).join().unwrap()).await.unwrap()
}

/// Each thread's log has seqs 1..=n: no gap, no duplicate.
fn assert_logs_whole(store: &PgStore) {
    for t in 0..THREADS {
        let id = ThreadId::new(format!("t{t}")).unwrap();
        let events = store.read_since(&id, Seq(0), 10_000).wait().unwrap();
        let seqs: Vec<u64> = events.iter().map(|e| e.bookmark.seq.0).collect();
        assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "t{t}: no gap, no dup");
    }
}

#[test]
fn with_default_deadlines_a_silent_network_is_noticed_in_seconds_and_reads_answer_503() {
    let Some(cluster) = Cluster::start("pg_outage_silent") else { return };
    let proxy = Proxy::start(&cluster).expect("proxy");
    // The URL sets no deadline: the defaults are what is tested.
    let url = proxy.url(&cluster.new_database());
    let store = PgStore::connect(&url, Durability::Immediate).expect("connect");
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let effects = Effects::default();
    let wf = slow(&effects);
    let recorder = Arc::new(TestRecorder::default());
    let up = || recorder.gauge(cairn::telemetry::storage::DATABASE_UP);
    runtime.block_on(async {
        let (engine, server) = Engine::with_store(Arc::new(store.clone()))
            .metrics_recorder(recorder.clone())
            .seed(31)
            .poll_ms(200)
            .health_every_ms(None)
            .workflow(&wf)
            .serve(([127, 0, 0, 1], 0).into())
            .open()
            .await
            .expect("open on postgres");
        let mut handles = Vec::new();
        for t in 0..THREADS {
            let id = StartOptions::id(format!("t{t}"));
            handles.push(engine.start_json("slow", Tally::default(), id).await.unwrap());
        }
        while effects.count() < (THREADS * 3) as u64 {
            tokio::time::sleep(TICK).await;
        }
        let (health, threads) = (
            format!("http://{}/api/health", server.addr()),
            format!("http://{}/api/threads?limit=5", server.addr()),
        );
        proxy.blackhole();
        let silent = Instant::now();
        // A read asked as the network goes silent waits until the engine knows, no longer.
        let early = tokio::spawn(ask(threads.clone()));
        // The health report, asked again and again until the store has noticed (and logged)
        // the loss: each answer within a second, saying the database does not answer, and why.
        let (mut noticed, mut health_slowest, mut asked) = (None, Duration::ZERO, 0);
        let (mut health_said, mut last) = (None, Value::Null);
        while noticed.is_none() && silent.elapsed() < AWAY {
            let (status, body, took) = ask(health.clone()).await;
            assert_eq!(status, 200, "{body}");
            health_slowest = health_slowest.max(took);
            asked += 1;
            let gone = body["database"]["reachable"] == false;
            if health_said.is_none() && gone && body["database"]["last_error"].is_string() {
                health_said = Some(silent.elapsed());
            }
            if store.database().is_some_and(|d| !d.reachable) {
                noticed = Some(silent.elapsed());
            }
            last = body;
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
        let (early_status, early_body, early_took) = early.await.unwrap();
        // Known gone: a read is refused at once, naming why.
        let (status, body, refused_in) = ask(threads.clone()).await;
        let up_while_away = up();
        tokio::time::sleep(AWAY.saturating_sub(silent.elapsed())).await;
        proxy.resume();
        let resumed = Instant::now();
        let mut outputs = Vec::new();
        for h in &handles {
            outputs.push(output_once_back(h, Duration::from_secs(40)).await);
        }
        let recovered = resumed.elapsed();
        let (after_status, after_body, _) = ask(threads.clone()).await;
        let runs = effects.count();
        let expected = (THREADS * NODES) as u64;
        crate::common::report(&format!(
            "PG_OUTAGE silent defaults noticed_ms={} health_said_ms={} health_answers={asked} \
             health_slowest_ms={} early_read_status={early_status} early_read_ms={} \
             refused_status={status} refused_ms={} recovered_ms={} tool_runs={runs}/{expected} \
             refused_with={:?}",
            noticed.map_or(-1, |d| d.as_millis() as i64),
            health_said.map_or(-1, |d| d.as_millis() as i64),
            health_slowest.as_millis(),
            early_took.as_millis(),
            refused_in.as_millis(),
            recovered.as_millis(),
            body["error"].as_str().unwrap_or_default(),
        ));
        let noticed = noticed.unwrap_or_else(|| panic!("never noticed: {last}"));
        assert!(noticed <= NOTICE_MAX, "noticed after {noticed:?}");
        let said = health_said.unwrap_or_else(|| panic!("health never said so: {last}"));
        assert!(said <= noticed + HEALTH_MAX, "health said so after {said:?}");
        assert!(health_slowest < HEALTH_MAX, "a health report took {health_slowest:?}");
        assert_eq!(early_status, 503, "{early_body}");
        assert!(early_took <= NOTICE_MAX + REFUSED_MAX, "the early read took {early_took:?}");
        assert_eq!(status, 503, "{body}");
        assert!(refused_in < REFUSED_MAX, "refused after {refused_in:?}");
        let why = body["error"].as_str().unwrap_or_default();
        assert!(why.contains("the database does not answer: "), "{body}");
        assert_eq!(up_while_away, 0.0, "cairn_database_up while away");
        assert_eq!(after_status, 200, "{after_body}");
        for out in &outputs {
            assert_eq!(out.log.len(), NODES, "every step of every thread once: {out:?}");
        }
        // A tool call whose result a refused write carried runs again (at least once, as
        // after a crash): at most the one in flight per thread.
        assert!(runs <= expected + THREADS as u64, "{runs} tool runs for {expected} calls");
        assert_eq!(up(), 1.0, "cairn_database_up once the network is back");
        server.shutdown().await;
        engine.shutdown().await;
    });
    assert_logs_whole(&store);
    assert!(store.verify().unwrap().is_clean());
}

#[test]
fn a_server_stopped_for_a_while_fails_waiters_with_the_cause_and_the_engine_carries_on() {
    let Some(cluster) = Cluster::start("pg_outage_stopped") else { return };
    let store = PgStore::connect(&cluster.new_database(), Durability::Immediate).expect("connect");
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let effects = Effects::default();
    let wf = slow(&effects);
    runtime.block_on(async {
        let engine = Engine::with_store(Arc::new(store.clone()))
            .seed(32)
            .poll_ms(200)
            .health_every_ms(None)
            .workflow(&wf)
            .open()
            .await
            .expect("open on postgres");
        let mut handles = Vec::new();
        for t in 0..THREADS {
            let id = StartOptions::id(format!("t{t}"));
            handles.push(engine.start_json("slow", Tally::default(), id).await.unwrap());
        }
        // Every thread a step or so in (of 16 of 100 ms each): none ends before the stop.
        while effects.count() < THREADS as u64 {
            tokio::time::sleep(TICK).await;
        }
        // Callers waiting for each thread when the server goes.
        let waiters: Vec<_> = handles
            .iter()
            .map(|h| {
                let h = h.clone();
                tokio::spawn(async move {
                    let waited = h.output::<Tally>().await;
                    (waited, Instant::now())
                })
            })
            .collect();
        let stopping = Instant::now();
        let c = &cluster;
        tokio::task::block_in_place(|| c.stop()).expect("stop the server");
        let stopped = Instant::now();
        let (mut waited_for, mut heard) = (Duration::ZERO, String::new());
        for w in waiters {
            let (waited, at) =
                tokio::time::timeout(Duration::from_secs(30), w).await.expect("a waiter").unwrap();
            match waited {
                Err(cairn::Error::Storage(cairn::storage::Error::Unavailable {
                    cause, ..
                })) => {
                    assert!(!cause.is_empty());
                    heard = cause;
                }
                other => panic!("a waiter heard {other:?}"),
            }
            waited_for = waited_for.max(at.duration_since(stopped));
        }
        // Known gone: health, a read and a start answer at once, with the cause.
        let asked = Instant::now();
        let health = engine.health().await.expect("a health report while stopped");
        let health_in = asked.elapsed();
        let asked = Instant::now();
        let read = engine.thread("t0").await.map(drop);
        let read_in = asked.elapsed();
        let asked = Instant::now();
        let started = engine.start_json("slow", Tally::default(), StartOptions::id("late")).await;
        let start_in = asked.elapsed();
        let away = AWAY.saturating_sub(stopping.elapsed());
        tokio::time::sleep(away).await;
        tokio::task::block_in_place(|| c.start_server()).expect("start the server again");
        let back = Instant::now();
        let mut outputs = Vec::new();
        for h in &handles {
            outputs.push(output_once_back(h, Duration::from_secs(40)).await);
        }
        let recovered = back.elapsed();
        let after = engine.health().await.expect("health after");
        let late = engine.start_json("slow", Tally::default(), StartOptions::id("late")).await;
        let runs = effects.count();
        let expected = (THREADS * NODES) as u64;
        crate::common::report(&format!(
            "PG_OUTAGE stopped waiters_failed_after_ms={} health_ms={} read_ms={} start_ms={} \
             recovered_ms={} tool_runs={runs}/{expected} waiter_heard={heard:?}",
            waited_for.as_millis(),
            health_in.as_millis(),
            read_in.as_millis(),
            start_in.as_millis(),
            recovered.as_millis(),
        ));
        // Writes wait 5 s for the database, waiters as long; then they hear why.
        assert!(waited_for < Duration::from_secs(8), "waiters answered after {waited_for:?}");
        let database = health.database.as_ref().expect("a database in the report");
        assert!(!database.reachable && database.last_error.is_some(), "{health:?}");
        assert!(!health.ok);
        assert!(health_in < HEALTH_MAX, "health took {health_in:?}");
        assert!(
            matches!(read, Err(cairn::Error::Storage(cairn::storage::Error::Unavailable { .. }))),
            "{read:?}"
        );
        assert!(read_in < REFUSED_MAX, "a read took {read_in:?}");
        assert!(
            matches!(
                started,
                Err(cairn::Error::Storage(cairn::storage::Error::Unavailable { .. }))
            ),
            "{:?}",
            started.map(|h| h.id().clone())
        );
        assert!(start_in < REFUSED_MAX, "a start took {start_in:?}");
        for out in &outputs {
            assert_eq!(out.log.len(), NODES, "every step of every thread once: {out:?}");
        }
        assert!(runs <= expected + THREADS as u64, "{runs} tool runs for {expected} calls");
        assert!(after.database.as_ref().is_some_and(|d| d.reachable), "{after:?}");
        late.expect("a start once the server is back");
        engine.shutdown().await;
    });
    assert_logs_whole(&store);
    assert!(store.verify().unwrap().is_clean());
}
