//! Patching inside a workflow (`ctx.patched`, `ctx.deprecate_patch`): a thread that went past a
//! changed point under the old code goes on through the old branch, a new one takes the new
//! branch, both replay cleanly, and the resume check blocks only an unguarded change.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::event::Body;
use cairn::{Durability, END, Engine, START, StartOptions, ThreadStatus, ToolError};

use crate::common::{Tally, db};

/// Which code the engine runs: the same workflow id, version and graph every time (the
/// fingerprint cannot tell them apart), only the node bodies differ.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Code {
    /// Before the change: `a` adds 1, `work` calls `add`.
    Old,
    /// The change guarded by patches: `a` adds 10, `work` calls `mul`, for tasks that get
    /// there first under this code.
    Patched,
    /// The same change without the guards.
    Unguarded,
    /// The old branches deleted, the patches deprecated.
    Deprecated,
    /// The deprecation calls deleted too.
    Final,
}

/// While set, `work` stops after its tool call and never finishes (so a crash finds it there),
/// and says so.
#[derive(Clone, Default)]
struct Hold(Arc<(AtomicBool, tokio::sync::Notify)>);

/// START -> a -> work -> END. `work` draws a random number, calls a tool on 1, then waits for a
/// number `n`, and adds the tool's result and `n`.
fn wf(code: Code, hold: Hold) -> Workflow<Tally> {
    Workflow::<Tally>::builder("patchy", 1)
        .node("a", move |_s, ctx: Ctx| async move {
            let new = match code {
                Code::Old => false,
                Code::Patched => ctx.patched("a-ten"),
                Code::Deprecated => {
                    ctx.deprecate_patch("a-ten");
                    true
                }
                Code::Unguarded | Code::Final => true,
            };
            Ok(NodeOutput::update(if new { (10, "a-new".to_owned()) } else { (1, "a".to_owned()) }))
        })
        .node("work", move |_s, ctx: Ctx| {
            let hold = hold.clone();
            async move {
                let new = match code {
                    Code::Old => false,
                    Code::Patched => ctx.patched("work-mul"),
                    Code::Deprecated => {
                        ctx.deprecate_patch("work-mul");
                        true
                    }
                    Code::Unguarded | Code::Final => true,
                };
                // A draw after the patch point: a marker recorded before it must not be read as it.
                let _ = ctx.random_u64();
                let v: u64 = if new {
                    ctx.tool("mul", 1u64, |x: u64, _| async move { Ok::<_, ToolError>(x * 10) })
                        .await?
                } else {
                    ctx.tool("add", 1u64, |x: u64, _| async move { Ok::<_, ToolError>(x + 1) })
                        .await?
                };
                if hold.0.0.load(Ordering::SeqCst) {
                    hold.0.1.notify_one();
                    std::future::pending::<()>().await;
                }
                let n: u64 = ctx.interrupt("n?")?;
                let note = if new { "work-new" } else { "work-old" };
                Ok(NodeOutput::update((v + n, note.to_owned())))
            }
        })
        .edge(START, "a")
        .edge("a", "work")
        .edge("work", END)
        .build()
        .expect("patchy workflow")
}

/// What a thread run by the old code alone ends with (given 5).
const OLD_LOG: [&str; 2] = ["a", "work-old"];
/// What a thread run by the new code ends with (given 5).
const NEW_LOG: [&str; 2] = ["a-new", "work-new"];

async fn open(path: &Path, code: Code) -> Engine {
    open_with(path, code, Hold::default()).await
}

async fn open_with(path: &Path, code: Code, hold: Hold) -> Engine {
    let wf = wf(code, hold);
    Engine::builder(path).durability(Durability::None).seed(7).workflow(&wf).open().await.unwrap()
}

/// Starts thread `id` under `code` and leaves it waiting for input in `work` (its tool call
/// recorded), the engine shut down.
async fn waiting(path: &Path, code: Code, id: &str) {
    let engine = open(path, code).await;
    let t = engine.start_json("patchy", Tally::default(), StartOptions::id(id)).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.shutdown().await;
}

/// Gives `id` its input and returns how it stopped.
async fn finish(engine: &Engine, id: &str) -> ThreadStatus {
    engine.send_input(id, 5).await.unwrap();
    engine.thread(id).await.unwrap().wait().await.unwrap().status
}

async fn log_of(engine: &Engine, id: &str) -> (u64, Vec<String>) {
    let out: Tally = engine.thread(id).await.unwrap().output().await.unwrap();
    (out.total, out.log)
}

async fn blocked_ever(engine: &Engine, id: &str) -> bool {
    let mut stream = engine.thread(id).await.unwrap().events(0).unwrap();
    let mut blocked = false;
    while let Some(e) = stream.try_next().await.unwrap() {
        blocked |= matches!(e.body, Body::StatusChanged { to: ThreadStatus::Blocked, .. });
    }
    blocked
}

#[tokio::test]
async fn an_old_thread_finishes_through_the_old_branch_and_a_new_one_through_the_new() {
    let (_d, path) = db();
    waiting(&path, Code::Old, "old").await;
    let engine = open(&path, Code::Patched).await;
    // The resume check replays `a` (completed under the old code): the guard matches its log.
    let tail = engine.replay_tail("old").await.unwrap();
    assert_eq!((tail.tasks_replayed, tail.divergence), (1, None));
    let new = engine.start_json("patchy", Tally::default(), StartOptions::id("new")).await.unwrap();
    assert_eq!(new.wait().await.unwrap().status, ThreadStatus::WaitingInput);

    assert_eq!(finish(&engine, "old").await, ThreadStatus::Completed);
    assert_eq!(log_of(&engine, "old").await, (1 + 2 + 5, OLD_LOG.map(String::from).to_vec()));
    assert!(!blocked_ever(&engine, "old").await);
    assert_eq!(finish(&engine, "new").await, ThreadStatus::Completed);
    assert_eq!(log_of(&engine, "new").await, (10 + 10 + 5, NEW_LOG.map(String::from).to_vec()));
    for id in ["old", "new"] {
        let report = engine.replay(id, &Default::default()).await.unwrap();
        assert_eq!((report.tasks_replayed, report.divergence), (2, None), "{id}");
    }
    engine.shutdown().await;
}

#[tokio::test]
async fn an_old_thread_stopped_by_a_crash_inside_the_patched_node_finishes_the_old_way() {
    let (_d, path) = db();
    let hold = Hold::default();
    hold.0.0.store(true, Ordering::SeqCst);
    let engine = open_with(&path, Code::Old, hold.clone()).await;
    engine.start_json("patchy", Tally::default(), StartOptions::id("old")).await.unwrap();
    // `work` has called its tool (recorded) and is still running: crash.
    hold.0.1.notified().await;
    engine.crash().await;
    drop(engine);

    // Recovery runs `work` again under the patched code: it went past the patch with `add`.
    let engine = open(&path, Code::Patched).await;
    let t = engine.thread("old").await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    assert_eq!(finish(&engine, "old").await, ThreadStatus::Completed);
    assert_eq!(log_of(&engine, "old").await, (1 + 2 + 5, OLD_LOG.map(String::from).to_vec()));
    assert!(!blocked_ever(&engine, "old").await);
    assert!(engine.replay("old", &Default::default()).await.unwrap().is_deterministic());
    engine.shutdown().await;
}

#[tokio::test]
async fn a_new_thread_that_crashes_or_waits_after_the_patch_keeps_the_new_branch() {
    // The new thread recorded its markers before it stopped; a later engine with the same code
    // (which has not created it, so checks it) reads them back.
    let (_d, path) = db();
    waiting(&path, Code::Patched, "new").await;
    let engine = open(&path, Code::Patched).await;
    assert_eq!(finish(&engine, "new").await, ThreadStatus::Completed);
    assert_eq!(log_of(&engine, "new").await.1, NEW_LOG.map(String::from).to_vec());
    assert!(engine.replay("new", &Default::default()).await.unwrap().is_deterministic());
    engine.shutdown().await;
}

#[tokio::test]
async fn the_same_change_without_the_guard_blocks_the_old_thread() {
    let (_d, path) = db();
    waiting(&path, Code::Old, "old").await;
    let engine = open(&path, Code::Unguarded).await;
    let tail = engine.replay_tail("old").await.unwrap();
    assert!(tail.divergence.is_some(), "{tail:?}");
    assert_eq!(finish(&engine, "old").await, ThreadStatus::Blocked);
    engine.shutdown().await;
}

#[tokio::test]
async fn after_deprecation_the_new_code_alone_runs_a_thread_that_had_the_marker() {
    let (_d, path) = db();
    waiting(&path, Code::Patched, "new").await;
    waiting(&path, Code::Old, "old").await;
    let engine = open(&path, Code::Deprecated).await;
    assert_eq!(finish(&engine, "new").await, ThreadStatus::Completed);
    assert_eq!(log_of(&engine, "new").await.1, NEW_LOG.map(String::from).to_vec());
    assert!(engine.replay("new", &Default::default()).await.unwrap().is_deterministic());
    // A thread that needed the old branch is stopped, not run through the new one.
    let tail = engine.replay_tail("old").await.unwrap();
    let d = tail.divergence.expect("the old thread needs the deleted branch");
    assert!(d.what.contains("deprecated patch \"a-ten\""), "{d:?}");
    assert_eq!(finish(&engine, "old").await, ThreadStatus::Blocked);
    engine.shutdown().await;
    drop(engine);

    // With the deprecation calls deleted too, the markers left in the log are read past.
    let engine = open(&path, Code::Final).await;
    let report = engine.replay("new", &Default::default()).await.unwrap();
    assert_eq!((report.tasks_replayed, report.divergence), (2, None));
    engine.shutdown().await;
}

#[tokio::test]
async fn the_listing_finds_the_old_thread_and_not_the_new_one() {
    let (_d, path) = db();
    waiting(&path, Code::Old, "old").await;
    waiting(&path, Code::Patched, "new").await;
    let engine = open(&path, Code::Patched).await;
    for patch in ["a-ten", "work-mul"] {
        let found = engine.threads_without_patch(patch, None, 100).await.unwrap();
        let ids: Vec<_> = found.iter().map(|t| t.thread.as_str()).collect();
        assert_eq!(ids, ["old"], "{patch}");
        assert_eq!(found[0].status, ThreadStatus::WaitingInput);
    }
    let other = engine.threads_without_patch("a-ten", Some("elsewhere"), 100).await.unwrap();
    assert!(other.is_empty());
    // Finished, the old thread no longer needs the old branch.
    assert_eq!(finish(&engine, "old").await, ThreadStatus::Completed);
    assert!(engine.threads_without_patch("a-ten", None, 100).await.unwrap().is_empty());
    engine.shutdown().await;
}
