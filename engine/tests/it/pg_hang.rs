//! A network that hangs instead of failing, under a running engine on PostgreSQL: threads are
//! mid-run when a proxy between the engine and the server silently stops passing bytes both
//! ways ([`Proxy::blackhole`]: nothing is closed, every connection, new ones too, just hears
//! nothing) for [`SILENT`], longer than every deadline the URL sets. Meanwhile:
//!
//! - a ticker on the engine's runtime keeps ticking (no worker thread waits on the network);
//! - the HTTP endpoint answers `/api/health`, and says the database is unreachable;
//! - the engine's health report says so within a bound of the deadlines, and so does the
//!   gauge `cairn_database_up`;
//!
//! and once the network is back, every thread completes by itself, each tool call run once
//! (counted by [`Effects`]): nothing lost, nothing run twice.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use cairn::storage::{Maintenance, ThreadLog};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::storage::PgStore;
use cairn::{Durability, END, Engine, START, StartOptions, ThreadHandle};
use cairn_storage_testkit::pg_cluster::Cluster;
use cairn_storage_testkit::pg_proxy::Proxy;
use serde_json::Value;

use crate::common::{Effects, Tally};
use crate::telemetry_recorder::TestRecorder;
use cairn_tools::serve::Serve as _;

/// Deadlines through the URL, as a user sets them: connections open within 1 s; statements
/// end on the server after 1 s, so the client gives an unanswered one up after 2 s.
const TIMEOUTS: &str = "connect_timeout=1&options=-c%20statement_timeout%3D1000";

/// The most the engine may take to say the database is gone: the answer deadline (2 s), or
/// the listener's check (every 1 s, answered within 1 s), plus room for a loaded machine.
const NOTICE_MAX: Duration = Duration::from_secs(5);

/// The most the silent engine may take, once the network is back, to have every write it held
/// refused and stop driving: its writer reconnects within about a second; the rest is room
/// for a loaded machine (a bound on a wait for a condition, not a time waited).
const SETTLE_MAX: Duration = Duration::from_secs(30);

/// How long the network is silent.
pub(crate) const SILENT: Duration = Duration::from_secs(8);

/// Threads run at once, and the steps of each (one tool call each, [`STEP`] long).
pub(crate) const THREADS: usize = 6;
pub(crate) const NODES: usize = 16;
const STEP: Duration = Duration::from_millis(100);

/// The ticker's period, and the longest gap it may see (a worker blocked on the network would
/// stop it for a deadline at least, 1 s).
pub(crate) const TICK: Duration = Duration::from_millis(10);
pub(crate) const GAP_MAX: Duration = Duration::from_millis(500);

/// START -> n0 -> ... -> END, each node one tool call that takes [`STEP`] and counts itself.
pub(crate) fn slow(effects: &Effects) -> Workflow<Tally> {
    let mut b = Workflow::<Tally>::builder("slow", 1);
    for i in 0..NODES {
        let fx = effects.clone();
        b = b.node(format!("n{i}"), move |_s: Arc<Tally>, ctx: Ctx| {
            let fx = fx.clone();
            async move {
                let v: u64 = ctx
                    .tool("step", i as u64, move |x: u64, _| async move {
                        tokio::time::sleep(STEP).await;
                        fx.0.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, cairn::ToolError>(x + 1)
                    })
                    .await?;
                Ok(NodeOutput::update((v, format!("n{i}"))))
            }
        });
    }
    b = b.edge(START, "n0");
    for i in 1..NODES {
        b = b.edge(format!("n{}", i - 1), format!("n{i}"));
    }
    b.edge(format!("n{}", NODES - 1), END).build().expect("slow workflow")
}

/// `GET url` on a thread of its own (a client that gives up after 15 s): the status, the body,
/// and how long the answer took.
pub(crate) fn get(url: String) -> std::thread::JoinHandle<(u16, Value, Duration)> {
    std::thread::spawn(move || {
        let agent: ureq::Agent = ureq::Agent::config_builder()
            .http_status_as_error(false)
            .timeout_global(Some(Duration::from_secs(15)))
            .build()
            .into();
        let started = Instant::now();
        match agent.get(&url).call() {
            Ok(mut resp) => {
                let status = resp.status().as_u16();
                let text = resp.body_mut().read_to_string().unwrap_or_default();
                let body = serde_json::from_str(&text).unwrap_or(Value::String(text));
                (status, body, started.elapsed())
            }
            Err(e) => (0, Value::String(e.to_string()), started.elapsed()),
        }
    })
}

/// Ticks every [`TICK`] until `stop`; the longest time between two ticks.
pub(crate) async fn ticker(stop: Arc<AtomicBool>) -> Duration {
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

/// The thread's output, waited for within `limit` from now: a wait that ends because the
/// database does not answer (yet: `Error::Unavailable`, as a caller hears during an outage)
/// is made again, as a caller would once the database is back.
pub(crate) async fn output_once_back(handle: &ThreadHandle, limit: Duration) -> Tally {
    let started = Instant::now();
    loop {
        let left = limit.saturating_sub(started.elapsed());
        let output = tokio::time::timeout(left, handle.output::<Tally>()).await;
        match output.expect("the thread completed once the database was back") {
            Ok(out) => return out,
            Err(cairn::Error::Storage(cairn::storage::Error::Unavailable { .. })) => {
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
            Err(e) => panic!("{}: {e}", handle.id()),
        }
    }
}

#[test]
fn an_engine_rides_out_a_silent_network_noticing_it_and_answering_meanwhile() {
    let Some(cluster) = Cluster::start("pg_hang_engine") else { return };
    let proxy = Proxy::start(&cluster).expect("proxy");
    let url = format!("{}?{TIMEOUTS}", proxy.url(&cluster.new_database()));
    let store = PgStore::connect(&url, Durability::Immediate).expect("connect");
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let effects = Effects::default();
    let wf = slow(&effects);
    let test_started = Instant::now();
    let recorder = Arc::new(TestRecorder::default());
    let up = || recorder.gauge(cairn::telemetry::storage::DATABASE_UP);
    runtime.block_on(async {
        let (engine, server) = Engine::with_store(Arc::new(store.clone()))
            .metrics_recorder(recorder.clone())
            .seed(27)
            .poll_ms(200)
            .health_every_ms(None)
            .workflow(&wf)
            .serve(([127, 0, 0, 1], 0).into())
            .open()
            .await
            .expect("open on postgres");
        let stop = Arc::new(AtomicBool::new(false));
        let ticking = tokio::spawn(ticker(stop.clone()));
        let mut handles = Vec::new();
        for t in 0..THREADS {
            let id = format!("t{t}");
            handles.push(
                engine.start_json("slow", Tally::default(), StartOptions::id(id)).await.unwrap(),
            );
        }
        // Every thread a few steps in: the network goes silent in the middle of their runs.
        while effects.count() < (THREADS * 3) as u64 {
            tokio::time::sleep(TICK).await;
        }
        let before = effects.count();
        assert_eq!(up(), 1.0, "the database answers before the silence");
        proxy.blackhole();
        let silent = Instant::now();

        // The engine's own report says the database is gone.
        let mut noticed = None;
        while noticed.is_none() && silent.elapsed() < SILENT {
            // Bounded here too: a report that hangs with the network must fail the test, not
            // hang it.
            let left = SILENT.saturating_sub(silent.elapsed());
            match tokio::time::timeout(left, engine.health()).await {
                Ok(report) => {
                    let report = report.expect("a health report while silent");
                    // The report may say so before the store does (a read of its pass left
                    // unanswered); the gauge follows the store.
                    if report.database.as_ref().is_some_and(|d| !d.reachable) && up() == 0.0 {
                        noticed = Some(silent.elapsed());
                        assert!(!report.ok, "an unreachable database is not ok");
                    }
                }
                Err(_) => break,
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        let up_while_silent = up();
        let failures = recorder.counter(cairn::telemetry::storage::DATABASE_FAILURES);
        // The endpoint answers meanwhile, and says the same.
        let health = format!("http://{}/api/health", server.addr());
        let asked = tokio::task::spawn_blocking(move || get(health).join().unwrap());
        let (status, body, took) = asked.await.unwrap();
        let during = effects.count() - before;
        let left = SILENT.saturating_sub(silent.elapsed());
        tokio::time::sleep(left).await;
        proxy.resume();
        let resumed = Instant::now();

        let mut outputs = Vec::new();
        for h in handles {
            outputs.push(output_once_back(&h, Duration::from_secs(25)).await);
        }
        let recovered = resumed.elapsed();
        let after = engine.health().await.expect("health after");
        stop.store(true, Ordering::SeqCst);
        let max_gap = ticking.await.unwrap();
        let runs = effects.count();
        let expected = (THREADS * NODES) as u64;
        crate::common::report(&format!(
            "PG_HANG engine noticed_ms={} health_http_status={status} health_http_ms={} \
             max_tick_gap_ms={} tool_runs_while_silent={during} threads_completed={}/{THREADS} \
             tool_runs={runs}/{expected} double_runs={} recovered_ms={} total_ms={} \
             database_failures={failures}",
            noticed.map_or(-1, |d| d.as_millis() as i64),
            took.as_millis(),
            max_gap.as_millis(),
            outputs.len(),
            runs.saturating_sub(expected),
            recovered.as_millis(),
            test_started.elapsed().as_millis()
        ));
        let noticed = noticed.expect("the health report never said the database was gone");
        assert!(noticed <= NOTICE_MAX, "noticed after {noticed:?}");
        assert_eq!(status, 200, "{body}");
        assert_eq!(body["database"]["reachable"], false, "{body}");
        assert!(body["database"]["last_error"].is_string(), "{body}");
        assert!(took < Duration::from_secs(3), "/api/health took {took:?} while silent");
        assert!(max_gap < GAP_MAX, "the ticker stopped for {max_gap:?}");
        for out in &outputs {
            assert_eq!(out.log.len(), NODES, "every step of every thread: {out:?}");
        }
        assert_eq!(runs, expected, "each tool call ran once: none lost, none twice");
        assert!(after.database.as_ref().is_some_and(|d| d.reachable), "{after:?}");
        assert_eq!(up_while_silent, 0.0, "cairn_database_up while silent");
        assert!(failures > 0, "no failed connection counted");
        assert_eq!(up(), 1.0, "cairn_database_up once the network is back");
        server.shutdown().await;
        engine.shutdown().await;
    });
    assert!(store.verify().unwrap().is_clean());
}

/// The same silence, with a second engine on a direct connection to the same database: the
/// first engine's leases lapse while its network is silent, the second takes its threads over
/// and finishes them; once the network is back, the first engine's late writes (the groups its
/// writer held through the silence, run again on a fresh connection) are refused: fenced by
/// the leases and the threads' guards, nothing of them in the log. A tool call whose result the
/// first engine had not made durable when the network went silent runs again under the second
/// (at least once, as after a crash): at most one per thread.
///
/// The takeover waits for the rows the first engine's writer had locked in its open
/// transaction: the server ends that transaction once it has sat idle for
/// `idle_in_transaction_session_timeout` (the answer deadline, 2 s here, or
/// `write::IDLE_IN_GROUP_MAX`, 10 s, whichever is shorter), the network being silent; the
/// second engine then takes the lapsed leases. After the resume the test waits for what it
/// checks (a runner of the silent engine fenced, none of its threads driven by it), bounded
/// by [`SETTLE_MAX`].
#[test]
fn a_second_engine_takes_over_and_the_silent_engines_late_writes_are_fenced() {
    const LEASE_TTL_MS: u64 = 1_500;
    let Some(cluster) = Cluster::start("pg_hang_takeover") else { return };
    let proxy = Proxy::start(&cluster).expect("proxy");
    let direct = cluster.new_database();
    let url = format!("{}?{TIMEOUTS}", proxy.url(&direct));
    let silent_store = PgStore::connect(&url, Durability::Immediate).expect("connect");
    let other_store = PgStore::connect(&direct, Durability::Immediate).expect("connect");
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let effects = Effects::default();
    let wf = slow(&effects);
    runtime.block_on(async {
        let open = |store: &PgStore, seed: u64| {
            Engine::with_store(Arc::new(store.clone()))
                .seed(seed)
                .lease_ttl_ms(LEASE_TTL_MS)
                .poll_ms(100)
                .health_every_ms(None)
                .workflow(&wf)
                .open()
        };
        let first = open(&silent_store, 27).await.expect("open the first engine");
        for t in 0..THREADS {
            first
                .start_json("slow", Tally::default(), StartOptions::id(format!("t{t}")))
                .await
                .unwrap();
        }
        while effects.count() < (THREADS * 3) as u64 {
            tokio::time::sleep(TICK).await;
        }
        proxy.blackhole();
        let silent = Instant::now();
        // The second engine finds the threads once their leases lapse, and finishes them.
        let second = open(&other_store, 28).await.expect("open the second engine");
        let mut outputs = Vec::new();
        for t in 0..THREADS {
            let handle = second.thread(&format!("t{t}")).await.unwrap();
            let Ok(out) = tokio::time::timeout(Duration::from_secs(20), handle.output()).await
            else {
                let state = takeover_state(&other_store, &direct).await;
                panic!("t{t} was not taken over and finished within 20 s of the silence:\n{state}");
            };
            let out: Tally = out.expect("completed");
            outputs.push(out);
        }
        let taken_over_ms = silent.elapsed().as_millis();
        let runs_before_resume = effects.count();
        tokio::time::sleep(SILENT.saturating_sub(silent.elapsed())).await;
        proxy.resume();
        // The first engine's writer runs what it held; every write of it is refused. Waited
        // for as it is meant, not for a fixed time (3 s and 500 ms raced the writer's
        // reconnection on a loaded machine, and a runner still driving after them could run a
        // tool unseen): until a runner of it was fenced and it drives none of the threads.
        let resumed = Instant::now();
        let driven = |engine: &Engine| {
            let ids = (0..THREADS).map(|t| cairn::ThreadId::new(format!("t{t}")).unwrap());
            ids.filter(|id| engine.is_driven(id)).count()
        };
        while first.fenced_runners() == 0 || driven(&first) > 0 {
            assert!(
                resumed.elapsed() < SETTLE_MAX,
                "the silent engine did not settle within {SETTLE_MAX:?} of the resume: {} fenced \
                 runners, {} threads still driven",
                first.fenced_runners(),
                driven(&first)
            );
            tokio::time::sleep(TICK).await;
        }
        let runs = effects.count();
        let expected = (THREADS * NODES) as u64;
        let settled_ms = resumed.elapsed().as_millis();
        crate::common::report(&format!(
            "PG_HANG takeover taken_over_ms={taken_over_ms} settled_ms={settled_ms} fenced_runners={} \
             tool_runs={runs}/{expected} runs_after_resume={} double_runs={}",
            first.fenced_runners(),
            runs - runs_before_resume,
            runs.saturating_sub(expected)
        ));
        for out in &outputs {
            assert_eq!(out.log.len(), NODES, "every step once in the state: {out:?}");
        }
        assert!(first.fenced_runners() > 0, "the silent engine's runners were not fenced");
        assert_eq!(runs, runs_before_resume, "the fenced engine ran a tool after the resume");
        assert!(
            runs <= expected + THREADS as u64,
            "{runs} tool runs for {expected} calls: more than one in flight per thread ran again"
        );
        for t in 0..THREADS {
            let id = cairn::storage::ThreadId::new(format!("t{t}")).unwrap();
            let events =
                other_store.read_since(&id, cairn::storage::Seq(0), 10_000).wait().unwrap();
            let seqs: Vec<u64> = events.iter().map(|e| e.bookmark.seq.0).collect();
            assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>(), "t{t}: no gap, no dup");
        }
        second.shutdown().await;
        first.shutdown().await;
    });
    assert!(other_store.verify().unwrap().is_clean());
}

/// What held a take-over up, for a failure's message: each thread as the database has it
/// (status, lease, last seq), and what each session on the database is doing.
async fn takeover_state(store: &PgStore, url: &str) -> String {
    use cairn::storage::Catalog;
    let mut out = String::new();
    for t in 0..THREADS {
        let id = cairn::storage::ThreadId::new(format!("t{t}")).unwrap();
        let record = store.thread(&id).await;
        let record = record.map(|r| r.map(|r| (r.status, r.lease, r.last.map(|b| b.seq.0))));
        out.push_str(&format!("t{t}: {record:?}\n"));
    }
    let url = url.to_owned();
    let sessions = tokio::task::spawn_blocking(move || {
        let mut admin = postgres::Client::connect(&url, postgres::NoTls)?;
        admin.query(
            "SELECT application_name, state, wait_event_type, wait_event, \
             (now() - xact_start)::text, left(query, 100) \
             FROM pg_stat_activity WHERE datname = current_database()",
            &[],
        )
    })
    .await
    .expect("the look at the sessions ran");
    match sessions {
        Ok(rows) => {
            for row in rows {
                let cols: Vec<Option<String>> = (0..6).map(|i| row.get(i)).collect();
                out.push_str(&format!("session: {cols:?}\n"));
            }
        }
        Err(e) => out.push_str(&format!("sessions: {e}\n")),
    }
    out
}
