//! Flow control on queues in the store (`docs/queues.md`): a dropping rate refuses a start and
//! writes nothing, a per-key rate holds admissions per key, a debounced start supersedes the
//! key's waiting start only as the caller read it (compare and swap), and a batch run takes
//! the key's first gathering starts only as the caller read them. Both backends.

use cairn_storage::{
    Batch, Enqueue, Error, QueueLimits, QueueOp, RateLimit, Store, ThreadRecord, ThreadStatus,
};

use crate::common::*;

fn define(store: &dyn Store, name: &str, limits: QueueLimits) {
    let define = QueueOp::Define { name: name.into(), limits };
    store
        .append(Batch { queues: vec![define], ..Batch::default() })
        .unwrap()
        .wait_blocking()
        .unwrap();
}

/// A start of `id` on `queue` at `now_ms`, ending the threads in `cancels` in the same batch.
fn start(store: &dyn Store, e: Enqueue, cancels: &[&str]) -> Result<(), Error> {
    let mut record = ThreadRecord::new(e.thread.clone(), workflow("w"), e.now_ms);
    record.status = ThreadStatus::Queued;
    let mut threads = vec![record];
    for id in cancels {
        let mut old = store.thread(&tid(id)).wait().unwrap().unwrap();
        old.status = ThreadStatus::Cancelled;
        threads.push(old);
    }
    let batch = Batch { threads, queues: vec![QueueOp::Enqueue(e)], ..Batch::default() };
    store.append(batch)?.wait_blocking().map(drop)
}

fn plain(queue: &str, id: &str, key: &str, now_ms: u64) -> Enqueue {
    Enqueue::new(tid(id), queue.into(), key.into(), now_ms)
}

fn admit(store: &dyn Store, queue: &str, now_ms: u64) -> Vec<String> {
    let op = QueueOp::Admit { queue: queue.into(), now_ms, max: 100, workflows: vec!["w".into()] };
    let done = store
        .append(Batch { queues: vec![op], ..Batch::default() })
        .unwrap()
        .wait_blocking()
        .unwrap();
    done.admitted.iter().map(ToString::to_string).collect()
}

fn rates(store: &dyn Store) {
    let drops = QueueLimits {
        rate: Some(RateLimit { starts: 2, period_ms: 100 }),
        rate_drops: true,
        ..QueueLimits::default()
    };
    define(store, "drops", drops);
    start(store, plain("drops", "d-1", "", 10), &[]).unwrap();
    start(store, plain("drops", "d-2", "", 20), &[]).unwrap();
    let refused = start(store, plain("drops", "d-3", "", 30), &[]);
    assert!(matches!(refused, Err(Error::RateLimited { retry_after_ms: 81, .. })), "{refused:?}");
    assert!(store.thread(&tid("d-3")).wait().unwrap().is_none(), "a dropped start writes nothing");
    start(store, plain("drops", "d-3", "", 111), &[]).unwrap();
    assert_eq!(admit(store, "drops", 112), ["d-1", "d-2", "d-3"], "accepted starts run at once");
    let per_key = QueueLimits {
        rate_per_key: Some(RateLimit { starts: 1, period_ms: 100 }),
        ..QueueLimits::default()
    };
    define(store, "per-key", per_key);
    for (id, key) in [("a-1", "a"), ("a-2", "a"), ("b-1", "b")] {
        start(store, plain("per-key", id, key, 0), &[]).unwrap();
    }
    assert_eq!(admit(store, "per-key", 10), ["a-1", "b-1"]);
    assert!(admit(store, "per-key", 50).is_empty(), "a's window is full");
    let q = store.queues().wait().unwrap().into_iter().find(|q| q.name == "per-key").unwrap();
    assert_eq!(q.next_due_at(), Some(111));
    assert_eq!(admit(store, "per-key", 111), ["a-2"]);
}

fn debounce(store: &dyn Store) {
    let limits = QueueLimits { debounce_ms: Some(100), ..QueueLimits::default() };
    define(store, "deb", limits);
    start(store, plain("deb", "x-1", "k", 0), &[]).unwrap();
    // A second start that did not read x-1 is refused: the caller reads again.
    let blind = start(store, plain("deb", "x-2", "k", 10), &[]);
    assert!(matches!(blind, Err(Error::QueueMoved { .. })), "{blind:?}");
    let supersede = Enqueue { supersedes: Some(tid("x-1")), ..plain("deb", "x-2", "k", 10) };
    start(store, supersede, &["x-1"]).unwrap();
    let x1 = store.thread(&tid("x-1")).wait().unwrap().unwrap();
    assert_eq!(x1.status, ThreadStatus::Cancelled);
    assert!(store.queue_member(&tid("x-1")).wait().unwrap().is_none());
    assert!(admit(store, "deb", 50).is_empty(), "the quiet period holds");
    let q = store.queues().wait().unwrap().into_iter().find(|q| q.name == "deb").unwrap();
    assert_eq!((q.waiting, q.debounced["k"].due_ms), (1, 110));
    assert_eq!(admit(store, "deb", 110), ["x-2"]);
    let q = store.queues().wait().unwrap().into_iter().find(|q| q.name == "deb").unwrap();
    assert!(q.debounced.is_empty(), "{q:?}");
}

fn batches(store: &dyn Store) {
    let limits =
        QueueLimits { batch_max: Some(2), batch_window_ms: Some(1_000), ..QueueLimits::default() };
    define(store, "bat", limits);
    for (id, at) in [("m-1", 5), ("m-2", 6), ("m-3", 7)] {
        start(store, plain("bat", id, "", at), &[]).unwrap();
    }
    assert!(admit(store, "bat", 8).is_empty(), "gathering starts are not admitted one by one");
    let q = store.queues().wait().unwrap().into_iter().find(|q| q.name == "bat").unwrap();
    assert_eq!(q.batches_due(8), [String::new()]);
    let wrong = Enqueue { batch_of: vec![tid("m-2")], ..plain("bat", "run-0", "", 9) };
    let refused = start(store, wrong, &["m-2"]);
    assert!(matches!(refused, Err(Error::QueueMoved { .. })), "{refused:?}");
    let run = Enqueue { batch_of: vec![tid("m-1"), tid("m-2")], ..plain("bat", "run-1", "", 9) };
    start(store, run, &["m-1", "m-2"]).unwrap();
    let member = store.queue_member(&tid("run-1")).wait().unwrap().unwrap();
    assert_eq!(member.batch_of, [tid("m-1"), tid("m-2")]);
    assert_eq!(admit(store, "bat", 10), ["run-1"]);
    let q = store.queues().wait().unwrap().into_iter().find(|q| q.name == "bat").unwrap();
    assert_eq!(q.batching[""].members, [tid("m-3")]);
    assert!(q.batches_due(10).is_empty());
    assert_eq!(q.batches_due(1_007), [String::new()], "the window closes");
    assert_eq!(q.waiting, 1);
}

fn flow_contract(store: &dyn Store) {
    rates(store);
    debounce(store);
    batches(store);
    assert!(store.verify().unwrap().is_clean());
}

#[test]
fn flow_control_on_a_file() {
    let (_dir, _path, store) = open_fast();
    flow_contract(&store);
}

#[cfg(feature = "postgres")]
#[test]
fn flow_control_on_postgres() {
    use cairn_storage_testkit::pg_cluster::Cluster;
    let Some(cluster) = Cluster::start("queue_flow_contract") else { return };
    let url = cluster.new_database();
    let store =
        cairn_storage::PgStore::connect(&url, cairn_storage::Durability::Immediate).unwrap();
    flow_contract(&store);
}
