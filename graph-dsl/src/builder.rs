//! [`WorkflowBuilder`]: declare nodes, edges, routes, joins, loops and settings, then `build()`.
//!
//! Declaring never fails: mistakes are collected and `build()` reports all of them at once, with
//! the names of the nodes involved. Handlers are type-erased as they are declared, so the built
//! workflow holds no type parameter beyond a marker.

use std::collections::BTreeSet;
use std::future::Future;
use std::marker::PhantomData;
use std::sync::Arc;

use serde::Serialize;
use serde_json::Value;

use crate::erased::{DynHandler, DynNodeKind, DynRoute, snapshot};
use crate::limits::MAP_ITEMS_MAX;
use crate::policy::{Budgets, CheckpointPolicy, NodePolicy};
use crate::{BuildError, Ctx, NodeError, NodeResult, State, StateError, Workflow};

/// Builds a [`Workflow`]; start with [`Workflow::builder`].
#[must_use = "a builder does nothing until `build()` is called"]
pub struct WorkflowBuilder<S: State> {
    pub(crate) decls: Decls,
    _state: PhantomData<fn() -> S>,
}

/// Everything declared, before resolution.
pub(crate) struct Decls {
    pub id: String,
    pub version: u32,
    pub nodes: Vec<NodeDecl>,
    pub edges: Vec<(String, String)>,
    pub routes: Vec<RouteDecl>,
    pub gotos: Vec<(String, Vec<String>)>,
    pub joins: Vec<(Vec<String>, String)>,
    pub loop_bounds: Vec<(String, u32)>,
    pub budgets: Budgets,
    pub permissions: BTreeSet<String>,
    pub checkpoint: CheckpointPolicy,
}

pub(crate) struct NodeDecl {
    pub name: String,
    pub policy: NodePolicy,
    pub kind: DynNodeKind,
}

pub(crate) struct RouteDecl {
    pub from: String,
    pub targets: Vec<String>,
    pub f: DynRoute,
}

impl<S: State> WorkflowBuilder<S> {
    pub(crate) fn new(id: String, version: u32) -> Self {
        Self {
            decls: Decls {
                id,
                version,
                nodes: Vec::new(),
                edges: Vec::new(),
                routes: Vec::new(),
                gotos: Vec::new(),
                joins: Vec::new(),
                loop_bounds: Vec::new(),
                budgets: Budgets::default(),
                permissions: BTreeSet::new(),
                checkpoint: CheckpointPolicy::default(),
            },
            _state: PhantomData,
        }
    }

    /// Declares a task node with the default policy.
    ///
    /// The handler receives a shared snapshot of the state and the context, and returns an
    /// update (and optionally gotos), or an error / suspension.
    pub fn node<F, Fut>(self, name: impl Into<String>, handler: F) -> Self
    where
        F: Fn(Arc<S>, Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = NodeResult<S::Update>> + Send + 'static,
    {
        self.node_with(name, handler, NodePolicy::default())
    }

    /// Declares a task node with a policy.
    pub fn node_with<F, Fut>(
        mut self,
        name: impl Into<String>,
        handler: F,
        policy: NodePolicy,
    ) -> Self
    where
        F: Fn(Arc<S>, Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = NodeResult<S::Update>> + Send + 'static,
    {
        self.push(name, policy, DynNodeKind::Task(erase_handler::<S, F, Fut>(handler)));
        self
    }

    /// Declares a map node: `items` lists the work at run time, and `handler` runs once per
    /// item (read it with [`Ctx::item`]); the updates are applied in item order.
    pub fn map<T, I, F, Fut>(self, name: impl Into<String>, items: I, handler: F) -> Self
    where
        T: Serialize,
        I: Fn(&S) -> Vec<T> + Send + Sync + 'static,
        F: Fn(Arc<S>, Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = NodeResult<S::Update>> + Send + 'static,
    {
        self.map_with(name, items, handler, NodePolicy::default())
    }

    /// Declares a map node with a policy (applied to each item's task).
    pub fn map_with<T, I, F, Fut>(
        mut self,
        name: impl Into<String>,
        items: I,
        handler: F,
        policy: NodePolicy,
    ) -> Self
    where
        T: Serialize,
        I: Fn(&S) -> Vec<T> + Send + Sync + 'static,
        F: Fn(Arc<S>, Ctx) -> Fut + Send + Sync + 'static,
        Fut: Future<Output = NodeResult<S::Update>> + Send + 'static,
    {
        let items = Arc::new(move |state: &dyn crate::DynState| {
            let typed = snapshot::<S>(state)?;
            let items = items(&typed);
            if items.len() > MAP_ITEMS_MAX {
                return Err(StateError::LimitExceeded {
                    limit: "MAP_ITEMS_MAX",
                    value: items.len() as u64,
                    max: MAP_ITEMS_MAX as u64,
                });
            }
            items
                .iter()
                .map(|item| {
                    serde_json::to_value(item).map_err(|e| StateError::codec("map item", e))
                })
                .collect::<Result<Vec<Value>, _>>()
        });
        let handler = erase_handler::<S, F, Fut>(handler);
        self.push(name, policy, DynNodeKind::Map { items, handler });
        self
    }

    /// Declares a node that runs the workflow `child` to its end: `input` makes the child's
    /// initial state from the parent's, `output` turns the child's final state into a parent
    /// update.
    pub fn subgraph<C, In, Out>(
        self,
        name: impl Into<String>,
        child: Workflow<C>,
        input: In,
        output: Out,
    ) -> Self
    where
        C: State,
        In: Fn(&S) -> C + Send + Sync + 'static,
        Out: Fn(&C) -> S::Update + Send + Sync + 'static,
    {
        self.subgraph_with(name, child, input, output, NodePolicy::default())
    }

    /// Declares a sub-workflow node with a policy.
    pub fn subgraph_with<C, In, Out>(
        mut self,
        name: impl Into<String>,
        child: Workflow<C>,
        input: In,
        output: Out,
        policy: NodePolicy,
    ) -> Self
    where
        C: State,
        In: Fn(&S) -> C + Send + Sync + 'static,
        Out: Fn(&C) -> S::Update + Send + Sync + 'static,
    {
        let input = Arc::new(move |state: &dyn crate::DynState| {
            let parent = snapshot::<S>(state)?;
            serde_json::to_value(input(&parent)).map_err(|e| StateError::codec("child input", e))
        });
        let output = Arc::new(move |child_state: &Value| {
            let child =
                C::deserialize(child_state).map_err(|e| StateError::codec("child state", e))?;
            serde_json::to_value(output(&child)).map_err(|e| StateError::codec("update", e))
        });
        let child = child.erase();
        self.push(name, policy, DynNodeKind::Subgraph { child, input, output });
        self
    }

    /// Declares an edge: after `from` completes, `to` runs. `from` may be [`START`](crate::START),
    /// `to` may be [`END`](crate::END).
    pub fn edge(mut self, from: impl Into<String>, to: impl Into<String>) -> Self {
        self.decls.edges.push((from.into(), to.into()));
        self
    }

    /// Declares edges from `from` to each of `targets`: they all run, in parallel.
    pub fn fan_out<T: Into<String>>(
        mut self,
        from: impl Into<String>,
        targets: impl IntoIterator<Item = T>,
    ) -> Self {
        let from = from.into();
        for to in targets {
            self.decls.edges.push((from.clone(), to.into()));
        }
        self
    }

    /// Declares that `to` waits for every one of `sources` before it runs (and the edges from
    /// each source to it).
    pub fn join<T: Into<String>>(
        mut self,
        sources: impl IntoIterator<Item = T>,
        to: impl Into<String>,
    ) -> Self {
        // The edges from the sources are added when the join resolves, so that an undeclared
        // source is reported once, as the join's.
        let sources: Vec<String> = sources.into_iter().map(Into::into).collect();
        self.decls.joins.push((sources, to.into()));
        self
    }

    /// Declares a conditional route: after `from`, exactly one of `targets` runs, the one `f`
    /// names for the current state. Returning a name outside `targets` fails the thread with a
    /// [`RouteError`](crate::RouteError).
    pub fn route<F, R, T>(
        mut self,
        from: impl Into<String>,
        f: F,
        targets: impl IntoIterator<Item = T>,
    ) -> Self
    where
        F: Fn(&S) -> R + Send + Sync + 'static,
        R: AsRef<str>,
        T: Into<String>,
    {
        let f: DynRoute = Arc::new(move |state: &dyn crate::DynState| {
            let typed = snapshot::<S>(state)?;
            Ok(f(&typed).as_ref().to_owned())
        });
        self.decls.routes.push(RouteDecl {
            from: from.into(),
            targets: targets.into_iter().map(Into::into).collect(),
            f,
        });
        self
    }

    /// Declares targets `node` may choose at run time with
    /// [`NodeOutput::goto`](crate::NodeOutput::goto).
    pub fn gotos<T: Into<String>>(
        mut self,
        node: impl Into<String>,
        targets: impl IntoIterator<Item = T>,
    ) -> Self {
        self.decls.gotos.push((node.into(), targets.into_iter().map(Into::into).collect()));
        self
    }

    /// Bounds how often `node` may be entered per thread; every cycle needs one such node.
    pub fn loop_bound(mut self, node: impl Into<String>, max_visits: u32) -> Self {
        self.decls.loop_bounds.push((node.into(), max_visits));
        self
    }

    /// Sets the per-thread budgets.
    pub fn budgets(mut self, budgets: Budgets) -> Self {
        self.decls.budgets = budgets;
        self
    }

    /// Grants permissions that tool calls may require.
    pub fn permissions<T: Into<String>>(
        mut self,
        permissions: impl IntoIterator<Item = T>,
    ) -> Self {
        self.decls.permissions.extend(permissions.into_iter().map(Into::into));
        self
    }

    /// Sets the periodic checkpoint policy.
    pub fn checkpoint_every(mut self, policy: CheckpointPolicy) -> Self {
        self.decls.checkpoint = policy;
        self
    }

    /// Validates the definition and returns the immutable workflow.
    ///
    /// # Errors
    /// [`BuildError`] listing every [`Problem`](crate::Problem) found.
    pub fn build(self) -> Result<Workflow<S>, BuildError> {
        crate::assemble::assemble(self.decls, crate::erased::state_codec::<S>())
            .map(Workflow::from_dyn)
    }

    fn push(&mut self, name: impl Into<String>, policy: NodePolicy, kind: DynNodeKind) {
        self.decls.nodes.push(NodeDecl { name: name.into(), policy, kind });
    }
}

fn erase_handler<S, F, Fut>(handler: F) -> DynHandler
where
    S: State,
    F: Fn(Arc<S>, Ctx) -> Fut + Send + Sync + 'static,
    Fut: Future<Output = NodeResult<S::Update>> + Send + 'static,
{
    Arc::new(move |state: &dyn crate::DynState, ctx: Ctx| match snapshot::<S>(state) {
        Ok(typed) => {
            let running = handler(typed, ctx);
            Box::pin(async move {
                running.await?.try_map_update(|update| {
                    serde_json::to_value(update).map_err(|e| NodeError::codec("update", e))
                })
            })
        }
        Err(e) => Box::pin(std::future::ready(Err(NodeError::from(e)))),
    })
}
