//! Waits with a deadline (`ctx.recv_timeout`, `ctx.select`): a signal sent in time wakes the
//! sleeping thread and is taken; the deadline passes and a signal sent after it stays in the
//! inbox; several names give the first sent; replay takes the recorded branch and reports
//! code that selects otherwise; a crash at any write around the wait neither loses nor doubles
//! the signal.

use std::sync::Arc;

use cairn::clock::ManualClock;
use cairn::dsl::{Ctx, NodeOutput, Select, Selected, Workflow};
use cairn::replay::ReplayOptions;
use cairn::{END, Engine, START, StartOptions, ThreadStatus};

use crate::common::{Tally, db, open};
use crate::crash::every_write;

const T0: u64 = 1_000_000;
const WAIT_MS: u64 = 1_000;

/// `recv_timeout("approve", WAIT_MS)`, then what a `recv` of the same name takes after it.
fn approval(id: &str) -> Workflow<Tally> {
    Workflow::<Tally>::builder(id, 1)
        .node("decide", |_s: Arc<Tally>, ctx: Ctx| async move {
            let got: Option<u64> = ctx.recv_timeout("approve", WAIT_MS).await?;
            let next: u64 = ctx.recv("approve").await?;
            Ok(NodeOutput::update((got.unwrap_or(0), format!("{got:?} then {next}"))))
        })
        .edge(START, "decide")
        .edge("decide", END)
        .build()
        .unwrap()
}

async fn engine_at(path: &std::path::Path, wf: &Workflow<Tally>, clock: &ManualClock) -> Engine {
    let clock = Arc::new(clock.clone());
    open(path, &[wf], |b| b.seed(11).clock(clock)).await
}

#[tokio::test]
async fn a_signal_sent_before_the_deadline_wakes_the_sleeping_wait_and_is_taken_once() {
    let (_d, path) = db();
    let (wf, clock) = (approval("approval"), ManualClock::new(T0));
    let engine = engine_at(&path, &wf, &clock).await;
    let t = engine.start_json("approval", Tally::default(), StartOptions::id("a1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::Sleeping, "asleep until the deadline");
    engine.signal("a1", "approve", 7u64).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput, "in the recv after");
    engine.signal("a1", "approve", 8u64).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log, vec!["Some(7) then 8".to_string()]);
    let report = engine.replay("a1", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic() && report.tasks_replayed == 1, "{report:?}");
    engine.shutdown().await;
}

/// The deadline passes while no engine runs, and a signal is stored after it (by an engine
/// without the workflow, which cannot wake the thread): the reopened engine wakes the thread,
/// which times out and leaves the late signal for the `recv` after.
#[tokio::test]
async fn the_deadline_wins_over_a_later_signal_which_stays_in_the_inbox() {
    let (_d, path) = db();
    let (wf, clock) = (approval("approval"), ManualClock::new(T0));
    let engine = engine_at(&path, &wf, &clock).await;
    let t = engine.start_json("approval", Tally::default(), StartOptions::id("a2")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::Sleeping);
    engine.shutdown().await;
    drop((t, engine));
    clock.advance_ms(WAIT_MS + 1);
    let stranger = open::<Tally>(&path, &[], |b| b.clock(Arc::new(clock.clone()))).await;
    stranger.signal("a2", "approve", 9u64).await.unwrap();
    stranger.shutdown().await;
    drop(stranger);
    let engine = engine_at(&path, &wf, &clock).await;
    let t = engine.thread("a2").await.unwrap();
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log, vec!["None then 9".to_string()], "timed out; the signal received after");
    let report = engine.replay("a2", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{report:?}");
    engine.shutdown().await;
}

/// Two selects over two names: the first takes the signal sent first, the second the other.
fn chooser(names: [&'static str; 2]) -> Workflow<Tally> {
    Workflow::<Tally>::builder("chooser", 1)
        .node("choose", move |_s: Arc<Tally>, ctx: Ctx| async move {
            let _: String = ctx.recv("go").await?;
            let mut took = Vec::new();
            for _ in 0..2 {
                let wait = Select::new().signal(names[0]).signal(names[1]).timeout_ms(WAIT_MS);
                took.push(match ctx.select(wait).await? {
                    Selected::Signal { name, value } => format!("{name}={value}"),
                    Selected::Child(_) | Selected::Timeout => "timeout".into(),
                });
            }
            Ok(NodeOutput::update((0, took.join(" "))))
        })
        .edge(START, "choose")
        .edge("choose", END)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_select_takes_the_first_sent_and_replay_reports_code_that_selects_otherwise() {
    let (_d, path) = db();
    let (wf, clock) = (chooser(["a", "b"]), ManualClock::new(T0));
    let engine = engine_at(&path, &wf, &clock).await;
    let t = engine.start_json("chooser", Tally::default(), StartOptions::id("c1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.signal("c1", "b", 2u64).await.unwrap();
    engine.signal("c1", "a", 1u64).await.unwrap();
    engine.signal("c1", "go", "now").await.unwrap();
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log, vec!["b=2 a=1".to_string()]);
    let same = engine.replay("c1", &ReplayOptions::default()).await.unwrap();
    assert!(same.is_deterministic(), "{same:?}");
    let other = chooser(["a", "c"]).erase();
    let options = ReplayOptions { workflow: Some(other), ..ReplayOptions::default() };
    let report = engine.replay("c1", &options).await.unwrap();
    assert!(report.divergence.is_some(), "a select of other names is a divergence: {report:?}");
    engine.shutdown().await;
}

/// The store dies at each write in turn while a thread waits with a deadline: once where the
/// signal wins, once where the deadline does (and the signal, sent after, goes to the `recv`).
/// The reopened engine, sent what the inbox lacks, finishes: the signal received exactly once,
/// by the branch the run took.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_around_a_wait_with_a_deadline_neither_loses_nor_doubles_it() {
    let mut crashes = 0;
    for timeout in [false, true] {
        crashes += crash_points(timeout).await;
    }
    assert!(crashes >= 10, "the crash points covered the runs: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY select_crash crash_points={crashes} lost=0 doubled=0"
    ));
}

/// One run of the crash test per crash point; returns the crash points covered.
async fn crash_points(timeout: bool) -> usize {
    let secs = std::time::Duration::from_secs(10);
    let wf = approval("approval");
    let id = cairn::ThreadId::new("w1").unwrap();
    let expected = if timeout { "None then 7" } else { "Some(7) then 8" };
    // Each crash point gets a clock of its own at T0 (time never goes back).
    let tune = |b: cairn::EngineBuilder, clock: &ManualClock| {
        b.workflow(&wf).seed(11).clock(Arc::new(clock.clone()))
    };
    let run = async |engine: &Engine, clock: &ManualClock| {
        let t = engine.start_json("approval", Tally::default(), StartOptions::id("w1")).await?;
        t.wait().await?;
        if timeout {
            clock.advance_ms(WAIT_MS + 1);
            t.wait().await?;
        }
        engine.signal("w1", "approve", 7u64).await?;
        if !timeout {
            t.wait().await?;
            engine.signal("w1", "approve", 8u64).await?;
        }
        t.finished().await.map(|_| ())
    };
    let check = async |engine: &Engine, clock: &ManualClock, crash_after: i64| {
        let t = match engine.thread("w1").await {
            Ok(t) => t,
            Err(_) => engine
                .start_json("approval", Tally::default(), StartOptions::id("w1"))
                .await
                .unwrap(),
        };
        let parked = tokio::time::timeout(secs, t.wait()).await;
        assert!(parked.is_ok(), "crash_after {crash_after}: the thread did not park or finish");
        if timeout {
            clock.set_ms(T0 + WAIT_MS + 1);
            let parked = tokio::time::timeout(secs, t.wait()).await;
            assert!(parked.is_ok(), "crash_after {crash_after}: no park after the deadline");
        }
        let sent = engine.store().signals(&id, 0, 10).wait().unwrap().len();
        let values: &[u64] = if timeout { &[7] } else { &[7, 8] };
        for v in &values[sent..] {
            engine.signal("w1", "approve", *v).await.unwrap();
            let _ = tokio::time::timeout(secs, t.wait()).await;
        }
        let finished = tokio::time::timeout(secs, t.finished()).await;
        let status = finished.unwrap_or_else(|_| panic!("crash_after {crash_after}: not finished"));
        assert_eq!(status.unwrap().status, ThreadStatus::Completed, "crash_after {crash_after}");
        let out: Tally = t.output().await.unwrap();
        assert_eq!(out.log, vec![expected.to_string()], "crash_after {crash_after} ({timeout})");
        assert!(engine.store().verify().unwrap().is_clean());
    };
    every_write(200, || ManualClock::new(T0), tune, run, check).await
}
