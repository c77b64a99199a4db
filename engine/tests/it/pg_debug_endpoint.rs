//! The endpoint serves `/api/threads/{id}/state` from PostgreSQL while the store's reads are
//! held, without a blocking thread per request (issue 14: the handlers await the debug reads).
//!
//! The server runs on a `current_thread` runtime with one blocking thread. A proxy holds every
//! query of the store's reader connections for [`READ_DELAY`]; [`REQUESTS`] requests sent at
//! once (from threads of their own) take about as long as one: a handler that moved its reads
//! to a blocking thread (each one did before the reads were async) would wait for the one
//! blocking thread, and the requests would take [`REQUESTS`] times one. The answers are those
//! without the delay, and `PgStore::blocking_reads` does not move.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::storage::PgStore;
use cairn::{Durability, Engine, StartOptions, ThreadStatus};
use cairn_storage_testkit::pg_cluster::Cluster;
use cairn_storage_testkit::pg_proxy::Proxy;
use serde_json::Value;

use crate::common::Tally;
use crate::pg_debug_reads::{READ_DELAY, chat};
use cairn_tools::serve::Serve as _;

/// Requests sent to the endpoint at once (as many as the store has reader connections).
const REQUESTS: usize = 4;

/// `GET` of `url` from a thread of its own (not the server's runtime): status and JSON body.
fn get(url: String) -> std::thread::JoinHandle<(u16, Value, Duration)> {
    std::thread::spawn(move || {
        let agent: ureq::Agent =
            ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let started = Instant::now();
        let mut resp = agent.get(&url).call().unwrap();
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)), started.elapsed())
    })
}

/// Waits for `request` without blocking the runtime the server runs on.
async fn answer(
    request: std::thread::JoinHandle<(u16, Value, Duration)>,
) -> (u16, Value, Duration) {
    while !request.is_finished() {
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    request.join().unwrap()
}

#[test]
fn the_endpoint_serves_states_while_postgres_is_slow_without_a_blocking_thread_per_request() {
    let Some(cluster) = Cluster::start("pg_debug_reads_endpoint") else { return };
    let url = cluster.new_database();
    let proxy = Proxy::start(&cluster).expect("proxy");
    // One blocking thread: a handler that moved its reads to one would queue behind the others.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .max_blocking_threads(1)
        .enable_all()
        .build()
        .unwrap();
    let store = PgStore::connect(&proxy.url(&url), Durability::Immediate).expect("connect");
    let wf = chat();
    runtime.block_on(async {
        let (engine, server) = Engine::with_store(Arc::new(store.clone()))
            .poll_ms(60_000)
            .health_every_ms(None)
            .checkpoint_every(Some(1), None)
            .workflow(&wf)
            .serve(([127, 0, 0, 1], 0).into())
            .open()
            .await
            .expect("open on postgres");
        let t =
            engine.start_json("chat", Tally::default(), StartOptions::id("chat-1")).await.unwrap();
        assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
        let state = format!("http://{}/api/threads/chat-1/state?at=3", server.addr());
        let (status, fast, _) = answer(get(state.clone())).await;
        assert_eq!(status, 200, "{fast}");
        assert_eq!(fast["seq"], 3);
        // Every reader connection prepares its statements once (a round trip more, the first
        // time): all of them do it here, before the timed requests.
        let warm: Vec<_> = (0..REQUESTS).map(|_| get(state.clone())).collect();
        for request in warm {
            assert_eq!(answer(request).await.0, 200);
        }

        let before = store.blocking_reads();
        proxy.delay_queries("cairn-reader", READ_DELAY);
        let (status, one, single) = answer(get(state.clone())).await;
        assert_eq!((status, &one), (200, &fast));
        let started = Instant::now();
        let requests: Vec<_> = (0..REQUESTS).map(|_| get(state.clone())).collect();
        for request in requests {
            let (status, body, _) = answer(request).await;
            assert_eq!((status, &body), (200, &fast));
        }
        let together = started.elapsed();
        let blocking = store.blocking_reads() - before;
        proxy.delay_queries("cairn-reader", Duration::ZERO);
        crate::common::report(&format!(
            "PG_DEBUG_READS endpoint_state single_ms={} requests={REQUESTS} together_ms={} \
             blocking_reads={blocking}",
            single.as_millis(),
            together.as_millis()
        ));
        server.shutdown().await;
        engine.shutdown().await;
        assert!(single >= READ_DELAY, "the request was not slowed ({single:?})");
        // Served one after another (a blocking thread each, one to go round) they would take
        // REQUESTS times one request; awaited, they share the time.
        assert!(
            together < single * 2,
            "{REQUESTS} requests at once took {together:?}, one alone {single:?}: they waited \
             for each other"
        );
        assert_eq!(blocking, 0, "sync PostgreSQL reads while serving");
    });
}
