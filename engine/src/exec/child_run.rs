//! Sub-workflow child threads, run for their parent's subgraph node over the engine's shell:
//! created once, woken if a signal it waits for was sent, handed the parent's pending input,
//! and driven inline by the parent's runner.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_dsl::{ChildStart, DynWorkflow, NodeError};
use cairn_storage::{ThreadId, ThreadStatus};
use futures::future::BoxFuture;
use serde_json::Value;

use super::child_drive::{LiveChildren, drive_child};
use super::env::{ChildStop, ChildThreads};
use super::start::NewThread;
use crate::core::child_start::ChildEnd;
use crate::core::children::PARENT_LABEL;
use crate::error::Error;

impl ChildThreads for LiveChildren {
    fn run(
        &self,
        id: ThreadId,
        wf: Arc<DynWorkflow>,
        input: Value,
        input_for_child: Option<Value>,
    ) -> BoxFuture<'static, Result<ChildStop, NodeError>> {
        let (shell, depth, cancel) = (self.shell.clone(), self.depth, self.cancel.clone());
        let stop = self.stop.clone();
        let parent = self.parent.to_string();
        Box::pin(async move {
            let engine = |e: Error| stop.node_error(e);
            let mut labels = BTreeMap::new();
            labels.insert(PARENT_LABEL.to_owned(), parent);
            super::start::create(&shell, NewThread { labels, ..NewThread::new(&wf, &id, input) })
                .await
                .map_err(engine)?;
            // A child parked in `recv` (itself, or through a child of its own) whose signal was
            // sent is woken here: the signal woke this parent for it (`signals.rs`).
            if let Some(record) = shell.store.thread(&id).await.map_err(|e| engine(e.into()))? {
                super::signals::wake_parked(&shell, &record).await.map_err(engine)?;
            }
            if let Some(value) = input_for_child
                && let Some(record) = shell.store.thread(&id).await.map_err(|e| engine(e.into()))?
                && record.status == ThreadStatus::WaitingInput
            {
                let delivered = super::parked::deliver_input(&shell, &wf, &id, value).await;
                // Refused as not waiting for input: the child waits in `recv`, and the input
                // was for an earlier wait of it.
                let for_input = !matches!(
                    delivered,
                    Err(Error::WrongStatus { status: ThreadStatus::WaitingInput, .. })
                );
                if for_input {
                    delivered.map_err(engine)?;
                }
            }
            let status = drive_child(&shell, &id, depth, &cancel, &stop).await?;
            let ctx = super::fetch::restore(shell.store.as_ref(), &wf, &id, None)
                .await
                .map_err(engine)?;
            Ok((status, ctx))
        })
    }

    fn start(
        self: Arc<Self>,
        id: ThreadId,
        start: ChildStart,
    ) -> BoxFuture<'static, Result<(), NodeError>> {
        Box::pin(async move {
            let ChildStart { workflow, input, parent_close } = start;
            super::child_start::start(&self, id, &workflow, input, parent_close).await
        })
    }

    fn join(self: Arc<Self>, id: ThreadId) -> BoxFuture<'static, Result<ChildEnd, NodeError>> {
        Box::pin(async move { super::child_start::join(&self, id).await })
    }

    fn ended(
        self: Arc<Self>,
        id: ThreadId,
    ) -> BoxFuture<'static, Result<Option<ChildEnd>, NodeError>> {
        Box::pin(async move { super::child_start::ended_child(&self, &id).await })
    }
}
