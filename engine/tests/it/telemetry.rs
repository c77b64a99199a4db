//! Metrics and health, seen through a real recorder: a run moves each metric by what it did,
//! and a health pass finds a stuck thread, an expired lock and slow commits.

use cairn::storage::ThreadLog;
use std::sync::Arc;

use cairn::clock::ManualClock;
use cairn::dsl::NodePolicy;
use cairn::storage::{Durability, Lsn, Options, QueueLimits, RedbStore};
use cairn::telemetry::names;
use cairn::telemetry::storage as store_names;
use cairn::{Ctx, END, Engine, NodeOutput, START, StartOptions, Workflow};

use crate::common::{Tally, db};
use crate::spans::traced;
use crate::telemetry_recorder::TestRecorder;

#[tokio::test]
async fn a_run_moves_each_metric_by_what_it_did() {
    let (_d, path) = db();
    let recorder = Arc::new(TestRecorder::default());
    let store = Arc::new(RedbStore::open(&path, Options::default()).unwrap());
    let wf = traced();
    let engine = Engine::with_store(store.clone())
        .workflow(&wf)
        .metrics_recorder(recorder.clone())
        .health_every_ms(None)
        // Short threads: a completion checkpoint each only when asked for every completion.
        .completion_checkpoint_after(0)
        .open()
        .await
        .unwrap();
    let out: Tally = engine
        .start_json("traced", Tally::default(), StartOptions::id("metrics-p"))
        .await
        .unwrap()
        .output()
        .await
        .unwrap();
    assert_eq!(out.total, 20);
    let report = engine.health().await.unwrap();
    engine.shutdown().await;

    let r = &recorder;
    // Labelled with the workflow (and the node, for failures and retries).
    let wf = |name: &str, w: &str| format!("{name}{{workflow={w}}}");
    let tool = |memo| format!("{}{{workflow=traced,memo={memo}}}", names::TOOL_CALLS);
    assert_eq!(r.counter(&tool(false)), 1, "one real call of fetch");
    assert_eq!(r.counter(&tool(true)), 0, "no memo hit in an uninterrupted run");
    let timed = r.samples(&wf(names::TOOL_CALL_SECONDS, "traced"));
    assert_eq!(timed.len(), 1, "the real call is timed");
    let flaky = |name: &str| format!("{name}{{workflow=traced,node=flaky}}");
    assert_eq!(r.counter(&flaky(names::RETRIES)), 1, "flaky is retried once");
    assert_eq!(r.counter(&flaky(names::NODE_FAILURES)), 1, "flaky's first attempt failed");
    assert_eq!(r.counter(&wf(names::THREAD_FAILURES, "traced")), 0);
    assert_eq!(r.counter(names::LEASE_TAKEOVERS), 0);
    assert_eq!(r.counter(names::RUNNERS_FENCED), 0);
    // Steps: the parent's call, flaky and sub, and the child's inner, each timed once.
    let steps = r.counter(&wf(names::STEPS, "traced"));
    assert_eq!(steps, 3, "{steps} steps");
    assert_eq!(r.counter(&wf(names::STEPS, "traced-child")), 1, "the child's step");
    let timed = r.samples(&wf(names::STEP_SECONDS, "traced")).len();
    assert_eq!(timed as u64, steps, "every step is timed");
    let steps = steps + 1;
    node_and_thread_metrics(r);
    // Checkpoints by kind: each thread's completion.
    let checkpoint = |kind: &str| r.counter(&format!("{}{{kind={kind}}}", names::CHECKPOINTS));
    assert_eq!(checkpoint("completion"), 2, "the parent's and the child's completion");
    assert_eq!(checkpoint("failure"), 0);
    let commits = r.samples(names::COMMIT_SECONDS);
    assert!(commits.len() as u64 >= steps, "each step's batch is committed: {}", commits.len());
    assert_eq!(r.gauge(names::WAITING_PERMIT), 0.0, "nobody waits once the run is over");
    assert_eq!(r.gauge(names::TIMERS_ARMED), 0.0);
    // The store: every event this engine wrote went through its group commits, each synced.
    let events = store.read_all_since(Lsn(0), 10_000).wait().unwrap().len() as u64;
    assert_eq!(r.counter(store_names::EVENTS), events, "events committed");
    let groups = r.counter(&format!("{}{{outcome=ok}}", store_names::GROUP_COMMITS));
    assert!(groups > 0);
    assert_eq!(r.counter(store_names::FSYNCS), groups, "Immediate: every group is synced");
    assert_eq!(r.samples(store_names::GROUP_WRITES).len() as u64, groups);
    assert_eq!(r.samples(store_names::GROUP_COMMIT_SECONDS).len() as u64, groups);
    assert!(r.counter(store_names::BYTES) > 0);
    // The health pass set the threads-by-status gauges: the parent and its child completed.
    assert_eq!(r.gauge(&format!("{}{{status=completed}}", names::THREADS)), 2.0);
    assert_eq!(r.gauge(&format!("{}{{status=running}}", names::THREADS)), 0.0);
    assert!(report.ok, "{report:?}");
    assert_eq!(report.threads["completed"], 2);
    // Units, as docs/observability.md lists them; and every metric is in its table.
    assert_eq!(r.unit(names::STEP_SECONDS), Some(metrics::Unit::Seconds));
    assert_eq!(r.unit(store_names::BYTES), Some(metrics::Unit::Bytes));
    let doc =
        std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/observability.md"));
    let doc = doc.unwrap();
    let names = r.names();
    assert!(names.len() >= 27, "{names:?}");
    for name in names {
        assert!(
            doc.contains(&format!("| `{name}")),
            "{name} is not in docs/observability.md's table"
        );
    }
}

#[tokio::test]
async fn a_tool_call_answered_from_the_log_counts_as_a_memo_hit() {
    let (_d, path) = db();
    let recorder = Arc::new(TestRecorder::default());
    // The node calls its tool, then asks for input: after the input it runs again from the
    // top, and the call is answered from the log.
    let wf = Workflow::<Tally>::builder("ask", 1)
        .node("ask", |_s, ctx: Ctx| async move {
            let v: u64 = ctx
                .tool("fetch", 2_u64, |x: u64, _| async move { Ok::<_, cairn::ToolError>(x * 2) })
                .await?;
            let more: u64 = ctx.interrupt("how many more?")?;
            Ok(NodeOutput::update((v + more, "ask".into())))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .build()
        .unwrap();
    let engine = Engine::builder(&path)
        .workflow(&wf)
        .metrics_recorder(recorder.clone())
        .health_every_ms(None)
        .open()
        .await
        .unwrap();
    let t = engine.start_json("ask", Tally::default(), StartOptions::id("memo")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, cairn::ThreadStatus::WaitingInput);
    // A manual checkpoint of the parked thread is counted by its kind.
    let manual = format!("{}{{kind=manual}}", names::CHECKPOINTS);
    assert_eq!(recorder.counter(&manual), 0);
    engine.checkpoint_now("memo", cairn::storage::CheckpointMeta::default()).await.unwrap();
    assert_eq!(recorder.counter(&manual), 1);
    engine.send_input("memo", 3_u64).await.unwrap();
    let out: Tally = t.output().await.unwrap();
    assert_eq!(out.total, 7);
    engine.shutdown().await;
    let tool = |memo| format!("{}{{workflow=ask,memo={memo}}}", names::TOOL_CALLS);
    assert_eq!(recorder.counter(&tool(false)), 1, "the tool ran once");
    assert_eq!(recorder.counter(&tool(true)), 1, "its second call came from the log");
    let timed = recorder.samples(&format!("{}{{workflow=ask}}", names::TOOL_CALL_SECONDS));
    assert_eq!(timed.len(), 1, "only the real call is timed");
}

/// A node that takes a lock, then waits until the test lets it go (sends `true`).
fn hang(release: tokio::sync::watch::Receiver<bool>) -> Workflow<Tally> {
    Workflow::<Tally>::builder("hang", 1)
        .node_with(
            "hold",
            move |_s, ctx: Ctx| {
                let mut release = release.clone();
                async move {
                    ctx.lock("report.md", 1_000).await?;
                    release.wait_for(|go| *go).await.expect("the test holds the sender");
                    Ok(NodeOutput::update((1, "held".into())))
                }
            },
            NodePolicy::default(),
        )
        .edge(START, "hold")
        .edge("hold", END)
        .build()
        .unwrap()
}

#[tokio::test]
async fn health_finds_a_stuck_thread_an_expired_lock_and_slow_commits() {
    let (_d, path) = db();
    let recorder = Arc::new(TestRecorder::default());
    let clock = ManualClock::new(1_000_000);
    let (release, go) = tokio::sync::watch::channel(false);
    let wf = hang(go);
    let engine = Engine::builder(&path)
        .durability(Durability::Immediate)
        .clock(Arc::new(clock.clone()))
        .workflow(&wf)
        .metrics_recorder(recorder.clone())
        .watchdog_ms(60_000)
        .slow_commit_ms(0)
        .health_every_ms(None)
        .open()
        .await
        .unwrap();
    let t = engine.start_json("hang", Tally::default(), StartOptions::id("stuck")).await.unwrap();
    // Wait until the node holds its lock (the lock event is durable).
    let mut events = t.events(0).unwrap();
    while !engine.store().locks().wait().unwrap().iter().any(|l| l.owner == "stuck") {
        events.next().await.expect("the thread's events");
    }
    let fresh = engine.health().await.unwrap();
    assert_eq!((fresh.stuck_threads, fresh.expired_locks), (0, 0), "{fresh:?}");
    assert!(fresh.commits.slow_recent > 0, "every commit is over a 0 ms threshold");
    assert!(!fresh.ok, "slow commits need attention");

    clock.advance_ms(60_001);
    let report = engine.health().await.unwrap();
    assert!(!report.ok);
    assert_eq!(report.stuck_threads, 1, "{report:?}");
    let stuck = &report.stuck[0];
    assert_eq!((stuck.thread.as_str(), stuck.workflow.as_str()), ("stuck", "hang"));
    assert!(stuck.idle_ms > 60_000);
    assert_eq!(report.expired_locks, 1);
    assert_eq!(
        (report.expired[0].name.as_str(), report.expired[0].holder.as_str()),
        ("report.md", "stuck")
    );
    assert!(report.expired[0].expired_ms >= 59_000, "{report:?}");
    assert_eq!(report.threads["running"], 1);
    assert_eq!(report.commits.slow_recent, 0, "taken by the previous pass");
    assert!(report.commits.slow_total > 0);
    let json = serde_json::to_value(&report).unwrap();
    assert_eq!(json["stuck"][0]["thread"], "stuck", "{json}");
    // The same figures as metrics.
    assert_eq!(recorder.gauge(names::STUCK_THREADS), 1.0);
    assert_eq!(recorder.gauge(names::EXPIRED_LOCKS), 1.0);
    assert_eq!(recorder.gauge(names::LOCKS_HELD), 1.0);
    assert_eq!(recorder.gauge(&format!("{}{{status=running}}", names::THREADS)), 1.0);
    assert!(recorder.counter(names::COMMITS_SLOW) > 0);

    release.send_replace(true);
    t.wait().await.unwrap();
    let after = engine.health().await.unwrap();
    assert_eq!((after.stuck_threads, after.expired_locks), (0, 0), "{after:?}");
    assert_eq!(recorder.gauge(names::LOCKS_HELD), 0.0, "its end released the lock");
    engine.shutdown().await;
}

/// Polls `done` between scheduler turns (no sleep): the engine's tasks move on each turn.
async fn until(what: &str, done: impl Fn() -> bool) {
    for _ in 0..100_000 {
        if done() {
            return;
        }
        tokio::task::yield_now().await;
    }
    panic!("never came: {what}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn gauges_follow_permits_timers_and_a_take_over_counts() {
    let (_d, path) = db();
    let recorder = Arc::new(TestRecorder::default());
    let (release, go) = tokio::sync::watch::channel(false);
    let hang = hang(go);
    let nap = Workflow::<Tally>::builder("nap", 1)
        .node("nap", |_s, ctx: Ctx| async move {
            ctx.sleep_ms(3_600_000).await?;
            Ok(NodeOutput::update((1, "woke".into())))
        })
        .edge(START, "nap")
        .edge("nap", END)
        .build()
        .unwrap();
    let open = |recorder: Arc<TestRecorder>| {
        Engine::builder(&path)
            .concurrency(1)
            .workflow(&hang)
            .workflow(&nap)
            .metrics_recorder(recorder)
            .health_every_ms(None)
            .open()
    };
    let engine = open(recorder.clone()).await.unwrap();
    // A thread that holds a lock (so its lease is written) when its engine crashes is taken
    // over by the next one.
    let first =
        engine.start_json("hang", Tally::default(), StartOptions::id("first")).await.unwrap();
    let mut events = first.events(0).unwrap();
    while !engine.store().locks().wait().unwrap().iter().any(|l| l.owner == "first") {
        events.next().await.expect("the thread's events");
    }
    engine.crash().await;
    drop((first, events, engine));
    let recorder = Arc::new(TestRecorder::default());
    let engine = open(recorder.clone()).await.unwrap();
    // The take-over is recovery's, which may still be under way when `open` returns.
    until("first's lease taken over", || recorder.counter(names::LEASE_TAKEOVERS) == 1).await;
    assert_eq!(recorder.counter(names::LEASE_TAKEOVERS), 1, "first's lease was the dead engine's");
    // One permit: whichever of the two threads holds it waits in its node (for the release or
    // the lock), so the other waits for the permit until the release.
    engine.start_json("hang", Tally::default(), StartOptions::id("second")).await.unwrap();
    until("a thread waiting for the permit", || recorder.gauge(names::WAITING_PERMIT) == 1.0).await;
    release.send_replace(true);
    engine.thread("first").await.unwrap().wait().await.unwrap();
    engine.thread("second").await.unwrap().wait().await.unwrap();
    assert_eq!(recorder.gauge(names::WAITING_PERMIT), 0.0);
    assert_eq!(recorder.gauge(names::TIMERS_ARMED), 0.0);
    let t = engine.start_json("nap", Tally::default(), StartOptions::id("nap")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, cairn::ThreadStatus::Sleeping);
    // Its runner arms the wake-up right after the commit that parked it, which `wait` may see
    // first (the thread can park within its creation's commit, before `start` returns).
    until("its wake-up armed", || recorder.gauge(names::TIMERS_ARMED) == 1.0).await;
    engine.cancel("nap", "done").await.unwrap();
    assert_eq!(recorder.gauge(names::TIMERS_ARMED), 0.0, "disarmed by the cancel");
    engine.shutdown().await;
}

/// The Prometheus exporter renders the names ARCHITECTURE.md and docs/alerts.yml use, with
/// histogram buckets (so `histogram_quantile` works on the latencies).
#[tokio::test]
async fn the_prometheus_exporter_renders_the_documented_names() {
    let (_d, path) = db();
    let (recorder, handle) = cairn_tools::prometheus::recorder().unwrap();
    let wf = traced();
    let engine = Engine::builder(&path)
        .workflow(&wf)
        .queue("prom-q", QueueLimits { concurrency_max: Some(1), ..QueueLimits::default() })
        .metrics_recorder(Arc::new(recorder))
        .completion_checkpoint_after(0)
        .open()
        .await
        .unwrap();
    let run =
        engine.start_json("traced", Tally::default(), StartOptions::id("prom-p")).await.unwrap();
    run.wait().await.unwrap();
    engine.health().await.unwrap();
    engine.admit_queued().await.unwrap();
    engine.shutdown().await;
    let text = handle.render();
    for line in [
        "cairn_steps_total{workflow=\"traced\"} 3",
        "cairn_steps_total{workflow=\"traced-child\"} 1",
        "cairn_tool_calls_total{workflow=\"traced\",memo=\"false\"} 1",
        "cairn_retries_total{workflow=\"traced\",node=\"flaky\"} 1",
        "cairn_checkpoints_total{kind=\"completion\"} 2",
        "cairn_queue_depth{queue=\"prom-q\"} 0",
        "cairn_queue_running{queue=\"prom-q\"} 0",
        "cairn_threads{status=\"completed\"} 2",
        "cairn_workflow_threads{workflow=\"traced\",status=\"completed\"} 1",
        "cairn_health_stuck_threads 0",
        "cairn_storage_group_commits_total{outcome=\"ok\"}",
        "cairn_commit_duration_seconds_bucket{le=\"0.0001\"}",
        "cairn_storage_group_writes_bucket{le=\"1\"}",
    ] {
        assert!(text.lines().any(|l| l.starts_with(line)), "{line} in:\n{text}");
    }
}

/// A health policy acts on what a pass finds: the stuck thread is cancelled with the watchdog
/// as its recorded reason, and a lock held past its time to live is released.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_health_policy_cancels_a_stuck_thread_and_releases_an_expired_lock() {
    use cairn::storage::{Batch, LockOp};
    use cairn::{ExpiredLockAction, HealthPolicy, StuckAction};
    let (_d, path) = db();
    let (_release, go) = tokio::sync::watch::channel(false);
    let wf = hang(go);
    let policy =
        HealthPolicy { stuck: StuckAction::Cancel, expired_locks: ExpiredLockAction::Release };
    let told = Arc::new(std::sync::Mutex::new(Vec::new()));
    let notifier = told.clone();
    let engine = Engine::builder(&path)
        .workflow(&wf)
        .watchdog_ms(200)
        .cancel_grace_ms(100)
        .health_every_ms(None)
        .health_policy(policy)
        .on_stuck(move |_engine, stuck| {
            notifier.lock().unwrap().push(stuck.thread);
            Box::pin(async {})
        })
        .open()
        .await
        .unwrap();
    let t = engine.start_json("hang", Tally::default(), StartOptions::id("stuck")).await.unwrap();
    let mut events = t.events(0).unwrap();
    while !engine.store().locks().wait().unwrap().iter().any(|l| l.owner == "stuck") {
        events.next().await.expect("the thread's events");
    }
    // A lock nobody will renew, held by no thread at all.
    let ghost =
        LockOp::Acquire { name: "old.lock".into(), owner: "ghost".into(), now_ms: 1, ttl_ms: 1 };
    engine
        .store()
        .append(Batch { locks: vec![ghost], ..Batch::default() })
        .unwrap()
        .wait()
        .await
        .unwrap();
    tokio::time::sleep(std::time::Duration::from_millis(400)).await;

    let report = engine.health().await.unwrap();
    assert_eq!(report.stuck_threads, 1, "{report:?}");
    assert!(report.expired.iter().any(|l| l.name == "old.lock"), "{report:?}");
    let done = engine.act_on_health(&report).await;
    assert!(
        done.iter().any(|d| d.starts_with("thread stuck cancelled (watchdog: no step for")),
        "{done:?}"
    );
    assert_eq!(told.lock().unwrap().as_slice(), ["stuck"], "the notifier was told, once");
    assert_eq!(done[0], "thread stuck reported to the on_stuck hook", "before the action");
    assert!(done.iter().any(|d| d.starts_with("lock old.lock of ghost released")), "{done:?}");
    assert_eq!(t.wait().await.unwrap().status, cairn::ThreadStatus::Cancelled);
    let mut log = t.events(0).unwrap();
    let mut reason = None;
    while let Some(r) = log.try_next().await.unwrap() {
        if let cairn::event::Body::StatusChanged {
            to: cairn::ThreadStatus::Cancelled,
            reason: why,
            ..
        } = r.body
        {
            reason = Some(why);
        }
    }
    assert!(
        reason.is_some_and(|r| r.starts_with("watchdog: no step for")),
        "the reason is recorded"
    );
    assert!(engine.store().locks().wait().unwrap().is_empty(), "both locks are gone");
    engine.shutdown().await;
}

/// A queue's gauges come from the counts the store keeps: after a crash, a new engine (with a
/// fresh recorder) reports the waiting and running threads the crashed one left.
#[tokio::test]
async fn queue_gauges_hold_across_a_restart() {
    let (_d, path) = db();
    let (release, hold) = tokio::sync::watch::channel(false);
    let wf = hang(hold);
    let limits = QueueLimits { concurrency_max: Some(1), ..QueueLimits::default() };
    let open = |recorder: Arc<TestRecorder>| {
        Engine::builder(&path)
            .workflow(&wf)
            .queue("gauged", limits.clone())
            .metrics_recorder(recorder)
            .health_every_ms(None)
            .open()
    };
    let gauge = |r: &TestRecorder, name: &str| r.gauge(&format!("{name}{{queue=gauged}}"));
    let first = Arc::new(TestRecorder::default());
    let engine = open(first.clone()).await.unwrap();
    for id in ["g1", "g2", "g3"] {
        engine
            .start_json("hang", Tally::default(), StartOptions::id(id).on_queue("gauged"))
            .await
            .unwrap();
    }
    engine.admit_queued().await.unwrap();
    assert_eq!(gauge(&first, names::QUEUE_DEPTH), 2.0, "two wait behind the one admitted");
    assert_eq!(gauge(&first, names::QUEUE_RUNNING), 1.0);
    engine.crash().await;
    drop(engine);

    let second = Arc::new(TestRecorder::default());
    let engine = open(second.clone()).await.unwrap();
    engine.admit_queued().await.unwrap();
    assert_eq!(gauge(&second, names::QUEUE_DEPTH), 2.0, "the same after the restart");
    assert_eq!(gauge(&second, names::QUEUE_RUNNING), 1.0);
    release.send(true).unwrap();
    for id in ["g1", "g2", "g3"] {
        engine.thread(id).await.unwrap().wait().await.unwrap();
    }
    engine.admit_queued().await.unwrap();
    assert_eq!(gauge(&second, names::QUEUE_DEPTH), 0.0);
    assert_eq!(gauge(&second, names::QUEUE_RUNNING), 0.0, "all done");
    engine.shutdown().await;
}

/// The node, thread and schedule metrics of [`a_run_moves_each_metric_by_what_it_did`]'s run.
fn node_and_thread_metrics(r: &TestRecorder) {
    let wf = |name: &str, w: &str| format!("{name}{{workflow={w}}}");
    // Node attempts, each timed, labelled with its workflow and node.
    let node =
        |w: &str, n: &str| r.samples(&format!("{}{{workflow={w},node={n}}}", names::NODE_SECONDS));
    assert_eq!(node("traced", "call").len(), 1, "call's one attempt");
    assert_eq!(node("traced", "flaky").len(), 2, "flaky's failed attempt and its retry");
    assert_eq!(node("traced-child", "inner").len(), 1);
    // Threads ended, by workflow and status, and their times.
    let ended = |w: &str, status: &str| {
        r.counter(&format!("{}{{workflow={w},status={status}}}", names::THREADS_ENDED))
    };
    assert_eq!(ended("traced", "completed"), 1);
    assert_eq!(ended("traced-child", "completed"), 1);
    assert_eq!(ended("traced", "failed"), 0);
    assert_eq!(r.samples(&wf(names::THREAD_SECONDS, "traced")).len(), 1, "the parent's time");
    assert!(r.samples(names::SCHEDULE_LAG_SECONDS).is_empty(), "no schedule ran");
}

/// A schedule's run started five minutes after its tick (the engine was busy, or down) records a
/// lag of 300 s; the thread it started counts as ended by its workflow and status.
#[tokio::test]
async fn a_schedule_tick_run_late_records_its_lag() {
    use crate::schedules::{HOUR, JAN_1_2026, file, spec, ticks_started};
    let dir = tempfile::tempdir().unwrap();
    let recorder = Arc::new(TestRecorder::default());
    let clock = cairn::clock::ManualClock::new(JAN_1_2026);
    let engine = Engine::with_store(file(&dir.path().join("lag.db")))
        .clock(Arc::new(clock.clone()))
        .workflow(&crate::schedules::report())
        .metrics_recorder(recorder.clone())
        .health_every_ms(None)
        .open()
        .await
        .unwrap();
    // Its first tick an hour from now: nothing runs until the clock moves.
    // A late tick runs (`CatchUp::One`; the default skips ticks past a grace).
    let hourly = spec(cairn::Every::Interval { ms: HOUR })
        .between(Some(JAN_1_2026 + HOUR), None)
        .catch_up(cairn::CatchUp::One);
    engine.create_schedule("hourly", hourly).await.unwrap();
    let info = engine.schedule("hourly").await.unwrap().unwrap();
    let next = info.state.next_tick_ms.expect("a next tick");
    assert_eq!(next, JAN_1_2026 + HOUR);
    clock.set_ms(next + 300_000);
    let waited = std::time::Instant::now();
    while ticks_started(&engine, "hourly").is_empty() {
        if waited.elapsed().as_secs() >= 20 {
            let info = engine.schedule("hourly").await.unwrap();
            panic!("the tick was not handled: {info:?}");
        }
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    let completed = format!("{}{{workflow=report,status=completed}}", names::THREADS_ENDED);
    while recorder.counter(&completed) == 0 {
        assert!(waited.elapsed().as_secs() < 60, "the tick's run did not end");
        tokio::time::sleep(std::time::Duration::from_millis(5)).await;
    }
    engine.shutdown().await;
    assert_eq!(recorder.samples(names::SCHEDULE_LAG_SECONDS), vec![300.0]);
}

/// A health pass reads the database's disk and this process's memory, says the disk is short
/// below its floor and the memory over its bound, and says what to do about each (seed 004's
/// resource checks with a recommended action).
#[tokio::test]
async fn health_reports_a_short_disk_and_memory_with_what_to_do() {
    let (_d, path) = db();
    let engine = Engine::builder(&path).health_every_ms(None).open().await.unwrap();
    let fine = engine.health().await.unwrap();
    let disk = fine.resources.as_ref().and_then(|r| r.disk.clone()).expect("the disk is read");
    assert!(disk.path.ends_with(path.file_name().unwrap().to_str().unwrap()), "{disk:?}");
    assert!(disk.free_bytes > 0 && disk.total_bytes >= disk.free_bytes, "{disk:?}");
    assert!(fine.ok && fine.actions.is_empty(), "{fine:?}");
    engine.shutdown().await;

    let (_d2, path) = db();
    let engine = Engine::builder(&path)
        .health_every_ms(None)
        .health_disk_free_min_bytes(u64::MAX)
        .health_memory_max_bytes(Some(1024))
        .open()
        .await
        .unwrap();
    let short = engine.health().await.unwrap();
    engine.shutdown().await;
    assert!(!short.ok, "{short:?}");
    let resources = short.resources.as_ref().expect("resources");
    assert!(resources.disk.as_ref().is_some_and(|d| d.is_short()));
    assert!(resources.memory_bytes.is_some_and(|m| m > 1024 * 1024), "{resources:?}");
    assert_eq!(short.actions.len(), 2, "{:?}", short.actions);
    assert!(short.actions[0].starts_with("free space on the disk of"), "{:?}", short.actions);
    assert!(short.actions[1].contains("over its bound of 1024"), "{:?}", short.actions);
}

/// A thread parked in `recv("a")` that took one signal named "a" and was sent three named "b"
/// has a backlog of three (not four: the "a" was taken) once they are older than the
/// threshold, and none before; the report names it, says what to do and sets the gauge (seed
/// 004's signal backlog).
#[tokio::test]
async fn health_counts_the_signals_no_node_took_past_the_threshold() {
    let (_d, path) = db();
    let recorder = Arc::new(TestRecorder::default());
    let clock = ManualClock::new(1_000_000);
    let wf = Workflow::<Tally>::builder("inbox", 1)
        .node_with(
            "recv",
            |_s, ctx: Ctx| async move {
                for _ in 0..2 {
                    let _: u64 = ctx.recv("a").await?;
                }
                Ok(NodeOutput::update((1, "got".into())))
            },
            NodePolicy::default(),
        )
        .edge(START, "recv")
        .edge("recv", END)
        .build()
        .unwrap();
    let engine = Engine::builder(&path)
        .clock(Arc::new(clock.clone()))
        .workflow(&wf)
        .metrics_recorder(recorder.clone())
        .health_signal_backlog_ms(60_000)
        .health_every_ms(None)
        .open()
        .await
        .unwrap();
    let t = engine.start_json("inbox", Tally::default(), StartOptions::id("in1")).await.unwrap();
    t.wait().await.unwrap();
    engine.signal("in1", "a", 1u64).await.unwrap();
    // Taken once the thread parks again with the receipt folded into its record's summary.
    let id = cairn::ThreadId::new("in1").unwrap();
    let store = engine.store().clone();
    until("the first a taken", || {
        store
            .thread(&id)
            .wait()
            .unwrap()
            .is_some_and(|r| cairn_core::summary::signal_cursors(&r.summary).0.get("a") == Some(&1))
    })
    .await;
    for _ in 0..3 {
        engine.signal("in1", "b", "never").await.unwrap();
    }
    let fresh = engine.health().await.unwrap();
    assert_eq!(fresh.signal_backlog, 0, "{fresh:?}");
    assert!(fresh.ok, "{fresh:?}");

    clock.advance_ms(60_001);
    let report = engine.health().await.unwrap();
    assert!(!report.ok);
    assert_eq!((report.signal_backlog, report.signal_backlog_ms), (3, 60_000), "{report:?}");
    let b = &report.backlogged[0];
    assert_eq!((b.thread.as_str(), b.workflow.as_str(), b.signals), ("in1", "inbox", 3));
    assert_eq!(b.names, vec!["b".to_owned()]);
    assert!(b.oldest_ms > 60_000, "{b:?}");
    assert!(
        report
            .actions
            .iter()
            .any(|a| a.starts_with("thread in1 has 3 signals (b)") && a.contains("cairn show in1")),
        "{:?}",
        report.actions
    );
    assert_eq!(recorder.gauge(names::SIGNAL_BACKLOG), 3.0);
    assert_eq!(t.status().await.unwrap(), cairn::ThreadStatus::WaitingInput);
    engine.shutdown().await;
}

/// `cairn_workflow_threads{workflow,status}`: a health pass counts each registered workflow's
/// threads under its own label: `traced` and its child completed, one `waiter` waiting.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_health_pass_counts_threads_by_workflow_and_status() {
    let (_d, path) = db();
    let recorder = Arc::new(TestRecorder::default());
    let (traced, waiter) = (traced(), crate::batch::waiter());
    let engine = Engine::builder(&path)
        .workflow(&traced)
        .workflow(&waiter)
        .metrics_recorder(recorder.clone())
        .health_every_ms(None)
        .open()
        .await
        .unwrap();
    let run = engine.start_json("traced", Tally::default(), StartOptions::id("p")).await.unwrap();
    run.wait().await.unwrap();
    engine.start_json("waiter", Tally::default(), StartOptions::id("w")).await.unwrap();
    let id = cairn::ThreadId::new("w").unwrap();
    until("w waits", || {
        engine.store().thread(&id).wait().unwrap().unwrap().status
            == cairn::ThreadStatus::WaitingInput
    })
    .await;
    engine.health().await.unwrap();
    let of = |w: &str, s: &str| {
        recorder.gauge(&format!("{}{{workflow={w},status={s}}}", names::WORKFLOW_THREADS))
    };
    assert_eq!(of("traced", "completed"), 1.0);
    assert_eq!(of("traced-child", "completed"), 1.0);
    assert_eq!(of("waiter", "waiting_input"), 1.0);
    // Controls: no thread counted under another workflow's label or another status.
    assert_eq!(of("waiter", "completed"), 0.0);
    assert_eq!(of("traced", "waiting_input"), 0.0);
    // The unlabelled gauge still counts all of them.
    assert_eq!(recorder.gauge(&format!("{}{{status=completed}}", names::THREADS)), 2.0);
    engine.shutdown().await;
}
