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

use crate::assemble::Decls;
use crate::erased::{DynHandler, DynNodeKind, DynRoute, snapshot};
use crate::limits::MAP_ITEMS_MAX;
use crate::policy::{Budgets, CheckpointPolicy, NodePolicy};
use crate::resolve::{NodeDecl, RouteDecl};
use crate::{
    BuildError, Ctx, NodeError, NodeResult, QueryName, Recovery, SignalName, State, StateError,
    UpdateName, Workflow,
};

/// Builds a [`Workflow`]; start with [`Workflow::builder`].
#[must_use = "a builder does nothing until `build()` is called"]
pub struct WorkflowBuilder<S: State> {
    pub(crate) decls: Decls,
    _state: PhantomData<fn() -> S>,
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
                queries: Vec::new(),
                compensations: Vec::new(),
                signals: Vec::new(),
                updates: Vec::new(),
                budgets: Budgets::default(),
                permissions: BTreeSet::new(),
                checkpoint: CheckpointPolicy::default(),
                on_failure: Recovery::Fail,
                on_failure_by_kind: std::collections::BTreeMap::new(),
                events: BTreeSet::new(),
            },
            _state: PhantomData,
        }
    }

    /// Declares a task node with the default policy.
    ///
    /// The handler receives a shared snapshot of the state and the context, and returns an
    /// update (and optionally gotos), or an error / suspension.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, Workflow, END, START};
    /// let wf = Workflow::<Replace<u32>>::builder("double", 1)
    ///     .node("double", |s, _ctx| async move { Ok(NodeOutput::update(s.0 * 2)) })
    ///     .edge(START, "double")
    ///     .edge("double", END)
    ///     .build()?;
    /// assert_eq!(wf.as_dyn().nodes()[0].name, "double");
    /// # Ok::<(), cairn_dsl::BuildError>(())
    /// ```
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
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeOutput, Replace, Workflow, END, START};
    /// let wf = Workflow::<Replace<Vec<u32>>>::builder("squares", 1)
    ///     .map("square", |s: &Replace<Vec<u32>>| s.0.clone(), |_s, ctx: Ctx| async move {
    ///         let n: u32 = ctx.item()?;
    ///         Ok(NodeOutput::update(vec![n * n]))
    ///     })
    ///     .edge(START, "square")
    ///     .edge("square", END)
    ///     .build()?;
    /// assert_eq!(wf.as_dyn().nodes()[0].kind.label(), "map");
    /// # Ok::<(), cairn_dsl::BuildError>(())
    /// ```
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
                    limit: "items of one map node",
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
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, Workflow, END, START};
    /// let child = Workflow::<Replace<String>>::builder("shout", 1)
    ///     .node("upper", |s, _ctx| async move { Ok(NodeOutput::update(s.0.to_uppercase())) })
    ///     .edge(START, "upper")
    ///     .edge("upper", END)
    ///     .build()?;
    /// let parent = Workflow::<Replace<(String, usize)>>::builder("count", 1)
    ///     .subgraph(
    ///         "shout",
    ///         child,
    ///         |s: &Replace<(String, usize)>| Replace(s.0.0.clone()),
    ///         |done: &Replace<String>| (done.0.clone(), done.0.len()),
    ///     )
    ///     .edge(START, "shout")
    ///     .edge("shout", END)
    ///     .build()?;
    /// assert_eq!(parent.as_dyn().depth(), 1);
    /// # Ok::<(), cairn_dsl::BuildError>(())
    /// ```
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
    ///
    /// The branches must all be sure to run whenever one does (a static fan-out, not the
    /// alternatives of a route), and nothing else may lead into the join; `build()` checks both.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, Workflow, END, START};
    /// let step = |_s, _ctx| async { Ok(NodeOutput::none()) };
    /// let wf = Workflow::<Replace<u8>>::builder("fan", 1)
    ///     .node("a", step).node("b", step).node("both", step)
    ///     .fan_out(START, ["a", "b"])
    ///     .join(["a", "b"], "both")
    ///     .edge("both", END)
    ///     .build()?;
    /// let both = wf.as_dyn().node_id("both").unwrap();
    /// assert_eq!(wf.as_dyn().join_sources(both), Some(&[0, 1][..]));
    /// # Ok::<(), cairn_dsl::BuildError>(())
    /// ```
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
    ///
    /// `f` returns a node name or [`END`](crate::END): a `&'static str` or a `String` (it cannot
    /// borrow from the state; clone the field).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, Workflow, END, START};
    /// let wf = Workflow::<Replace<i32>>::builder("sign", 1)
    ///     .node("negative", |_s, _ctx| async { Ok(NodeOutput::none()) })
    ///     .route(START, |s: &Replace<i32>| if s.0 < 0 { "negative" } else { END }, ["negative", END])
    ///     .edge("negative", END)
    ///     .build()?;
    /// assert!(wf.to_dot().contains("label=\"route\""));
    /// # Ok::<(), cairn_dsl::BuildError>(())
    /// ```
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

    /// Declares a read-only query `name`: `f` answers it from a thread's state and JSON
    /// arguments (`Engine::query`, `cairn query`), without running or writing anything. Queries
    /// are not part of the fingerprint. A name declared twice is a build error.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, Workflow, END, START};
    /// let wf = Workflow::<Replace<String>>::builder("doc", 1)
    ///     .node("n", |s, _ctx| async move { Ok(NodeOutput::update(s.0.clone())) })
    ///     .edge(START, "n")
    ///     .edge("n", END)
    ///     .query("length", |s: &Replace<String>, (): ()| s.0.len())
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(wf.as_dyn().query_names(), ["length"]);
    /// ```
    pub fn query<A, R, F>(mut self, name: impl QueryName<A, R>, f: F) -> Self
    where
        A: serde::de::DeserializeOwned,
        R: serde::Serialize,
        F: Fn(&S, A) -> R + Send + Sync + 'static,
    {
        let q: crate::erased::DynQuery = Arc::new(move |state: &dyn crate::DynState, args| {
            let typed = snapshot::<S>(state)?;
            let args = A::deserialize(args).map_err(|e| StateError::Codec {
                what: "query arguments",
                detail: e.to_string(),
            })?;
            serde_json::to_value(f(&typed, args))
                .map_err(|e| StateError::Codec { what: "query answer", detail: e.to_string() })
        });
        self.decls.queries.push((name.query_name().to_owned(), q));
        self
    }

    /// Declares the update `name` (`Engine::update`, `POST /api/threads/{id}/updates/{name}`,
    /// `cairn update`): a synchronous call into a running thread that changes its state and
    /// answers the caller. `validator` reads the state and the arguments and may refuse with a
    /// message (nothing is written then); `handler` changes the state and returns the reply,
    /// or an error (nothing is written either). The engine runs them at the thread's next step
    /// boundary and records the arguments, the reply and the new state in one event. Both must
    /// be deterministic and quick (no I/O): they run between steps. Updates are not part of the
    /// fingerprint; a name declared twice is a build error.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, UpdateDef, Workflow, END, START};
    /// const RENAME: UpdateDef<String, String> = UpdateDef::new("rename");
    /// let wf = Workflow::<Replace<String>>::builder("doc", 1)
    ///     .node("n", |_s, _ctx| async { Ok(NodeOutput::none()) })
    ///     .edge(START, "n")
    ///     .edge("n", END)
    ///     .update(
    ///         RENAME,
    ///         |_s: &Replace<String>, to: &String| {
    ///             if to.is_empty() { Err("a name is needed".into()) } else { Ok(()) }
    ///         },
    ///         |s: &mut Replace<String>, to: String| Ok(std::mem::replace(&mut s.0, to)),
    ///     )
    ///     .build()
    ///     .unwrap();
    /// assert_eq!(wf.as_dyn().update_names(), ["rename"]);
    /// ```
    pub fn update<A, R, V, H>(
        mut self,
        name: impl UpdateName<A, R>,
        validator: V,
        handler: H,
    ) -> Self
    where
        A: serde::de::DeserializeOwned,
        R: serde::Serialize,
        V: Fn(&S, &A) -> Result<(), String> + Send + Sync + 'static,
        H: Fn(&mut S, A) -> Result<R, String> + Send + Sync + 'static,
    {
        let name = name.update_name().to_owned();
        let update = erase_update::<S, A, R, V, H>(&name, validator, handler);
        self.decls.updates.push((name, update));
        self
    }

    /// Declares the signal `name` and the type `T` its value must decode as. Once a workflow
    /// declares a signal, `Engine::signal` (and the endpoint, `cairn signal`) refuses, before
    /// storing anything, a value of a declared name that does not decode as its `T`, and any
    /// name the workflow does not declare; the thread is untouched. A workflow that declares
    /// none accepts every signal. Receive it as the same `T` with [`Ctx::recv`]. Declarations
    /// are not part of the fingerprint; a name declared twice is a build error.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeOutput, Replace, Workflow, END, START};
    /// let wf = Workflow::<Replace<String>>::builder("parcel", 1)
    ///     .node("wait", |_s, ctx: Ctx| async move {
    ///         let place: String = ctx.recv("delivered").await?;
    ///         Ok(NodeOutput::update(place))
    ///     })
    ///     .edge(START, "wait")
    ///     .edge("wait", END)
    ///     .signal::<String>("delivered") // its values must decode as a String
    ///     .signal::<u32>("delay_days")
    ///     .build()?;
    /// assert_eq!(wf.as_dyn().signal_names(), ["delay_days", "delivered"]);
    /// assert_eq!(wf.as_dyn().signal_type("delivered"), Some("String"));
    /// # Ok::<(), cairn_dsl::BuildError>(())
    /// ```
    pub fn signal<T: serde::de::DeserializeOwned>(mut self, name: impl SignalName<T>) -> Self {
        let name = name.signal_name().to_owned();
        self.decls.signals.push((name, crate::signals::DynSignal::of::<T>()));
        self
    }

    /// Declares targets `node` may choose at run time with
    /// [`NodeOutput::goto`](crate::NodeOutput::goto).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, Workflow, END, START};
    /// let wf = Workflow::<Replace<bool>>::builder("escalate", 1)
    ///     .node("triage", |s, _ctx| async move {
    ///         Ok(if s.0 { NodeOutput::none().goto("human") } else { NodeOutput::none().goto(END) })
    ///     })
    ///     .node("human", |_s, _ctx| async { Ok(NodeOutput::none()) })
    ///     .edge(START, "triage")
    ///     .gotos("triage", ["human", END])
    ///     .edge("human", END)
    ///     .build()?;
    /// assert_eq!(wf.as_dyn().successors(0).len(), 2);
    /// # Ok::<(), cairn_dsl::BuildError>(())
    /// ```
    pub fn gotos<T: Into<String>>(
        mut self,
        node: impl Into<String>,
        targets: impl IntoIterator<Item = T>,
    ) -> Self {
        self.decls.gotos.push((node.into(), targets.into_iter().map(Into::into).collect()));
        self
    }

    /// Bounds how often `node` may be entered per thread; every cycle needs one such node.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, Workflow, END, START};
    /// let wf = Workflow::<Replace<u32>>::builder("retry-loop", 1)
    ///     .node("attempt", |s, _ctx| async move { Ok(NodeOutput::update(s.0 + 1)) })
    ///     .edge(START, "attempt")
    ///     .route("attempt", |s: &Replace<u32>| if s.0 < 3 { "attempt" } else { END }, ["attempt", END])
    ///     .loop_bound("attempt", 3)
    ///     .build()?;
    /// assert_eq!(wf.as_dyn().nodes()[0].policy.max_visits, Some(3));
    /// # Ok::<(), cairn_dsl::BuildError>(())
    /// ```
    pub fn loop_bound(mut self, node: impl Into<String>, max_visits: u32) -> Self {
        self.decls.loop_bounds.push((node.into(), max_visits));
        self
    }

    /// Sets the recovery strategy of every node that has none of its own
    /// (`NodePolicy::on_failure`): see [`Recovery`].
    pub fn on_failure(mut self, recovery: Recovery) -> Self {
        self.decls.on_failure = recovery;
        self
    }

    /// Sets the recovery of a failure of `kind` for every node that names none for that kind
    /// (`NodePolicy::on_failure_of`; a node's own wins): see
    /// [`FailureKind`](crate::FailureKind).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{FailureKind, NodeOutput, Recovery, Replace, Workflow, END, START};
    /// let wf = Workflow::<Replace<u64>>::builder("w", 1)
    ///     .node("a", |_s, _ctx| async { Ok(NodeOutput::update(1)) })
    ///     .edge(START, "a")
    ///     .edge("a", END)
    ///     .on_failure_of(FailureKind::Timeout, Recovery::RestoreAndRetry)
    ///     .build()?;
    /// let policy = &wf.as_dyn().nodes()[0].policy;
    /// assert_eq!(policy.recovery_for(FailureKind::Timeout), &Recovery::RestoreAndRetry);
    /// assert_eq!(policy.recovery_for(FailureKind::Deadlock), &Recovery::Fail);
    /// # Ok::<(), cairn_dsl::BuildError>(())
    /// ```
    pub fn on_failure_of(mut self, kind: crate::FailureKind, recovery: Recovery) -> Self {
        self.decls.on_failure_by_kind.insert(kind, recovery);
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
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Problem, Replace, Workflow, END, START};
    /// let err = Workflow::<Replace<u8>>::builder("typo", 1)
    ///     .node("a", |_s, _ctx| async { Ok(NodeOutput::none()) })
    ///     .edge(START, "a")
    ///     .edge("a", "b")
    ///     .build()
    ///     .unwrap_err();
    /// assert_eq!(
    ///     err.problems,
    ///     [
    ///         Problem::UnknownTarget { from: "a".into(), to: "b".into() },
    ///         Problem::NoPathToEnd("a".into()),
    ///     ]
    /// );
    /// ```
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

/// The update `name` of a state `S` taking `A`s and answering `R`s, with its types erased.
fn erase_update<S, A, R, V, H>(name: &str, validator: V, handler: H) -> crate::updates::DynUpdate
where
    S: State,
    A: serde::de::DeserializeOwned,
    R: Serialize,
    V: Fn(&S, &A) -> Result<(), String> + Send + Sync + 'static,
    H: Fn(&mut S, A) -> Result<R, String> + Send + Sync + 'static,
{
    use crate::UpdateError;
    use crate::updates::{DynApply, DynValidate};
    let validator = Arc::new(validator);
    let (n1, n2) = (name.to_owned(), name.to_owned());
    let check = validator.clone();
    let validate: DynValidate = Arc::new(move |state, args| {
        let (typed, args) = typed_call::<S, A>(&n1, state, args)?;
        check(&typed, &args).map_err(|message| UpdateError::Refused { name: n1.clone(), message })
    });
    let apply: DynApply = Arc::new(move |state, args| {
        let (typed, args) = typed_call::<S, A>(&n2, state, args)?;
        validator(&typed, &args)
            .map_err(|message| UpdateError::Refused { name: n2.clone(), message })?;
        let mut next = S::clone(&typed);
        let reply = handler(&mut next, args)
            .map_err(|message| UpdateError::Failed { name: n2.clone(), message })?;
        let codec = |what: &'static str| {
            let name = n2.clone();
            move |e: serde_json::Error| UpdateError::Codec { name, what, detail: e.to_string() }
        };
        let reply = serde_json::to_value(reply).map_err(codec("reply"))?;
        let state = serde_json::to_value(&next).map_err(codec("state"))?;
        Ok(crate::UpdateOutcome { state, reply })
    });
    crate::updates::DynUpdate { validate, apply }
}

/// The typed state and arguments of an update call.
fn typed_call<S: State, A: serde::de::DeserializeOwned>(
    name: &str,
    state: &dyn crate::DynState,
    args: &Value,
) -> Result<(Arc<S>, A), crate::UpdateError> {
    let codec =
        |what, detail: String| crate::UpdateError::Codec { name: name.to_owned(), what, detail };
    let typed = snapshot::<S>(state).map_err(|e| codec("state", e.to_string()))?;
    let args = A::deserialize(args).map_err(|e| codec("arguments", e.to_string()))?;
    Ok((typed, args))
}
