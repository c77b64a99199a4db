//! Updates across engines on PostgreSQL (`docs/updates.md`, "Across engines"): an update sent
//! to an engine that does not drive the thread is stored in the thread's inbox, taken by the
//! driving runner at its next step boundary and answered from the log: applied once, its id
//! answered again as a duplicate; a validator's refusal recorded (`update_refused`) and heard
//! by the caller; and a crash of the driving engine at any of its writes neither loses the
//! update nor applies it twice.

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, UpdateDef, Workflow};
use cairn::event::Body;
use cairn::storage::{PgStore, Store, ThreadId};
use cairn::{END, Engine, Error, START, StartOptions, ThreadStatus, UpdateOptions};
use cairn_storage_testkit::pg_cluster::Cluster;
use serde_json::json;

use crate::common::Tally;
use crate::crash::Dying;

/// Short, so that the crash test waits a dead engine's leases out quickly.
const LEASE_TTL_MS: u64 = 400;

/// Adds its argument to the total; refuses 0. Replies with the new total.
const ADD: UpdateDef<u64, u64> = UpdateDef::new("add");

/// Ticks (20 ms a step) until the total reaches 100: only updates get it there.
fn ticking() -> Workflow<Tally> {
    Workflow::<Tally>::builder("ticking", 1)
        .node("tick", |_s: Arc<Tally>, _ctx: Ctx| async move {
            tokio::time::sleep(Duration::from_millis(20)).await;
            Ok(NodeOutput::update((0, String::new())))
        })
        .edge(START, "tick")
        .route("tick", |s: &Tally| if s.total >= 100 { END } else { "tick" }, ["tick", END])
        .loop_bound("tick", 5_000)
        .update(
            ADD,
            |_s: &Tally, by: &u64| if *by == 0 { Err("add at least 1".into()) } else { Ok(()) },
            |s: &mut Tally, by: u64| {
                s.total += by;
                Ok(s.total)
            },
        )
        .build()
        .unwrap()
}

fn tune(b: cairn::EngineBuilder, wf: &Workflow<Tally>) -> cairn::EngineBuilder {
    b.lease_ttl_ms(LEASE_TTL_MS).poll_ms(50).workflow(wf)
}

async fn open(url: &str, wf: &Workflow<Tally>) -> Engine {
    tune(Engine::builder(url), wf).open().await.unwrap()
}

async fn bodies(engine: &Engine, thread: &str) -> Vec<Body> {
    let mut stream = engine.thread(thread).await.unwrap().events(0).unwrap();
    let mut out = Vec::new();
    while let Some(recorded) = stream.try_next().await.unwrap() {
        out.push(recorded.body);
    }
    out
}

/// How many `update_applied` (`refused: false`) or `update_refused` events of `id` there are.
fn count(bodies: &[Body], id: &str, refused: bool) -> usize {
    let hit = |b: &Body| match b {
        Body::UpdateApplied { id: i, .. } => !refused && i == id,
        Body::UpdateRefused { id: i, .. } => refused && i == id,
        _ => false,
    };
    bodies.iter().filter(|b| hit(b)).count()
}

/// Waits until `engine` drives `thread`.
async fn driven_by(engine: &Engine, thread: &str) {
    let id = ThreadId::new(thread).unwrap();
    let driven = async {
        while !engine.is_driven(&id) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), driven).await.expect("driven in time");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_sent_to_the_engine_that_does_not_drive_the_thread_is_applied_once() {
    let Some(cluster) = Cluster::start("update_across_engines") else { return };
    let url = cluster.new_database();
    let wf = ticking();
    let (a, b) = (open(&url, &wf).await, open(&url, &wf).await);
    let t = a.start_json("ticking", Tally::default(), StartOptions::id("u")).await.unwrap();
    driven_by(&a, "u").await;
    assert!(!b.is_driven(&ThreadId::new("u").unwrap()), "b does not drive it");
    let done = b.update("u", "add", 40u64, UpdateOptions::id("add-1")).await.unwrap();
    assert_eq!((done.reply.clone(), done.duplicate), (json!(40), false), "{done:?}");
    let again = b.update("u", "add", 40u64, UpdateOptions::id("add-1")).await.unwrap();
    assert_eq!((again.reply, again.seq, again.duplicate), (json!(40), done.seq, true));
    let refused = b.update("u", "add", 0u64, UpdateOptions::id("zero")).await;
    let Err(Error::UpdateRefused { source, .. }) = refused else { panic!("{refused:?}") };
    assert!(source.to_string().contains("add at least 1"), "{source}");
    let refused = b.update("u", "add", 0u64, UpdateOptions::id("zero")).await;
    assert!(matches!(refused, Err(Error::UpdateRefused { .. })), "answered again: {refused:?}");
    let handle = b.thread("u").await.unwrap();
    let typed: u64 = handle.update_with(ADD, 60, UpdateOptions::id("add-2")).await.unwrap();
    assert_eq!(typed, 100);
    let out = tokio::time::timeout(Duration::from_secs(20), t.finished()).await.unwrap().unwrap();
    assert_eq!(out.status, ThreadStatus::Completed);
    let log = bodies(&a, "u").await;
    assert_eq!(count(&log, "add-1", false), 1, "applied once");
    assert_eq!(count(&log, "add-2", false), 1, "applied once");
    assert_eq!(count(&log, "zero", true), 1, "refused once, recorded");
    assert_eq!(count(&log, "zero", false), 0);
    let report = a.replay("u", &cairn::replay::ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{report:?}");
    a.shutdown().await;
    b.shutdown().await;
}

/// Engine `a` drives the thread over a store that dies at its write number `k + 1` counted from
/// the moment engine `b` sends the update (for each `k` in turn: before the request is taken,
/// at the `update_applied` commit, after it); `b` sends it again under the same id until it is
/// answered (after `a`'s leases lapse, `b` takes the thread over). Each crash point: the update
/// applied exactly once, answered with its reply, and the thread completes.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_of_the_driving_engine_neither_loses_nor_doubles_an_update_sent_elsewhere() {
    let Some(cluster) = Cluster::start("update_across_engines_crash") else { return };
    let wf = ticking();
    let mut crashes = 0;
    for crash_after in 0..8 {
        let url = cluster.new_database();
        let at = url.clone();
        let connect = move || PgStore::connect(&at, cairn::Durability::Immediate).unwrap();
        let pg: Arc<dyn Store> = Arc::new(tokio::task::spawn_blocking(connect).await.unwrap());
        let dying = Arc::new(Dying::new(pg, None));
        let a = tune(Engine::with_store(dying.clone()), &wf).open().await.unwrap();
        let b = open(&url, &wf).await;
        a.start_json("ticking", Tally::default(), StartOptions::id("u")).await.unwrap();
        driven_by(&a, "u").await;
        dying.left.store(crash_after, std::sync::atomic::Ordering::SeqCst);
        let send = async {
            loop {
                let options = UpdateOptions { id: Some("big".into()), wait_ms: Some(2_000) };
                match b.update("u", "add", 100u64, options).await {
                    Ok(done) => return done,
                    Err(Error::UpdatePending { .. }) => {}
                    Err(e) => panic!("at {crash_after}: {e}"),
                }
            }
        };
        let died = dying.died.notified();
        let (done, died) = tokio::select! {
            done = send => (Some(done), false),
            () = died => (None, true),
        };
        a.crash().await;
        let done = match done {
            Some(done) => done,
            None => loop {
                let options = UpdateOptions { id: Some("big".into()), wait_ms: Some(5_000) };
                match b.update("u", "add", 100u64, options).await {
                    Ok(done) => break done,
                    Err(Error::UpdatePending { .. }) => {}
                    Err(e) => panic!("at {crash_after}: {e}"),
                }
            },
        };
        assert_eq!(done.reply, json!(100), "at {crash_after}: {done:?}");
        let thread = b.thread("u").await.unwrap();
        let out = tokio::time::timeout(Duration::from_secs(20), thread.finished()).await;
        assert_eq!(out.expect("in time").unwrap().status, ThreadStatus::Completed);
        assert_eq!(count(&bodies(&b, "u").await, "big", false), 1, "at {crash_after}: once");
        b.shutdown().await;
        drop(a);
        if died || dying.dead() {
            crashes += 1;
        }
    }
    assert!(crashes >= 2, "the crash points covered the update: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY update_across_engines_crash crash_points={crashes} lost=0 doubled=0"
    ));
}
