//! The node's side of children started at run time (`ctx.start_child`, `ctx.join_child`): each
//! start and each join is a recorded value of the task. A task that runs again reads them back
//! (and starts or waits for nothing); a fresh one derives the child's id from its place among
//! the task's values, starts the child idempotently by that id, and records it.

use cairn_dsl::{ChildEnded, ChildStart, NodeError, ParentClose};
use cairn_storage::ThreadId;
use futures::future::BoxFuture;
use serde_json::Value;

use super::{LiveNodeContext, lock_state};
use crate::core::child_start::{
    CLOSES_CHILDREN_LABEL, ChildEnd, same_start, start_record, started_child_id,
};
use crate::core::drawn::Drawn;
use crate::limits::CHILDREN_PER_TASK_MAX;

impl LiveNodeContext {
    /// The task's next recorded value, and the draw's index (the value's place in the task).
    fn next_recorded(&self) -> (Option<Value>, u64) {
        let mut st = self.state();
        st.draws += 1;
        crate::core::patch::skip(&mut st.replay_values);
        (st.replay_values.pop_front(), st.draws)
    }

    /// `ctx.start_child`: the recorded start when the task runs again (checked against what
    /// the code starts now), else a fresh start of the child, recorded.
    pub(super) fn start_child_of(
        &self,
        start: ChildStart,
    ) -> BoxFuture<'static, Result<String, NodeError>> {
        if start.parent_close == ParentClose::Cancel {
            // The parent's end then lists its children (`child_start::close_children`); the
            // marker goes before the start, where a task that runs again takes it back.
            let _ = self.label(CLOSES_CHILDREN_LABEL, Some("yes"));
        }
        let (recorded, index) = self.next_recorded();
        if let Some(recorded) = recorded {
            let replayed = Drawn::ChildStart
                .read(&recorded)
                .map_err(|was| format!("the code starts a child where a {was} value was recorded"))
                .and_then(|inner| same_start(&inner, &start.workflow, &start.input))
                .map_err(|detail| NodeError::Nondeterminism { detail });
            return Box::pin(std::future::ready(replayed));
        }
        let (env, st) = (self.env.clone(), self.st.clone());
        let id = started_child_id(&env.thread, &self.key.to_string(), self.step, index);
        Box::pin(async move {
            let started = {
                let mut st = lock_state(&st);
                st.children_started += 1;
                st.children_started
            };
            if started > CHILDREN_PER_TASK_MAX {
                return Err(NodeError::fatal(format!(
                    "limit children_per_task exceeded: {started} > {CHILDREN_PER_TASK_MAX}"
                )));
            }
            let thread = ThreadId::new(id.clone()).map_err(|e| NodeError::fatal(e.to_string()))?;
            // The child must never rest on a step of the parent that a crash could still lose.
            env.settle().await.map_err(|e| env.stop.node_error(e))?;
            let record = start_record(&id, &start.workflow, &start.input);
            env.children.clone().start(thread, start).await?;
            lock_state(&st).new_values.push(Drawn::ChildStart.record(record));
            Ok(id)
        })
    }

    /// `ctx.join_child`: the recorded end when the task runs again, else the child waited for
    /// and its end recorded. A handle joined twice in one task is refused.
    pub(super) fn join_child_of(
        &self,
        child: &str,
    ) -> BoxFuture<'static, Result<ChildEnded, NodeError>> {
        if !self.state().joined.insert(child.to_owned()) {
            let twice = NodeError::fatal(format!("child thread {child} is joined twice"));
            return Box::pin(std::future::ready(Err(twice)));
        }
        let (recorded, _) = self.next_recorded();
        if let Some(recorded) = recorded {
            let replayed = Drawn::ChildJoin
                .read(&recorded)
                .ok()
                .and_then(|inner| ChildEnd::read(&inner))
                .filter(|end| end.child == child)
                .map(ChildEnd::ended)
                .ok_or_else(|| NodeError::Nondeterminism {
                    detail: format!("the code joins child {child} where {recorded} was recorded"),
                });
            return Box::pin(std::future::ready(replayed));
        }
        let (env, st, child) = (self.env.clone(), self.st.clone(), child.to_owned());
        Box::pin(async move {
            let id = ThreadId::new(child.clone()).map_err(|e| NodeError::fatal(e.to_string()))?;
            let end = env.children.clone().join(id).await?;
            lock_state(&st).new_values.push(Drawn::ChildJoin.record(end.record()));
            Ok(end.ended())
        })
    }
}
