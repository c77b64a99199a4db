//! The debug reads on PostgreSQL are awaited (issue 14: "no blocking call on a tokio worker"):
//! `state_at`, `diff`, `trace`, `node_runs` and `export_bundle` suspend their task for each
//! round trip, so another task of a one-thread runtime keeps running (the endpoint's handlers:
//! `pg_debug_endpoint.rs`).
//!
//! A proxy holds every query of the store's reader connections for [`READ_DELAY`]. Each read
//! runs on a `current_thread` runtime beside a task that ticks every [`TICK`] (missed ticks
//! skipped, not caught up): a read that blocked the runtime (every one of these before they were
//! async) lets it tick not once while it runs; an awaited one lets it tick all along. Each read
//! returns what it returns without the delay, and `PgStore::blocking_reads` does not move.

use cairn::storage::Catalog;
use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use cairn::dsl::{Ctx, Message, NodeOutput, Workflow};
use cairn::storage::PgStore;
use cairn::{Durability, END, Engine, START, StartOptions, ThreadStatus};
use cairn_storage_testkit::pg_cluster::Cluster;
use cairn_storage_testkit::pg_proxy::Proxy;
use cairn_tools::debug::{ExportOptions, TraceQuery, TraceScope};

use crate::common::Tally;

/// How long the proxy holds each query of a reader connection.
pub(crate) const READ_DELAY: Duration = Duration::from_millis(300);

/// The ticking task's period.
const TICK: Duration = Duration::from_millis(10);

/// A read must let the ticker tick at least once per this many periods it takes (an awaited
/// read lets it tick nearly every period; a blocking one not once).
const TICKS_PER_PERIODS: u32 = 4;

/// Three steps, each saying something on one conversation: states to diff, messages to trace,
/// node runs, and a checkpoint after every step for the bundle.
pub(crate) fn chat() -> Workflow<Tally> {
    let step = |name: &'static str, to: &'static str| {
        move |_s: Arc<Tally>, ctx: Ctx| async move {
            ctx.message(
                Message::new(name, format!("{name} to {to}")).to(to).correlation_id("conv"),
            );
            Ok(NodeOutput::update((1, name.to_owned())))
        }
    };
    Workflow::<Tally>::builder("chat", 1)
        .node("ask", step("ask", "plan"))
        .node("plan", step("plan", "code"))
        .node("code", step("code", "ask"))
        .edge(START, "ask")
        .edge("ask", "plan")
        .edge("plan", "code")
        .edge("code", END)
        .build()
        .unwrap()
}

/// Runs `read` beside a task ticking every [`TICK`]; its answer, the ticks while it ran and how
/// long it took.
async fn ticking<T>(read: impl Future<Output = T>) -> (T, u64, Duration) {
    let stop = Arc::new(AtomicBool::new(false));
    let ticking = stop.clone();
    let ticker = tokio::spawn(async move {
        let mut interval = tokio::time::interval(TICK);
        interval.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        interval.tick().await;
        let mut ticks = 0u64;
        loop {
            interval.tick().await;
            if ticking.load(Ordering::SeqCst) {
                return ticks;
            }
            ticks += 1;
        }
    });
    // The ticker starts (its first tick is at once) before the read does.
    tokio::task::yield_now().await;
    let started = Instant::now();
    let out = read.await;
    let took = started.elapsed();
    stop.store(true, Ordering::SeqCst);
    (out, ticker.await.unwrap(), took)
}

/// Checks one timed read: slowed by the proxy, the ticker running all along.
fn check(what: &str, ticks: u64, took: Duration) {
    crate::common::report(&format!(
        "PG_DEBUG_READS read={what} took_ms={} ticks={ticks}",
        took.as_millis()
    ));
    assert!(took >= READ_DELAY, "{what}: the read was not slowed ({took:?})");
    let periods = u64::try_from(took.as_millis() / TICK.as_millis()).unwrap();
    assert!(
        ticks * u64::from(TICKS_PER_PERIODS) >= periods,
        "{what}: the runtime ticked {ticks} times in {took:?} ({periods} periods of {TICK:?}): \
         the read blocked its thread"
    );
}

/// What the debug reads answer for `chat-1`, the bundle's export time set to 0.
#[derive(Debug, PartialEq)]
struct Answers {
    state: cairn_tools::debug::StateView,
    diff: Vec<cairn_tools::debug::Change>,
    session: Vec<cairn_tools::debug::TracedMessage>,
    correlated: Vec<cairn_tools::debug::TracedMessage>,
    runs: Vec<cairn_core::node_runs::NodeRun>,
    bundle: cairn_tools::debug::Bundle,
}

fn session() -> TraceQuery {
    TraceQuery::new(TraceScope::Threads(vec!["chat-1".into()]))
}

fn correlated() -> TraceQuery {
    let mut q = TraceQuery::new(TraceScope::All);
    q.correlation_id = Some("conv".into());
    q
}

fn bundle_options() -> ExportOptions {
    ExportOptions { include_checkpoints: true, ..ExportOptions::default() }
}

/// Every debug read once, untimed.
async fn answers(engine: &Engine, seq: u64, last: u64) -> Answers {
    let mut bundle = cairn_tools::Operator::new(engine)
        .export_bundle("chat-1", &bundle_options())
        .await
        .unwrap();
    bundle.timestamp = 0;
    Answers {
        state: cairn_tools::Operator::new(engine).state_at("chat-1", Some(seq)).await.unwrap(),
        diff: cairn_tools::Operator::new(engine).diff("chat-1", seq, last).await.unwrap(),
        session: cairn_tools::Operator::new(engine).trace(&session()).await.unwrap(),
        correlated: cairn_tools::Operator::new(engine).trace(&correlated()).await.unwrap(),
        runs: cairn_tools::Operator::new(engine).node_runs("chat-1").await.unwrap(),
        bundle,
    }
}

#[test]
fn debug_reads_on_one_runtime_thread_leave_it_running_while_postgres_is_slow() {
    let Some(cluster) = Cluster::start("pg_debug_reads_never_block_the_runtime") else { return };
    let url = cluster.new_database();
    let proxy = Proxy::start(&cluster).expect("proxy");
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let store = PgStore::connect(&proxy.url(&url), Durability::Immediate).expect("connect");
    let wf = chat();
    runtime.block_on(async {
        let engine = Engine::with_store(Arc::new(store.clone()))
            .poll_ms(60_000)
            .health_every_ms(None)
            .checkpoint_every(Some(1), None)
            .workflow(&wf)
            .open()
            .await
            .expect("open on postgres");
        let t =
            engine.start_json("chat", Tally::default(), StartOptions::id("chat-1")).await.unwrap();
        assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
        let id = cairn::storage::ThreadId::new("chat-1").unwrap();
        let last = store.thread(&id).await.unwrap().unwrap().last.unwrap().seq.0;
        let seq =
            cairn_tools::Operator::new(&engine).states("chat-1", 1, last).await.unwrap()[0].seq;
        let fast = answers(&engine, seq, last).await;
        assert_eq!(fast.session.len(), 3, "{:?}", fast.session);
        assert_eq!(fast.correlated, fast.session);
        assert!(!fast.diff.is_empty());
        assert!(fast.bundle.checkpoints.as_ref().is_some_and(|c| !c.is_empty()));

        let before = store.blocking_reads();
        proxy.delay_queries("cairn-reader", READ_DELAY);
        let (state, ticks, took) =
            ticking(cairn_tools::Operator::new(&engine).state_at("chat-1", Some(seq))).await;
        check("state_at", ticks, took);
        assert_eq!(state.unwrap(), fast.state);
        let (diff, ticks, took) =
            ticking(cairn_tools::Operator::new(&engine).diff("chat-1", seq, last)).await;
        check("diff", ticks, took);
        assert_eq!(diff.unwrap(), fast.diff);
        let (found, ticks, took) =
            ticking(cairn_tools::Operator::new(&engine).trace(&session())).await;
        check("trace_session", ticks, took);
        assert_eq!(found.unwrap(), fast.session);
        let (found, ticks, took) =
            ticking(cairn_tools::Operator::new(&engine).trace(&correlated())).await;
        check("trace_correlated", ticks, took);
        assert_eq!(found.unwrap(), fast.correlated);
        let (runs, ticks, took) =
            ticking(cairn_tools::Operator::new(&engine).node_runs("chat-1")).await;
        check("node_runs", ticks, took);
        assert_eq!(runs.unwrap(), fast.runs);
        let (bundle, ticks, took) =
            ticking(cairn_tools::Operator::new(&engine).export_bundle("chat-1", &bundle_options()))
                .await;
        check("export_bundle", ticks, took);
        let mut bundle = bundle.unwrap();
        bundle.timestamp = 0;
        assert_eq!(bundle, fast.bundle);
        let blocking = store.blocking_reads() - before;
        proxy.delay_queries("cairn-reader", Duration::ZERO);
        engine.shutdown().await;
        assert_eq!(blocking, 0, "sync PostgreSQL reads on the caller's runtime");
    });
}
