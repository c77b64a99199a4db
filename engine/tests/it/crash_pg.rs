//! The invariant proptest of `crash.rs` on PostgreSQL, with the crash at the SQL boundary: any
//! workflow of the same generator, its engine crashed at any append, where the append at the
//! crash point goes to the server through a proxy that cuts the writer's connection before its
//! COMMIT reaches the server, right after it does, or after the server answered it (so the
//! transaction committed and the writer never heard). The store resolves the COMMIT by the
//! transaction's status; the engine then crashes. Another engine on the same database takes
//! the threads over once the dead engine's leases lapse and must end with the state of an
//! uninterrupted run, no recorded tool call run again, and the same set of side effects. Every
//! engine here coordinates through the shared database (its health report says so, and the
//! test counts it): the crash-point wrapper carries what PostgreSQL offers, as every decorator
//! does.

use std::collections::BTreeSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cairn::storage::{PgStore, Store, ThreadId};
use cairn::{Durability, EngineBuilder, RecoveryPolicy, ThreadStatus};
use cairn_storage_testkit::pg_cluster::Cluster;
use cairn_storage_testkit::pg_proxy::{Cut, Proxy};
use proptest::prelude::*;

use crate::crash::{
    Dying, EffectLog, SHARED_ENGINES, Shape, build, cases_from_env, recorded_calls_in, run_on,
    shape,
};

/// Short, so that a case waits out the crashed engine's leases quickly.
const LEASE_TTL_MS: u64 = 300;

static CASES: AtomicU64 = AtomicU64::new(0);
static DIVERGED: AtomicU64 = AtomicU64::new(0);
static REPEATED: AtomicU64 = AtomicU64::new(0);
static CUTS: AtomicU64 = AtomicU64::new(0);
/// Held by each test that runs cases, so that the counts above are one test's.
static ONE_AT_A_TIME: std::sync::Mutex<()> = std::sync::Mutex::new(());

fn tune(b: EngineBuilder) -> EngineBuilder {
    b.lease_ttl_ms(LEASE_TTL_MS).poll_ms(50).recovery(RecoveryPolicy::Resume)
}

fn connect(url: &str) -> Arc<dyn Store> {
    Arc::new(PgStore::connect(url, Durability::Immediate).expect("connect"))
}

fn one_case(
    cluster: &Cluster,
    shape: &Shape,
    crash_frac: f64,
    cut: Cut,
) -> Result<(), TestCaseError> {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    let (clean, crashed) = (cluster.new_database(), cluster.new_database());
    let proxy = Proxy::start(cluster).expect("proxy");
    rt.block_on(async {
        let fx = EffectLog::default();
        let wf = build(shape, &fx);
        let (appends, expected) = run_on(Dying::new(connect(&clean), None), &wf, false, tune).await;
        let baseline: BTreeSet<String> = fx.take().into_iter().collect();

        let crash_after = ((appends as f64 * crash_frac) as i64).max(1);
        let mut dying = Dying::new(connect(&proxy.url(&crashed)), Some(crash_after));
        let armed = Arc::new(proxy);
        let at_death = armed.clone();
        dying.at_death = Some(Box::new(move || at_death.cut_next_commit("cairn-writer", cut)));
        run_on(dying, &wf, true, tune).await;
        // The append at the crash point may still be on its way to the server (a dying
        // process's last write): give it a moment to meet the cut (a batch refused on its own
        // terms, a guard, sends no COMMIT and is not cut).
        let waited = std::time::Instant::now();
        while armed.cuts() == 0 && waited.elapsed() < std::time::Duration::from_secs(2) {
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
        CUTS.fetch_add(armed.cuts(), Ordering::SeqCst);
        let before_crash = fx.take();
        let store = connect(&crashed);
        let recorded = recorded_calls_in(store.as_ref());
        let (_, got) = run_on(Dying::new(store.clone(), None), &wf, false, tune).await;
        let after = fx.take();

        CASES.fetch_add(1, Ordering::SeqCst);
        let repeated = after.iter().filter(|k| recorded.contains(*k)).count() as u64;
        REPEATED.fetch_add(repeated, Ordering::SeqCst);
        if got != expected {
            DIVERGED.fetch_add(1, Ordering::SeqCst);
        }
        prop_assert_eq!(
            &got,
            &expected,
            "shape {:?} crash after {} of {} appends, {:?}",
            shape,
            crash_after,
            appends,
            cut
        );
        prop_assert_eq!(repeated, 0, "a recorded tool call ran again");
        let all: BTreeSet<String> = before_crash.into_iter().chain(after).collect();
        prop_assert_eq!(all, baseline, "the set of side effects differs");
        let report = store.verify().unwrap();
        prop_assert!(report.is_clean(), "{:?}", report);
        for t in 0..2 {
            let r = store.thread(&ThreadId::new(format!("t{t}")).unwrap()).wait().unwrap().unwrap();
            prop_assert_eq!(r.status, ThreadStatus::Completed);
        }
        Ok(())
    })
}

fn cut() -> impl Strategy<Value = Cut> {
    prop_oneof![Just(Cut::BeforeCommit), Just(Cut::AfterCommit), Just(Cut::AfterAnswer)]
}

#[test]
fn engine_crash_at_the_sql_boundary_on_postgres_then_resume() {
    let Some(cluster) = Cluster::start("engine_crash_at_the_sql_boundary_on_postgres") else {
        return;
    };
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let config = ProptestConfig {
        cases: cases_from_env("CAIRN_PG_CRASH_CASES", 24),
        failure_persistence: None,
        ..ProptestConfig::default()
    };
    // The counts start here: the regression case below may have run before.
    for count in [&CASES, &DIVERGED, &REPEATED, &CUTS] {
        count.store(0, Ordering::SeqCst);
    }
    let shared_before = SHARED_ENGINES.load(Ordering::SeqCst);
    let mut runner = proptest::test_runner::TestRunner::new(config);
    let result = runner.run(&(shape(), 0.0f64..1.0, cut()), |(shape, frac, cut)| {
        one_case(&cluster, &shape, frac, cut)
    });
    let shared = SHARED_ENGINES.load(Ordering::SeqCst) - shared_before;
    crate::common::report(&format!(
        "RELIABILITY engine_crash_pg cases={} cuts={} diverged={} repeated_effects={} shared_engines={shared}",
        CASES.load(Ordering::SeqCst),
        CUTS.load(Ordering::SeqCst),
        DIVERGED.load(Ordering::SeqCst),
        REPEATED.load(Ordering::SeqCst)
    ));
    if let Err(e) = result {
        panic!("{e}");
    }
    assert!(
        CUTS.load(Ordering::SeqCst) > 0,
        "no COMMIT was cut: the SQL boundary was not exercised"
    );
    // Three engines a case (clean, crashed, resuming), each on the shared coordinator.
    assert_eq!(
        shared,
        3 * CASES.load(Ordering::SeqCst),
        "an engine of the crash test did not coordinate through the shared database"
    );
}

/// The crash-point wrapper over PostgreSQL leaves the engine on the shared coordinator, whose
/// takeover waits for a lease to lapse (a wrapper that dropped `shared()` made it `Local`,
/// which takes any lease over at once, as if the database were a file of its own).
#[test]
fn an_engine_over_the_crash_wrapper_coordinates_through_postgres() {
    let Some(cluster) = Cluster::start("an_engine_over_the_crash_wrapper_coordinates") else {
        return;
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let dying = Arc::new(Dying::new(connect(&cluster.new_database()), None));
        let engine = tune(cairn::Engine::with_store(dying)).open().await.unwrap();
        let health = engine.health().await.unwrap();
        assert_eq!(health.coordination, Some(cairn::telemetry::Coordination::Shared));
        engine.shutdown().await;
    });
}

/// The case that once hung CI: the store dies at a thread's creation, whose COMMIT reaches the
/// server and loses its answer. The runner's first batch is refused at once, while the writer
/// still asks the server what became of the creation; `start` must learn that outcome (its
/// runner's acknowledger used to drop the batch it was waiting for when the runner stopped, and
/// `start` waited forever).
#[test]
fn a_start_whose_creation_lost_its_commit_answer_returns_when_its_runner_is_refused() {
    let Some(cluster) = Cluster::start("a_start_whose_creation_lost_its_commit_answer") else {
        return;
    };
    let _alone = ONE_AT_A_TIME.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
    let shape = crate::crash::Shape::linear_loop(1, 1, 3);
    // The crash point: the second thread's creation.
    one_case(&cluster, &shape, 0.5004946873161975, Cut::AfterCommit).unwrap();
}
