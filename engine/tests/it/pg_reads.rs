//! On PostgreSQL the engine awaits its reads (issue 14: "no blocking call on a tokio worker"):
//! a slow server suspends the tasks that read, never the runtime they run on.
//!
//! An engine on a `current_thread` runtime (one thread for everything: its runners, its
//! timers, its poller, the test) runs threads to their end, a thread parked on input, a
//! control, and its looks for work, while a proxy holds every query of its reader connections
//! for [`READ_DELAY`]. A task of the same runtime ticks every [`TICK`] meanwhile: with the reads
//! awaited, the ticks keep coming (the time lost in gaps of half a read delay or more stays
//! under [`STALLED_MAX`], what a loaded machine's scheduler may take from a thread). A sync read
//! there (as every read was before the async reads) stops the whole runtime for the delay, each
//! time: before this change the engine made 74 of them in this test, and its runtime stood
//! still for 19.6 s at once; and the store counts them (`PgStore::blocking_reads`), which must not move.

use cairn::storage::Maintenance;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cairn::dsl::{Ctx, END, NodeOutput, START, Workflow};
use cairn::storage::PgStore;
use cairn::{Durability, Engine, StartOptions, ThreadStatus};
use cairn_storage_testkit::pg_cluster::Cluster;
use cairn_storage_testkit::pg_proxy::Proxy;

use crate::common::{Effects, Tally, linear};

/// How long the proxy holds each query of a reader connection.
const READ_DELAY: Duration = Duration::from_millis(250);

/// The ticking task's period.
const TICK: Duration = Duration::from_millis(5);

/// A gap between two ticks this long or longer is time the runtime stood still: half the read
/// delay (a runtime blocked by a read misses ticks for a whole delay at least).
const STALL: Duration = Duration::from_millis(125);

/// The most time allowed in stalls, in all: two read delays (a sync read per thread would make
/// many times that; a machine loaded by other builds may stall a thread once or twice).
const STALLED_MAX: Duration = Duration::from_millis(500);

fn asks_input() -> Workflow<Tally> {
    Workflow::<Tally>::builder("ask", 1)
        .node("only", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt("how many?")?;
            Ok(NodeOutput::update((n, "answered".into())))
        })
        .edge(START, "only")
        .edge("only", END)
        .build()
        .unwrap()
}

#[test]
fn an_engine_on_one_runtime_thread_keeps_it_running_while_postgres_reads_are_slow() {
    let Some(cluster) = Cluster::start("pg_reads_never_block_the_runtime") else { return };
    let url = cluster.new_database();
    let proxy = Proxy::start(&cluster).expect("proxy");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = PgStore::connect(&proxy.url(&url), Durability::Immediate).expect("connect");
    let effects = Effects::default();
    let (wf, ask) = (linear(3, effects.clone()), asks_input());
    runtime.block_on(async {
        let engine = Engine::with_store(Arc::new(store.clone()))
            .poll_ms(200)
            .workflow(&wf)
            .workflow(&ask)
            .open()
            .await
            .expect("open on postgres");
        let before = store.blocking_reads();
        proxy.delay_queries("cairn-reader", READ_DELAY);

        let stop = Arc::new(AtomicBool::new(false));
        let ticking = stop.clone();
        let ticker = tokio::spawn(async move {
            let (mut gap, mut stalled, mut ticks) = (Duration::ZERO, Duration::ZERO, 0u64);
            while !ticking.load(Ordering::SeqCst) {
                let at = Instant::now();
                tokio::time::sleep(TICK).await;
                let took = at.elapsed();
                gap = gap.max(took);
                if took >= STALL {
                    stalled += took - TICK;
                }
                ticks += 1;
            }
            (gap, stalled, ticks)
        });

        let started = Instant::now();
        let asked =
            engine.start_json("ask", Tally::default(), StartOptions::id("ask-1")).await.unwrap();
        let mut runs = Vec::new();
        for i in 0..3 {
            let options = StartOptions::id(format!("run-{i}"));
            runs.push(engine.start_json("linear", Tally::default(), options).await.unwrap());
        }
        for run in &runs {
            let out: Tally = run.output().await.expect("a thread runs to its end");
            assert_eq!(out.total, 1 + 2 + 3);
        }
        assert_eq!(asked.wait().await.unwrap().status, ThreadStatus::WaitingInput);
        engine.send_input("ask-1", 7u64).await.expect("input to a parked thread");
        let out: Tally = asked.output().await.unwrap();
        assert_eq!(out.total, 7);
        let result = engine.await_result("run-0", Duration::from_secs(5)).await.unwrap();
        assert_eq!(result.map(|o| o.status), Some(ThreadStatus::Completed));
        // A look for work or two (every 200 ms) reads the wake index meanwhile.
        tokio::time::sleep(READ_DELAY * 2).await;
        let took = started.elapsed();

        stop.store(true, Ordering::SeqCst);
        let (gap, stalled, ticks) = ticker.await.unwrap();
        let blocking = store.blocking_reads() - before;
        proxy.delay_queries("cairn-reader", Duration::ZERO);
        engine.shutdown().await;
        assert!(took >= READ_DELAY * 4, "the reads were slowed: the run took {took:?}");
        assert!(ticks > 0);
        assert!(
            stalled < STALLED_MAX,
            "the runtime stood still for {stalled:?} in all (at most {gap:?} at once) while \
             reads took {READ_DELAY:?} each ({blocking} sync reads on it, {ticks} ticks in \
             {took:?})"
        );
        assert_eq!(blocking, 0, "sync PostgreSQL reads on the engine's runtime");
    });
    assert!(store.verify().unwrap().is_clean());
    assert_eq!(effects.count(), 9);
}
