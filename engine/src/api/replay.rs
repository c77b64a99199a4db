//! Replaying a thread against the registered code: the whole history, or its tail since the
//! latest checkpoint (what the engine checks before it resumes a thread it did not create).

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::{Seq, ThreadId};
use serde_json::Value;

use super::engine::Engine;
use crate::core::thread_ctx::ThreadCtx;
use crate::error::Error;
use crate::replay::{ReplayOptions, ReplayReport, replay_after};

impl Engine {
    /// Replays `thread` against the registered code of its workflow. Reads only.
    ///
    /// # Errors
    /// [`Error::UnknownThread`], [`Error::UnknownWorkflow`] / [`Error::FingerprintChanged`] when
    /// the code is not registered; storage and record errors.
    pub async fn replay(
        &self,
        thread: &str,
        options: &ReplayOptions,
    ) -> Result<ReplayReport, Error> {
        let id = ThreadId::new(thread)?;
        let wf = match &options.workflow {
            Some(wf) => wf.clone(),
            None => self.workflow_of(&id).await?,
        };
        let mut report = self.replay_one(&id, &wf, &options.overrides).await?;
        // Sub-workflow child threads, level by level (nesting is bounded by the DSL), each
        // against the child workflow the parent's code has (so a changed child is caught too).
        let mut parents = vec![(id, wf)];
        while let Some((parent, parent_wf)) = parents.pop() {
            for child in crate::exec::fetch::children_of(self.store().as_ref(), &parent).await? {
                let Some(child_wf) = crate::replay::child_workflow(&parent_wf, &child.workflow.id)
                    .or_else(|| self.workflow_for(&child).ok())
                else {
                    continue;
                };
                let sub = self.replay_one(&child.id, &child_wf, &BTreeMap::new()).await?;
                report.children_replayed += 1;
                report.tasks_replayed += sub.tasks_replayed;
                if report.divergence.is_none()
                    && let Some(mut d) = sub.divergence
                {
                    d.child.get_or_insert_with(|| child.id.to_string());
                    report.divergence = Some(d);
                }
                parents.push((child.id, child_wf));
            }
        }
        Ok(report)
    }

    /// Replays one thread from its creation against `wf`.
    async fn replay_one(
        &self,
        id: &ThreadId,
        wf: &Arc<DynWorkflow>,
        overrides: &BTreeMap<(u64, String, u32), Value>,
    ) -> Result<ReplayReport, Error> {
        let store = self.store().as_ref();
        let first = store.read_since(id, Seq(0), 1).await?;
        let Some(event) = first.into_iter().next() else {
            return Err(Error::UnknownThread(id.to_string()));
        };
        let rec = crate::exec::fetch::decode(store, event).await?;
        let ctx = ThreadCtx::created(wf, id.as_str(), &rec.body, rec.bookmark.at_ms)?;
        replay_after(store, wf, id, ctx, overrides).await
    }

    /// Replays `thread`'s steps since its latest checkpoint (since its creation when it has
    /// none) against the registered code of its workflow: what the engine checks before it
    /// resumes a thread it did not create. Reads only; the cost is bounded by the events after
    /// the checkpoint, whatever the length of the history (see [`ReplayReport::after_seq`] and
    /// [`ReplayReport::tasks_replayed`]).
    ///
    /// # Errors
    /// [`Error::UnknownThread`], [`Error::UnknownWorkflow`] / [`Error::FingerprintChanged`] when
    /// the code is not registered; storage and record errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// let report = engine.replay_tail("t1").await?;
    /// if let Some(d) = &report.divergence {
    ///     eprintln!("t1 would block on resume: {d}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn replay_tail(&self, thread: &str) -> Result<ReplayReport, Error> {
        let id = ThreadId::new(thread)?;
        let wf = self.workflow_of(&id).await?;
        crate::exec::resume_check::tail(self.store().as_ref(), &wf, &id).await
    }
}
