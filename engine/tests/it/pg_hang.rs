//! A network that hangs instead of failing, under a running engine on PostgreSQL: threads are
//! mid-run when a proxy between the engine and the server silently stops passing bytes both
//! ways ([`Proxy::blackhole`]: nothing is closed, every connection, new ones too, just hears
//! nothing) for [`SILENT`], longer than every deadline the URL sets. Meanwhile:
//!
//! - a ticker on the engine's runtime keeps ticking (no worker thread waits on the network);
//! - the HTTP endpoint answers `/api/health`, and says the database is unreachable;
//! - the engine's health report says so within a bound of the deadlines;
//!
//! and once the network is back, every thread completes by itself, each tool call run once
//! (counted by [`Effects`]): nothing lost, nothing run twice.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::storage::pg_cluster::Cluster;
use cairn::storage::pg_proxy::Proxy;
use cairn::storage::{PgStore, Store};
use cairn::{Durability, END, Engine, START, StartOptions};
use serde_json::Value;

use crate::common::{Effects, Tally};

/// Deadlines through the URL, as a user sets them: connections open within 1 s; statements
/// end on the server after 1 s, so the client gives an unanswered one up after 2 s.
const TIMEOUTS: &str = "connect_timeout=1&options=-c%20statement_timeout%3D1000";

/// The most the engine may take to say the database is gone: the answer deadline (2 s), or
/// the listener's check (every 1 s, answered within 1 s), plus room for a loaded machine.
const NOTICE_MAX: Duration = Duration::from_secs(5);

/// How long the network is silent.
const SILENT: Duration = Duration::from_secs(8);

/// Threads run at once, and the steps of each (one tool call each, [`STEP`] long).
const THREADS: usize = 6;
const NODES: usize = 16;
const STEP: Duration = Duration::from_millis(100);

/// The ticker's period, and the longest gap it may see (a worker blocked on the network would
/// stop it for a deadline at least, 1 s).
const TICK: Duration = Duration::from_millis(10);
const GAP_MAX: Duration = Duration::from_millis(500);

/// START -> n0 -> ... -> END, each node one tool call that takes [`STEP`] and counts itself.
fn slow(effects: &Effects) -> Workflow<Tally> {
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
fn get(url: String) -> std::thread::JoinHandle<(u16, Value, Duration)> {
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
    runtime.block_on(async {
        let (engine, server) = Engine::with_store(Arc::new(store.clone()))
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
            handles
                .push(engine.start("slow", Tally::default(), StartOptions::id(id)).await.unwrap());
        }
        // Every thread a few steps in: the network goes silent in the middle of their runs.
        while effects.count() < (THREADS * 3) as u64 {
            tokio::time::sleep(TICK).await;
        }
        let before = effects.count();
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
                    if report.database.as_ref().is_some_and(|d| !d.reachable) {
                        noticed = Some(silent.elapsed());
                        assert!(!report.ok, "an unreachable database is not ok");
                    }
                }
                Err(_) => break,
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
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
            let out: Tally = tokio::time::timeout(Duration::from_secs(25), h.output())
                .await
                .expect("the thread completed once the network was back")
                .expect("completed");
            outputs.push(out);
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
             tool_runs={runs}/{expected} double_runs={} recovered_ms={} total_ms={}",
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
        server.shutdown().await;
        engine.shutdown().await;
    });
    assert!(store.verify().unwrap().is_clean());
}
