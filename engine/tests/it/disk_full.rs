//! A full disk under an embedded engine (issue 38 item 3), on the fault-injection disk model:
//! every waiter and caller hears the cause at once, as a typed error.

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{NodeOutput, State, Workflow};
use cairn::storage::{Durability, Options, RedbStore};
use cairn::{END, Engine, Error, START, StartOptions};
use cairn_storage_testkit::fault::{FaultBackend, FaultController};
use cairn_tools::serve::Serve as _;
use serde::{Deserialize, Serialize};
use tokio::sync::{Notify, watch};

/// The longest a caller may wait to hear that the disk is full.
const PROMPT: Duration = Duration::from_secs(2);

/// A state of notes, one per node.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Notes {
    notes: Vec<String>,
}

impl State for Notes {
    type Update = String;
    fn apply(&mut self, note: String) {
        self.notes.push(note);
    }
}

/// Where the `big` node waits until the test has filled the disk.
#[derive(Clone)]
struct Gate {
    reached: Arc<Notify>,
    open: Arc<watch::Sender<bool>>,
}

impl Gate {
    fn new() -> Gate {
        Gate { reached: Arc::new(Notify::new()), open: Arc::new(watch::channel(false).0) }
    }

    async fn pass(&self) {
        self.reached.notify_one();
        let mut open = self.open.subscribe();
        let _ = open.wait_for(|open| *open).await;
    }
}

/// The bytes of the `big` node's note: far more than the file holds now, so its commit must
/// grow the file.
const BIG_BYTES: usize = 3 << 20;

/// START -> first -> big -> last -> END; `big` waits at `gate`, then writes [`BIG_BYTES`].
fn bulky(gate: &Gate) -> Workflow<Notes> {
    let gate = gate.clone();
    Workflow::<Notes>::builder("bulky", 1)
        .node("first", |_s, _ctx| async move { Ok(NodeOutput::update("first".to_owned())) })
        .node("big", move |_s, _ctx| {
            let gate = gate.clone();
            async move {
                gate.pass().await;
                Ok(NodeOutput::update("b".repeat(BIG_BYTES)))
            }
        })
        .node("last", |_s, _ctx| async move { Ok(NodeOutput::update("last".to_owned())) })
        .edge(START, "first")
        .edge("first", "big")
        .edge("big", "last")
        .edge("last", END)
        .build()
        .expect("bulky workflow")
}

/// An engine on a simulated disk, its disk, and the gate of its `bulky` workflow.
async fn engine_on_a_disk() -> (Engine, FaultController, Gate) {
    let backend = FaultBackend::new();
    let disk = backend.controller();
    let options = Options { durability: Durability::Immediate, ..Options::default() };
    let store = RedbStore::with_backend(backend, options).expect("store");
    let gate = Gate::new();
    let engine =
        Engine::with_store(Arc::new(store)).workflow(&bulky(&gate)).open().await.expect("engine");
    (engine, disk, gate)
}

/// Starts `id`, lets it run into a full disk at `big`, and returns its handle.
async fn run_into_a_full_disk(
    engine: &Engine,
    disk: &FaultController,
    gate: &Gate,
    id: &str,
) -> cairn::ThreadHandle {
    let handle =
        engine.start_json("bulky", Notes::default(), StartOptions::id(id)).await.expect("start");
    gate.reached.notified().await;
    disk.set_capacity(Some(disk.live_image().len() as u64));
    gate.open.send_replace(true);
    handle
}

fn is_disk_full(error: &Error) -> bool {
    matches!(error, Error::Storage(cairn::storage::Error::DiskFull { .. }))
}

/// The thread whose commit hit the full disk: its `wait()` ends within [`PROMPT`] with the
/// typed error naming the cause (it used to wait for ever: the runner stopped, nothing told
/// the thread's status channel).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_wait_on_a_thread_that_hit_a_full_disk_ends_with_disk_full() {
    let (engine, disk, gate) = engine_on_a_disk().await;
    let handle = run_into_a_full_disk(&engine, &disk, &gate, "t1").await;
    let waited = tokio::time::timeout(PROMPT, handle.wait()).await.expect("the wait ends at once");
    let error = waited.expect_err("the commit failed");
    assert!(is_disk_full(&error), "{error:?}");
    assert!(error.to_string().contains("disk full"), "{error}");
    engine.shutdown().await;
}

/// After the full disk, every caller hears the cause: a start on the same engine is refused
/// with `Poisoned` naming the full disk (it used to say only "poisoned ... reopen it"), and a
/// wait begun afterwards (a new handle, `await_result`) ends at once with the cause instead of
/// waiting for a thread nothing drives.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn later_callers_hear_what_poisoned_the_store() {
    let (engine, disk, gate) = engine_on_a_disk().await;
    let handle = run_into_a_full_disk(&engine, &disk, &gate, "t1").await;
    let _ = tokio::time::timeout(PROMPT, handle.wait()).await.expect("the wait ends at once");
    let refused = engine
        .start_json("bulky", Notes::default(), StartOptions::id("t2"))
        .await
        .expect_err("the store refuses writes");
    let Error::Storage(cairn::storage::Error::Poisoned { cause }) = &refused else {
        panic!("a start after the full disk: {refused:?}");
    };
    assert!(matches!(**cause, cairn::storage::Error::DiskFull { .. }), "{cause:?}");
    let said = refused.to_string();
    assert!(said.contains("poisoned by: disk full during"), "{said}");
    let again = tokio::time::timeout(PROMPT, handle.finished()).await.expect("at once");
    assert!(again.as_ref().is_err_and(is_disk_full), "{again:?}");
    let by_id = engine.thread("t1").await.expect("t1");
    let waited = tokio::time::timeout(PROMPT, by_id.wait()).await.expect("at once");
    assert!(waited.as_ref().is_err_and(is_disk_full), "{waited:?}");
    let result = tokio::time::timeout(PROMPT, engine.await_result("t1", Duration::from_secs(30)))
        .await
        .expect("at once");
    assert!(result.as_ref().is_err_and(is_disk_full), "{result:?}");
    engine.shutdown().await;
}

/// While the store refuses writes, the health report says so and why (without a write), the
/// `cairn_database_writable` gauge is 0, and the endpoint's `/api/health` says the same.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn health_says_the_store_refuses_writes_and_why() {
    use crate::telemetry_recorder::TestRecorder;
    let backend = FaultBackend::new();
    let disk = backend.controller();
    let options = Options { durability: Durability::Immediate, ..Options::default() };
    let store = RedbStore::with_backend(backend, options).expect("store");
    let gate = Gate::new();
    let recorder = Arc::new(TestRecorder::default());
    let (engine, server) = Engine::with_store(Arc::new(store))
        .workflow(&bulky(&gate))
        .metrics_recorder(recorder.clone())
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .expect("a serving engine");
    let before = engine.health().await.expect("health");
    assert!(before.ok && before.database.is_none(), "{before:?}");
    assert_eq!(recorder.gauge("cairn_database_writable"), 1.0);
    let handle = run_into_a_full_disk(&engine, &disk, &gate, "t1").await;
    let waited = tokio::time::timeout(PROMPT, handle.wait()).await.expect("the wait ends at once");
    assert!(waited.as_ref().is_err_and(is_disk_full), "{waited:?}");

    let report = engine.health().await.expect("health answers");
    assert!(!report.ok, "{report:?}");
    let database = report.database.expect("the report says how the database stands");
    assert!(database.reachable && !database.writable, "{database:?}");
    let said = database.last_error.unwrap_or_default();
    assert!(said.contains("disk full during"), "{said}");
    assert_eq!(recorder.gauge("cairn_database_writable"), 0.0);

    let url = format!("http://{}/api/health", server.addr());
    let (status, body) = crate::common::call("GET", url, None, String::new()).await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["ok"], false, "{body}");
    assert_eq!(body["database"]["writable"], false, "{body}");
    let said = body["database"]["last_error"].as_str().unwrap_or_default();
    assert!(said.contains("disk full during"), "{body}");
    server.shutdown().await;
    engine.shutdown().await;
}

/// Waits, as the engine does, for `store` to take writes and then for `id` to finish: it must
/// complete within 30 s, with every step of `bulky` in its log once.
async fn finishes_once_the_store_takes_writes(engine: &Engine, store: &RedbStore, id: &str) {
    use cairn::storage::{Backend, EventKind, Seq, ThreadId, ThreadLog};
    let finished = tokio::time::timeout(Duration::from_secs(30), async {
        let mut refusals = store.refusals().expect("a file store says when it refuses writes");
        loop {
            // Woken by the store, not polled: once it takes writes, the engine drives it on.
            refusals.wait_for(Option::is_none).await.expect("the store is open");
            match engine.await_result(id, Duration::from_secs(30)).await {
                Ok(Some(outcome)) => return outcome,
                Ok(None) => panic!("{id} did not finish"),
                // The runner that hit the failure stopped only now (its waiters hear why), or
                // the store refuses writes again: wait for the store again.
                Err(e) => assert!(matches!(e, Error::Storage(_)), "{e:?}"),
            }
        }
    })
    .await
    .expect("the engine comes back within 30 s of the cause clearing");
    assert_eq!(finished.status, cairn::ThreadStatus::Completed, "{finished:?}");
    let notes: Notes = serde_json::from_value(finished.output.expect("output")).expect("notes");
    assert_eq!(notes.notes.len(), 3);
    assert_eq!((notes.notes[0].as_str(), notes.notes[2].as_str()), ("first", "last"));
    let thread = ThreadId::new(id).expect("id");
    let events = store.read_since(&thread, Seq(0), 10_000).await.expect("the log");
    for node in ["first", "big", "last"] {
        let completed = events
            .iter()
            .filter(|e| e.kind == EventKind::NodeCompleted && e.node.as_deref() == Some(node))
            .count();
        assert_eq!(completed, 1, "{node} completed {completed} times in {id}'s log");
    }
}

/// An engine running `bulky` on a store over a faulty disk that reopens its file by itself
/// (`Durability::Immediate`): the disk's controller, the store, the workflow's gate, the engine.
async fn on_a_reopening_store() -> (FaultController, Arc<RedbStore>, Gate, Engine) {
    let backend = FaultBackend::new();
    let disk = backend.controller();
    let options = Options { durability: Durability::Immediate, ..Options::default() };
    let store = Arc::new(RedbStore::with_reopening_backend(backend, options).expect("store"));
    let gate = Gate::new();
    let engine =
        Engine::with_store(store.clone()).workflow(&bulky(&gate)).open().await.expect("engine");
    (disk, store, gate, engine)
}

/// Once the disk has room again, the same engine comes back by itself (no reopen by the
/// caller): its store reopens the file, the thread that was in flight is driven on from its
/// log and completes, each of its steps recorded once, a new start runs, and the file
/// verifies clean. It used to refuse every write with `Poisoned` until the process restarted.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_engine_comes_back_by_itself_once_the_disk_has_room() {
    use cairn::storage::Maintenance;
    let (disk, store, gate, engine) = on_a_reopening_store().await;
    let handle = run_into_a_full_disk(&engine, &disk, &gate, "t1").await;
    let waited = tokio::time::timeout(PROMPT, handle.wait()).await.expect("the wait ends at once");
    assert!(waited.as_ref().is_err_and(is_disk_full), "{waited:?}");

    disk.clear();
    finishes_once_the_store_takes_writes(&engine, &store, "t1").await;
    let t2 = engine
        .start_json("bulky", Notes::default(), StartOptions::id("t2"))
        .await
        .expect("a start");
    let t2 = tokio::time::timeout(Duration::from_secs(30), t2.finished()).await.expect("t2 runs");
    assert_eq!(t2.expect("t2").status, cairn::ThreadStatus::Completed);
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{report:?}");
    engine.shutdown().await;
}

/// An I/O error is told and waited out the same way: the wait ends at once with the typed
/// storage error naming it, and once the disk answers again the same engine finishes the thread.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_io_error_is_told_and_waited_out_the_same_way() {
    use cairn::storage::Maintenance;
    use cairn_storage_testkit::fault::{CrashModel, Fault};
    let (disk, store, gate, engine) = on_a_reopening_store().await;
    let handle =
        engine.start_json("bulky", Notes::default(), StartOptions::id("t1")).await.expect("start");
    gate.reached.notified().await;
    disk.arm(Fault::at(disk.mutations(), CrashModel::IoErrorPersistent));
    gate.open.send_replace(true);
    let waited = tokio::time::timeout(PROMPT, handle.wait()).await.expect("the wait ends at once");
    let error = waited.expect_err("the commit failed");
    assert!(matches!(error, Error::Storage(cairn::storage::Error::Storage { .. })), "{error:?}");
    assert!(error.to_string().contains("persistent I/O error"), "{error}");

    disk.clear();
    finishes_once_the_store_takes_writes(&engine, &store, "t1").await;
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{report:?}");
    engine.shutdown().await;
}
