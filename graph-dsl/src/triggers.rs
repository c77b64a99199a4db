//! Event triggers ([`WorkflowBuilder::on_event`]): the event names a workflow subscribes to, so
//! that an emitted event of one of them starts a thread of it with the event's payload as input
//! (the engine's `Engine::emit`, `docs/events.md`).
//!
//! A trigger is declared on the workflow, not beside it, so that it goes wherever the workflow
//! is registered (an application, `cairn serve`, the command line) and no registration can
//! forget it. Triggers are not part of the fingerprint: they say what starts a thread, not how
//! one runs, so adding one never blocks a running thread.

use std::collections::BTreeSet;

use crate::{Problem, State, WorkflowBuilder};

impl<S: State> WorkflowBuilder<S> {
    /// Subscribes the workflow to the event `name`: each event of that name emitted to an
    /// engine where the workflow is registered starts one thread of its newest registered
    /// version, on the event's payload as input (declared twice, once).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, Workflow, END, START};
    /// let wf = Workflow::<Replace<u32>>::builder("ship", 1)
    ///     .on_event("order.created")
    ///     .node("ship", |_s, _ctx| async { Ok(NodeOutput::none()) })
    ///     .edge(START, "ship")
    ///     .edge("ship", END)
    ///     .build()?;
    /// assert!(wf.as_dyn().subscribes_to("order.created"));
    /// assert_eq!(wf.as_dyn().events().collect::<Vec<_>>(), ["order.created"]);
    /// # Ok::<(), cairn_dsl::BuildError>(())
    /// ```
    pub fn on_event(mut self, name: impl Into<String>) -> Self {
        self.decls.events.insert(name.into());
        self
    }
}

/// Event names that are not names (empty, too long, with control characters).
pub(crate) fn trigger_problems(events: &BTreeSet<String>) -> Vec<Problem> {
    let mut problems = Vec::new();
    for name in events {
        crate::resolve::check_name(name, &mut problems);
    }
    problems
}
