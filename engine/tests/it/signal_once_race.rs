//! A dedup key stores one signal when its sends race (`Engine::signal_once`): two engines on one
//! PostgreSQL database sending the same key at once, round after round, store it once (the
//! store's write checks the inbox for the key's marker under the thread's row lock), and
//! concurrent sends in one engine on redb likewise (under its single writer). Every send
//! answers the stored signal's number; exactly one of them is not a duplicate.

use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::{DEDUP_SIGNAL, Engine, Sent, StartOptions, ThreadStatus};
use cairn::{END, START};
use cairn_storage_testkit::pg_cluster::Cluster;

use crate::common::{Tally, db, open};

/// Rounds of racing sends, each with a key of its own.
const ROUNDS: u64 = 60;

/// Waits for a `stop` signal, so that the `add` signals sent meanwhile stay in its inbox.
fn inbox() -> Workflow<Tally> {
    Workflow::<Tally>::builder("inbox", 1)
        .node("wait", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.recv("stop").await?;
            Ok(NodeOutput::update((n, "stopped".into())))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .build()
        .unwrap()
}

/// The names of `thread`'s signals, in order.
async fn names(engine: &Engine, thread: &str) -> Vec<String> {
    let id = cairn::ThreadId::new(thread).unwrap();
    let mut out = Vec::new();
    loop {
        let page = engine.store().signals(&id, out.len() as u64, 256).await.unwrap();
        if page.is_empty() {
            return out;
        }
        out.extend(page.into_iter().map(|s| s.name));
    }
}

/// Checks one round's answers: one stored, the rest duplicates, all of the same number.
/// Returns how many stored (1 unless the key was doubled).
fn stored_once(round: u64, sent: &[Sent]) -> usize {
    let first = sent.iter().filter(|s| !s.duplicate).count();
    assert!(sent.iter().all(|s| s.signal == sent[0].signal), "round {round}: {sent:?}");
    first
}

/// Checks the inbox after the rounds: one `add` and one marker per key, the thread waiting.
async fn check_inbox(engine: &Engine, thread: &str) {
    let names = names(engine, thread).await;
    let adds = names.iter().filter(|n| *n == "add").count() as u64;
    let markers = names.iter().filter(|n| *n == DEDUP_SIGNAL).count() as u64;
    assert_eq!((adds, markers), (ROUNDS, ROUNDS), "one signal and one marker per key");
    let status = engine.thread(thread).await.unwrap().status().await.unwrap();
    assert_eq!(status, ThreadStatus::WaitingInput);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn two_engines_on_one_postgres_database_racing_a_key_store_it_once() {
    let Some(cluster) = Cluster::start("two_engines_racing_a_dedup_key") else { return };
    let url = cluster.new_database();
    let wf = inbox();
    let a = Engine::builder(&url).workflow(&wf).open().await.unwrap();
    let b = Engine::builder(&url).workflow(&wf).open().await.unwrap();
    let t = a.start_json("inbox", Tally::default(), StartOptions::id("race")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let mut doubled = 0;
    for round in 0..ROUNDS {
        let key = format!("hook-{round}");
        let (x, y) = tokio::join!(
            a.signal_once("race", "add", round, &key),
            b.signal_once("race", "add", round, &key)
        );
        let sent = [x.unwrap(), y.unwrap()];
        let first = stored_once(round, &sent);
        doubled += first.saturating_sub(1);
        assert_eq!(first, 1, "round {round}: {sent:?}");
    }
    check_inbox(&a, "race").await;
    println!(
        "RELIABILITY signal_once_race backend=postgres engines=2 rounds={ROUNDS} doubled={doubled}"
    );
    assert!(a.store().verify().unwrap().is_clean());
    b.shutdown().await;
    a.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_sends_of_a_key_in_one_engine_on_redb_store_it_once() {
    let (_d, path) = db();
    let wf = inbox();
    let engine = open(&path, &[&wf], |b| b).await;
    let t = engine.start_json("inbox", Tally::default(), StartOptions::id("race")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let mut doubled = 0;
    for round in 0..ROUNDS {
        let key = format!("hook-{round}");
        let sends = (0..4).map(|_| {
            let (engine, key) = (engine.clone(), key.clone());
            tokio::spawn(async move { engine.signal_once("race", "add", round, &key).await })
        });
        let mut sent = Vec::new();
        for s in futures::future::join_all(sends).await {
            sent.push(s.unwrap().unwrap());
        }
        let first = stored_once(round, &sent);
        doubled += first.saturating_sub(1);
        assert_eq!(first, 1, "round {round}: {sent:?}");
    }
    check_inbox(&engine, "race").await;
    println!(
        "RELIABILITY signal_once_race backend=redb senders=4 rounds={ROUNDS} doubled={doubled}"
    );
    engine.shutdown().await;
}
