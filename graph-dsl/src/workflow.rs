//! [`Workflow`]: a validated, immutable workflow over a state type `S`.

use std::fmt;
use std::marker::PhantomData;
use std::sync::Arc;

use crate::fingerprint::Fingerprint;
use crate::{DynWorkflow, State, WorkflowBuilder};

/// A validated, immutable workflow over the state `S`. Cheap to clone (shared inside).
///
/// Only [`WorkflowBuilder::build`] makes one, so holding a `Workflow` proves the graph passed
/// validation; the engine runs its erased form ([`Workflow::erase`]).
pub struct Workflow<S: State> {
    inner: Arc<DynWorkflow>,
    _state: PhantomData<fn() -> S>,
}

impl<S: State> Clone for Workflow<S> {
    fn clone(&self) -> Self {
        Self { inner: Arc::clone(&self.inner), _state: PhantomData }
    }
}

impl<S: State> fmt::Debug for Workflow<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.inner.fmt(f)
    }
}

impl<S: State> Workflow<S> {
    /// Starts declaring the workflow `id` at `version`.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, Workflow, END, START};
    /// let wf = Workflow::<Replace<u32>>::builder("count", 1)
    ///     .node("inc", |s, _ctx| async move { Ok(NodeOutput::update(s.0 + 1)) })
    ///     .edge(START, "inc")
    ///     .edge("inc", END)
    ///     .build()?;
    /// assert_eq!(wf.id(), "count");
    /// # Ok::<(), cairn_dsl::BuildError>(())
    /// ```
    pub fn builder(id: impl Into<String>, version: u32) -> WorkflowBuilder<S> {
        WorkflowBuilder::new(id.into(), version)
    }

    pub(crate) fn from_dyn(inner: DynWorkflow) -> Self {
        Self { inner: Arc::new(inner), _state: PhantomData }
    }

    /// The erased form the engine registers and runs.
    pub fn erase(&self) -> Arc<DynWorkflow> {
        Arc::clone(&self.inner)
    }

    /// The erased form, borrowed.
    pub fn as_dyn(&self) -> &DynWorkflow {
        &self.inner
    }

    /// The workflow's id.
    pub fn id(&self) -> &str {
        self.inner.id()
    }

    /// The workflow's version.
    pub fn version(&self) -> u32 {
        self.inner.version()
    }

    /// The structural fingerprint.
    pub fn fingerprint(&self) -> &Fingerprint {
        self.inner.fingerprint()
    }

    /// Graphviz DOT picture (deterministic).
    pub fn to_dot(&self) -> String {
        self.inner.to_dot()
    }

    /// Mermaid flowchart (deterministic).
    pub fn to_mermaid(&self) -> String {
        self.inner.to_mermaid()
    }
}

impl<S: State> From<Workflow<S>> for Arc<DynWorkflow> {
    fn from(workflow: Workflow<S>) -> Self {
        workflow.inner
    }
}
