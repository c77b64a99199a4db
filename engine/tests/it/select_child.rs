//! A select that waits for a child's end (`Select::child`): a child that has ended when the
//! select decides wins over a signal sent too (which stays in the inbox); a signal taken while
//! the child runs leaves the child to be joined later; the deadline wins over both; replay and
//! `state_at` agree with the live run, and code that selects another child is a divergence; a
//! fork inside the node selects its own child; a crash at any write around it neither loses
//! nor doubles the branch taken.

use std::sync::Arc;

use cairn::clock::ManualClock;
use cairn::dsl::{ChildHandle, Ctx, NodeOutput, Select, Selected, Workflow};
use cairn::replay::ReplayOptions;
use cairn::{END, Engine, START, StartOptions, ThreadStatus};

use crate::common::{Tally, db, open};
use crate::crash::every_write;

const T0: u64 = 1_000_000;
const WAIT_MS: u64 = 1_000;
/// The child of parent `p`'s select (its first start in node `race`).
const CHILD: &str = "p/race@1/child-1";

/// A child that ends with the number sent to it as `finish`.
fn worker() -> Workflow<Tally> {
    Workflow::<Tally>::builder("worker", 1)
        .node("work", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.recv("finish").await?;
            Ok(NodeOutput::update((n, format!("worked {n}"))))
        })
        .edge(START, "work")
        .edge("work", END)
        .build()
        .unwrap()
}

/// A parent that starts a `worker`, waits for `go`, then selects the child's end, a `stop`
/// signal or the deadline (`other`: names another child instead, for the divergence); after a
/// signal or the deadline it joins the child; then it takes what `stop` the inbox still holds.
fn racer(child: &Workflow<Tally>, other: bool) -> Workflow<Tally> {
    let child = child.clone();
    Workflow::<Tally>::builder("racer", 1)
        .node("race", move |_s: Arc<Tally>, ctx: Ctx| {
            let child = child.clone();
            async move {
                let c = ctx.start_child(&child, Tally::default()).await?;
                let _: String = ctx.recv("go").await?;
                let waited: ChildHandle<Tally> = if other {
                    ChildHandle::from_id("p/elsewhere")
                } else {
                    ChildHandle::from_id(c.id())
                };
                let wait = Select::new().child(&waited).signal("stop").timeout_ms(WAIT_MS);
                let took = match ctx.select(wait).await? {
                    Selected::Child(end) => format!("child {}", end.status),
                    Selected::Signal { name, value } => {
                        let out: Tally = ctx.join_child(c).await?;
                        format!("{name}={value} then child {}", out.total)
                    }
                    Selected::Timeout => {
                        let out: Tally = ctx.join_child(c).await?;
                        format!("timeout then child {}", out.total)
                    }
                };
                let left: Option<u64> = ctx.try_recv("stop").await?;
                Ok(NodeOutput::update((0, format!("{took}; stop left {left:?}"))))
            }
        })
        .edge(START, "race")
        .edge("race", END)
        .build()
        .unwrap()
}

async fn engine_at(path: &std::path::Path, clock: &ManualClock) -> Engine {
    let (child, clock) = (worker(), Arc::new(clock.clone()));
    let parent = racer(&child, false);
    open(path, &[&parent, &child], |b| b.seed(3).clock(clock)).await
}

/// Waits until thread `id` exists and parks (or ends).
async fn parked(engine: &Engine, id: &str) -> ThreadStatus {
    parked_or(engine, id).await.unwrap()
}

/// [`parked`], the engine's error (a store that died) returned.
async fn parked_or(engine: &Engine, id: &str) -> Result<ThreadStatus, cairn::Error> {
    let secs = std::time::Duration::from_secs(10);
    let found = tokio::time::timeout(secs, async {
        loop {
            if let Ok(t) = engine.thread(id).await {
                return t;
            }
            tokio::time::sleep(std::time::Duration::from_millis(10)).await;
        }
    });
    let t = found.await.unwrap_or_else(|_| panic!("thread {id} never started"));
    Ok(tokio::time::timeout(secs, t.wait()).await.expect("parks")?.status)
}

/// The parent's log line, its replay deterministic, `state_at` its live state, and a replay of
/// code that selects another child a divergence.
async fn finished_and_replayed(engine: &Engine) -> String {
    let t = engine.thread("p").await.unwrap();
    let out: Tally = t.output().await.unwrap();
    let report = engine.replay("p", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{report:?}");
    let at = cairn_tools::Operator::new(engine).state_at("p", None).await.unwrap();
    assert_eq!(at.state, serde_json::to_value(&out).unwrap(), "state_at agrees");
    let other = racer(&worker(), true).erase();
    let options = ReplayOptions { workflow: Some(other), ..ReplayOptions::default() };
    let report = engine.replay("p", &options).await.unwrap();
    assert!(report.divergence.is_some(), "another child selected diverges: {report:?}");
    out.log.join(" | ")
}

#[tokio::test]
async fn a_child_that_ended_wins_over_a_signal_sent_too_which_stays_in_the_inbox() {
    let (_d, path) = db();
    let clock = ManualClock::new(T0);
    let engine = engine_at(&path, &clock).await;
    engine.start_json("racer", Tally::default(), StartOptions::id("p")).await.unwrap();
    assert_eq!(parked(&engine, "p").await, ThreadStatus::WaitingInput, "waiting for go");
    assert_eq!(parked(&engine, CHILD).await, ThreadStatus::WaitingInput);
    engine.signal(CHILD, "finish", 5u64).await.unwrap();
    assert_eq!(parked(&engine, CHILD).await, ThreadStatus::Completed);
    engine.signal("p", "stop", 9u64).await.unwrap();
    engine.signal("p", "go", "now").await.unwrap();
    let log = finished_and_replayed(&engine).await;
    assert_eq!(log, "child completed; stop left Some(9)");
    engine.shutdown().await;
}

#[tokio::test]
async fn a_signal_sent_while_the_child_runs_wins_and_the_child_is_joined_after() {
    let (_d, path) = db();
    let clock = ManualClock::new(T0);
    let engine = engine_at(&path, &clock).await;
    engine.start_json("racer", Tally::default(), StartOptions::id("p")).await.unwrap();
    assert_eq!(parked(&engine, "p").await, ThreadStatus::WaitingInput, "waiting for go");
    engine.signal("p", "go", "now").await.unwrap();
    engine.signal("p", "stop", 3u64).await.unwrap();
    // The select took `stop` and the parent joins the child, which still waits.
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    assert_eq!(parked(&engine, CHILD).await, ThreadStatus::WaitingInput);
    engine.signal(CHILD, "finish", 4u64).await.unwrap();
    let log = finished_and_replayed(&engine).await;
    assert_eq!(log, "stop=3 then child 4; stop left None");
    engine.shutdown().await;
}

#[tokio::test]
async fn the_deadline_wins_over_a_running_child_and_a_later_signal() {
    let (_d, path) = db();
    let clock = ManualClock::new(T0);
    let engine = engine_at(&path, &clock).await;
    engine.start_json("racer", Tally::default(), StartOptions::id("p")).await.unwrap();
    assert_eq!(parked(&engine, "p").await, ThreadStatus::WaitingInput, "waiting for go");
    engine.signal("p", "go", "now").await.unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    clock.advance_ms(WAIT_MS + 1);
    tokio::time::sleep(std::time::Duration::from_millis(200)).await;
    // Sent after the deadline (the select decided or decides on the deadline): left over.
    engine.signal("p", "stop", 8u64).await.unwrap();
    engine.signal(CHILD, "finish", 6u64).await.unwrap();
    let log = finished_and_replayed(&engine).await;
    assert_eq!(log, "timeout then child 6; stop left Some(8)");
    engine.shutdown().await;
}

/// Waits until `thread`'s select has taken a child's end: its `signal_arrived` under a child's
/// wake name is in its log. (Its status does not tell: a select parked on a child waits for
/// input, as the `recv` after it does.)
async fn took_child(engine: &Engine, thread: &str) {
    let started = std::time::Instant::now();
    loop {
        let handle = engine.thread(thread).await.unwrap();
        let mut log = handle.events(0).unwrap();
        while let Some(r) = log.try_next().await.unwrap() {
            if let cairn::event::Body::SignalArrived { name, .. } = &r.body
                && name.starts_with("cairn.child.")
            {
                return;
            }
        }
        assert!(started.elapsed().as_secs() < 30, "{thread}'s select never took its child");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
}

/// A parent that starts a `worker` and selects its end or `stop`, then waits in `recv("done")`
/// in the same node (so the select's outcome is in the park's recorded values).
fn forker(child: &Workflow<Tally>) -> Workflow<Tally> {
    let child = child.clone();
    Workflow::<Tally>::builder("forker", 1)
        .node("race", move |_s: Arc<Tally>, ctx: Ctx| {
            let child = child.clone();
            async move {
                let c = ctx.start_child(&child, Tally::default()).await?;
                let took = match ctx.select(Select::new().child(&c).signal("stop")).await? {
                    Selected::Child(end) => format!("child {}", end.status),
                    Selected::Signal { name, .. } => name,
                    Selected::Timeout => "timeout".into(),
                };
                let done: u64 = ctx.recv("done").await?;
                Ok(NodeOutput::update((done, format!("{took} then {done}"))))
            }
        })
        .edge(START, "race")
        .edge("race", END)
        .build()
        .unwrap()
}

/// A fork taken where the task parked after its select (in the `recv` after it) runs the node
/// again: it starts a child of its own (ids derive from the thread), its select takes that
/// child's end, and its replay agrees. (A decision recorded in a task that completed is kept by
/// a fork as state; see `it::select_fork`.)
#[tokio::test]
async fn a_fork_inside_the_node_selects_its_own_child_and_replays_as_it_ran() {
    use cairn_tools::Operator;
    use cairn_tools::debug::{ForkFrom, ForkOptions};

    let (_d, path) = db();
    let (child, clock) = (worker(), Arc::new(ManualClock::new(T0)));
    let wf = forker(&child);
    let engine = open(&path, &[&wf, &child], |b| b.seed(3).clock(clock)).await;
    let t = engine.start_json("forker", Tally::default(), StartOptions::id("f")).await.unwrap();
    assert_eq!(parked(&engine, "f/race@1/child-1").await, ThreadStatus::WaitingInput);
    engine.signal("f/race@1/child-1", "finish", 2u64).await.unwrap();
    took_child(&engine, "f").await;
    let secs = std::time::Duration::from_secs(10);
    let waited = tokio::time::timeout(secs, t.wait()).await.expect("parent wait");
    assert_eq!(waited.unwrap().status, ThreadStatus::WaitingInput, "in recv done");
    let id = cairn::ThreadId::new("f").unwrap();
    let at = engine.store().thread(&id).await.unwrap().unwrap().last.map_or(0, |b| b.seq.0);
    let operator = Operator::new(&engine);
    let fork = operator.fork("f", ForkFrom::Seq(at), ForkOptions::id("g")).await.unwrap();
    // The node runs again in the fork, which starts a child of its own and waits for it.
    assert_eq!(parked(&engine, "g/race@1/child-1").await, ThreadStatus::WaitingInput);
    engine.signal("g/race@1/child-1", "finish", 3u64).await.unwrap();
    took_child(&engine, "g").await;
    let waited = tokio::time::timeout(secs, fork.wait()).await.expect("fork wait");
    assert_eq!(waited.unwrap().status, ThreadStatus::WaitingInput, "the fork in recv done");
    // Sent after the fork's select took its child: left in the inbox.
    engine.signal("g", "stop", 0u64).await.unwrap();
    engine.signal("g", "done", 7u64).await.unwrap();
    let g = engine.thread("g").await.unwrap();
    let out = tokio::time::timeout(secs, g.output::<Tally>()).await.expect("fork output");
    let out = out.unwrap();
    assert_eq!(out.log, vec!["child completed then 7".to_string()]);
    let report = engine.replay("g", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{report:?}");
    engine.signal("f", "done", 1u64).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log, vec!["child completed then 1".to_string()]);
    engine.shutdown().await;
}

/// The store dies at each write in turn, once where the child ends before the select decides
/// and once where `stop` is sent while the child runs. The reopened engine, sent what the
/// inboxes lack, finishes: one child started, each signal stored once, and `stop` and the
/// child's end each accounted for once by the branch taken.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_around_a_select_of_a_child_neither_loses_nor_doubles() {
    let mut crashes = 0;
    for child_first in [true, false] {
        crashes += crash_points(child_first).await;
    }
    assert!(crashes >= 10, "the crash points covered the runs: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY select_child_crash crash_points={crashes} lost=0 doubled=0"
    ));
}

/// How many signals named `name` thread `id`'s inbox holds.
fn stored(engine: &Engine, id: &str, name: &str) -> Result<usize, cairn::Error> {
    let id = cairn::ThreadId::new(id)?;
    let all = engine.store().signals(&id, 0, 100).wait()?;
    Ok(all.iter().filter(|s| s.name == name).count())
}

/// Sends the signals of one run in order, each one only if `thread`'s inbox lacks it, waiting
/// for the child to end after its `finish` when the child goes first.
async fn send_missing(engine: &Engine, child_first: bool) -> Result<(), cairn::Error> {
    let secs = std::time::Duration::from_secs(10);
    let finish = async {
        if stored(engine, CHILD, "finish")? == 0 {
            engine.signal(CHILD, "finish", if child_first { 5u64 } else { 4 }).await?;
        }
        Ok::<_, cairn::Error>(())
    };
    let to_parent = async {
        if stored(engine, "p", "stop")? == 0 {
            engine.signal("p", "stop", if child_first { 9u64 } else { 3 }).await?;
        }
        if stored(engine, "p", "go")? == 0 {
            engine.signal("p", "go", "now").await?;
        }
        Ok::<_, cairn::Error>(())
    };
    if child_first {
        finish.await?;
        let child = engine.thread(CHILD).await?;
        tokio::time::timeout(secs, child.finished()).await.expect("the child ends")?;
        to_parent.await
    } else {
        to_parent.await?;
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
        finish.await
    }
}

/// One run of the crash test per crash point; returns the crash points covered.
async fn crash_points(child_first: bool) -> usize {
    let secs = std::time::Duration::from_secs(10);
    let child = worker();
    let parent = racer(&child, false);
    let tune = |b: cairn::EngineBuilder, clock: &ManualClock| {
        b.workflow(&parent).workflow(&child).seed(3).clock(Arc::new(clock.clone()))
    };
    let run = async |engine: &Engine, _: &ManualClock| {
        let t = engine.start_json("racer", Tally::default(), StartOptions::id("p")).await?;
        parked_or(engine, "p").await?;
        parked_or(engine, CHILD).await?;
        send_missing(engine, child_first).await?;
        t.finished().await.map(|_| ())
    };
    let check = async |engine: &Engine, _: &ManualClock, crash_after: i64| {
        let t = match engine.thread("p").await {
            Ok(t) => t,
            Err(_) => {
                engine.start_json("racer", Tally::default(), StartOptions::id("p")).await.unwrap()
            }
        };
        parked(engine, CHILD).await;
        send_missing(engine, child_first).await.unwrap();
        let finished = tokio::time::timeout(secs, t.finished()).await;
        let status = finished.unwrap_or_else(|_| panic!("crash_after {crash_after}: not finished"));
        assert_eq!(status.unwrap().status, ThreadStatus::Completed, "crash_after {crash_after}");
        let out: Tally = t.output().await.unwrap();
        let line = out.log.join(" | ");
        // A decision is durable with the task's record: one lost to the crash is taken again,
        // and with `stop` sent while the child ran, the child may have ended by then.
        let expected: &[&str] = if child_first {
            &["child completed; stop left Some(9)"]
        } else {
            &["stop=3 then child 4; stop left None", "child completed; stop left Some(3)"]
        };
        assert!(expected.contains(&line.as_str()), "crash_after {crash_after}: {line}");
        for (id, name) in [("p", "stop"), ("p", "go"), (CHILD, "finish")] {
            assert_eq!(
                stored(engine, id, name).unwrap(),
                1,
                "crash_after {crash_after}: {id} {name}"
            );
        }
        let p = cairn::ThreadId::new("p").unwrap();
        let started = cairn::admin::started_children_of(engine.store().as_ref(), &p).await;
        assert_eq!(started.unwrap().len(), 1, "crash_after {crash_after}: one child");
        let report = engine.replay("p", &ReplayOptions::default()).await.unwrap();
        assert!(report.is_deterministic(), "crash_after {crash_after}: {report:?}");
        assert!(engine.store().verify().unwrap().is_clean());
    };
    // The clock stands at T0 throughout (no deadline passes): a fresh one per crash point.
    every_write(300, || ManualClock::new(T0), tune, run, check).await
}

/// A select that took a child's end counts as its join: a `join_child` of the same handle in
/// the node after it is refused, and the thread fails naming it.
#[tokio::test]
async fn a_join_after_the_select_took_the_child_is_refused_as_a_second_join() {
    let (_d, path) = db();
    let child = worker();
    let c2 = child.clone();
    let wf = Workflow::<Tally>::builder("twice", 1)
        .node("race", move |_s: Arc<Tally>, ctx: Ctx| {
            let child = c2.clone();
            async move {
                let c = ctx.start_child(&child, Tally::default()).await?;
                let took = ctx.select(Select::new().child(&c)).await?;
                assert!(matches!(took, Selected::Child(_)), "{took:?}");
                let again: Tally = ctx.join_child(c).await?;
                Ok(NodeOutput::update((again.total, "joined again".into())))
            }
        })
        .edge(START, "race")
        .edge("race", END)
        .build()
        .unwrap();
    let engine = open(&path, &[&wf, &child], |b| b.seed(3)).await;
    let t = engine.start_json("twice", Tally::default(), StartOptions::id("j")).await.unwrap();
    assert_eq!(parked(&engine, "j/race@1/child-1").await, ThreadStatus::WaitingInput);
    engine.signal("j/race@1/child-1", "finish", 1u64).await.unwrap();
    let secs = std::time::Duration::from_secs(10);
    let end = tokio::time::timeout(secs, t.finished()).await.expect("ends").unwrap();
    assert_eq!(end.status, ThreadStatus::Failed);
    let error = format!("{:?}", end.error);
    assert!(error.contains("joined twice"), "{error}");
    engine.shutdown().await;
}

/// An hour: the deadline of [`waiter`]'s select, which only the manual clock passes.
const HOUR_MS: u64 = 3_600_000;
/// The child of parent `w`'s select.
const W_CHILD: &str = "w/wait@1/child-1";

/// A parent that starts a `worker` and selects its end or an hour's deadline: it parks
/// (asleep until the deadline) while the child runs.
fn waiter(child: &Workflow<Tally>) -> Workflow<Tally> {
    let child = child.clone();
    Workflow::<Tally>::builder("waiter", 1)
        .node("wait", move |_s: Arc<Tally>, ctx: Ctx| {
            let child = child.clone();
            async move {
                let c = ctx.start_child(&child, Tally::default()).await?;
                let took = match ctx.select(Select::new().child(&c).timeout_ms(HOUR_MS)).await? {
                    Selected::Child(end) => format!("child {}", end.status),
                    Selected::Signal { name, .. } => name,
                    Selected::Timeout => "timeout".into(),
                };
                Ok(NodeOutput::update((0, took)))
            }
        })
        .edge(START, "wait")
        .edge("wait", END)
        .build()
        .unwrap()
}

async fn waiter_engine(path: &std::path::Path, clock: &ManualClock) -> Engine {
    let (child, clock) = (worker(), Arc::new(clock.clone()));
    let parent = waiter(&child);
    open(path, &[&parent, &child], |b| b.seed(3).clock(clock)).await
}

/// The select parks its thread durably while the child runs (asleep until its deadline), and
/// the child's end wakes it, also after the engine was dropped and reopened in between: the
/// parent takes the child's branch and its replay agrees.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_parent_is_woken_by_its_childs_end_after_a_restart() {
    let (_d, path) = db();
    let clock = ManualClock::new(T0);
    let engine = waiter_engine(&path, &clock).await;
    engine.start_json("waiter", Tally::default(), StartOptions::id("w")).await.unwrap();
    assert_eq!(parked(&engine, W_CHILD).await, ThreadStatus::WaitingInput);
    assert_eq!(parked(&engine, "w").await, ThreadStatus::Sleeping, "parked, not in its runner");
    engine.shutdown().await;
    drop(engine);
    let engine = waiter_engine(&path, &clock).await;
    assert_eq!(parked(&engine, "w").await, ThreadStatus::Sleeping, "still parked after the open");
    engine.signal(W_CHILD, "finish", 2u64).await.unwrap();
    let secs = std::time::Duration::from_secs(10);
    let t = engine.thread("w").await.unwrap();
    let end = tokio::time::timeout(secs, t.finished()).await.expect("woken by the child's end");
    assert_eq!(end.unwrap().status, ThreadStatus::Completed);
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log, vec!["child completed".to_string()]);
    let report = engine.replay("w", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{report:?}");
    engine.shutdown().await;
}

/// The same select's deadline still wins while the child runs on (the child is left running).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_parked_parent_takes_its_deadline_while_the_child_runs() {
    let (_d, path) = db();
    let clock = ManualClock::new(T0);
    let engine = waiter_engine(&path, &clock).await;
    let t = engine.start_json("waiter", Tally::default(), StartOptions::id("w")).await.unwrap();
    assert_eq!(parked(&engine, W_CHILD).await, ThreadStatus::WaitingInput);
    assert_eq!(parked(&engine, "w").await, ThreadStatus::Sleeping);
    clock.advance_ms(HOUR_MS + 1);
    let secs = std::time::Duration::from_secs(10);
    let end = tokio::time::timeout(secs, t.finished()).await.expect("the deadline wakes it");
    assert_eq!(end.unwrap().status, ThreadStatus::Completed);
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log, vec!["timeout".to_string()]);
    assert_eq!(parked(&engine, W_CHILD).await, ThreadStatus::WaitingInput, "runs on");
    engine.shutdown().await;
}

/// The store dies at each write in turn while the parent parks in its select, the child ends
/// and wakes it, and the parent ends. The reopened engine (recovery wakes a parent whose child
/// ended while nobody could) finishes the parent on the child's branch: one child, its `finish`
/// stored once, the branch taken once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_parked_select_of_a_child_neither_loses_nor_doubles() {
    let secs = std::time::Duration::from_secs(10);
    let child = worker();
    let parent = waiter(&child);
    let tune = |b: cairn::EngineBuilder, clock: &ManualClock| {
        b.workflow(&parent).workflow(&child).seed(3).clock(Arc::new(clock.clone()))
    };
    let finish = async |engine: &Engine| {
        if stored(engine, W_CHILD, "finish")? == 0 {
            engine.signal(W_CHILD, "finish", 2u64).await?;
        }
        Ok::<_, cairn::Error>(())
    };
    let run = async |engine: &Engine, _: &ManualClock| {
        let t = engine.start_json("waiter", Tally::default(), StartOptions::id("w")).await?;
        parked_or(engine, W_CHILD).await?;
        parked_or(engine, "w").await?;
        finish(engine).await?;
        t.finished().await.map(|_| ())
    };
    let check = async |engine: &Engine, _: &ManualClock, crash_after: i64| {
        let t = match engine.thread("w").await {
            Ok(t) => t,
            Err(_) => {
                engine.start_json("waiter", Tally::default(), StartOptions::id("w")).await.unwrap()
            }
        };
        parked(engine, W_CHILD).await;
        finish(engine).await.unwrap();
        let finished = tokio::time::timeout(secs, t.finished()).await;
        let status = finished.unwrap_or_else(|_| panic!("crash_after {crash_after}: not woken"));
        assert_eq!(status.unwrap().status, ThreadStatus::Completed, "crash_after {crash_after}");
        let out: Tally = t.output().await.unwrap();
        assert_eq!(out.log, vec!["child completed".to_string()], "crash_after {crash_after}");
        assert_eq!(stored(engine, W_CHILD, "finish").unwrap(), 1, "crash_after {crash_after}");
        let w = cairn::ThreadId::new("w").unwrap();
        let started = cairn::admin::started_children_of(engine.store().as_ref(), &w).await;
        assert_eq!(started.unwrap().len(), 1, "crash_after {crash_after}: one child");
        let report = engine.replay("w", &ReplayOptions::default()).await.unwrap();
        assert!(report.is_deterministic(), "crash_after {crash_after}: {report:?}");
        assert!(engine.store().verify().unwrap().is_clean());
    };
    let crashes = every_write(300, || ManualClock::new(T0), tune, run, check).await;
    assert!(crashes >= 8, "the crash points covered the run: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY select_child_park_crash crash_points={crashes} lost=0 doubled=0"
    ));
}
