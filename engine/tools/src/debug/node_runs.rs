//! [`Operator::node_runs`](crate::Operator::node_runs): every run of every node of a thread, from its log.

use cairn_storage::{Seq, ThreadId};

use crate::Operator;
use crate::limits::NODE_RUNS_EVENTS_MAX;
use cairn::admin;
use cairn::admin as fetch;
use cairn::error::Error;
use cairn_core::limits;
use cairn_core::node_runs::{NodeRun, node_runs};

impl Operator {
    /// Every run of every node of `thread`, in the order they started, then the nodes due next
    /// (`pending`) or, for a completed thread, those no branch reached (`skipped`): node type,
    /// step, attempt, status, times, the update a run produced and the error a failed one met.
    /// A retried node has one run per attempt; a node in a loop one per step. Sub-workflow
    /// children are threads of their own: ask for theirs by their id.
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; [`Error::LimitExceeded`] for a log over
    /// [`NODE_RUNS_EVENTS_MAX`] events (read it with `events` in pages instead);
    /// [`Error::UnknownWorkflow`] if the thread's workflow is not registered; storage errors
    /// (`Pruned` when the start of the log was pruned).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// use cairn_core::node_runs::RunStatus;
    /// let runs = cairn_tools::Operator::new(&engine).node_runs("t1").await?;
    /// let failed = runs.iter().filter(|r| r.status == RunStatus::Failed).count();
    /// println!("{} runs, {failed} failed", runs.len());
    /// # Ok(()) }
    /// ```
    pub async fn node_runs(&self, thread: &str) -> Result<Vec<NodeRun>, Error> {
        let id = ThreadId::new(thread)?;
        let record = admin::thread_record(self.engine.store().as_ref(), &id).await?;
        let last = record.last.map_or(0, |b| b.seq.0);
        if last > NODE_RUNS_EVENTS_MAX {
            return Err(Error::LimitExceeded {
                limit: "the events of a thread whose node runs are listed",
                value: last,
                max: NODE_RUNS_EVENTS_MAX,
            });
        }
        let wf = admin::workflow_for(&self.engine, &record)?;
        let mut events = Vec::new();
        let mut after = 0;
        while after < last {
            let chunk =
                self.engine.store().read_since(&id, Seq(after), limits::READ_CHUNK_EVENTS).await?;
            let Some(end) = chunk.last().map(|e| e.bookmark.seq.0) else { break };
            for event in chunk {
                events.push(fetch::decode(self.engine.store().as_ref(), event).await?);
            }
            after = end;
        }
        Ok(node_runs(&wf, events))
    }
}
