//! Bounded history (`Engine::prune`, the history policy `EngineBuilder::prune_history`): a
//! schedule ticking every second on a manual clock keeps its database bounded with the policy
//! on and grows without it; a thread pruned while it runs keeps running, and a read of a pruned
//! step answers `Pruned`.
//!
//! `CAIRN_BOUNDED_TICKS` sets the ticks of the long run (default 1,000, about 30 s for both runs; a simulated month is
//! 2,592,000); `CAIRN_BOUNDED_ON_ONLY=1` skips the run without the policy (for long runs).

use std::sync::Arc;

use cairn::clock::ManualClock;
use cairn::dsl::{END, NodeOutput, START, Workflow};
use cairn::storage::{Error as StoreError, Seq, ThreadId};
use cairn::{Durability, Engine, Every, RetentionPolicy, ScheduleSpec, ThreadStatus};

use crate::common::{Tally, report};

/// 2026-01-01T00:00:00Z.
const JAN_1_2026: u64 = 1_767_225_600_000;
/// Events after the newest checkpoint that make the next one (small, so the run prunes often).
const TAIL_EVENTS: u64 = 200;
/// Rounds a schedule thread runs before it continues as new: fewer than the default, so that
/// a run of 1,000 or 10,000 ticks ends on a link 401 rounds old, long enough to be pruned.
const PER_RUN: u32 = 600;

fn tiny() -> Workflow<Tally> {
    Workflow::<Tally>::builder("tiny", 1)
        .node("write", |_s, _ctx| async move { Ok(NodeOutput::update((1, "w".to_owned()))) })
        .edge(START, "write")
        .edge("write", END)
        .build()
        .unwrap()
}

async fn open(builder: cairn::EngineBuilder, clock: &ManualClock, prune: bool) -> Engine {
    // Tick threads are deleted a minute after they end, in both runs: what differs is the
    // schedule thread's own log.
    let policy = RetentionPolicy::after_ms(1_000).every_ms(60_000);
    builder
        .durability(Durability::None)
        .clock(Arc::new(clock.clone()))
        .checkpoint_tail(Some(TAIL_EVENTS), None)
        .retention(policy)
        .prune_history(prune)
        .schedule_ticks_per_run(PER_RUN)
        .workflow(&tiny())
        .open()
        .await
        .unwrap()
}

/// Moves the clock to the schedule's next tick and waits until the schedule handled it.
async fn tick(engine: &Engine, clock: &ManualClock) {
    let next = engine.schedule("sec").await.unwrap().unwrap().state.next_tick_ms.unwrap();
    clock.set_ms(next);
    let waited = std::time::Instant::now();
    loop {
        let info = engine.schedule("sec").await.unwrap().unwrap();
        if info.state.last_tick_ms == Some(next) && info.status == ThreadStatus::Sleeping {
            return;
        }
        assert!(waited.elapsed().as_secs() < 20, "tick {next} not handled: {info:?}");
        tokio::time::sleep(std::time::Duration::from_micros(200)).await;
    }
}

fn spec() -> ScheduleSpec {
    ScheduleSpec::new("tiny", Every::Interval { ms: 1_000 })
        .input(serde_json::json!({ "total": 0, "log": [] }))
}

/// Runs `ticks` ticks and answers the sizes measured after each of `marks` ticks.
async fn run(
    engine: &Engine,
    clock: &ManualClock,
    marks: &[u64],
    size: &dyn Fn() -> u64,
) -> Vec<u64> {
    engine.create_schedule("sec", spec()).await.unwrap();
    let mut sizes = Vec::new();
    let mut done = 0;
    for &mark in marks {
        while done < mark {
            tick(engine, clock).await;
            done += 1;
        }
        sizes.push(size());
    }
    sizes
}

fn ticks() -> u64 {
    std::env::var("CAIRN_BOUNDED_TICKS").ok().and_then(|v| v.parse().ok()).unwrap_or(1_000)
}

async fn redb_sizes(prune: bool, marks: &[u64]) -> (Vec<u64>, Engine, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("b.db");
    let clock = ManualClock::new(JAN_1_2026);
    let engine = open(Engine::builder(&path), &clock, prune).await;
    let size = || std::fs::metadata(&path).unwrap().len();
    let sizes = run(&engine, &clock, marks, &size).await;
    (sizes, engine, dir)
}

/// The schedule's live thread: pruned on, whole off; a read of a pruned step answers `Pruned`.
async fn check_schedule_thread(engine: &Engine, pruned: bool) {
    let live = engine.schedule("sec").await.unwrap().unwrap().thread;
    let id = ThreadId::new(live.as_str()).unwrap();
    let record = engine.store().thread(&id).await.unwrap().unwrap();
    assert_eq!(record.status, ThreadStatus::Sleeping, "still ticking");
    let read = engine.store().read_since(&id, Seq(0), 10).await;
    if pruned {
        assert!(record.first_seq.0 > 1, "pruned while it runs: {record:?}");
        assert!(
            matches!(read, Err(StoreError::Pruned { .. })),
            "a read of a pruned step says so: {read:?}"
        );
        let at = cairn_tools::Operator::new(engine).state_at(&live, Some(1)).await;
        assert!(at.is_err(), "state_at of a pruned step is an error");
    } else {
        assert_eq!(record.first_seq.0, 1);
        assert!(read.is_ok());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_ticking_every_second_keeps_its_database_bounded_on_a_file() {
    let n = ticks();
    let marks = [n / 10, n];
    let (on, engine_on, _d1) = redb_sizes(true, &marks).await;
    check_schedule_thread(&engine_on, true).await;
    engine_on.shutdown().await;
    if std::env::var_os("CAIRN_BOUNDED_ON_ONLY").is_some() {
        // A long run measures the policy alone (the run without it grows by ~6.7 KB a tick).
        report(&format!(
            "RELIABILITY bounded_history backend=redb ticks={},{} bytes_on={},{}",
            marks[0], marks[1], on[0], on[1]
        ));
        assert!(on[1] <= on[0] * 3 / 2 + (1 << 20), "bounded with the policy on: {on:?}");
        return;
    }
    let (off, engine_off, _d2) = redb_sizes(false, &marks).await;
    check_schedule_thread(&engine_off, false).await;
    engine_off.shutdown().await;
    report(&format!(
        "RELIABILITY bounded_history backend=redb ticks={},{} bytes_on={},{} bytes_off={},{}",
        marks[0], marks[1], on[0], on[1], off[0], off[1]
    ));
    // On: the file after n ticks is (near) the file after n/10: freed pages are reused.
    assert!(on[1] <= on[0] * 3 / 2 + (1 << 20), "bounded with the policy on: {on:?}");
    assert!(off[1] > on[1], "the policy makes the difference: on {on:?} off {off:?}");
}

/// The one number `sql` answers on the database at `url`.
#[cfg(feature = "postgres")]
fn pg_query(url: &str, sql: &'static str) -> u64 {
    let url = url.to_owned();
    std::thread::spawn(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let n: i64 = client.query_one(sql, &[]).unwrap().get(0);
        u64::try_from(n).unwrap()
    })
    .join()
    .unwrap()
}

#[cfg(feature = "postgres")]
const PG_BYTES: &str = "SELECT COALESCE(SUM(pg_total_relation_size(c.oid)), 0)::bigint \
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace \
    WHERE c.relkind = 'r' AND n.nspname NOT IN ('pg_catalog', 'information_schema')";

#[cfg(feature = "postgres")]
const PG_EVENTS: &str = "SELECT coalesce(sum(last_seq - first_seq + 1), 0)::bigint FROM cairn_event_batches \
     WHERE thread ~ '^schedule:sec(~[0-9]+)?$'";

/// A shorter run on PostgreSQL. Relation sizes (`pg_total_relation_size`) are as measured: the
/// rows a prune or a delete removes are dead until autovacuum makes their space reusable, which
/// the cluster here does as a busy server's would (every second, from 50 dead rows a table),
/// so that the sizes show what the policy bounds; the live event rows of the schedule's thread
/// show the bound exactly.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_schedule_ticking_every_second_keeps_its_database_bounded_on_postgres() {
    use cairn_storage_testkit::pg_cluster::Cluster;
    let Some(cluster) = Cluster::start("bounded_history_pg") else { return };
    let url = cluster.new_database();
    // Off the runtime's threads, as every blocking client call of this test.
    std::thread::spawn(move || {
        let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        for setting in [
            "autovacuum_naptime = '1s'",
            "autovacuum_vacuum_threshold = 50",
            "autovacuum_vacuum_scale_factor = 0",
        ] {
            admin.batch_execute(&format!("ALTER SYSTEM SET {setting}")).unwrap();
        }
        admin.batch_execute("SELECT pg_reload_conf()").unwrap();
    })
    .join()
    .unwrap();
    let n = ticks() / 2;
    let marks = [n / 10, n];
    let (mut bytes, mut rows) = (Vec::new(), Vec::new());
    for prune in [true, false] {
        let url = cluster.new_database();
        let clock = ManualClock::new(JAN_1_2026);
        let engine = open(Engine::builder(&url), &clock, prune).await;
        let size = || pg_query(&url, PG_BYTES) << 32 | pg_query(&url, PG_EVENTS);
        let both = run(&engine, &clock, &marks, &size).await;
        bytes.push(both.iter().map(|b| b >> 32).collect::<Vec<_>>());
        rows.push(both.iter().map(|b| b & 0xffff_ffff).collect::<Vec<_>>());
        check_schedule_thread(&engine, prune).await;
        engine.shutdown().await;
    }
    let (on, off) = (&bytes[0], &bytes[1]);
    let (rows_on, rows_off) = (&rows[0], &rows[1]);
    report(&format!(
        "RELIABILITY bounded_history backend=postgres ticks={},{} bytes_on={},{} bytes_off={},{} \
         schedule_event_rows_on={},{} schedule_event_rows_off={},{}",
        marks[0],
        marks[1],
        on[0],
        on[1],
        off[0],
        off[1],
        rows_on[0],
        rows_on[1],
        rows_off[0],
        rows_off[1]
    ));
    // On: the schedule's live log holds what its newest checkpoint does not cover (at most the
    // tail) and what the ticks since the last pass wrote (a pass a minute: 60 ticks), whatever
    // the number of ticks.
    let per_tick = rows_off[1].div_ceil(n);
    let bound = TAIL_EVENTS + 61 * per_tick;
    assert!(rows_on[1] <= bound, "bounded with the policy on: {rows_on:?} (bound {bound})");
    assert!(
        rows_off[1] > rows_on[1],
        "the policy makes the difference: on {rows_on:?} off {rows_off:?}"
    );
}
