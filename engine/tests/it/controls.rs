//! One test per control: cancel, pause/resume, timeouts, deadlines, retries, budgets,
//! permissions, human input, durable sleep, locks.

use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};

use cairn::clock::ManualClock;
use cairn::dsl::{Budgets, Ctx, NodeOutput, NodePolicy, RetryPolicy, ToolCall, Workflow};
use cairn::event::Body;
use cairn::{Durability, END, Engine, NodeError, START, StartOptions, ThreadStatus, ToolError};

use crate::common::{Tally, db};

async fn open(
    path: &std::path::Path,
    wfs: &[&Workflow<Tally>],
    clock: Option<ManualClock>,
) -> Engine {
    let mut b = Engine::builder(path).durability(Durability::None).cancel_grace_ms(50);
    if let Some(c) = clock {
        b = b.clock(Arc::new(c));
    }
    for wf in wfs {
        b = b.workflow(wf);
    }
    b.open().await.unwrap()
}

fn one_node<F, Fut>(id: &str, policy: NodePolicy, f: F) -> Workflow<Tally>
where
    F: Fn(Arc<Tally>, Ctx) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = cairn::NodeResult<(u64, String)>> + Send + 'static,
{
    Workflow::<Tally>::builder(id, 1)
        .node_with("only", f, policy)
        .edge(START, "only")
        .edge("only", END)
        .build()
        .unwrap()
}

/// The sub-workflow threads of `parent`.
fn children_of(engine: &Engine, parent: &str) -> Vec<cairn::storage::ThreadRecord> {
    let filter = cairn::storage::ThreadFilter {
        labels: vec![("parent".into(), parent.into())],
        ..Default::default()
    };
    engine
        .store()
        .list_threads(&filter, cairn::storage::Page { limit: 10, offset: 0 })
        .wait()
        .unwrap()
}

/// Bodies of a thread's events, in order.
fn bodies(engine: &Engine, thread: &str) -> Vec<Body> {
    let id = cairn::ThreadId::new(thread).unwrap();
    engine
        .store()
        .read_since(&id, cairn::Seq(0), 10_000)
        .wait()
        .unwrap()
        .into_iter()
        .map(|e| cairn::blocking::decode(engine.store().as_ref(), e).unwrap().body)
        .collect()
}

#[tokio::test]
async fn cancel_during_a_tool_call_reaches_the_tool_and_releases_locks() {
    let (_d, path) = db();
    let (started_tx, started_rx) = tokio::sync::oneshot::channel::<()>();
    let started_tx = Arc::new(std::sync::Mutex::new(Some(started_tx)));
    let wf = one_node("slow", NodePolicy::default(), move |_s, ctx: Ctx| {
        let started_tx = started_tx.clone();
        async move {
            ctx.lock("out.txt", 60_000).await?;
            let r: u64 = ctx
                .tool("slow", 1u64, move |_x: u64, tool_ctx| async move {
                    if let Some(tx) = started_tx.lock().unwrap().take() {
                        let _ = tx.send(());
                    }
                    // A well-behaved tool stops when asked.
                    tool_ctx.cancellation().cancelled().await;
                    Err::<u64, _>(ToolError::fatal("cancelled"))
                })
                .await?;
            Ok(NodeOutput::update((r, "never".into())))
        }
    });
    let engine = open(&path, &[&wf], None).await;
    let t = engine.start_json("slow", Tally::default(), StartOptions::id("c1")).await.unwrap();
    started_rx.await.unwrap();
    assert_eq!(engine.store().locks().wait().unwrap().len(), 1);
    engine.cancel("c1", "user pressed stop").await.unwrap();
    let out = t.finished().await.unwrap();
    assert_eq!(out.status, ThreadStatus::Cancelled);
    assert!(engine.store().locks().wait().unwrap().is_empty(), "locks released on cancel");
    let b = bodies(&engine, "c1");
    assert!(b.iter().any(|b| matches!(b, Body::StatusChanged { to: ThreadStatus::Cancelled, reason, .. } if reason == "user pressed stop")));
    assert!(b.iter().any(|b| matches!(b, Body::Lock { acquired: false, .. })));
    engine.shutdown().await;
}

fn asks_input(id: &str) -> Workflow<Tally> {
    one_node(id, NodePolicy::default(), |_s, ctx: Ctx| async move {
        let n: u64 = ctx.interrupt(serde_json::json!({"question": "how many?"}))?;
        Ok(NodeOutput::update((n, "answered".into())))
    })
}

#[tokio::test]
async fn cancel_a_parked_thread() {
    let (_d, path) = db();
    let wf = asks_input("ask");
    let engine = open(&path, &[&wf], None).await;
    let t = engine.start_json("ask", Tally::default(), StartOptions::id("p1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.cancel("p1", "no longer needed").await.unwrap();
    assert_eq!(t.status().await.unwrap(), ThreadStatus::Cancelled);
    let err = engine.cancel("p1", "again").await.unwrap_err();
    assert!(matches!(err, cairn::Error::Transition { .. }), "{err}");
    engine.shutdown().await;
}

#[tokio::test]
async fn interrupt_and_input_across_a_restart() {
    let (_d, path) = db();
    let wf = asks_input("ask");
    let engine = open(&path, &[&wf], None).await;
    let t = engine.start_json("ask", Tally::default(), StartOptions::id("i1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.shutdown().await;
    drop(t);
    drop(engine);
    let engine = open(&path, &[&wf], None).await;
    let t = engine.thread("i1").await.unwrap();
    assert_eq!(
        t.status().await.unwrap(),
        ThreadStatus::WaitingInput,
        "still waiting after the restart"
    );
    engine.send_input("i1", 42).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.total, 42);
    let b = bodies(&engine, "i1");
    assert!(b.iter().any(
        |b| matches!(b, Body::InputReceived { value, .. } if value == &serde_json::json!(42))
    ));
    engine.shutdown().await;
}

fn counter(id: &str, n: u64) -> Workflow<Tally> {
    Workflow::<Tally>::builder(id, 1)
        .node("inc", |_s, _ctx| async move { Ok(NodeOutput::update((1, String::new()))) })
        .edge(START, "inc")
        .route("inc", move |s: &Tally| if s.total >= n { END } else { "inc" }, ["inc", END])
        .loop_bound("inc", n as u32)
        .build()
        .unwrap()
}

/// [`counter`] whose node waits at `total >= 10` until `gate` opens: the runner computes steps
/// ahead of their commits, so an ungated thread could end before a control reaches it.
fn gated_counter(id: &str, n: u64, gate: tokio::sync::watch::Receiver<bool>) -> Workflow<Tally> {
    Workflow::<Tally>::builder(id, 1)
        .node("inc", move |s: Arc<Tally>, _ctx| {
            let mut gate = gate.clone();
            async move {
                if s.total >= 10 {
                    let _ = gate.wait_for(|open| *open).await;
                }
                Ok(NodeOutput::update((1, String::new())))
            }
        })
        .edge(START, "inc")
        .route("inc", move |s: &Tally| if s.total >= n { END } else { "inc" }, ["inc", END])
        .loop_bound("inc", n as u32)
        .build()
        .unwrap()
}

#[tokio::test]
async fn pause_and_resume_survive_a_restart() {
    let (_d, path) = db();
    let (gate, gate_rx) = tokio::sync::watch::channel(false);
    let wf = gated_counter("count", 200, gate_rx);
    let engine = open(&path, &[&wf], None).await;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = std::sync::Mutex::new(Some(tx));
    engine.on_step(Arc::new(move |_t, step, _| {
        if step == 10
            && let Some(tx) = tx.lock().unwrap().take()
        {
            let _ = tx.send(());
        }
    }));
    let t = engine.start_json("count", Tally::default(), StartOptions::id("pz")).await.unwrap();
    rx.await.unwrap();
    // The pause is asked while step 11 waits at the gate (join! polls it first), then the gate
    // opens: the thread pauses at the end of that step.
    let (paused, ()) = tokio::join!(engine.pause("pz"), async {
        gate.send_replace(true);
    });
    paused.unwrap();
    assert_eq!(t.status().await.unwrap(), ThreadStatus::Paused);
    engine.shutdown().await;
    drop(t);
    drop(engine);
    let engine = open(&path, &[&wf], None).await;
    let t = engine.thread("pz").await.unwrap();
    assert_eq!(
        t.status().await.unwrap(),
        ThreadStatus::Paused,
        "a paused thread is not resumed by recovery"
    );
    assert!(engine.resumable().await.unwrap().iter().any(|r| r.id.as_str() == "pz"));
    engine.resume("pz").await.unwrap();
    assert_eq!(t.output::<Tally>().await.unwrap().total, 200);
    engine.shutdown().await;
}

#[tokio::test]
async fn retry_then_success_and_non_retryable_failure() {
    let (_d, path) = db();
    let flaky = one_node(
        "flaky",
        NodePolicy::default().retry(RetryPolicy::fixed(3, 1)),
        |_s, ctx: Ctx| async move {
            if ctx.attempt() < 3 {
                return Err(NodeError::retryable(format!("attempt {} failed", ctx.attempt())));
            }
            Ok(NodeOutput::update((u64::from(ctx.attempt()), "ok".into())))
        },
    );
    let fatal = one_node(
        "fatal",
        NodePolicy::default().retry(RetryPolicy::fixed(5, 1)),
        |_s, _ctx: Ctx| async move {
            Err::<NodeOutput<(u64, String)>, _>(NodeError::fatal("bad input"))
        },
    );
    let engine = open(&path, &[&flaky, &fatal], None).await;
    let out: Tally = engine
        .start_json("flaky", Tally::default(), StartOptions::id("r1"))
        .await
        .unwrap()
        .output()
        .await
        .unwrap();
    assert_eq!(out.total, 3);
    let b = bodies(&engine, "r1");
    let retries: Vec<u32> = b
        .iter()
        .filter_map(|b| match b {
            Body::RetryScheduled { attempt, .. } => Some(*attempt),
            _ => None,
        })
        .collect();
    assert_eq!(retries, vec![2, 3]);

    let t = engine.start_json("fatal", Tally::default(), StartOptions::id("r2")).await.unwrap();
    let outcome = t.finished().await.unwrap();
    assert_eq!(outcome.status, ThreadStatus::Failed);
    let b = bodies(&engine, "r2");
    assert!(
        !b.iter().any(|b| matches!(b, Body::RetryScheduled { .. })),
        "a fatal error is not retried"
    );
    assert!(b.iter().any(|b| matches!(b, Body::NodeFailed { terminal: true, .. })));
    engine.shutdown().await;
}

#[tokio::test]
async fn node_timeout_counts_as_a_failure_for_the_retry_policy() {
    let (_d, path) = db();
    let wf = one_node(
        "slowpoke",
        NodePolicy::default().timeout_ms(30).retry(RetryPolicy::fixed(2, 1)),
        |_s, ctx: Ctx| async move {
            if ctx.attempt() == 1 {
                // Hangs until the watchdog cancels the attempt.
                ctx.cancelled().await;
            }
            Ok(NodeOutput::update((u64::from(ctx.attempt()), "done".into())))
        },
    );
    let engine = open(&path, &[&wf], None).await;
    let out: Tally = engine
        .start_json("slowpoke", Tally::default(), StartOptions::id("to"))
        .await
        .unwrap()
        .output()
        .await
        .unwrap();
    assert_eq!(out.total, 2, "the second attempt succeeded");
    let b = bodies(&engine, "to");
    assert!(b.iter().any(|b| matches!(
        b,
        Body::NodeFailed { error: NodeError::Timeout { .. }, terminal: false, .. }
    )));
    engine.shutdown().await;
}

#[tokio::test]
async fn thread_deadline_ends_it_timed_out() {
    let (_d, path) = db();
    let wf = one_node("forever", NodePolicy::default(), |_s, ctx: Ctx| async move {
        ctx.cancelled().await;
        Err::<NodeOutput<(u64, String)>, _>(NodeError::Cancelled)
    });
    let engine = open(&path, &[&wf], None).await;
    let opts = StartOptions { deadline_ms: Some(40), ..StartOptions::id("dl") };
    let t = engine.start_json("forever", Tally::default(), opts).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::TimedOut);

    // A parked thread times out too.
    let ask = asks_input("ask");
    engine.register(&ask).unwrap();
    let opts = StartOptions { deadline_ms: Some(40), ..StartOptions::id("dl2") };
    let t = engine.start_json("ask", Tally::default(), opts).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::TimedOut);
    engine.shutdown().await;
}

#[tokio::test]
async fn budget_warning_stop_raise_and_resume() {
    let (_d, path) = db();
    let wf = counter("count", 8);
    let engine = open(&path, &[&wf], None).await;
    let budgets = Budgets { max_steps: Some(5), warn_fraction: 0.6, ..Budgets::default() };
    let opts = StartOptions { budgets: Some(budgets.clone()), ..StartOptions::id("b1") };
    let t = engine.start_json("count", Tally::default(), opts).await.unwrap();
    let outcome = t.wait().await.unwrap();
    assert_eq!(outcome.status, ThreadStatus::Paused, "stopped cleanly at the limit");
    let b = bodies(&engine, "b1");
    let budget_events: Vec<(u64, u64)> = b
        .iter()
        .filter_map(|b| match b {
            Body::Budget { used, limit, .. } => Some((*used, *limit)),
            _ => None,
        })
        .collect();
    assert_eq!(budget_events, vec![(3, 5), (5, 5)], "a warning at 60%, then the stop");
    engine.set_budgets("b1", Budgets { max_steps: Some(20), ..budgets }).await.unwrap();
    engine.resume("b1").await.unwrap();
    assert_eq!(t.output::<Tally>().await.unwrap().total, 8);
    engine.shutdown().await;
}

#[tokio::test]
async fn permission_denied_is_an_error_event() {
    let (_d, path) = db();
    let wf = one_node("net", NodePolicy::default(), |_s, ctx: Ctx| async move {
        let v: u64 = ctx
            .call(ToolCall::new("fetch").permission("net"), 1u64, |x: u64, _| async move {
                Ok::<_, ToolError>(x)
            })
            .await?;
        Ok(NodeOutput::update((v, "fetched".into())))
    });
    let engine = open(&path, &[&wf], None).await;
    let t = engine.start_json("net", Tally::default(), StartOptions::id("n1")).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Failed);
    let b = bodies(&engine, "n1");
    assert!(b.iter().any(|b| matches!(b, Body::NodeFailed { error: NodeError::PermissionDenied { permission, .. }, .. } if permission == "net")));
    // Granted per thread, the same call runs.
    let mut perms = std::collections::BTreeSet::new();
    perms.insert("net".to_owned());
    let opts = StartOptions { permissions: Some(perms), ..StartOptions::id("n2") };
    let out: Tally =
        engine.start_json("net", Tally::default(), opts).await.unwrap().output().await.unwrap();
    assert_eq!(out.total, 1);
    engine.shutdown().await;
}

#[tokio::test]
async fn durable_sleep_across_a_restart_with_the_manual_clock() {
    let (_d, path) = db();
    let wf = one_node("nap", NodePolicy::default(), |_s, ctx: Ctx| async move {
        ctx.sleep_ms(3_600_000).await?;
        Ok(NodeOutput::update((ctx.now_ms(), "woke".into())))
    });
    let clock = ManualClock::new(1_000_000);
    let engine = open(&path, &[&wf], Some(clock.clone())).await;
    let t = engine.start_json("nap", Tally::default(), StartOptions::id("s1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::Sleeping);
    engine.shutdown().await;
    drop(t);
    drop(engine);
    let engine = open(&path, &[&wf], Some(clock.clone())).await;
    let t = engine.thread("s1").await.unwrap();
    assert_eq!(t.status().await.unwrap(), ThreadStatus::Sleeping);
    clock.advance_ms(3_599_999);
    tokio::task::yield_now().await;
    assert_eq!(t.status().await.unwrap(), ThreadStatus::Sleeping, "not before its time");
    clock.advance_ms(1);
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.log, vec!["woke"]);
    assert!(out.total >= 4_600_000, "the clock reading after the sleep: {}", out.total);
    engine.shutdown().await;
}

#[tokio::test]
async fn lock_contention_expiry_and_release_on_every_end() {
    let (_d, path) = db();
    let clock = ManualClock::new(0);
    // Holder: takes the lock (ttl 1000) and waits for input.
    let holder = one_node("holder", NodePolicy::default(), |_s, ctx: Ctx| async move {
        ctx.lock("report.md", 1_000).await?;
        let _: u64 = ctx.interrupt("go?")?;
        Ok(NodeOutput::update((1, "held".into())))
    });
    // Impatient: try_lock fails at once on contention.
    let impatient = one_node("impatient", NodePolicy::default(), |_s, ctx: Ctx| async move {
        ctx.try_lock("report.md", 1_000).await?;
        Ok(NodeOutput::update((1, "got it".into())))
    });
    // Patient: waits for the lock.
    let tries = Arc::new(AtomicU32::new(0));
    let tries2 = tries.clone();
    let patient = one_node("patient", NodePolicy::default(), move |_s, ctx: Ctx| {
        let tries = tries2.clone();
        async move {
            tries.fetch_add(1, Ordering::SeqCst);
            ctx.lock("report.md", 1_000).await?;
            Ok(NodeOutput::update((1, "waited".into())))
        }
    });
    let engine = open(&path, &[&holder, &impatient, &patient], Some(clock.clone())).await;
    let h = engine.start_json("holder", Tally::default(), StartOptions::id("h")).await.unwrap();
    assert_eq!(h.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let i = engine.start_json("impatient", Tally::default(), StartOptions::id("i")).await.unwrap();
    assert_eq!(
        i.finished().await.unwrap().status,
        ThreadStatus::Failed,
        "contention is an error for try_lock"
    );
    assert!(
        bodies(&engine, "i")
            .iter()
            .any(|b| matches!(b, Body::NodeFailed { error: NodeError::Lock { .. }, .. }))
    );
    // Expiry: after the ttl another thread takes the lock even though the holder still waits.
    let p = engine.start_json("patient", Tally::default(), StartOptions::id("p")).await.unwrap();
    clock.advance_ms(1_001);
    assert_eq!(p.finished().await.unwrap().status, ThreadStatus::Completed);
    // Release on end: the patient thread completed, so its lock is gone; the holder's expired
    // lock was taken over. Cancel the holder: nothing of it remains.
    engine.cancel("h", "done").await.unwrap();
    assert!(
        engine.store().locks().wait().unwrap().iter().all(|l| l.owner != "h" && l.owner != "p"),
        "{:?}",
        engine.store().locks().wait().unwrap()
    );
    engine.shutdown().await;
}

#[tokio::test]
async fn a_waiting_lock_is_taken_when_released_and_cancel_reaches_child_threads() {
    let (_d, path) = db();
    let clock = ManualClock::new(0);
    // The child workflow holds a lock and waits for input; the parent runs it as a sub-workflow.
    let child = one_node("child", NodePolicy::default(), |_s, ctx: Ctx| async move {
        ctx.lock("shared", 1_000_000).await?;
        let _: u64 = ctx.interrupt("go?")?;
        Ok(NodeOutput::update((1, "child".into())))
    });
    let parent = Workflow::<Tally>::builder("parent", 1)
        .subgraph("sub", child, |s: &Tally| s.clone(), |c: &Tally| (c.total, "sub".to_owned()))
        .edge(START, "sub")
        .edge("sub", END)
        .build()
        .unwrap();
    let waiter = one_node("waiter", NodePolicy::default(), |_s, ctx: Ctx| async move {
        ctx.lock("shared", 1_000).await?;
        Ok(NodeOutput::update((1, "got".into())))
    });
    let engine = open(&path, &[&parent, &waiter], Some(clock.clone())).await;
    let p = engine.start_json("parent", Tally::default(), StartOptions::id("par")).await.unwrap();
    assert_eq!(p.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let w = engine.start_json("waiter", Tally::default(), StartOptions::id("w")).await.unwrap();
    engine.cancel("par", "stop everything").await.unwrap();
    // The clock never moves: the waiter gets the lock because the cancelled child released it.
    assert_eq!(w.finished().await.unwrap().status, ThreadStatus::Completed);
    let children = children_of(&engine, "par");
    assert_eq!(children.len(), 1);
    assert_eq!(children[0].status, ThreadStatus::Cancelled, "the child ended with its parent");
    engine.shutdown().await;
}

#[tokio::test]
async fn the_three_channel_view_splits_progress_control_and_monitor() {
    use cairn::Channel;
    let (_d, path) = db();
    let wf = one_node("chan", NodePolicy::default(), |_s, ctx: Ctx| async move {
        ctx.progress(1, 2, "half");
        let n: u64 = ctx.interrupt("n?")?;
        ctx.progress(2, 2, "done");
        Ok(NodeOutput::update((n, "x".into())))
    });
    let engine = open(&path, &[&wf], None).await;
    let t = engine.start_json("chan", Tally::default(), StartOptions::id("ch")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let mut control = t.events(0).unwrap();
    let first = control.next_in(Channel::Control).await.unwrap();
    assert!(
        matches!(first.body, Body::StatusChanged { to: ThreadStatus::Running, .. }),
        "{first:?}"
    );
    let mut progress = t.events(0).unwrap();
    let p = progress.next_in(Channel::Progress).await.unwrap();
    assert!(matches!(p.body, Body::Progress { .. }));
    let mut monitor = t.events(0).unwrap();
    let m = monitor.next_in(Channel::Monitor).await.unwrap();
    assert!(matches!(m.body, Body::ThreadCreated { .. }));
    engine.send_input("ch", 3).await.unwrap();
    assert_eq!(t.output::<Tally>().await.unwrap().total, 3);
    engine.shutdown().await;
}

/// A woken thread (timer fired, input delivered, resumed, started) waits for a runner permit
/// with its status already Running and no runner: a pause that lands in that window is
/// recorded at once, and the runner that later gets the permit must leave the thread Paused
/// (it used to run it on, losing a pause the caller saw acknowledged).
#[tokio::test]
async fn a_pause_while_a_woken_thread_waits_for_a_runner_holds() {
    let (_d, path) = db();
    let clock = ManualClock::new(1_000_000);
    let (gate, gate_rx) = tokio::sync::watch::channel(false);
    let (busy_tx, busy_rx) = tokio::sync::oneshot::channel();
    let busy_tx = std::sync::Mutex::new(Some(busy_tx));
    // Holds the only runner permit until the gate opens.
    let busy = one_node("busy", NodePolicy::default(), move |_s, _ctx| {
        let (mut gate, started) = (gate_rx.clone(), busy_tx.lock().unwrap().take());
        async move {
            if let Some(tx) = started {
                let _ = tx.send(());
            }
            let _ = gate.wait_for(|open| *open).await;
            Ok(NodeOutput::update((1, "busy".into())))
        }
    });
    let nap = Workflow::<Tally>::builder("nap", 1)
        .node("nap", |_s, ctx: Ctx| async move {
            ctx.sleep_ms(1_000).await?;
            Ok(NodeOutput::update((1, "woke".into())))
        })
        .node("after", |_s, _ctx| async move { Ok(NodeOutput::update((1, "after".into()))) })
        .edge(START, "nap")
        .edge("nap", "after")
        .edge("after", END)
        .build()
        .unwrap();
    let quick = one_node("quick", NodePolicy::default(), |_s, _ctx| async move {
        Ok(NodeOutput::update((1, "quick".into())))
    });
    let engine = Engine::builder(&path)
        .durability(Durability::None)
        .concurrency(1)
        .clock(Arc::new(clock.clone()))
        .workflow(&busy)
        .workflow(&nap)
        .workflow(&quick)
        .open()
        .await
        .unwrap();
    let s = engine.start_json("nap", Tally::default(), StartOptions::id("s")).await.unwrap();
    assert_eq!(s.wait().await.unwrap().status, ThreadStatus::Sleeping);
    let b = engine.start_json("busy", Tally::default(), StartOptions::id("b")).await.unwrap();
    busy_rx.await.unwrap();
    // The timer fires: `s` is Running, queued behind `b` for the permit.
    clock.advance_ms(1_000);
    while s.status().await.unwrap() != ThreadStatus::Running {
        tokio::task::yield_now().await;
    }
    // The pause is recorded while the runner of `s` still waits for the permit (opening the
    // gate at the same time let that runner in first now and then, and `s` completed).
    engine.pause("s").await.unwrap();
    gate.send_replace(true);
    assert_eq!(b.finished().await.unwrap().status, ThreadStatus::Completed);
    // Queued behind the runner of `s` (permits are handed out in order, and this test's
    // runtime has one thread): once `q` has finished, that runner has come and gone.
    let q = engine.start_json("quick", Tally::default(), StartOptions::id("q")).await.unwrap();
    assert_eq!(q.finished().await.unwrap().status, ThreadStatus::Completed);
    assert_eq!(
        s.status().await.unwrap(),
        ThreadStatus::Paused,
        "the acknowledged pause holds: {:#?}",
        bodies(&engine, "s")
    );
    engine.resume("s").await.unwrap();
    let out: Tally = s.output().await.unwrap();
    assert_eq!(out.log, vec!["woke", "after"]);
    engine.shutdown().await;
}

/// A thread paused while it waits for input, and resumed: it waits for the input again, and the
/// input then completes it (across a restart too).
#[tokio::test]
async fn pause_and_resume_a_thread_waiting_for_input() {
    let (_d, path) = db();
    let wf = asks_input("ask");
    let engine = open(&path, &[&wf], None).await;
    let t = engine.start_json("ask", Tally::default(), StartOptions::id("pi")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.pause("pi").await.unwrap();
    assert_eq!(t.status().await.unwrap(), ThreadStatus::Paused);
    let err = engine.send_input("pi", 1).await.unwrap_err();
    assert!(matches!(err, cairn::Error::WrongStatus { .. }), "input to a paused thread: {err}");
    engine.resume("pi").await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.shutdown().await;
    drop(t);
    drop(engine);
    let engine = open(&path, &[&wf], None).await;
    let t = engine.thread("pi").await.unwrap();
    assert_eq!(t.status().await.unwrap(), ThreadStatus::WaitingInput);
    engine.send_input("pi", 42).await.unwrap();
    assert_eq!(t.output::<Tally>().await.unwrap().total, 42);
    engine.shutdown().await;
}

/// A thread paused while it sleeps does not wake while paused (its timer's time may pass);
/// resumed, it sleeps again until the timer's time, or wakes at once if that has passed.
#[tokio::test]
async fn pause_and_resume_a_sleeping_thread() {
    let (_d, path) = db();
    let wf = one_node("nap", NodePolicy::default(), |_s, ctx: Ctx| async move {
        ctx.sleep_ms(1_000).await?;
        Ok(NodeOutput::update((1, "woke".into())))
    });
    let clock = ManualClock::new(1_000_000);
    let engine = open(&path, &[&wf], Some(clock.clone())).await;
    for (id, pass_while_paused) in [("early", false), ("late", true)] {
        let t = engine.start_json("nap", Tally::default(), StartOptions::id(id)).await.unwrap();
        assert_eq!(t.wait().await.unwrap().status, ThreadStatus::Sleeping);
        engine.pause(id).await.unwrap();
        if pass_while_paused {
            clock.advance_ms(1_000);
            tokio::task::yield_now().await;
            assert_eq!(
                t.status().await.unwrap(),
                ThreadStatus::Paused,
                "{id}: no wake while paused"
            );
        }
        engine.resume(id).await.unwrap();
        if !pass_while_paused {
            assert_eq!(t.wait().await.unwrap().status, ThreadStatus::Sleeping, "{id}");
            clock.advance_ms(1_000);
        }
        let out: Tally = t.output().await.unwrap();
        assert_eq!(out.log, vec!["woke"], "{id}");
    }
    engine.shutdown().await;
}

/// On a multi-thread runtime, the timer armed when the thread went to sleep may not have seen
/// its disarming (by the resume, which arms a new one) when the clock reaches both: only the
/// armed one may fire. Two firing at once used to leave the thread Running with no runner (the
/// wake's runner found the thread held by the other timer's write and gave up).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_resumed_sleeper_wakes_once() {
    for i in 0..200 {
        let (_d, path) = db();
        let wf = one_node("nap", NodePolicy::default(), |_s, ctx: Ctx| async move {
            ctx.sleep_ms(1_000).await?;
            Ok(NodeOutput::update((1, "woke".into())))
        });
        let clock = ManualClock::new(1_000_000);
        let engine = open(&path, &[&wf], Some(clock.clone())).await;
        let t = engine.start_json("nap", Tally::default(), StartOptions::id("x")).await.unwrap();
        assert_eq!(t.wait().await.unwrap().status, ThreadStatus::Sleeping);
        engine.pause("x").await.unwrap();
        engine.resume("x").await.unwrap();
        assert_eq!(t.wait().await.unwrap().status, ThreadStatus::Sleeping);
        clock.advance_ms(1_000);
        let out = tokio::time::timeout(std::time::Duration::from_secs(10), t.output::<Tally>());
        let out = out.await.unwrap_or_else(|_| panic!("case {i}: {:#?}", bodies(&engine, "x")));
        assert_eq!(out.unwrap().log, vec!["woke"]);
        let fired =
            bodies(&engine, "x").iter().filter(|b| matches!(b, Body::TimerFired { .. })).count();
        assert_eq!(fired, 1, "case {i}");
        engine.shutdown().await;
    }
}

/// Pausing a sub-workflow's child thread pauses the parent at the node that drives it (it used
/// to fail the parent for good); resuming the parent resumes the child, and both complete.
#[tokio::test]
async fn a_paused_child_pauses_its_parent_and_resumes_with_it() {
    let (_d, path) = db();
    let (gate, gate_rx) = tokio::sync::watch::channel(false);
    let (at_gate_tx, at_gate) = tokio::sync::oneshot::channel();
    let at_gate_tx = std::sync::Mutex::new(Some(at_gate_tx));
    let child = Workflow::<Tally>::builder("child", 1)
        .node("a", move |_s, _ctx| {
            let (mut gate, signal) = (gate_rx.clone(), at_gate_tx.lock().unwrap().take());
            async move {
                if let Some(tx) = signal {
                    let _ = tx.send(());
                }
                let _ = gate.wait_for(|open| *open).await;
                Ok(NodeOutput::update((1, "a".into())))
            }
        })
        .node("b", |_s, _ctx| async move { Ok(NodeOutput::update((1, "b".into()))) })
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap();
    let parent = Workflow::<Tally>::builder("parent", 1)
        .subgraph("sub", child, |s: &Tally| s.clone(), |c: &Tally| (c.total, "sub".to_owned()))
        .edge(START, "sub")
        .edge("sub", END)
        .build()
        .unwrap();
    let engine = open(&path, &[&parent], None).await;
    let p = engine.start_json("parent", Tally::default(), StartOptions::id("par")).await.unwrap();
    at_gate.await.unwrap();
    let children = children_of(&engine, "par");
    let child_id = children[0].id.to_string();
    // Asked while the child's first node waits at the gate: it pauses after that step.
    let (paused, ()) = tokio::join!(engine.pause(&child_id), async {
        gate.send_replace(true);
    });
    paused.unwrap();
    let outcome = p.wait().await.unwrap();
    assert_eq!(outcome.status, ThreadStatus::Paused, "{:#?}", bodies(&engine, "par"));
    let c = engine.thread(&child_id).await.unwrap();
    assert_eq!(c.status().await.unwrap(), ThreadStatus::Paused);
    engine.resume("par").await.unwrap();
    let out: Tally = p.output().await.unwrap();
    assert_eq!(out.total, 2, "the child ran a then b once each: {out:?}");
    assert_eq!(c.status().await.unwrap(), ThreadStatus::Completed);
    engine.shutdown().await;
}
