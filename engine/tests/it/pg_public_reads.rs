//! The engine's public reads on PostgreSQL are awaited (issue 14: "no blocking call on a tokio
//! worker"): a caller on a runtime suspends its task for the round trip, never the runtime.
//!
//! On a `current_thread` runtime (one thread for everything), a task calls every public read
//! of the engine in a loop ([`ROUNDS`] times) while a proxy holds every query of the store's
//! reader connections for [`READ_DELAY`]; another task of the same runtime ticks every [`TICK`].
//! With the reads awaited the ticks keep coming (the time lost in gaps of a read delay or more
//! stays under a [`STALLED_SHARE_MAX`]th of the run), and `cairn_storage_blocking_reads_total`
//! does not move. Before these reads were async, each one stopped the runtime for its round
//! trips: 66 sync reads in this test, the runtime standing still for 36.1 s at once, the whole
//! run (the ticker never ran). After: none, the longest gap 15 ms on an idle machine (390 ms,
//! 3.7 s in gaps of 75 ms or more, when the whole `it` suite and other builds share 2 cores).
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use cairn::storage::SharedDatabase;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cairn::dsl::{Ctx, END, NodeOutput, START, Workflow};
use cairn::storage::{PgStore, Scope, ThreadId};
use cairn::telemetry::storage as store_names;
use cairn::{Durability, Engine, Every, ScheduleSpec, StartOptions, ThreadStatus};
use cairn_storage_testkit::pg_cluster::Cluster;
use cairn_storage_testkit::pg_proxy::Proxy;
use serde_json::json;

use crate::common::Tally;
use crate::telemetry_recorder::TestRecorder;

/// How long the proxy holds each query of a reader connection.
const READ_DELAY: Duration = Duration::from_millis(150);

/// The ticking task's period.
const TICK: Duration = Duration::from_millis(5);

/// A gap between two ticks this long or longer is time the runtime stood still: a read delay
/// (a runtime blocked by a sync read misses ticks for a whole delay at least).
const STALL: Duration = Duration::from_millis(150);

/// The time in stalls must stay under this fraction (1/n) of the run: a sync read per call
/// makes it the whole run; a machine loaded by the other tests and builds takes a few
/// hundred ms from a thread now and then over the run's half minute.
const STALLED_SHARE_MAX: u32 = 10;

/// Times the reads are all made.
const ROUNDS: usize = 2;

const DAY_MS: u64 = 24 * 60 * 60 * 1_000;

fn counted() -> Workflow<Tally> {
    Workflow::<Tally>::builder("counted", 1)
        .node("add", |_s: Arc<Tally>, _ctx: Ctx| async move {
            Ok(NodeOutput::update((5, "added".to_owned())))
        })
        .edge(START, "add")
        .edge("add", END)
        .query("total", |s: &Tally, (): ()| s.total)
        .build()
        .unwrap()
}

#[test]
fn every_public_read_on_one_runtime_thread_leaves_it_running_while_postgres_is_slow() {
    let Some(cluster) = Cluster::start("pg_public_reads_never_block_the_runtime") else { return };
    let url = cluster.new_database();
    let proxy = Proxy::start(&cluster).expect("proxy");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = PgStore::connect(&proxy.url(&url), Durability::Immediate).expect("connect");
    let recorder = Arc::new(TestRecorder::default());
    let wf = counted();
    runtime.block_on(async {
        let engine = Engine::with_store(Arc::new(store.clone()))
            .poll_ms(60_000)
            .health_every_ms(None)
            .metrics_recorder(recorder.clone())
            .workflow(&wf)
            .open()
            .await
            .expect("open on postgres");
        let done = engine.start_json("counted", Tally::default(), StartOptions::id("done-1")).await;
        assert_eq!(done.unwrap().output::<Tally>().await.unwrap().total, 5);
        let spec = ScheduleSpec::new("counted", Every::Interval { ms: DAY_MS }).input(json!({
            "total": 0, "log": []
        }));
        engine.create_schedule("daily", spec).await.expect("a schedule");
        let before = (store.blocking_reads(), recorder.counter(store_names::BLOCKING_READS));
        proxy.delay_queries("cairn-reader", READ_DELAY);

        let stop = Arc::new(AtomicBool::new(false));
        let ticking = stop.clone();
        let spawned = Instant::now();
        let ticker = tokio::spawn(async move {
            // Each gap runs from the tick before (or the spawn) to this task's next turn, the
            // last one included: a runtime that never lets it run is one long stall.
            let (mut last, mut gap, mut stalled, mut ticks) =
                (spawned, Duration::ZERO, Duration::ZERO, 0u64);
            loop {
                let took = last.elapsed();
                gap = gap.max(took);
                if took >= STALL {
                    stalled += took.saturating_sub(TICK);
                }
                if ticking.load(Ordering::SeqCst) {
                    return (gap, stalled, ticks);
                }
                last = Instant::now();
                tokio::time::sleep(TICK).await;
                ticks += 1;
            }
        });

        let started = Instant::now();
        let id = ThreadId::new("done-1").unwrap();
        for _ in 0..ROUNDS {
            let handle = engine.thread("done-1").await.expect("an existing thread");
            assert_eq!(handle.status().await.unwrap(), ThreadStatus::Completed);
            assert_eq!(
                handle.outcome().await.unwrap().output,
                Some(json!({ "total": 5, "log": ["added"] }))
            );
            assert_eq!(engine.query("done-1", "total", json!(null)).await.unwrap(), json!(5));
            assert_eq!(
                engine.result("done-1").await.unwrap().map(|o| o.status),
                Some(ThreadStatus::Completed)
            );
            assert!(engine.resumable().await.unwrap().is_empty());
            assert!(engine.resumable_within(DAY_MS).await.unwrap().is_empty());
            assert_eq!(engine.workflow_of(&id).await.unwrap().id(), "counted");
            assert_eq!(
                engine.schedule("daily").await.unwrap().map(|s| s.name),
                Some("daily".to_owned())
            );
            assert_eq!(engine.schedules().await.unwrap().len(), 1);
            assert!(engine.queues().await.unwrap().is_empty());
            assert!(engine.health().await.unwrap().ok);
            let mut events = handle.events(0).unwrap();
            assert!(events.try_next().await.unwrap().is_some(), "the thread's first event");
            let mut all = engine.subscribe(Scope::All, 0).unwrap();
            assert!(all.try_next().await.unwrap().is_some(), "the database's first event");
            store.tell_driver(&id, "nobody drives it").await.unwrap();
        }
        let took = started.elapsed();

        stop.store(true, Ordering::SeqCst);
        let (gap, stalled, ticks) = ticker.await.unwrap();
        let blocking = store.blocking_reads() - before.0;
        let counted = recorder.counter(store_names::BLOCKING_READS) - before.1;
        proxy.delay_queries("cairn-reader", Duration::ZERO);
        engine.shutdown().await;
        crate::common::report(&format!(
            "PG_PUBLIC_READS rounds={ROUNDS} read_delay_ms={} took_ms={} stalled_ms={} \
             longest_gap_ms={} ticks={ticks} blocking_reads={blocking}",
            READ_DELAY.as_millis(),
            took.as_millis(),
            stalled.as_millis(),
            gap.as_millis()
        ));
        assert!(took >= READ_DELAY * 4, "the reads were slowed: the rounds took {took:?}");
        assert!(
            stalled < took / STALLED_SHARE_MAX,
            "the runtime stood still for {stalled:?} in all (at most {gap:?} at once) while \
             reads took {READ_DELAY:?} each ({blocking} sync reads on it, {ticks} ticks in \
             {took:?})"
        );
        assert!(ticks > 0);
        assert_eq!(blocking, 0, "sync PostgreSQL reads on the caller's runtime");
        assert_eq!(counted, 0, "{} grew", store_names::BLOCKING_READS);
    });
}
