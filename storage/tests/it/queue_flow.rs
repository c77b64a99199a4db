//! Flow control on queues in the store (`docs/queues.md`): a dropping rate refuses a start and
//! writes nothing, a per-key rate holds admissions per key, a debounced start supersedes the
//! key's waiting start only as the caller read it (compare and swap), and a batch run takes
//! the key's first gathering starts only as the caller read them; fairness weights split
//! admissions between keys in proportion (3:1 gives 300:100 of 400), and weights that do not
//! differ admit exactly as a queue without them. Both backends.

use cairn_storage::{
    Batch, Enqueue, Error, Fairness, QueueLimits, QueueOp, RateLimit, Store, ThreadRecord,
    ThreadStatus,
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

/// Starts `ids` (each with its key) on `queue` in one batch.
fn start_many(store: &dyn Store, queue: &str, ids: &[(String, &str)]) {
    let mut batch = Batch::default();
    for (id, key) in ids {
        let mut record = ThreadRecord::new(tid(id), workflow("w"), 1);
        record.status = ThreadStatus::Queued;
        batch.threads.push(record);
        batch.queues.push(QueueOp::Enqueue(plain(queue, id, key, 1)));
    }
    store.append(batch).unwrap().wait_blocking().unwrap();
}

/// Admits up to `max` threads of `queue`: their ids.
fn admit_some(store: &dyn Store, queue: &str, max: usize) -> Vec<String> {
    let op = QueueOp::Admit { queue: queue.into(), now_ms: 2, max, workflows: vec!["w".into()] };
    let done = store.append(Batch { queues: vec![op], ..Batch::default() }).unwrap();
    done.wait_blocking().unwrap().admitted.iter().map(ToString::to_string).collect()
}

fn weighted(default_weight: u32, weights: &[(&str, u32)]) -> QueueLimits {
    let weights = weights.iter().map(|(k, w)| ((*k).to_owned(), *w));
    QueueLimits { fairness: Some(Fairness::new(default_weight, weights)), ..QueueLimits::default() }
}

fn fairness(store: &dyn Store) {
    // Weights 3:1, both keys waiting throughout (500 each): 400 admissions split 300:100.
    define(store, "fair", weighted(1, &[("gold", 3)]));
    for key in ["gold", "free"] {
        for chunk in 0..5 {
            let ids: Vec<(String, &str)> =
                (0..100).map(|i| (format!("{key}-{:03}", chunk * 100 + i), key)).collect();
            start_many(store, "fair", &ids);
        }
    }
    let mut admitted = Vec::new();
    for _ in 0..4 {
        admitted.extend(admit_some(store, "fair", 100));
    }
    let gold = admitted.iter().filter(|id| id.starts_with("gold")).count();
    assert_eq!(admitted.len(), 400);
    assert!((299..=301).contains(&gold), "gold {gold} of 400");
    let q = store.queues().wait().unwrap().into_iter().find(|q| q.name == "fair").unwrap();
    assert_eq!(q.limits.fairness.as_ref().map(|f| f.weight_of("gold")), Some(3), "read back");
    assert_eq!(q.fair.pass.len(), 2, "{:?}", q.fair);

    // Control: the same starts on a queue without weights, one with equal weights: the same
    // admissions in the same order (round robin), in steps of 3.
    let order = |queue: &str, limits: QueueLimits| {
        define(store, queue, limits);
        let keys = ["a", "a", "b", "c", "a", "b", "b", "c", "a", "a", "c", "b"];
        let ids: Vec<(String, &str)> =
            keys.iter().enumerate().map(|(i, k)| (format!("{queue}-{i:02}-{k}"), *k)).collect();
        start_many(store, queue, &ids);
        let mut out = Vec::new();
        for _ in 0..4 {
            let step = admit_some(store, queue, 3);
            out.extend(step.into_iter().map(|id| id.split_once('-').unwrap().1.to_owned()));
        }
        out
    };
    let plain_order = order("rr", QueueLimits::default());
    assert_eq!(plain_order.len(), 12);
    assert_eq!(order("eq", weighted(2, &[("a", 2), ("b", 2)])), plain_order);
    assert_ne!(order("skew", weighted(1, &[("a", 5)])), plain_order, "control: weights matter");
}

fn flow_contract(store: &dyn Store) {
    rates(store);
    debounce(store);
    batches(store);
    fairness(store);
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
