//! Leases on a shared database as a deployment moves them: a tool call longer than the lease on
//! a live engine, and an engine stopped (`SIGSTOP`, a real child process) past its lease.
//!
//! A live engine keeps the leases of the threads it drives alive on its own (a heartbeat every
//! third of the lease), so another engine never takes over a thread whose call is still running
//! in a healthy process; a stopped engine renews nothing, loses the thread once its lease
//! lapses, and its write after it wakes is refused (fenced).
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::io::{BufRead, BufReader, Write as _};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::dsl::{Ctx, END, NodeOutput, START, Workflow};
use cairn::event::Body;
use cairn::{Engine, StartOptions, ThreadStatus};
use cairn_storage_testkit::pg_cluster::Cluster;

use crate::common::{Effects, Tally};

/// Short, so the tests wait leases out in seconds.
const LEASE_TTL_MS: u64 = 600;

/// What a call of the tool does besides its work (counting it, saying it started).
type OnCall = Arc<dyn Fn(&str) + Send + Sync>;

/// START -> call -> after -> END; `call` calls the tool `charge`, which runs `call_ms`.
fn long_call(call_ms: u64, on_call: OnCall) -> Workflow<Tally> {
    Workflow::<Tally>::builder("long-call", 1)
        .node("call", move |_s, ctx: Ctx| {
            let on_call = on_call.clone();
            async move {
                let v: u64 = ctx
                    .tool("charge", 1_u64, move |x: u64, t| async move {
                        on_call(t.idempotency_key());
                        tokio::time::sleep(Duration::from_millis(call_ms)).await;
                        Ok::<_, cairn::ToolError>(x)
                    })
                    .await?;
                Ok(NodeOutput::update((v, "call".to_owned())))
            }
        })
        .node("after", |_s, _ctx| async move { Ok(NodeOutput::update((1, "after".to_owned()))) })
        .edge(START, "call")
        .edge("call", "after")
        .edge("after", END)
        .build()
        .unwrap()
}

async fn open(url: &str, wf: &Workflow<Tally>) -> Engine {
    Engine::builder(url).lease_ttl_ms(LEASE_TTL_MS).poll_ms(50).workflow(wf).open().await.unwrap()
}

async fn bodies(engine: &Engine, thread: &str) -> Vec<Body> {
    let mut stream = engine.thread(thread).await.unwrap().events(0).unwrap();
    let mut out = Vec::new();
    while let Some(recorded) = stream.try_next().await.unwrap() {
        out.push(recorded.body);
    }
    out
}

fn tool_calls(bodies: &[Body]) -> usize {
    bodies.iter().filter(|b| matches!(b, Body::ToolCalled { .. })).count()
}

/// Two live engines on one database; one runs a tool call three times as long as the lease
/// while the other looks for work every 50 ms. The call runs once, nobody is fenced, and the
/// thread ends in the engine that started it (before the heartbeat, the other engine took the
/// thread over after one lease and ran the call again).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_tool_call_three_times_the_lease_runs_once_on_two_live_engines() {
    let Some(cluster) = Cluster::start("a_tool_call_three_times_the_lease") else { return };
    let url = cluster.new_database();
    let fx = Effects::default();
    let counter = fx.clone();
    let wf = long_call(
        3 * LEASE_TTL_MS,
        Arc::new(move |_key: &str| {
            counter.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }),
    );
    let driver = open(&url, &wf).await;
    let other = open(&url, &wf).await;
    driver.start_json("long-call", Tally::default(), StartOptions::id("long")).await.unwrap();
    let out: Tally = tokio::time::timeout(
        Duration::from_secs(30),
        driver.thread("long").await.unwrap().output(),
    )
    .await
    .expect("the thread ends")
    .unwrap();
    assert_eq!(out.log, ["call", "after"]);
    let log = bodies(&other, "long").await;
    let executions = fx.count();
    crate::common::report(&format!(
        "RELIABILITY long_call lease_ms={LEASE_TTL_MS} call_ms={} executions={executions} \
         recorded_calls={} fenced={}",
        3 * LEASE_TTL_MS,
        tool_calls(&log),
        driver.fenced_runners() + other.fenced_runners()
    ));
    assert_eq!(executions, 1, "the long call ran once");
    assert_eq!(tool_calls(&log), 1, "one recorded call");
    assert!(!log.iter().any(|b| matches!(b, Body::Recovered { .. })), "nobody took it over");
    assert_eq!(driver.fenced_runners() + other.fenced_runners(), 0);
    driver.shutdown().await;
    other.shutdown().await;
}

/// The stopped side of [`a_stopped_engine_loses_its_thread_and_its_late_write_is_fenced`]: an
/// engine that starts the thread, says `CALL` when its tool starts (a 2 s call), and `FENCED n`
/// whenever its count of fenced runners moves; it runs until it is killed. Does nothing
/// unless run by that test.
#[test]
fn lease_child() {
    let Ok(url) = std::env::var("CAIRN_LEASE_CHILD_URL") else { return };
    let say = |line: &str| {
        let mut out = std::io::stdout().lock();
        let _ = writeln!(out, "{line}");
        let _ = out.flush();
    };
    let rt = tokio::runtime::Builder::new_multi_thread().enable_all().build().unwrap();
    rt.block_on(async {
        let wf = long_call(2_000, Arc::new(move |key: &str| say(&format!("CALL {key}"))));
        let engine = open(&url, &wf).await;
        engine
            .start_json("long-call", Tally::default(), StartOptions::id("stopped"))
            .await
            .unwrap();
        let mut fenced = 0;
        loop {
            if engine.fenced_runners() != fenced {
                fenced = engine.fenced_runners();
                say(&format!("FENCED {fenced}"));
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
}

/// Sends `signal` (`STOP`, `CONT`, `KILL`) to `pid`.
fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill").arg(format!("-{signal}")).arg(pid.to_string()).status();
    assert!(status.unwrap().success(), "kill -{signal} {pid}");
}

/// An engine in another process is stopped (`SIGSTOP`) in the middle of its tool call: its
/// heartbeat stops with it, so its lease lapses and this engine takes the thread over, runs the
/// call (the stopped one's was never recorded as returned) and ends the thread. When the stopped
/// engine goes on (`SIGCONT`), its call returns and its write is refused: nothing of it reaches
/// the log.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_stopped_engine_loses_its_thread_and_its_late_write_is_fenced() {
    let Some(cluster) = Cluster::start("a_stopped_engine_loses_its_thread") else { return };
    let url = cluster.new_database();
    let mut child = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "pg_lease::lease_child", "--nocapture", "--test-threads", "1"])
        .env("CAIRN_LEASE_CHILD_URL", &url)
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let pid = child.id();
    // Killed whatever happens to this test (a stopped child would outlive it).
    struct Reap(std::process::Child);
    impl Drop for Reap {
        fn drop(&mut self) {
            let _ = self.0.kill();
            let _ = self.0.wait();
        }
    }
    let (lines_tx, lines) = std::sync::mpsc::channel::<String>();
    let stdout = child.stdout.take().unwrap();
    let _reap = Reap(child);
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            let _ = lines_tx.send(line);
        }
    });
    // The child's line that says `word` (libtest may print its own words before it), and what
    // follows the word.
    let wait_for = |word: &str, within: Duration| -> String {
        let until = Instant::now() + within;
        loop {
            let left = until.saturating_duration_since(Instant::now());
            match lines.recv_timeout(left) {
                Ok(line) => {
                    if let Some((_, rest)) = line.split_once(&format!("{word} ")) {
                        return rest.to_owned();
                    }
                }
                Err(e) => panic!("the child did not say {word:?} within {within:?}: {e}"),
            }
        }
    };
    let stopped_key = wait_for("CALL", Duration::from_secs(60));
    signal(pid, "STOP");
    let stopped_at = Instant::now();

    let fx = Effects::default();
    let counter = fx.clone();
    let taker_key = Arc::new(std::sync::Mutex::new(String::new()));
    let seen = taker_key.clone();
    let wf = long_call(
        0,
        Arc::new(move |key: &str| {
            counter.0.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
            *seen.lock().unwrap() = key.to_owned();
        }),
    );
    let taker = open(&url, &wf).await;
    let out: Tally = tokio::time::timeout(
        Duration::from_secs(30),
        taker.thread("stopped").await.unwrap().output(),
    )
    .await
    .expect("the other engine finishes the thread")
    .unwrap();
    let taken_after = stopped_at.elapsed();
    assert_eq!(out.log, ["call", "after"]);
    assert_eq!(fx.count(), 1, "the call ran again here once");
    let before = bodies(&taker, "stopped").await;

    signal(pid, "CONT");
    assert_eq!(wait_for("FENCED", Duration::from_secs(20)), "1");
    let after = bodies(&taker, "stopped").await;
    crate::common::report(&format!(
        "RELIABILITY stopped_engine lease_ms={LEASE_TTL_MS} taken_over_after_ms={} \
         late_events={} fenced=1",
        taken_after.as_millis(),
        after.len() - before.len()
    ));
    assert!(taken_after >= Duration::from_millis(LEASE_TTL_MS), "not before the lease lapsed");
    assert_eq!(after, before, "nothing of the stopped engine's late write reached the log");
    assert_eq!(tool_calls(&after), 2, "the stopped engine's call and the taker's");
    let taker_key = taker_key.lock().unwrap().clone();
    assert!(taker_key.starts_with("cairn-"), "{taker_key}");
    assert_eq!(taker_key, stopped_key, "the call run again has the idempotency key it had");
    assert!(after.iter().any(|b| matches!(b, Body::Recovered { .. })), "the take-over says so");
    assert_eq!(
        taker.thread("stopped").await.unwrap().status().await.unwrap(),
        ThreadStatus::Completed
    );
    assert!(taker.store().verify().unwrap().is_clean());
    taker.shutdown().await;
}

/// Two engines opened at the same engine-clock millisecond on one database, with no seed, each
/// start 50 threads without ids: 100 threads, each with its own input and its own drawn value
/// (an engine used to seed its ids from the clock, so the two made the same ids, and the
/// second engine's starts returned the first one's threads, dropping their input).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_engines_opened_in_one_millisecond_make_different_ids() {
    use std::collections::BTreeSet;

    use cairn::clock::ManualClock;
    use cairn::storage::{Page, ThreadFilter};

    let Some(cluster) = Cluster::start("two_engines_opened_in_one_millisecond") else { return };
    let url = cluster.new_database();
    let wf = Workflow::<Tally>::builder("draw", 1)
        .node("draw", |_s, ctx: Ctx| async move {
            Ok(NodeOutput::update((0, ctx.random_u64().to_string())))
        })
        .edge(START, "draw")
        .edge("draw", END)
        .build()
        .unwrap();
    let clock = Arc::new(ManualClock::new(1_700_000_000_000));
    let open = || Engine::builder(&url).clock(clock.clone()).workflow(&wf).open();
    let (a, b) = (open().await.unwrap(), open().await.unwrap());
    let mut handles = Vec::new();
    for i in 0..50_u64 {
        let input = |n: u64| Tally { total: n, log: Vec::new() };
        handles.push(a.start_json("draw", input(i), StartOptions::default()).await.unwrap());
        handles
            .push(b.start_json("draw", input(1_000 + i), StartOptions::default()).await.unwrap());
    }
    let mut inputs = BTreeSet::new();
    let mut drawn = BTreeSet::new();
    for handle in handles {
        let out: Tally =
            tokio::time::timeout(Duration::from_secs(30), handle.output()).await.unwrap().unwrap();
        inputs.insert(out.total);
        drawn.insert(out.log.concat());
    }
    let stored = a
        .store()
        .list_threads(&ThreadFilter::default(), Page { limit: 500, offset: 0 })
        .wait()
        .unwrap();
    crate::common::report(&format!(
        "RELIABILITY same_millisecond_engines threads={} inputs={} drawn_values={}",
        stored.len(),
        inputs.len(),
        drawn.len()
    ));
    assert_eq!(stored.len(), 100, "one thread per start");
    let expected: BTreeSet<u64> = (0..50).chain(1_000..1_050).collect();
    assert_eq!(inputs, expected, "each thread ran on its own input");
    assert_eq!(drawn.len(), 100, "no two threads drew the same value");
    a.shutdown().await;
    b.shutdown().await;
}
