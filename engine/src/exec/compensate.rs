//! Compensation in the runner: a thread that fails for good with undos registered
//! (`core::compensation`) runs them, last registered first, before it is marked failed.
//!
//! Each undo is recorded durably before it runs (`undo_started`) and after (`undo_finished`),
//! and the thread stays Running meanwhile, so a crash anywhere is recovered like any running
//! thread: the restored runner goes on with the undo in flight (again, with the same
//! idempotency key) or the next one. A failed undo is recorded and the unwinding goes on.
//! Cancelling, pausing or a deadline during the unwinding do not stop it.

use cairn_dsl::{ToolCtx, ToolError};
use cairn_storage::{Batch, ThreadStatus};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::runner::{Exit, Runner};
use crate::core::compensation::{self, Undo};
use crate::core::event::Body;
use crate::core::status::Transition;
use crate::error::Error;

impl Runner {
    /// What the runner checks before a step: a restored thread in the middle of its unwinding
    /// goes on with it (and then fails); else the budgets.
    pub(super) async fn before_step(&mut self, now: u64) -> Result<Option<Exit>, Error> {
        if self.ctx.meta.unwinding.is_some() {
            return Ok(Some(self.finish(Transition::Fail, "", now).await?));
        }
        self.check_budgets(now).await
    }

    /// Called as the thread stops with `t`: when it fails for good (or its unwinding began
    /// already) with undos registered, runs them all and answers the failure to record then
    /// (its transition, reason and time); otherwise answers `t` as it was.
    ///
    /// # Errors
    /// Storage errors (the unwinding goes on after a restore).
    pub(super) async fn unwind(
        &mut self,
        t: Transition,
        reason: &str,
        now: u64,
    ) -> Result<(Transition, String, u64), Error> {
        let m = &self.ctx.meta;
        let began = m.unwinding.is_some();
        if m.status != ThreadStatus::Running
            || !(began || t == Transition::Fail && !m.undos.is_empty())
        {
            return Ok((t, reason.to_owned(), now));
        }
        if !began {
            let undos = u32::try_from(m.undos.len()).unwrap_or(u32::MAX);
            self.emit(Body::CompensationBegan { reason: reason.to_owned(), undos }, now)?;
            self.commit_durable(Batch::default(), None).await?;
        }
        while let Some(u) = self.ctx.meta.unwinding.clone() {
            let Some(index) = compensation::next(&self.ctx.meta.undos, u.done) else { break };
            let Some(undo) = self.ctx.meta.undos.get(index as usize).cloned() else { break };
            if u.running != Some(index) {
                let (name, args) = (undo.name.clone(), undo.args.clone());
                self.emit(Body::UndoStarted { index, name, args }, self.now())?;
                self.commit_durable(Batch::default(), None).await?;
            }
            let started = self.now();
            let output = self.run_undo(index, &undo).await;
            let at = self.now();
            let duration_ms = at.saturating_sub(started);
            self.emit(Body::UndoFinished { index, name: undo.name, output, duration_ms }, at)?;
            self.commit_durable(Batch::default(), None).await?;
        }
        let reason = self.ctx.meta.unwinding.as_ref().map(|u| u.reason.clone()).unwrap_or_default();
        Ok((Transition::Fail, reason, self.now()))
    }

    /// Runs undo `index` with its idempotency key.
    async fn run_undo(&self, index: u32, undo: &Undo) -> Result<Value, ToolError> {
        let Some(f) = self.env.wf.compensation(&undo.name) else {
            let message = format!("the workflow declares no compensation {:?}", undo.name);
            return Err(ToolError::fatal(message).with_code("undo"));
        };
        let key = super::idempotency::undo_key(&self.env, index);
        let ctx = ToolCtx::new(CancellationToken::new()).with_idempotency_key(key);
        let span = tracing::info_span!("undo", thread = %self.env.thread, index, name = %undo.name);
        tracing::Instrument::instrument(f(undo.args.clone(), ctx), span).await
    }
}
