//! Per-run hooks the generated nodes call: the pause gate (a node at its thread's pause point
//! signals the driver and waits until the driver has asked for the pause) and the lock holder
//! registry (node code records when it holds the shared lock, so two threads holding it at once
//! is seen as it happens, not only in the log afterwards).
//!
//! Everything is replaced for every run, like [`super::Signals`]: a gate of a crashed run never
//! opens for the next.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cairn::NodeError;
use cairn::dsl::Ctx;
use cairn::event::Body;
use cairn::storage::limits::READ_LIMIT_MAX;
use cairn::storage::{Seq, Store, ThreadId};
use tokio::sync::{Notify, watch};

use super::tid;

/// The one lock every locking node of every thread takes: threads contend for it.
pub(super) const LOCK: &str = "shared";
/// Far past any time the drivers move the manual clock to (sleeps move it by seconds): a lock
/// that expired while held would let the other thread take it legitimately.
pub(super) const LOCK_TTL_MS: u64 = 3_600_000;

#[derive(Default)]
struct Inner {
    /// Per thread: the pause signal to the driver and the gate the driver opens.
    pause: BTreeMap<String, (Arc<Notify>, watch::Sender<bool>)>,
    /// The run's store, to tell a holder that ended (its locks released) from one that runs.
    store: Option<Arc<dyn Store>>,
    /// Who holds [`LOCK`] as far as node code saw.
    holder: Option<String>,
    /// Two holders at once, and wrong pause boundaries, as they were seen.
    violations: Vec<String>,
}

/// The hooks of the current run.
#[derive(Default)]
pub(super) struct Gates(Mutex<Inner>);

impl Gates {
    /// Fresh gates for a run of `threads` threads on `store`; returns the pause signals.
    pub(super) fn reset(&self, threads: usize, store: Option<Arc<dyn Store>>) -> Vec<Arc<Notify>> {
        let mut g = self.0.lock().unwrap();
        g.pause.clear();
        g.holder = None;
        g.store = store;
        (0..threads)
            .map(|t| {
                let n = Arc::new(Notify::new());
                g.pause.insert(tid(t), (n.clone(), watch::channel(false).0));
                n
            })
            .collect()
    }

    /// Drops the run's store (the workflow, which holds these gates, outlives the run).
    pub(super) fn detach(&self) {
        self.0.lock().unwrap().store = None;
    }

    /// At a pause point: tells the driver, then waits until it opens the gate (having asked
    /// for the pause first, so the pause lands at this node's step boundary).
    pub(super) async fn pause_point(&self, thread: &str, ctx: &Ctx) -> Result<(), NodeError> {
        let (signal, mut gate) = {
            let g = self.0.lock().unwrap();
            let (n, tx) = g.pause.get(thread).expect("a gate per thread");
            if *tx.borrow() {
                // Opened before in this run: the node runs again after a stop inside it (a
                // budget ran out there), and the pause it asked for is answered.
                return Ok(());
            }
            (n.clone(), tx.subscribe())
        };
        signal.notify_one();
        let opened = async move { gate.wait_for(|open| *open).await.is_ok() };
        tokio::select! {
            opened = opened => {
                if !opened {
                    // The run this node belongs to is over (the gates were replaced).
                    std::future::pending::<()>().await;
                }
                Ok(())
            }
            () = ctx.cancelled() => Err(NodeError::Cancelled),
        }
    }

    /// Whether node code runs as a replay (the resume check re-runs the completed nodes of a
    /// thread this engine instance did not create, feeding them the record): the node's
    /// completion is already logged. A replayed node must neither stop at its pause gate nor
    /// count as holding the lock (replay does not take it).
    pub(super) fn replaying(&self, ctx: &Ctx) -> bool {
        let Some(store) = self.0.lock().unwrap().store.clone() else { return false };
        let id = ThreadId::new(ctx.thread_id()).unwrap();
        let Ok(events) = store.read_since(&id, Seq(0), READ_LIMIT_MAX).wait() else { return false };
        events.into_iter().any(|e| {
            matches!(
                cairn::blocking::decode(store.as_ref(), e).map(|r| r.body),
                Ok(Body::NodeCompleted { step, task, .. })
                    if step == ctx.step() && *task.node == *ctx.node()
            )
        })
    }

    /// Opens thread's pause gate.
    pub(super) fn open(&self, thread: &str) {
        if let Some((_, tx)) = self.0.lock().unwrap().pause.get(thread) {
            tx.send_replace(true);
        }
    }

    /// Node code of `thread` took [`LOCK`]: nobody else may hold it, unless that holder has
    /// ended (its locks went with it; node code cannot see that release).
    pub(super) fn acquired(&self, thread: &str) {
        let mut g = self.0.lock().unwrap();
        if let Some(other) = g.holder.clone().filter(|h| h != thread) {
            let status = g.store.as_ref().and_then(|s| {
                s.thread(&ThreadId::new(other.clone()).unwrap())
                    .wait()
                    .ok()
                    .flatten()
                    .map(|r| r.status)
            });
            // No store (or a dead one): nothing to tell, the log check still runs.
            if let Some(status) = status.filter(|s| !s.is_terminal()) {
                g.violations
                    .push(format!("{thread} took {LOCK} while {other} ({status:?}) held it"));
            }
        }
        g.holder = Some(thread.to_owned());
    }

    /// Node code of `thread` is about to release [`LOCK`].
    pub(super) fn releasing(&self, thread: &str) {
        let mut g = self.0.lock().unwrap();
        if g.holder.as_deref() == Some(thread) {
            g.holder = None;
        }
    }

    /// Records a broken expectation seen during a run.
    pub(super) fn violation(&self, what: String) {
        self.0.lock().unwrap().violations.push(what);
    }

    /// The violations seen so far (cleared).
    pub(super) fn take_violations(&self) -> Vec<String> {
        std::mem::take(&mut self.0.lock().unwrap().violations)
    }
}
