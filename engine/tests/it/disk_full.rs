//! A full disk under an embedded engine (issue 38 item 3), on the fault-injection disk model:
//! every waiter and caller hears the cause at once, as a typed error.

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{NodeOutput, State, Workflow};
use cairn::storage::fault::{FaultBackend, FaultController};
use cairn::storage::{Durability, Options, RedbStore};
use cairn::{END, Engine, Error, START, StartOptions};
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
        engine.start("bulky", Notes::default(), StartOptions::id(id)).await.expect("start");
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
