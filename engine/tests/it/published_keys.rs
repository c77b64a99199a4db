//! The bound on the distinct keys one thread publishes (`PUBLISHED_KEYS_PER_THREAD_MAX`): the
//! new key past it is refused with an error that names the limit and nothing is written; a key
//! published before may be published again at the bound; the node that runs again (after a
//! wake) meets the same refusal at the same place, and replay agrees. The parallel tasks of a
//! step each count the keys of the step's start and their own (never a sibling's), so which
//! is refused does not depend on timing, and a crash at any write around the last slots changes
//! nothing.

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::replay::ReplayOptions;
use cairn::{END, Engine, START, StartOptions, ThreadStatus};
use serde_json::json;

use crate::common::{Tally, db, open};
use crate::crash::Dying;

/// `PUBLISHED_KEYS_PER_THREAD_MAX` (engine/src/limits.rs).
const KEYS_MAX: usize = 1_024;
/// `PUBLICATIONS_PER_TASK_MAX`: node `a` publishes this many keys, node `b` the rest.
const FIRST: usize = 1_000;

/// `a` publishes keys `k0`..; `b` publishes the rest up to the bound, `k0` again, then one key
/// too many (its error is the log), then waits for `go` (so that it runs again).
fn keys() -> Workflow<Tally> {
    Workflow::<Tally>::builder("keys", 1)
        .node("a", |_s: Arc<Tally>, ctx: Ctx| async move {
            for i in 0..FIRST {
                ctx.set_event(&format!("k{i}"), i as u64).await?;
            }
            Ok(NodeOutput::update((0, String::new())))
        })
        .node("b", |_s: Arc<Tally>, ctx: Ctx| async move {
            for i in FIRST..KEYS_MAX {
                ctx.set_event(&format!("k{i}"), i as u64).await?;
            }
            ctx.set_event("k0", "again").await?;
            let refused = match ctx.set_event(&format!("k{KEYS_MAX}"), 0u64).await {
                Ok(()) => "published".to_owned(),
                Err(e) => e.to_string(),
            };
            ctx.set_event("k1", "after").await?;
            let _go: u64 = ctx.recv("go").await?;
            Ok(NodeOutput::update((1, refused)))
        })
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_new_key_past_the_bound_is_refused_a_known_one_is_not_and_replay_agrees() {
    let (_d, path) = db();
    let wf = keys();
    let engine = open(&path, &[&wf], |b| b).await;
    let t = engine.start_json("keys", Tally::default(), StartOptions::id("k")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.signal("k", "go", 1u64).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log.len(), 1, "{:?}", out.log);
    let refused = &out.log[0];
    assert!(
        refused.contains("PUBLISHED_KEYS_PER_THREAD_MAX") && refused.contains("k1024"),
        "the node that ran again is refused the same: {refused}"
    );
    let published = engine.published("k").await.unwrap();
    assert_eq!(published.len(), KEYS_MAX, "nothing written for the refused key");
    assert!(!published.contains_key(&format!("k{KEYS_MAX}")));
    assert_eq!(published["k0"], json!("again"), "a known key at the bound");
    assert_eq!(published["k1"], json!("after"), "and after the refusal");
    let report = engine.replay("k", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{report:?}");
    engine.shutdown().await;
    drop((t, engine));
    let engine = open(&path, &[&wf], |b| b).await;
    assert_eq!(engine.published("k").await.unwrap(), published, "restored from the log");
    let report = engine.replay("k", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{report:?}");
    engine.shutdown().await;
}

/// Node `a` publishes `k0`..`k999` (step 1); then `p` and `q` run in one step (step 2), each
/// trying `SPLIT` new keys of its own: each counts the 1,000 keys of the step's start and its own,
/// never its sibling's, so each is refused at its 25th whichever ran first, and together they
/// pass the bound by 24 (the documented overshoot). Each then waits for `go` and runs again.
fn split() -> Workflow<Tally> {
    const SPLIT: usize = 30;
    let side = |name: &'static str| {
        move |_s: Arc<Tally>, ctx: Ctx| async move {
            let mut refused = String::new();
            for i in 0..SPLIT {
                if let Err(e) = ctx.set_event(&format!("{name}{i}"), i as u64).await {
                    refused = format!("{name}: {e}");
                    break;
                }
            }
            let _go: u64 = ctx.recv("go").await?;
            Ok(NodeOutput::update((1, refused)))
        }
    };
    Workflow::<Tally>::builder("split", 1)
        .node("a", |_s: Arc<Tally>, ctx: Ctx| async move {
            for i in 0..FIRST {
                ctx.set_event(&format!("k{i}"), i as u64).await?;
            }
            Ok(NodeOutput::update((0, String::new())))
        })
        .node("p", side("p"))
        .node("q", side("q"))
        .edge(START, "a")
        .edge("a", "p")
        .edge("a", "q")
        .edge("p", END)
        .edge("q", END)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn parallel_tasks_each_count_the_steps_start_and_their_own_keys_and_replay_agrees() {
    let (_d, path) = db();
    let wf = split();
    let engine = open(&path, &[&wf], |b| b).await;
    let t = engine.start_json("split", Tally::default(), StartOptions::id("s")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.signal("s", "go", 1u64).await.unwrap();
    engine.signal("s", "go", 2u64).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    let mut log = out.log.clone();
    log.sort();
    assert_eq!(log.len(), 2, "{log:?}");
    let own = KEYS_MAX - FIRST;
    for (line, name) in log.iter().zip(["p", "q"]) {
        assert!(
            line.starts_with(&format!("{name}: ")) && line.contains(&format!("\"{name}{own}\"")),
            "each refused at its own {own}th new key, not its sibling's: {line}"
        );
    }
    let published = engine.published("s").await.unwrap();
    assert_eq!(published.len(), FIRST + 2 * own, "the step's overshoot: one task's own new keys");
    let report = engine.replay("s", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{report:?}");
    engine.shutdown().await;
    drop((t, engine));
    let engine = open(&path, &[&wf], |b| b).await;
    assert_eq!(engine.published("s").await.unwrap(), published, "restored from the log");
    let report = engine.replay("s", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{report:?}");
    engine.shutdown().await;
}

/// Keys the thread holds before the crash test's parallel step: two slots are left.
const BEFORE_SLOTS: usize = KEYS_MAX - 2;

/// `a` publishes `k0`..`k999`, `b` the keys up to `BEFORE_SLOTS` and waits for `go`; then `p`
/// and `q`, in one step, each try three new keys (the third refused: the step's start and its
/// own two fill the bound), publish `k5` again (known) and end.
fn last_slots() -> Workflow<Tally> {
    let side = |name: &'static str| {
        move |_s: Arc<Tally>, ctx: Ctx| async move {
            let mut refused = String::new();
            for i in 0..3 {
                if let Err(e) = ctx.set_event(&format!("{name}{i}"), i).await {
                    refused = format!("{name}: {e}");
                }
            }
            ctx.set_event("k5", name).await?;
            Ok(NodeOutput::update((1, refused)))
        }
    };
    Workflow::<Tally>::builder("slots", 1)
        .node("a", |_s: Arc<Tally>, ctx: Ctx| async move {
            for i in 0..FIRST {
                ctx.set_event(&format!("k{i}"), i as u64).await?;
            }
            Ok(NodeOutput::update((0, String::new())))
        })
        .node("b", |_s: Arc<Tally>, ctx: Ctx| async move {
            for i in FIRST..BEFORE_SLOTS {
                ctx.set_event(&format!("k{i}"), i as u64).await?;
            }
            let _go: u64 = ctx.recv("go").await?;
            Ok(NodeOutput::update((0, String::new())))
        })
        .node("p", side("p"))
        .node("q", side("q"))
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", "p")
        .edge("b", "q")
        .edge("p", END)
        .edge("q", END)
        .build()
        .unwrap()
}

/// The number of `event_published` events of `key` in thread `t`'s log.
async fn written(engine: &Engine, key: &str) -> usize {
    let id = cairn::ThreadId::new("t").unwrap();
    let mut events = engine.subscribe(cairn::storage::Scope::Thread(id), 0).unwrap();
    let mut n = 0;
    while let Some(e) = events.try_next().await.unwrap() {
        if matches!(&e.body, cairn::event::Body::EventPublished { key: k, .. } if k == key) {
            n += 1;
        }
    }
    n
}

/// What a finished `slots` thread must show after any crash: each sibling refused its own
/// third key once, the two slots each took two keys (the overshoot), each written once, and
/// replay agrees.
async fn check_slots(engine: &Engine, at: i64) {
    let thread = engine.thread("t").await.unwrap();
    let done = tokio::time::timeout(Duration::from_secs(30), thread.finished()).await;
    assert_eq!(done.expect("in time").unwrap().status, ThreadStatus::Completed, "at {at}");
    let out: Tally = thread.output().await.unwrap();
    let mut log = out.log;
    log.sort();
    assert_eq!(log.len(), 2, "at {at}: {log:?}");
    for (line, name) in log.iter().zip(["p", "q"]) {
        assert!(line.starts_with(&format!("{name}: ")) && line.contains(&format!("\"{name}2\"")));
    }
    let published = engine.published("t").await.unwrap();
    assert_eq!(published.len(), BEFORE_SLOTS + 4, "at {at}: lost or refused a slot");
    for key in ["p0", "p1", "q0", "q1"] {
        assert_eq!(written(engine, key).await, 1, "at {at}: {key} written once");
    }
    assert!(!published.contains_key("p2") && !published.contains_key("q2"), "at {at}");
    let report = engine.replay("t", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "at {at}: {report:?}");
}

/// The thread parks with two slots left; the store then dies at each write in turn while `go`
/// is sent and the parallel step runs. The reopened engine, sent `go` again under its dedup key,
/// finishes with the same refusals and nothing written twice.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_around_the_last_slots_neither_loses_nor_doubles() {
    let wf = last_slots();
    let (_base, base) = db();
    let engine = open(&base, &[&wf], |b| b).await;
    let t = engine.start_json("slots", Tally::default(), StartOptions::id("t")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.shutdown().await;
    drop((t, engine));
    let go = async |engine: &Engine| engine.signal_once("t", "go", 1u64, "go-1").await.map(drop);
    let mut crashes = 0;
    for crash_after in 1..500 {
        let (_d, path) = db();
        std::fs::copy(&base, &path).unwrap();
        let dying = Dying::over_file(&path, Some(crash_after));
        let engine = Engine::with_store(dying.clone()).workflow(&wf).open().await.unwrap();
        let run = async {
            go(&engine).await?;
            engine.thread("t").await?.finished().await.map(drop)
        };
        let died = dying.crash_during(&engine, Duration::from_secs(20), run).await;
        drop(engine);
        if !died {
            break;
        }
        crashes += 1;
        drop(dying);
        let engine = open(&path, &[&wf], |b| b).await;
        go(&engine).await.unwrap_or_else(|e| panic!("at {crash_after}: {e}"));
        check_slots(&engine, crash_after).await;
        engine.shutdown().await;
    }
    assert!(crashes >= 8, "the crash points covered the step: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY published_keys_last_slot_crash crash_points={crashes} lost=0 doubled=0"
    ));
}
