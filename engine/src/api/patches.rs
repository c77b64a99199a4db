//! Which threads still need the old branch of a patch (`ctx.patched(id)` answering false): what
//! an operator checks before deleting that branch (`ctx.deprecate_patch`).

use cairn_storage::{Seq, ThreadFilter, ThreadId, ThreadStatus};
use serde::Serialize;

use super::engine::Engine;
use crate::core::event::Body;
use crate::core::patch;
use crate::error::Error;
use crate::limits;

/// An unfinished thread that ran tasks without recording the marker of a patch: when it goes
/// on, or is replayed, a task that went past the patch point under the older code answers
/// `ctx.patched(id) == false` and needs the old branch.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Unpatched {
    /// The thread.
    pub thread: String,
    /// Its workflow id.
    pub workflow: String,
    /// Its workflow version.
    pub version: u32,
    /// Its status (never a terminal one).
    pub status: ThreadStatus,
    /// Events read to decide (the scan's cost for this thread).
    pub events: u64,
}

impl Engine {
    /// The unfinished threads (of `workflow`, or of every workflow) that ran at least one task
    /// and whose log holds no marker of patch `id`, at most `limit` of them, in the store's id
    /// order. Such a thread may still replay or re-execute a task through the old branch of
    /// `id`; a thread that recorded the marker, a finished thread, and one whose tasks have not
    /// started are not listed. The answer is conservative: a thread of a node that never calls
    /// `patched(id)` is listed too (filter by `workflow`), and so is one whose marker lay in
    /// events a prune removed.
    ///
    /// Cost: a scan. Every thread record is listed (a page at a time), and the whole log of each
    /// unfinished one read until the marker is found: O(events of the unfinished threads), with
    /// offloaded payloads fetched. Reads only.
    ///
    /// # Errors
    /// Storage and record errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// let waiting = engine.threads_without_patch("vat-2027", Some("billing"), 100).await?;
    /// if waiting.is_empty() {
    ///     println!("no unfinished thread needs the old branch of vat-2027");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn threads_without_patch(
        &self,
        id: &str,
        workflow: Option<&str>,
        limit: usize,
    ) -> Result<Vec<Unpatched>, Error> {
        let store = self.store().as_ref();
        let filter =
            ThreadFilter { workflow_id: workflow.map(str::to_owned), ..ThreadFilter::default() };
        let mut found = Vec::new();
        let mut pages = super::ThreadPages::new(filter, None, PAGE);
        while let Some(page) = pages.next(store).await? {
            for record in page {
                if record.status.is_terminal() {
                    continue;
                }
                let (ran, marked, events) = self.scan(&record.id, id).await?;
                if ran && !marked {
                    found.push(Unpatched {
                        thread: record.id.to_string(),
                        workflow: record.workflow.id.to_string(),
                        version: record.workflow.version,
                        status: record.status,
                        events,
                    });
                    if found.len() >= limit {
                        return Ok(found);
                    }
                }
            }
        }
        Ok(found)
    }

    /// Reads `thread`'s log: whether a task of it ran, whether it recorded the marker of `id`
    /// (the read stops there), and how many events were read.
    async fn scan(&self, thread: &ThreadId, id: &str) -> Result<(bool, bool, u64), Error> {
        let store = self.store().as_ref();
        let (mut ran, mut read, mut after) = (false, 0u64, Seq(0));
        loop {
            let events = store.read_since(thread, after, limits::READ_CHUNK_EVENTS).await?;
            let n = events.len();
            for event in events {
                after = event.bookmark.seq;
                read += 1;
                let rec = crate::exec::fetch::decode(store, event).await?;
                let values = match &rec.body {
                    Body::ToolCalled { values, .. }
                    | Body::NodeCompleted { values, .. }
                    | Body::InputRequested { values, .. }
                    | Body::SignalAwaited { values, .. }
                    | Body::TimerSet { values, .. } => values,
                    Body::NodeStarted { .. } | Body::NodeFailed { .. } => {
                        ran = true;
                        continue;
                    }
                    _ => continue,
                };
                ran = true;
                if patch::holds(values, id) {
                    return Ok((true, true, read));
                }
            }
            if n < limits::READ_CHUNK_EVENTS {
                return Ok((ran, false, read));
            }
        }
    }
}

/// Thread records listed at a time.
const PAGE: usize = 1_000;
