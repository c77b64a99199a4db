//! Protection at rest (`cairn::sealing`, `docs/encryption.md`): with a payload codec no body
//! reaches the file in the clear (state, input, output, tool result, offloaded payload, signal,
//! checkpoint), every read opens it, an older key keeps opening what it sealed after a rotation,
//! a wrong or missing key is `Error::Sealed` naming the key, replay and forks agree, verify
//! needs no key, and a crash at any write of a sealed run loses and doubles nothing.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use cairn::dsl::{Ctx, NodeOutput, State, Workflow};
use cairn::replay::ReplayOptions;
use cairn::sealing::{AesGcmCodec, PayloadCodec};
use cairn::storage::{CheckpointFilter, Seq, ThreadId};
use cairn::{END, Engine, EngineBuilder, Error, START, StartOptions, ThreadStatus, ToolError};
use cairn_tools::Operator;
use cairn_tools::debug::{ForkFrom, ForkOptions};
use cairn_tools::serve::Serve;
use serde::{Deserialize, Serialize};

use crate::common::{call, db, open};
use crate::crash::every_write;

/// An order's notes; each update adds some.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct Order {
    log: Vec<String>,
}

impl State for Order {
    type Update = Vec<String>;

    fn apply(&mut self, update: Vec<String>) {
        self.log.extend(update);
    }
}

/// The markers a run writes, one per kind of body; none may be in a sealed file.
const MARKERS: [&str; 7] = [
    "INPUT-MARK",
    "TOOLIN-MARK",
    "TOOLRESULT-MARK",
    "PAYLOAD-MARK",
    "STATE-MARK",
    "SIGNAL-MARK",
    "MESSAGE-MARK",
];

/// START -> charge (a tool with a marked result, and one whose result is large enough to be
/// offloaded to the payload table) -> approve (waits for a signal) -> END.
pub(crate) fn orders(charges: Arc<AtomicU64>) -> Workflow<Order> {
    Workflow::<Order>::builder("sealed-orders", 1)
        .node("charge", move |s: Arc<Order>, ctx: Ctx| {
            let charges = charges.clone();
            async move {
                let card = format!("TOOLIN-MARK {}", s.log.len());
                let receipt: String = ctx
                    .tool("charge", card, move |card: String, _| async move {
                        charges.fetch_add(1, Ordering::SeqCst);
                        Ok::<String, ToolError>(format!("TOOLRESULT-MARK for {card}"))
                    })
                    .await?;
                let scan: String = ctx
                    .tool("scan", 1u64, |_: u64, _| async move {
                        Ok::<String, ToolError>("PAYLOAD-MARK ".repeat(2_000))
                    })
                    .await?;
                ctx.message(cairn::dsl::Message::new("assistant", "MESSAGE-MARK charged"));
                Ok(NodeOutput::update(vec![receipt, format!("STATE-MARK {}", scan.len())]))
            }
        })
        .node("approve", |_s, ctx: Ctx| async move {
            let by: String = ctx.recv("approve").await?;
            Ok(NodeOutput::update(vec![by]))
        })
        .edge(START, "charge")
        .edge("charge", "approve")
        .edge("approve", END)
        .build()
        .unwrap()
}

pub(crate) fn key(id: &str, byte: u8) -> Arc<dyn PayloadCodec> {
    Arc::new(AesGcmCodec::new(id, [byte; 32]).unwrap())
}

fn input() -> Order {
    Order { log: vec!["INPUT-MARK".into()] }
}

/// What the run's output is.
fn expected() -> Vec<String> {
    let receipt = "TOOLRESULT-MARK for TOOLIN-MARK 1".to_owned();
    let state = format!("STATE-MARK {}", "PAYLOAD-MARK ".len() * 2_000);
    vec!["INPUT-MARK".into(), receipt, state, "SIGNAL-MARK by ann".into()]
}

/// Starts `id`, waits until it waits for the signal, sends it and waits for the end.
pub(crate) async fn run_order(engine: &Engine, id: &str) {
    let t = engine.start_json("sealed-orders", input(), StartOptions::id(id)).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.signal(id, "approve", "SIGNAL-MARK by ann").await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
}

async fn output(engine: &Engine, id: &str) -> Result<Vec<String>, Error> {
    Ok(engine.thread(id).await?.output::<Order>().await?.log)
}

/// The markers the file at `path` holds in the clear.
fn plain_markers(path: &std::path::Path) -> Vec<&'static str> {
    let bytes = std::fs::read(path).unwrap();
    let holds = |m: &str| bytes.windows(m.len()).any(|w| w == m.as_bytes());
    MARKERS.into_iter().filter(|m| holds(m)).collect()
}

fn sealed_with(codec: Arc<dyn PayloadCodec>) -> impl FnOnce(EngineBuilder) -> EngineBuilder {
    move |b| b.payload_codec(codec).checkpoint_every(Some(1), None)
}

#[tokio::test]
async fn no_body_reaches_the_file_in_the_clear_and_every_read_opens_it() {
    let wf = orders(Arc::default());
    // Without a codec the markers are there: the search finds what it looks for.
    let (_plain_dir, plain) = db();
    let engine = open(&plain, &[&wf], |b| b.checkpoint_every(Some(1), None)).await;
    run_order(&engine, "o1").await;
    engine.shutdown().await;
    drop(engine);
    assert_eq!(plain_markers(&plain), MARKERS);

    let (_d, path) = db();
    let engine = open(&path, &[&wf], sealed_with(key("k1", 1))).await;
    run_order(&engine, "o1").await;
    assert_eq!(output(&engine, "o1").await.unwrap(), expected());
    let filter =
        CheckpointFilter { thread: Some(ThreadId::new("o1").unwrap()), ..Default::default() };
    let checkpoints = cairn::admin::checkpoints_all(engine.store().as_ref(), &filter);
    assert!(!checkpoints.await.unwrap().is_empty(), "checkpoints were taken and sealed");
    // A subscription reads through the sealing store: its events open as a read's do.
    let scope = cairn::Scope::Thread(ThreadId::new("o1").unwrap());
    let mut followed = engine.store().subscribe(scope, 0).unwrap();
    let first = followed.next().await.unwrap();
    let created = cairn::admin::decode(engine.store().as_ref(), first).await.unwrap();
    assert!(created.body.summary().starts_with("thread created"), "{:?}", created.body);
    assert!(engine.store().verify().unwrap().is_clean());
    engine.shutdown().await;
    drop(engine);
    assert_eq!(plain_markers(&path), Vec::<&str>::new(), "plaintext on disk");
}

#[tokio::test]
async fn an_older_key_opens_what_it_sealed_after_a_rotation() {
    let wf = orders(Arc::default());
    let (_d, path) = db();
    let engine = open(&path, &[&wf], sealed_with(key("k1", 1))).await;
    run_order(&engine, "before").await;
    engine.shutdown().await;
    drop(engine);
    let ring = AesGcmCodec::new("k2", [2; 32]).unwrap().with_key("k1", [1; 32]).unwrap();
    let engine = open(&path, &[&wf], sealed_with(Arc::new(ring))).await;
    run_order(&engine, "after").await;
    assert_eq!(output(&engine, "before").await.unwrap(), expected());
    assert_eq!(output(&engine, "after").await.unwrap(), expected());
    engine.shutdown().await;
    drop(engine);
    // k2 alone opens the new thread, not the old one: each record carries its key id.
    let engine = open(&path, &[&wf], sealed_with(key("k2", 2))).await;
    assert_eq!(output(&engine, "after").await.unwrap(), expected());
    match output(&engine, "before").await {
        Err(Error::Sealed { key, .. }) => assert_eq!(key, "k1"),
        other => panic!("the old thread without k1: {other:?}"),
    }
    engine.shutdown().await;
}

#[tokio::test]
async fn a_wrong_or_missing_key_is_a_sealed_error_and_verify_needs_no_key() {
    let wf = orders(Arc::default());
    let (_d, path) = db();
    let engine = open(&path, &[&wf], sealed_with(key("k1", 1))).await;
    run_order(&engine, "o1").await;
    engine.shutdown().await;
    drop(engine);
    let engine = open(&path, &[&wf], sealed_with(key("k1", 9))).await;
    let wrong = output(&engine, "o1").await.unwrap_err();
    assert!(matches!(&wrong, Error::Sealed { key, .. } if key == "k1"), "{wrong:?}");
    assert!(wrong.to_string().contains("does not open"), "{wrong}");
    engine.shutdown().await;
    drop(engine);
    let engine = open(&path, &[&wf], EngineBuilder::sealed_without_key).await;
    let missing = output(&engine, "o1").await.unwrap_err();
    assert!(matches!(&missing, Error::Sealed { key, .. } if key == "k1"), "{missing:?}");
    assert!(engine.store().verify().unwrap().is_clean(), "CRC and structure without the key");
    engine.shutdown().await;
}

/// The tools' lenient reading (`SealedView`) does not reach the engine: an engine without the
/// key shows placeholders through its view, yet its own reads, replay, a restore and a fork
/// (which would write the state into a new thread) still fail with `Error::Sealed`; with the
/// key the view opens every body.
#[tokio::test]
async fn the_placeholder_view_stays_out_of_the_engine() {
    let wf = orders(Arc::default());
    let (_d, path) = db();
    let engine = open(&path, &[&wf], sealed_with(key("k1", 1))).await;
    run_order(&engine, "o1").await;
    engine.shutdown().await;
    drop(engine);
    let id = ThreadId::new("o1").unwrap();
    let is_k1 = |e: &Error| matches!(e, Error::Sealed { key, .. } if key == "k1");
    let engine = open(&path, &[&wf], EngineBuilder::sealed_without_key).await;
    // The view: every body a placeholder naming k1, none opened.
    let viewed = cairn::admin::viewed_events(&engine, &id, Seq(0), 1_000).await.unwrap();
    assert!(viewed.len() > 5, "{}", viewed.len());
    for v in &viewed {
        let cairn::sealing::Viewed::Sealed(p) = &v.body else { panic!("opened without key") };
        assert_eq!((p.codec.as_str(), p.key.as_str()), ("aes256gcm", "k1"));
    }
    // The engine: its reads, replay, a restore and a fork fail as before.
    let read = engine.store().read_since(&id, Seq(0), 1_000).await.unwrap_err();
    assert!(matches!(&read, cairn::storage::Error::Sealed { key, .. } if key == "k1"), "{read:?}");
    let replay = engine.replay("o1", &ReplayOptions::default()).await.unwrap_err();
    assert!(is_k1(&replay), "{replay:?}");
    let restore = cairn::admin::restore_at(&engine, &id, 3).await.unwrap_err();
    assert!(is_k1(&restore), "{restore:?}");
    let fork = Operator::new(&engine).fork("o1", ForkFrom::Seq(3), ForkOptions::id("f")).await;
    assert!(fork.as_ref().is_err_and(is_k1), "{:?}", fork.err());
    assert!(engine.thread("f").await.is_err(), "no fork was written");
    engine.shutdown().await;
    drop(engine);
    // Control: with the key the same view opens every body.
    let engine = open(&path, &[&wf], sealed_with(key("k1", 1))).await;
    let viewed = cairn::admin::viewed_events(&engine, &id, Seq(0), 1_000).await.unwrap();
    assert!(viewed.iter().all(|v| matches!(v.body, cairn::sealing::Viewed::Open(_))));
    engine.shutdown().await;
    drop(engine);
    // A wrong key (k1 in the ring, other bytes) is no placeholder: the view's read fails.
    let engine = open(&path, &[&wf], sealed_with(key("k1", 9))).await;
    let wrong = cairn::admin::viewed_events(&engine, &id, Seq(0), 1_000).await.unwrap_err();
    assert!(is_k1(&wrong) && wrong.to_string().contains("does not open"), "{wrong}");
    engine.shutdown().await;
}

#[tokio::test]
async fn replay_and_a_fork_of_a_sealed_thread_agree_with_its_record() {
    let charges = Arc::new(AtomicU64::new(0));
    let wf = orders(charges.clone());
    let (_d, path) = db();
    let engine = open(&path, &[&wf], sealed_with(key("k1", 1))).await;
    run_order(&engine, "o1").await;
    let report = engine.replay("o1", &ReplayOptions::default()).await.unwrap();
    assert!(report.is_deterministic(), "{report:?}");
    assert_eq!(charges.load(Ordering::SeqCst), 1, "replay calls no tool");
    // A fork from the end of the charge's step: its recorded result, the same output.
    let id = ThreadId::new("o1").unwrap();
    let events = engine.store().read_since(&id, Seq(0), 1_000).await.unwrap();
    let mut charged = None;
    for event in events {
        let seq = event.bookmark.seq.0;
        let recorded = cairn::admin::decode(engine.store().as_ref(), event).await.unwrap();
        if recorded.body.summary().contains("completed; next: approve") {
            charged = Some(seq);
        }
    }
    let from = ForkFrom::Seq(charged.expect("the charge completed"));
    let fork = Operator::new(&engine).fork("o1", from, ForkOptions::id("o1-fork")).await.unwrap();
    assert_eq!(fork.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.signal("o1-fork", "approve", "SIGNAL-MARK by ann").await.unwrap();
    assert_eq!(fork.finished().await.unwrap().status, ThreadStatus::Completed);
    assert_eq!(output(&engine, "o1-fork").await.unwrap(), expected());
    assert_eq!(charges.load(Ordering::SeqCst), 1, "the fork reuses the recorded charge");
    engine.shutdown().await;
}

/// What a crash run's caller saw acknowledged.
#[derive(Default)]
struct Acked {
    started: AtomicBool,
    signalled: AtomicBool,
}

/// The store dies at each write of a sealed run in turn; the reopened engine (with the key)
/// resumes it, the caller asks again for what it saw no answer to (the signal with a dedup
/// key, so a signal stored but not acknowledged is not sent twice), and the thread ends with
/// every note once: nothing lost, nothing doubled.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_crash_at_any_write_of_a_sealed_run_loses_and_doubles_nothing() {
    let wf = orders(Arc::default());
    let codec = key("k1", 1);
    let tune = |b: EngineBuilder, _: &Acked| b.workflow(&wf).payload_codec(codec.clone());
    let run = async |engine: &Engine, acked: &Acked| {
        let t = engine.start_json("sealed-orders", input(), StartOptions::id("c")).await?;
        acked.started.store(true, Ordering::SeqCst);
        t.wait().await?;
        engine.signal_once("c", "approve", "SIGNAL-MARK by ann", "approve-1").await?;
        acked.signalled.store(true, Ordering::SeqCst);
        t.finished().await.map(drop)
    };
    let check = async |engine: &Engine, acked: &Acked, crash_after: i64| {
        let t = match engine.thread("c").await {
            Ok(t) => t,
            Err(e) => {
                assert!(!acked.started.load(Ordering::SeqCst), "crash_after {crash_after}: {e}");
                engine.start_json("sealed-orders", input(), StartOptions::id("c")).await.unwrap()
            }
        };
        if t.wait().await.unwrap().status == ThreadStatus::WaitingInput {
            assert!(!acked.signalled.load(Ordering::SeqCst), "crash_after {crash_after}: lost");
            let again = engine.signal_once("c", "approve", "SIGNAL-MARK by ann", "approve-1");
            again.await.unwrap();
        }
        assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
        let out = output(engine, "c").await.unwrap();
        assert_eq!(out, expected(), "crash_after {crash_after}: lost or doubled");
        assert!(engine.store().verify().unwrap().is_clean(), "crash_after {crash_after}");
    };
    let crashes = every_write(200, Acked::default, tune, run, check).await;
    assert!(crashes >= 5, "the crash points covered the run: {crashes}");
    crate::common::report(&format!(
        "RELIABILITY sealed_run_crash crash_points={crashes} lost=0 doubled=0"
    ));
}

/// The endpoint of an engine without the key answers the reads of a sealed thread (the thread,
/// its state, its events, its result) 200, each sealed value a placeholder naming the key and
/// a top-level `sealed: ["k1"]`, the clear fields as usual; a diff (a computation on sealed
/// values) stays 409 naming the key; a wrong key is a 409 that says it does not open. With
/// the key the same routes answer the values.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_without_the_key_answers_placeholders() {
    let wf = orders(Arc::default());
    let (_d, path) = db();
    let engine = open(&path, &[&wf], sealed_with(key("k1", 1))).await;
    run_order(&engine, "o1").await;
    engine.shutdown().await;
    drop(engine);
    let loopback: std::net::SocketAddr = ([127, 0, 0, 1], 0).into();
    let wf = &wf;
    let serving = |builder: EngineBuilder| async move {
        let (engine, server) = builder.workflow(wf).serve(loopback).open().await.unwrap();
        let base = format!("http://{}", server.addr());
        let get = |p: &str| call("GET", format!("{base}{p}"), None, String::new());
        let mut answers = Vec::new();
        for route in ["", "/state", "/state?at=3", "/events", "/result", "/state?diff=2,3"] {
            answers.push(get(&format!("/api/threads/o1{route}")).await);
        }
        answers.push(get("/api/threads").await);
        answers.push(get("/api/threads/o1/bundle").await);
        answers.push(get("/api/threads/o1/bundle?last_events=2").await);
        server.shutdown().await;
        engine.shutdown().await;
        answers
    };
    let placeholder = serde_json::json!({"encrypted": true, "codec": "aes256gcm", "key": "k1"});
    let a = serving(Engine::builder(&path).sealed_without_key()).await;
    for (status, body) in &a[..5] {
        assert_eq!(*status, 200, "{body}");
        assert_eq!(body["sealed"], serde_json::json!(["k1"]), "{body}");
        let clear: Vec<&str> =
            MARKERS.into_iter().filter(|m| body.to_string().contains(m)).collect();
        assert!(clear.is_empty(), "{clear:?} in {body}");
    }
    let [thread, state, state_at, events, result] = [0, 1, 2, 3, 4].map(|i| &a[i].1);
    assert_eq!((&thread["status"], &thread["output"]), (&"completed".into(), &placeholder));
    assert_eq!(thread["telemetry"], placeholder, "{thread}");
    assert_eq!((&state["state"], &state["status"]), (&placeholder, &"completed".into()));
    assert_eq!(state_at["state"], placeholder, "{state_at}");
    assert!(state_at.get("status").is_none(), "an earlier seq's status is sealed: {state_at}");
    let events = events["events"].as_array().unwrap();
    assert!(events.iter().all(|e| e["body"] == placeholder), "{events:?}");
    assert!(events.iter().any(|e| e["summary"] == "message (sealed)"), "summaries shown");
    assert!(events.iter().any(|e| e["kind"] == "node_completed" && e["node"] == "charge"));
    assert_eq!((&result["status"], &result["output"]), (&"completed".into(), &placeholder));
    let (diff, diff_body) = &a[5];
    assert_eq!(*diff, 409, "{diff_body}");
    assert!(diff_body.to_string().contains("sealed with key k1"), "{diff_body}");
    assert_eq!(a[6].0, 200);
    // The bundle goes out sealed, as stored; a cut of it needs the key.
    let (status, bundle) = &a[7];
    assert_eq!(*status, 200, "{bundle}");
    assert_eq!(bundle["sealed"]["keys"], serde_json::json!(["k1"]), "{bundle}");
    let clear: Vec<&str> = MARKERS.into_iter().filter(|m| bundle.to_string().contains(m)).collect();
    assert!(clear.is_empty(), "{clear:?} in the sealed bundle");
    assert_eq!(a[8].0, 409, "{}", a[8].1);
    // A wrong key: no placeholder, the error that says so.
    let a = serving(Engine::builder(&path).payload_codec(key("k1", 9))).await;
    assert_eq!(a[1].0, 409, "{}", a[1].1);
    assert!(a[1].1.to_string().contains("does not open"), "{}", a[1].1);
    // Control: with the key the same routes answer the values, no placeholder.
    let a = serving(Engine::builder(&path).payload_codec(key("k1", 1))).await;
    for (status, body) in &a[..5] {
        assert_eq!(*status, 200, "{body}");
        assert!(body.get("sealed").is_none() && !body.to_string().contains("encrypted"), "{body}");
    }
    assert!(a[1].1.to_string().contains("SIGNAL-MARK by ann"), "{}", a[1].1);
    assert!(a[3].1.to_string().contains("TOOLRESULT-MARK"), "{}", a[3].1);
}

/// On PostgreSQL the same: the rows hold no marker in the clear (the database's own dump of
/// every table), and every read opens.
#[cfg(feature = "postgres")]
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sealed_run_on_postgres_stores_no_body_in_the_clear() {
    use cairn_storage_testkit::pg_cluster::Cluster;
    let Some(cluster) = Cluster::start("a_sealed_run_on_postgres") else { return };
    let url = cluster.new_database();
    let wf = orders(Arc::default());
    let engine = Engine::builder(&url).workflow(&wf).payload_codec(key("k1", 1));
    let engine = engine.checkpoint_every(Some(1), None).open().await.unwrap();
    run_order(&engine, "o1").await;
    assert_eq!(output(&engine, "o1").await.unwrap(), expected());
    engine.shutdown().await;
    let dump = tokio::task::spawn_blocking(move || {
        let mut client = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        let tables = "SELECT table_name FROM information_schema.tables \
                      WHERE table_schema = 'public' AND table_name LIKE 'cairn%'";
        let mut all = Vec::new();
        for row in client.query(tables, &[]).unwrap() {
            let table: String = row.get(0);
            let rows = format!("SELECT CAST(t AS text) FROM \"{table}\" t");
            for row in client.query(rows.as_str(), &[]).unwrap() {
                all.push(row.get::<_, String>(0));
            }
        }
        all.join("\n")
    })
    .await
    .unwrap();
    assert!(dump.contains("sealed-orders"), "the dump holds the rows");
    let clear: Vec<&str> = MARKERS.into_iter().filter(|m| dump.contains(m)).collect();
    assert!(clear.is_empty(), "plaintext in PostgreSQL: {clear:?}");
}
