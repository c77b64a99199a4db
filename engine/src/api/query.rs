//! Read-only queries: a workflow's declared queries (`WorkflowBuilder::query`) answered from a
//! thread's state as stored, without running, claiming or writing anything.

use serde_json::Value;

use super::engine::Engine;
use crate::error::Error;

impl Engine {
    /// Answers query `name` of thread `thread`'s workflow with `args`, from the thread's state
    /// after its last stored event (latest checkpoint plus the log after it). The thread may be
    /// running, parked or finished; nothing is written, and a runner driving it is not
    /// disturbed (the answer reflects what is durable, not a step still being computed).
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; [`Error::Invalid`] naming the workflow's queries when it has no
    /// query `name`, or when `args` do not convert to the query's arguments; what restoring the
    /// thread may return (its workflow not registered, damage).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// let open_items = engine.query("order-7", "open_items", serde_json::Value::Null).await?;
    /// # Ok(()) }
    /// ```
    pub async fn query(&self, thread: &str, name: &str, args: Value) -> Result<Value, Error> {
        let id = cairn_storage::ThreadId::new(thread)?;
        let store = self.shell.store.as_ref();
        let record = crate::exec::fetch::record(store, &id).await?;
        let wf = self.shell.registry.workflow_for(&record)?;
        if !wf.query_names().contains(&name) {
            return Err(Error::Invalid(format!(
                "workflow {} has no query {name:?} (it has: {})",
                wf.id(),
                wf.query_names().join(", ")
            )));
        }
        let ctx = crate::exec::fetch::restore(store, &wf, &id, None).await?;
        let answer = wf
            .query(name, ctx.state.as_ref(), &args)
            .map_err(|e| Error::Invalid(format!("query {name:?} of {id}: {e}")))?;
        answer.ok_or_else(|| Error::Invalid(format!("workflow {} has no query {name:?}", wf.id())))
    }
}
