//! The wake index of a PostgreSQL database (`ready_at`): a worker looking for work reads the
//! threads due (a lease lapsing, a timer or deadline falling due, a time not known), never the
//! parked, the far-off or the finished ones, nor another workflow's; a database made before the
//! index gets it at open with every unfinished thread due once. Reads page by cursor.

use cairn_storage::{Append, Catalog, Maintenance, SharedDatabase};
use std::collections::BTreeSet;

use cairn_storage::{Batch, Durability, LeaseOp, PgStore, ThreadStatus, Wake};
use cairn_storage_testkit::pg_cluster::Cluster;

use crate::common::*;

fn put(store: &PgStore, id: &str, wf: &str, status: ThreadStatus, wake: Option<Wake>) {
    let mut record = thread_record(id);
    record.workflow = workflow(wf);
    record.status = status;
    let mut batch = Batch { threads: vec![record], ..Batch::default() };
    batch.wakes.extend(wake.map(|w| (tid(id), w)));
    append(store, batch);
}

fn due(store: &PgStore, horizon_ms: u64) -> BTreeSet<String> {
    // Two at a time, by cursor: the pages follow on in (ready_at, id) order, none repeated.
    let mut seen = Vec::new();
    let mut after = None;
    loop {
        let page =
            store.due_threads(&["wf".to_owned()], horizon_ms, after.as_ref(), 2).wait().unwrap();
        let full = page.len() == 2;
        for due in page {
            let key = (due.ready_at_ms, due.record.id.clone());
            assert!(after.as_ref().is_none_or(|a| *a < key), "{key:?} after {after:?}");
            after = Some(key);
            seen.push(due.record.id.to_string());
        }
        if !full {
            break;
        }
    }
    let unique: BTreeSet<String> = seen.iter().cloned().collect();
    assert_eq!(unique.len(), seen.len(), "a thread came twice: {seen:?}");
    unique
}

fn names(ids: &[&str]) -> BTreeSet<String> {
    ids.iter().map(|s| (*s).to_owned()).collect()
}

#[test]
fn a_look_for_work_reads_only_the_threads_due() {
    let Some(cluster) = Cluster::start("a_look_for_work_reads_only_the_threads_due") else {
        return;
    };
    let store = PgStore::connect(&cluster.new_database(), Durability::Immediate).unwrap();
    let hour = 3_600_000;
    let now =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_millis()
            as u64;
    put(&store, "sleeps-an-hour", "wf", ThreadStatus::Sleeping, Some(Wake::At(now + hour)));
    put(&store, "timer-passed", "wf", ThreadStatus::Sleeping, Some(Wake::At(now - 1)));
    put(&store, "waits-for-input", "wf", ThreadStatus::WaitingInput, Some(Wake::Never));
    put(&store, "deadline-soon", "wf", ThreadStatus::Paused, Some(Wake::At(now + 1_000)));
    put(&store, "finished", "wf", ThreadStatus::Completed, None);
    put(&store, "unknown", "wf", ThreadStatus::Created, None);
    put(&store, "other-workflow", "other", ThreadStatus::Created, None);
    put(&store, "driven", "wf", ThreadStatus::Running, None);
    let lease =
        LeaseOp::Acquire { thread: tid("driven"), owner: "w1".into(), now_ms: 0, ttl_ms: 400 };
    append(&store, Batch { leases: vec![lease], ..Batch::default() });

    assert_eq!(due(&store, 0), names(&["timer-passed", "unknown"]));
    assert_eq!(due(&store, 5_000), names(&["timer-passed", "unknown", "deadline-soon", "driven"]));
    std::thread::sleep(std::time::Duration::from_millis(500));
    assert!(due(&store, 0).contains("driven"), "a lapsed lease is due");
    assert!(due(&store, 2 * hour).contains("sleeps-an-hour"));
    assert!(!due(&store, u64::MAX / 4).contains("waits-for-input"), "never: someone acts on it");

    // A later write without a hint makes the thread due now (not known), never forgotten.
    let mut record = store.thread(&tid("sleeps-an-hour")).wait().unwrap().unwrap();
    record.labels.insert("k".into(), "v".into());
    append(&store, Batch { threads: vec![record], ..Batch::default() });
    assert!(due(&store, 0).contains("sleeps-an-hour"));
    // Several batches of one group: the last hint wins (the group path writes them together).
    let mut pending = Vec::new();
    for wake in [Wake::At(0), Wake::At(now + hour)] {
        let mut record = store.thread(&tid("timer-passed")).wait().unwrap().unwrap();
        record.summary = format!("{wake:?}").into_bytes();
        let batch = Batch {
            threads: vec![record],
            wakes: vec![(tid("timer-passed"), wake)],
            ..Batch::default()
        };
        pending.push(store.append(batch).unwrap());
    }
    for p in pending {
        p.wait_blocking().unwrap();
    }
    assert!(!due(&store, 0).contains("timer-passed"));
}

/// A signal sent to a thread parked waiting makes it due, so that a worker's look wakes it when
/// the sender cannot (it died after its send, or does not run the workflow); a signal to a
/// thread that is driven leaves its row alone.
#[test]
fn a_signal_makes_a_waiting_thread_due() {
    let Some(cluster) = Cluster::start("a_signal_makes_a_waiting_thread_due") else { return };
    let store = PgStore::connect(&cluster.new_database(), Durability::Immediate).unwrap();
    put(&store, "waits", "wf", ThreadStatus::WaitingInput, Some(Wake::Never));
    put(&store, "sleeps", "wf", ThreadStatus::Sleeping, Some(Wake::At(u64::MAX / 4)));
    assert!(due(&store, 0).is_empty());
    let signal =
        |t: &str| cairn_storage::NewSignal::new(tid(t), "go", b"1".to_vec(), 1).expect("a signal");
    append(&store, Batch { signals: vec![signal("waits"), signal("sleeps")], ..Batch::default() });
    assert_eq!(due(&store, 0), names(&["waits"]));
}

#[test]
fn a_database_made_before_the_wake_index_gets_it_at_open() {
    let Some(cluster) = Cluster::start("a_database_made_before_the_wake_index") else {
        return;
    };
    let url = cluster.new_database();
    {
        let store = PgStore::connect(&url, Durability::Immediate).unwrap();
        put(&store, "running", "wf", ThreadStatus::Running, None);
        put(&store, "parked", "wf", ThreadStatus::WaitingInput, Some(Wake::Never));
        put(&store, "finished", "wf", ThreadStatus::Completed, None);
    }
    // As an older Cairn left it: no column, no index.
    let mut sql = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    sql.batch_execute("ALTER TABLE cairn_threads DROP COLUMN ready_at").unwrap();
    let store = PgStore::connect(&url, Durability::Immediate).unwrap();
    assert_eq!(
        due(&store, 0),
        names(&["running", "parked"]),
        "unfinished: due once, finished never"
    );
    let indexes: i64 = sql
        .query_one(
            "SELECT count(*) FROM pg_indexes WHERE indexname = 'cairn_threads_by_ready_at'",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(indexes, 1);
    assert!(store.verify().unwrap().is_clean());
}
