//! A thread's acknowledger: waits for the batches its runner handed to storage, in submission
//! order, checks the seqs storage assigned, and reports each closed step as soon as it is
//! durable.
//!
//! It runs in the runner's own task, polled beside the runner ([`Acknowledger::beside`]), not
//! as a task of its own: the writer's answer then wakes the one task that waits for it (and
//! none at all while the runner is computing ahead), where a separate acknowledger was woken by
//! the runner's every hand-over and by every answer, and woke the runner in turn when it
//! settled. A step is still reported once its commit is durable, not when the runner next
//! looks: while the runner awaits anything (a node, a tool, a timer), the task is woken by the
//! answer and the acknowledger is polled first.

use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::Arc;

use cairn_storage::{Pending, ThreadId};
use tokio::sync::{mpsc, watch};

use super::shell::StepAcks;
use crate::telemetry::metrics::Metrics;

/// One submitted batch and what the runner predicted for it.
pub(crate) struct InFlight {
    /// The storage ticket.
    pub pending: Pending,
    /// The seq the runner gave the batch's first event.
    pub first_seq: u64,
    /// The step this batch closes, reported to the step hook once it is durable.
    pub step: Option<u64>,
    /// When it was submitted (its commit latency is measured from here).
    pub at: std::time::Instant,
}

/// What the acknowledger has seen durable.
#[derive(Debug, Clone, Default)]
pub(crate) struct Acked {
    /// Batches durable, counted from the first.
    pub batches: u64,
    /// The first failure: the batches after it were rejected (or never reached the disk), so
    /// the runner's context is ahead of the log and every later settle reports it.
    pub failed: Option<cairn_storage::Error>,
}

/// The acknowledger of one thread's pipeline: the receiving end of its batches in flight.
pub(crate) struct Acknowledger {
    pub(super) acks: Arc<StepAcks>,
    pub(super) metrics: Metrics,
    pub(super) thread: ThreadId,
    pub(super) rx: mpsc::Receiver<InFlight>,
    pub(super) acked: watch::Sender<Acked>,
}

impl Acknowledger {
    /// Runs `work` (the thread's runner, or what drives it) and acknowledges the pipeline's
    /// batches beside it, in the same task; once `work` is done, waits for the batches it left
    /// in flight (a runner stopped by an error may leave some), so that whoever waits for one
    /// learns its outcome. `work` is pinned where the caller made it: a runner's future is
    /// several KiB, not to be moved into this one.
    pub async fn beside<W: Future>(mut self, mut work: Pin<&mut W>) -> W::Output {
        let out = {
            let mut acking = pin!(self.acknowledge());
            let mut acking_done = false;
            std::future::poll_fn(|cx| {
                // First: a step that became durable is reported before the runner goes on.
                if !acking_done && acking.as_mut().poll(cx).is_ready() {
                    acking_done = true;
                }
                work.as_mut().poll(cx)
            })
            .await
        };
        // Nothing is handed over after the runner: what is queued now is all there is.
        self.rx.close();
        self.acknowledge().await;
        out
    }

    /// Waits for the batches in order until the channel ends or one fails.
    async fn acknowledge(&mut self) {
        if self.acked.borrow().failed.is_some() {
            return;
        }
        while let Some(batch) = self.rx.recv().await {
            match batch.pending.wait().await {
                Ok(appended) => {
                    // A continue-as-new's successor, created in the thread's last batch, has
                    // seqs 1 and 2, below any batch's first seq here: not this thread's.
                    let own = appended.bookmarks.iter().filter(|b| b.seq.0 >= batch.first_seq);
                    for (i, b) in own.enumerate() {
                        // The runner is the thread's only writer while it holds the lease, and
                        // each batch is guarded by the seq it expects: any other seq is a bug.
                        assert_eq!(
                            b.seq.0,
                            batch.first_seq + i as u64,
                            "seq predicted by the runner"
                        );
                    }
                    self.metrics.commit(batch.at.elapsed());
                    if let Some(step) = batch.step {
                        self.acks.acknowledged(&self.thread, step);
                    }
                    self.acked.send_modify(|a| a.batches += 1);
                }
                Err(e) => {
                    self.acked.send_modify(|a| a.failed = Some(e));
                    return;
                }
            }
        }
    }
}
