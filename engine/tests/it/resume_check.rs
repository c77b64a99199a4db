//! The resume check: a thread resumed by an engine that did not create it is replayed since its
//! latest checkpoint against the current code; a node body that no longer reproduces the record
//! blocks the thread instead of letting it continue.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::event::Body;
use cairn::{Durability, END, Engine, START, Seq, StartOptions, ThreadStatus, ToolError};
use cairn_core::codec::Recorded;

use crate::common::{Effects, Tally, db, open};

/// START -> a -> b -> hold -> ask -> c -> END. `a` calls tool `add` with 2 instead of 1 while
/// `flip` is set (same id, version and graph: the fingerprint cannot tell); `hold` never
/// finishes while `hold` is set (so a crash finds the thread mid-run); `ask` waits for a number.
fn flip_wf(
    version: u32,
    flip: Arc<AtomicBool>,
    hold: Arc<AtomicBool>,
    effects: Effects,
) -> Workflow<Tally> {
    Workflow::<Tally>::builder("flip", version)
        .node("a", move |_s: Arc<Tally>, ctx: Ctx| {
            let (flip, fx) = (flip.clone(), effects.clone());
            async move {
                let input: u64 = if flip.load(Ordering::SeqCst) { 2 } else { 1 };
                let v: u64 = ctx
                    .tool("add", input, move |x: u64, _| async move {
                        fx.0.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, ToolError>(x + 1)
                    })
                    .await?;
                Ok(NodeOutput::update((v, "a".to_owned())))
            }
        })
        .node("b", |_s, _ctx| async move { Ok(NodeOutput::update((1, "b".to_owned()))) })
        .node("hold", move |_s, _ctx| {
            let hold = hold.clone();
            async move {
                if hold.load(Ordering::SeqCst) {
                    std::future::pending::<()>().await;
                }
                Ok(NodeOutput::update((0, "hold".to_owned())))
            }
        })
        .node("ask", |_s, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt("how many?")?;
            Ok(NodeOutput::update((n, "ask".to_owned())))
        })
        .node("c", |_s, _ctx| async move { Ok(NodeOutput::update((1, "c".to_owned()))) })
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", "hold")
        .edge("hold", "ask")
        .edge("ask", "c")
        .edge("c", END)
        .build()
        .expect("flip workflow")
}

/// The final state of a [`flip_wf`] thread recorded with unflipped code and given 5.
const TOTAL: u64 = 2 + 1 + 5 + 1;

/// How the first engine leaves the thread for the second.
#[derive(Debug, Clone, Copy)]
enum Leave {
    /// Parked waiting for input, engine shut down; the second engine delivers the input.
    WaitingInput,
    /// Running (node `hold` in flight) when the engine crashes; the second engine's recovery
    /// resumes it.
    Crashed,
}

struct Fixture {
    _dir: tempfile::TempDir,
    path: std::path::PathBuf,
    flip: Arc<AtomicBool>,
    hold: Arc<AtomicBool>,
    effects: Effects,
    /// The thread's events as the first engine left them.
    before: Vec<Recorded>,
}

impl Fixture {
    /// First engine: runs thread `t` with the original code and leaves it as `leave` says.
    async fn first(leave: Leave) -> Self {
        let (dir, path) = db();
        let flip = Arc::new(AtomicBool::new(false));
        let hold = Arc::new(AtomicBool::new(matches!(leave, Leave::Crashed)));
        let effects = Effects::default();
        let wf = flip_wf(1, flip.clone(), hold.clone(), effects.clone());
        let engine = open(&path, &[&wf], |b| b.seed(7)).await;
        match leave {
            Leave::WaitingInput => {
                let t = engine
                    .start_json("flip", Tally::default(), StartOptions::id("t"))
                    .await
                    .unwrap();
                assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
                engine.shutdown().await;
            }
            Leave::Crashed => {
                // Steps a and b durable, hold in flight: crash.
                let (tx, rx) = tokio::sync::oneshot::channel::<()>();
                let tx = std::sync::Mutex::new(Some(tx));
                engine.on_step(Arc::new(move |_t, _s, total| {
                    if total == 2
                        && let Some(tx) = tx.lock().unwrap().take()
                    {
                        let _ = tx.send(());
                    }
                }));
                engine.start_json("flip", Tally::default(), StartOptions::id("t")).await.unwrap();
                rx.await.unwrap();
                engine.crash().await;
                hold.store(false, Ordering::SeqCst);
            }
        }
        let before = events(&engine).await;
        drop(engine);
        assert_eq!(effects.count(), 1, "the tool ran once");
        Self { _dir: dir, path, flip, hold, effects, before }
    }

    fn wf(&self, version: u32) -> Workflow<Tally> {
        flip_wf(version, self.flip.clone(), self.hold.clone(), self.effects.clone())
    }

    /// Second engine (with whatever `flip` says now): gets thread `t` going again (recovery
    /// resumes a crashed one; `ask` is given 5), returns once it stops other than for input.
    async fn second(&self, extra: &[&Workflow<Tally>]) -> (Engine, ThreadStatus) {
        let wf = self.wf(1);
        let mut wfs = vec![&wf];
        wfs.extend_from_slice(extra);
        let engine = open(&self.path, &wfs, |b| b.seed(7)).await;
        let t = engine.thread("t").await.unwrap();
        loop {
            match t.wait().await.unwrap().status {
                ThreadStatus::WaitingInput => engine.send_input("t", 5).await.unwrap(),
                status => return (engine, status),
            }
        }
    }

    /// Asserts the thread's log is the first engine's, plus only what the block wrote (no node
    /// ran, no tool ran), and returns the Blocked reasons written after it.
    async fn assert_blocked_untouched(&self, engine: &Engine) -> Vec<String> {
        let now = events(engine).await;
        assert_eq!(now[..self.before.len()], self.before[..], "recorded events changed");
        let mut reasons = Vec::new();
        for e in &now[self.before.len()..] {
            match &e.body {
                Body::StatusChanged { to: ThreadStatus::Blocked, reason, .. } => {
                    reasons.push(reason.clone());
                }
                Body::StatusChanged { .. }
                | Body::InputReceived { .. }
                | Body::Recovered { .. } => {}
                other => panic!("the blocked thread wrote {other:?}"),
            }
        }
        assert_eq!(self.effects.count(), 1, "a tool ran again");
        reasons
    }
}

async fn events(engine: &Engine) -> Vec<Recorded> {
    let mut stream = engine.thread("t").await.unwrap().events(0).unwrap();
    let mut out = Vec::new();
    while let Some(e) = stream.try_next().await.unwrap() {
        out.push(e);
    }
    out
}

fn assert_names_the_divergence(reason: &str) {
    for part in [
        "resuming would diverge",
        "step 1, task a",
        "tool call #0 (add) has another input",
        "recorded 1",
        "now gives 2",
    ] {
        assert!(reason.contains(part), "reason {reason:?} lacks {part:?}");
    }
}

#[tokio::test]
async fn a_changed_node_body_blocks_the_resumed_thread() {
    for leave in [Leave::WaitingInput, Leave::Crashed] {
        let fx = Fixture::first(leave).await;
        fx.flip.store(true, Ordering::SeqCst);
        let (engine, status) = fx.second(&[]).await;
        assert_eq!(status, ThreadStatus::Blocked, "{leave:?}");
        let reasons = fx.assert_blocked_untouched(&engine).await;
        assert_eq!(reasons.len(), 1, "{leave:?}: {reasons:?}");
        assert_names_the_divergence(&reasons[0]);
        // Listings and handles say why.
        let outcome = engine.thread("t").await.unwrap().outcome().await.unwrap();
        assert_names_the_divergence(&outcome.error.unwrap_or_default());
        // The thread holds no lease: nothing drives it.
        let record =
            engine.store().thread(&cairn::ThreadId::new("t").unwrap()).wait().unwrap().unwrap();
        assert!(record.lease.is_none(), "{leave:?}: {:?}", record.lease);
        engine.shutdown().await;
    }
}

#[tokio::test]
async fn unchanged_code_passes_the_check_and_completes() {
    for leave in [Leave::WaitingInput, Leave::Crashed] {
        let fx = Fixture::first(leave).await;
        let (engine, _) = fx.second(&[]).await;
        let t = engine.thread("t").await.unwrap();
        let out: Tally = t.output().await.unwrap();
        assert_eq!(out.total, TOTAL, "{leave:?}");
        assert_eq!(out.log, ["a", "b", "hold", "ask", "c"]);
        assert_eq!(fx.effects.count(), 1, "{leave:?}: the recorded tool call ran again");
        let blocked = events(&engine)
            .await
            .iter()
            .any(|e| matches!(e.body, Body::StatusChanged { to: ThreadStatus::Blocked, .. }));
        assert!(!blocked, "{leave:?}");
        engine.shutdown().await;
    }
}

#[tokio::test]
async fn resuming_with_the_code_still_changed_blocks_again_until_it_is_restored() {
    let leave = Leave::WaitingInput;
    let fx = Fixture::first(leave).await;
    fx.flip.store(true, Ordering::SeqCst);
    let (engine, status) = fx.second(&[]).await;
    assert_eq!(status, ThreadStatus::Blocked);
    let t = engine.thread("t").await.unwrap();

    engine.resume("t").await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::Blocked);
    let reasons = fx.assert_blocked_untouched(&engine).await;
    assert_eq!(reasons.len(), 2, "{reasons:?}");
    assert_names_the_divergence(&reasons[1]);

    // The old behaviour is back (a fixed deployment): the check passes, the thread completes
    // from its record.
    fx.flip.store(false, Ordering::SeqCst);
    engine.resume("t").await.unwrap();
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.total, TOTAL);
    assert_eq!(fx.effects.count(), 1, "the recorded tool call ran again");
    engine.shutdown().await;
}

#[tokio::test]
async fn a_migration_unblocks_the_thread_onto_the_new_version() {
    let leave = Leave::WaitingInput;
    let fx = Fixture::first(leave).await;
    fx.flip.store(true, Ordering::SeqCst);
    let v2 = fx.wf(2);
    let (engine, status) = fx.second(&[&v2]).await;
    assert_eq!(status, ThreadStatus::Blocked);
    assert!(engine.replay_tail("t").await.unwrap().divergence.is_some());

    engine.register_migration("flip", 1, 2, Ok);
    engine.migrate("t", 2).await.unwrap();
    // The migration's checkpoint is the thread's new starting point: nothing after it to check.
    let tail = engine.replay_tail("t").await.unwrap();
    assert_eq!((tail.tasks_replayed, tail.divergence), (0, None));
    engine.resume("t").await.unwrap();
    let out: Tally = engine.thread("t").await.unwrap().output().await.unwrap();
    assert_eq!(out.total, TOTAL);
    engine.shutdown().await;
}

#[tokio::test]
async fn threads_created_by_this_engine_are_not_checked() {
    // Code cannot change inside one process; flipping it here stands for "the check never runs
    // for a thread this instance started", so the recorded step is simply taken as is.
    let (_d, path) = db();
    let flip = Arc::new(AtomicBool::new(false));
    let effects = Effects::default();
    let wf = flip_wf(1, flip.clone(), Arc::new(AtomicBool::new(false)), effects.clone());
    let engine = open(&path, &[&wf], |b| b.seed(7)).await;
    let t = engine.start_json("flip", Tally::default(), StartOptions::id("t")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    flip.store(true, Ordering::SeqCst);
    engine.send_input("t", 5).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.total, TOTAL);
    // The same log replayed with the flipped code does diverge.
    assert!(engine.replay("t", &Default::default()).await.unwrap().divergence.is_some());
    engine.shutdown().await;
}

/// START -> inc (x25, a checkpoint every 10 steps) -> ask -> END; `inc` adds 2 instead of 1 in
/// its first 5 runs while `flip` is set.
fn counter(flip: Arc<AtomicBool>) -> Workflow<Tally> {
    Workflow::<Tally>::builder("counter", 1)
        .node("inc", move |s: Arc<Tally>, _ctx| {
            let flip = flip.clone();
            async move {
                let add = if flip.load(Ordering::SeqCst) && s.total < 5 { 2 } else { 1 };
                Ok(NodeOutput::update((add, String::new())))
            }
        })
        .node("ask", |_s, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt("how many?")?;
            Ok(NodeOutput::update((n, String::new())))
        })
        .edge(START, "inc")
        .route("inc", |s: &Tally| if s.total >= 25 { "ask" } else { "inc" }, ["inc", "ask"])
        .loop_bound("inc", 25)
        .edge("ask", END)
        .build()
        .expect("counter workflow")
}

#[tokio::test]
async fn the_check_replays_only_the_tail_since_the_latest_checkpoint() {
    let (_d, path) = db();
    let flip = Arc::new(AtomicBool::new(false));
    let wf = counter(flip.clone());
    let builder = || {
        Engine::builder(&path)
            .durability(Durability::None)
            .seed(7)
            .checkpoint_every(Some(10), None)
            .workflow(&wf)
    };
    let engine = builder().open().await.unwrap();
    let t = engine.start_json("counter", Tally::default(), StartOptions::id("t")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let id = cairn::ThreadId::new("t").unwrap();
    let checkpoint =
        engine.store().latest_checkpoint_at_or_before(&id, Seq(u64::MAX)).wait().unwrap();
    let checkpoint = checkpoint.expect("a periodic checkpoint").covers.seq.0;

    let tail = engine.replay_tail("t").await.unwrap();
    assert_eq!(tail.after_seq, checkpoint);
    assert_eq!(tail.tasks_replayed, 5, "steps 21..=25 follow the checkpoint after step 20");
    assert_eq!(tail.divergence, None);
    let whole = engine.replay("t", &Default::default()).await.unwrap();
    assert_eq!((whole.after_seq, whole.tasks_replayed), (1, 25));
    engine.shutdown().await;
    drop((t, engine));

    // A change that only the steps before the checkpoint would show is not what resuming
    // checks: the thread goes on from the checkpoint's state.
    flip.store(true, Ordering::SeqCst);
    let engine = builder().open().await.unwrap();
    assert!(engine.replay("t", &Default::default()).await.unwrap().divergence.is_some());
    assert_eq!(engine.replay_tail("t").await.unwrap().divergence, None);
    engine.send_input("t", 5).await.unwrap();
    let out: Tally = engine.thread("t").await.unwrap().output().await.unwrap();
    assert_eq!(out.total, 30);
    engine.shutdown().await;
}

/// START -> split -> {p, ask} -> join -> last -> END. `p` checkpoints after it completes, which
/// happens in the step where map task `ask[0]` calls a tool (named `fetch2` instead of `fetch`
/// while `flip` is set) and then waits for input: the checkpoint lies inside the step, after the
/// task's tool call and before its completion, so only the checkpoint's journal holds the call's
/// result. `last` waits for input again.
fn mid_step(flip: Arc<AtomicBool>, effects: Effects) -> Workflow<Tally> {
    use cairn::dsl::NodePolicy;
    Workflow::<Tally>::builder("mid", 1)
        .node("split", |_s, _ctx| async move { Ok(NodeOutput::update((0, "split".to_owned()))) })
        .node_with(
            "p",
            |_s, _ctx| async move { Ok(NodeOutput::update((1, "p".to_owned()))) },
            NodePolicy::default().checkpoint_after(true),
        )
        .map(
            "ask",
            |_s: &Tally| vec![10u64],
            move |_s, ctx: Ctx| {
                let (flip, fx) = (flip.clone(), effects.clone());
                async move {
                    let item: u64 = ctx.item()?;
                    let name = if flip.load(Ordering::SeqCst) { "fetch2" } else { "fetch" };
                    let v: u64 = ctx
                        .tool(name, item, move |x: u64, _| async move {
                            fx.0.fetch_add(1, Ordering::SeqCst);
                            Ok::<_, ToolError>(x + 1)
                        })
                        .await?;
                    let n: u64 = ctx.interrupt("n?")?;
                    Ok(NodeOutput::update((v + n, "ask".to_owned())))
                }
            },
        )
        .node("last", |_s, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt("last?")?;
            Ok(NodeOutput::update((n, "last".to_owned())))
        })
        .edge(START, "split")
        .fan_out("split", ["p", "ask"])
        .join(["p", "ask"], "last")
        .edge("last", END)
        .build()
        .expect("mid-step workflow")
}

#[tokio::test]
async fn a_checkpoint_inside_a_step_gives_the_tail_its_recorded_tool_results() {
    for changed in [false, true] {
        let (_d, path) = db();
        let flip = Arc::new(AtomicBool::new(false));
        let effects = Effects::default();
        let wf = mid_step(flip.clone(), effects.clone());
        let engine = Engine::builder(&path)
            .durability(Durability::None)
            .seed(7)
            .workflow(&wf)
            .open()
            .await
            .unwrap();
        let t = engine.start_json("mid", Tally::default(), StartOptions::id("t")).await.unwrap();
        assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
        let id = cairn::ThreadId::new("t").unwrap();
        let cp = engine.store().latest_checkpoint_at_or_before(&id, Seq(u64::MAX)).wait().unwrap();
        let cp = cp.expect("p's checkpoint").covers.seq.0;
        engine.send_input("t", 5).await.unwrap();
        assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
        engine.shutdown().await;
        drop((t, engine));

        flip.store(changed, Ordering::SeqCst);
        let engine = Engine::builder(&path)
            .durability(Durability::None)
            .seed(7)
            .workflow(&wf)
            .open()
            .await
            .unwrap();
        let tail = engine.replay_tail("t").await.unwrap();
        assert_eq!(tail.after_seq, cp, "the checkpoint inside step 2 is the latest");
        assert_eq!(tail.tasks_replayed, 1, "ask[0] completed after it");
        assert_eq!(tail.divergence.is_some(), changed, "{:?}", tail.divergence);
        if let Some(d) = &tail.divergence {
            assert_eq!((d.step, d.task.as_str()), (2, "ask[0]"));
            assert!(d.what.contains("names another tool"), "{d}");
        }
        engine.send_input("t", 7).await.unwrap();
        let t = engine.thread("t").await.unwrap();
        let status = t.wait().await.unwrap().status;
        if changed {
            assert_eq!(status, ThreadStatus::Blocked);
        } else {
            let out: Tally = t.output().await.unwrap();
            assert_eq!(out.total, 1 + 11 + 5 + 7);
        }
        assert_eq!(effects.count(), 1, "changed={changed}: the tool ran again");
        engine.shutdown().await;
    }
}
