//! The engine's view of a workflow: no type parameter, states and updates as JSON.
//!
//! A [`DynWorkflow`] is only ever made by a successful `build()`, so everything here may rely on
//! the graph being valid: every target resolves, joins are satisfiable, cycles are bounded. The
//! engine never re-validates. Routing ([`DynWorkflow::next`]) is the one run-time check left,
//! because route functions and gotos are user code.

use std::any::Any;
use std::collections::BTreeSet;
use std::fmt;
use std::sync::Arc;

use futures::future::BoxFuture;
use serde::Deserialize;
use serde_json::Value;

use crate::fingerprint::Fingerprint;
use crate::graph::{Links, NextTarget, NodeId, Shape};
use crate::policy::{Budgets, CheckpointPolicy, NodePolicy};
use crate::{Ctx, END, NodeError, NodeOutput, RouteError, START, State, StateError, Target};

/// A type-erased node handler: reads the state snapshot, returns the update as JSON.
pub type DynHandler = Arc<
    dyn Fn(&dyn DynState, Ctx) -> BoxFuture<'static, Result<NodeOutput<Value>, NodeError>>
        + Send
        + Sync,
>;

/// A type-erased map: the items a map node fans out over.
pub type DynItems = Arc<dyn Fn(&dyn DynState) -> Result<Vec<Value>, StateError> + Send + Sync>;

/// A type-erased mapping from the parent state to a sub-workflow's initial state.
pub type DynInput = Arc<dyn Fn(&dyn DynState) -> Result<Value, StateError> + Send + Sync>;

/// A type-erased mapping from a sub-workflow's final state to the parent's update.
pub type DynOutput = Arc<dyn Fn(&Value) -> Result<Value, StateError> + Send + Sync>;

pub(crate) type DynRoute = Arc<dyn Fn(&dyn DynState) -> Result<String, StateError> + Send + Sync>;

/// A type-erased query: the state and the JSON arguments to a JSON answer.
pub(crate) type DynQuery =
    Arc<dyn Fn(&dyn DynState, &Value) -> Result<Value, StateError> + Send + Sync>;

pub(crate) type DynStateCodec =
    Arc<dyn Fn(&Value) -> Result<Box<dyn DynState>, StateError> + Send + Sync>;

/// A workflow state with its type erased. The engine holds one per thread.
pub trait DynState: Send + Sync + fmt::Debug {
    /// The state as JSON.
    ///
    /// # Errors
    /// [`StateError::Codec`] if the state does not serialise (e.g. a map with non-string keys).
    fn to_json(&self) -> Result<Value, StateError>;
    /// Deserialises an update and applies it with the state's reducer.
    ///
    /// # Errors
    /// [`StateError::Codec`] if `update` is not an update of this state type; the state is then
    /// unchanged.
    fn apply_json(&mut self, update: &Value) -> Result<(), StateError>;
    /// Replaces the whole state with `state`, the JSON of a state of this type (a thread rolled
    /// back to an earlier checkpoint).
    ///
    /// # Errors
    /// [`StateError::Codec`] if `state` is not a state of this type; the state is then unchanged.
    /// The provided method refuses every value: a state implemented outside this crate that
    /// never rolls back need not implement it.
    fn replace_json(&mut self, state: &Value) -> Result<(), StateError> {
        let _ = state;
        Err(StateError::Codec { what: "state", detail: "this state cannot be replaced".into() })
    }
    /// A copy (cheap: the typed implementation shares the state until it is changed).
    fn clone_box(&self) -> Box<dyn DynState>;
    /// The typed state, for [`downcast_state`].
    fn as_any(&self) -> &dyn Any;
    /// The typed state behind a shared pointer (an `Arc<S>`), so that a handler's snapshot costs
    /// a reference count, not a copy.
    fn shared_any(&self) -> Arc<dyn Any + Send + Sync>;
}

impl Clone for Box<dyn DynState> {
    fn clone(&self) -> Self {
        self.clone_box()
    }
}

/// The typed state behind an erased one, if it is an `S`.
///
/// # Examples
/// ```
/// use cairn_dsl::{downcast_state, NodeOutput, Replace, Workflow, END, START};
/// let wf = Workflow::<Replace<u32>>::builder("w", 1)
///     .node("a", |_s, _ctx| async { Ok(NodeOutput::none()) })
///     .edge(START, "a").edge("a", END)
///     .build().unwrap();
/// let state = wf.erase().state_from_json(&serde_json::json!(5)).unwrap();
/// assert_eq!(downcast_state::<Replace<u32>>(&*state), Some(&Replace(5)));
/// ```
pub fn downcast_state<S: State>(state: &dyn DynState) -> Option<&S> {
    state.as_any().downcast_ref::<S>()
}

/// One node of an erased workflow.
#[derive(Clone)]
pub struct DynNode {
    /// Its name.
    pub name: String,
    /// Its policy (with `max_visits` set by `loop_bound`).
    pub policy: NodePolicy,
    /// What it runs.
    pub kind: DynNodeKind,
}

impl fmt::Debug for DynNode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynNode")
            .field("name", &self.name)
            .field("policy", &self.policy)
            .field("kind", &self.kind)
            .finish()
    }
}

/// What a node runs.
#[derive(Clone)]
pub enum DynNodeKind {
    /// A handler run once per activation.
    Task(DynHandler),
    /// A handler run once per item, in parallel; the engine applies the items' updates in item
    /// order, so the result never depends on timing.
    Map {
        /// Produces the items from the state (at most [`crate::limits::MAP_ITEMS_MAX`]).
        items: DynItems,
        /// Runs one item (read it with [`Ctx::item`]).
        handler: DynHandler,
    },
    /// A whole workflow run as one node.
    Subgraph {
        /// The child workflow.
        child: Arc<DynWorkflow>,
        /// Parent state -> child's initial state.
        input: DynInput,
        /// Child's final state -> parent update.
        output: DynOutput,
    },
}

impl DynNodeKind {
    /// `"task"`, `"map"` or `"subgraph"`.
    pub fn label(&self) -> &'static str {
        match self {
            Self::Task(_) => "task",
            Self::Map { .. } => "map",
            Self::Subgraph { .. } => "subgraph",
        }
    }
}

impl fmt::Debug for DynNodeKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Subgraph { child, .. } => f
                .debug_struct("Subgraph")
                .field("child", &child.id())
                .field("version", &child.version())
                .finish(),
            other => f.write_str(other.label()),
        }
    }
}

/// A validated, immutable workflow with its types erased. Made by
/// [`Workflow::erase`](crate::Workflow::erase).
pub struct DynWorkflow {
    pub(crate) id: String,
    pub(crate) version: u32,
    pub(crate) fingerprint: Fingerprint,
    pub(crate) budgets: Budgets,
    pub(crate) permissions: BTreeSet<String>,
    pub(crate) checkpoint: CheckpointPolicy,
    pub(crate) nodes: Vec<DynNode>,
    pub(crate) index: crate::graph::NameIndex,
    /// The nodes' names as shared strings (index = [`NodeId`]): a task's key takes a copy of
    /// its node's every step.
    pub(crate) names: Vec<Arc<str>>,
    pub(crate) shape: Shape,
    pub(crate) start_route: Option<DynRoute>,
    pub(crate) routes: Vec<Option<DynRoute>>,
    pub(crate) state_codec: DynStateCodec,
    pub(crate) depth: usize,
    /// Read-only queries by name (not part of the fingerprint: they change no run).
    pub(crate) queries: std::collections::BTreeMap<String, DynQuery>,
    /// Compensations by name (not part of the fingerprint: code, like node bodies).
    pub(crate) compensations: std::collections::BTreeMap<String, crate::DynCompensation>,
    /// Declared signals by name (not part of the fingerprint: they check what is sent, not
    /// how a thread runs).
    pub(crate) signals: crate::signals::Signals,
    /// Declared updates by name (not part of the fingerprint: code, like queries).
    pub(crate) updates: std::collections::BTreeMap<String, crate::updates::DynUpdate>,
    /// The event names it subscribes to (not part of the fingerprint: they say what starts a
    /// thread, not how one runs; `triggers.rs`).
    pub(crate) events: BTreeSet<String>,
}

impl fmt::Debug for DynWorkflow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("DynWorkflow")
            .field("id", &self.id)
            .field("version", &self.version)
            .field("fingerprint", &self.fingerprint)
            .field("nodes", &self.nodes)
            .finish_non_exhaustive()
    }
}

impl DynWorkflow {
    /// The event names the workflow subscribes to ([`crate::WorkflowBuilder::on_event`]), in
    /// order.
    pub fn events(&self) -> impl Iterator<Item = &str> {
        self.events.iter().map(String::as_str)
    }

    /// Whether the workflow subscribes to the event `name`.
    pub fn subscribes_to(&self, name: &str) -> bool {
        self.events.contains(name)
    }

    /// The compensation `name` ([`crate::WorkflowBuilder::compensation`]), if declared.
    pub fn compensation(&self, name: &str) -> Option<&crate::DynCompensation> {
        self.compensations.get(name)
    }

    /// The names of the workflow's queries ([`crate::WorkflowBuilder::query`]), in order.
    pub fn query_names(&self) -> Vec<&str> {
        self.queries.keys().map(String::as_str).collect()
    }

    /// Answers query `name` with `args` from `state`; `None` when the workflow has no such
    /// query.
    ///
    /// # Errors
    /// [`StateError::Codec`] when `args` do not convert to the query's argument type or the
    /// answer does not serialise.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, Workflow, END, START};
    /// let wf = Workflow::<Replace<Vec<u32>>>::builder("q", 1)
    ///     .node("n", |s, _ctx| async move { Ok(NodeOutput::update(s.0.clone())) })
    ///     .edge(START, "n")
    ///     .edge("n", END)
    ///     .query("count_above", |s: &Replace<Vec<u32>>, min: u32| s.0.iter().filter(|v| **v > min).count())
    ///     .build()
    ///     .unwrap()
    ///     .erase();
    /// let state = wf.state_from_json(&serde_json::json!([1, 5, 9])).unwrap();
    /// let answer = wf.query("count_above", &*state, &serde_json::json!(4)).unwrap();
    /// assert_eq!(answer, Some(serde_json::json!(2)));
    /// assert_eq!(wf.query("nope", &*state, &serde_json::Value::Null).unwrap(), None);
    /// ```
    pub fn query(
        &self,
        name: &str,
        state: &dyn DynState,
        args: &Value,
    ) -> Result<Option<Value>, StateError> {
        self.queries.get(name).map(|q| q(state, args)).transpose()
    }

    /// The names of the workflow's updates ([`crate::WorkflowBuilder::update`]), in order.
    pub fn update_names(&self) -> Vec<&str> {
        self.updates.keys().map(String::as_str).collect()
    }

    /// Runs update `name`'s validator on `state` with `args`, changing nothing: `Ok` if the
    /// update would be accepted.
    ///
    /// # Errors
    /// [`UpdateError::Unknown`](crate::UpdateError::Unknown) for a name the workflow does not
    /// declare; [`UpdateError::Refused`](crate::UpdateError::Refused) when the validator refuses;
    /// [`UpdateError::Codec`](crate::UpdateError::Codec) when `args` do not convert.
    pub fn validate_update(
        &self,
        name: &str,
        state: &dyn DynState,
        args: &Value,
    ) -> Result<(), crate::UpdateError> {
        self.declared_update(name)?.validate(state, args)
    }

    /// Runs update `name` on a copy of `state` with `args`: its validator, then its handler.
    /// Returns the state after the handler and the reply; `state` itself is not changed (the
    /// engine records the outcome and folds it).
    ///
    /// # Errors
    /// As [`DynWorkflow::validate_update`]; [`UpdateError::Failed`](crate::UpdateError::Failed)
    /// when the handler returns an error.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, UpdateError, Workflow, END, START};
    /// let wf = Workflow::<Replace<u32>>::builder("counter", 1)
    ///     .node("n", |_s, _ctx| async { Ok(NodeOutput::none()) })
    ///     .edge(START, "n")
    ///     .edge("n", END)
    ///     .update(
    ///         "add",
    ///         |_s: &Replace<u32>, by: &u32| if *by > 0 { Ok(()) } else { Err("add at least 1".into()) },
    ///         |s: &mut Replace<u32>, by: u32| { s.0 += by; Ok(s.0) },
    ///     )
    ///     .build()?
    ///     .erase();
    /// let state = wf.state_from_json(&serde_json::json!(5))?;
    /// let done = wf.apply_update("add", &*state, &serde_json::json!(2)).unwrap();
    /// assert_eq!((done.state, done.reply), (serde_json::json!(7), serde_json::json!(7)));
    /// let refused = wf.apply_update("add", &*state, &serde_json::json!(0)).unwrap_err();
    /// assert!(matches!(refused, UpdateError::Refused { .. }));
    /// # Ok::<(), Box<dyn std::error::Error>>(())
    /// ```
    pub fn apply_update(
        &self,
        name: &str,
        state: &dyn DynState,
        args: &Value,
    ) -> Result<crate::UpdateOutcome, crate::UpdateError> {
        self.declared_update(name)?.apply(state, args)
    }

    fn declared_update(
        &self,
        name: &str,
    ) -> Result<&crate::updates::DynUpdate, crate::UpdateError> {
        self.updates.get(name).ok_or_else(|| crate::UpdateError::Unknown {
            workflow: self.id.clone(),
            name: name.to_owned(),
            declared: self.update_names().into_iter().map(str::to_owned).collect(),
        })
    }

    /// The names of the signals the workflow declares, in order (empty: it declares none, and
    /// any name is accepted).
    pub fn signal_names(&self) -> Vec<&str> {
        self.signals.names()
    }

    /// The declared type of signal `name`, as its name without module paths (`Option<String>`).
    pub fn signal_type(&self, name: &str) -> Option<&str> {
        self.signals.type_name(name)
    }

    /// Checks that a signal `name` with `value` is one a thread of this workflow accepts: any
    /// signal when the workflow declares none; otherwise a declared name whose value decodes
    /// as the declared type.
    ///
    /// # Errors
    /// [`SignalError::Undeclared`](crate::SignalError::Undeclared) for a name the workflow does not declare (when it declares
    /// some); [`SignalError::Type`](crate::SignalError::Type) for a value that does not decode as the declared type.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, SignalError, Workflow, END, START};
    /// let wf = Workflow::<Replace<String>>::builder("parcel", 1)
    ///     .node("wait", |_s, _ctx| async { Ok(NodeOutput::none()) })
    ///     .edge(START, "wait")
    ///     .edge("wait", END)
    ///     .signal::<String>("delivered")
    ///     .build()?
    ///     .erase();
    /// assert!(wf.check_signal("delivered", &serde_json::json!("at the door")).is_ok());
    /// let wrong = wf.check_signal("delivered", &serde_json::json!(12345)).unwrap_err();
    /// assert!(matches!(wrong, SignalError::Type { .. }));
    /// assert_eq!(wrong.to_string(), "signal \"delivered\" takes a String, and the value does \
    ///     not decode as one: invalid type: integer `12345`, expected a string");
    /// let unknown = wf.check_signal("lost", &serde_json::json!(null)).unwrap_err();
    /// assert!(matches!(unknown, SignalError::Undeclared { .. }));
    /// # Ok::<(), cairn_dsl::BuildError>(())
    /// ```
    pub fn check_signal(&self, name: &str, value: &Value) -> Result<(), crate::SignalError> {
        self.signals.check(&self.id, name, value)
    }

    /// The workflow's id.
    pub fn id(&self) -> &str {
        &self.id
    }

    /// The workflow's version.
    pub fn version(&self) -> u32 {
        self.version
    }

    /// The structural fingerprint (see [`Fingerprint`]).
    pub fn fingerprint(&self) -> &Fingerprint {
        &self.fingerprint
    }

    /// Budgets per thread.
    pub fn budgets(&self) -> &Budgets {
        &self.budgets
    }

    /// Permissions that tool calls may use.
    pub fn permissions(&self) -> &BTreeSet<String> {
        &self.permissions
    }

    /// Periodic checkpoint policy.
    pub fn checkpoint_policy(&self) -> &CheckpointPolicy {
        &self.checkpoint
    }

    /// The nodes, in declaration order (index = [`NodeId`]).
    pub fn nodes(&self) -> &[DynNode] {
        &self.nodes
    }

    /// The node called `name`.
    pub fn node_id(&self, name: &str) -> Option<NodeId> {
        self.index.get(name).copied()
    }

    /// The name of node `id` as a shared string (a copy counts a reference), or `None` if
    /// the workflow has no such node.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, Workflow, END, START};
    /// let wf = Workflow::<Replace<u32>>::builder("w", 1)
    ///     .node("only", |_s, _ctx| async { Ok(NodeOutput::none()) })
    ///     .edge(START, "only")
    ///     .edge("only", END)
    ///     .build()
    ///     .unwrap()
    ///     .erase();
    /// let id = wf.node_id("only").unwrap();
    /// assert_eq!(wf.shared_name(id).map(|n| &**n), Some("only"));
    /// assert!(wf.shared_name(id + 1).is_none());
    /// ```
    pub fn shared_name(&self, id: NodeId) -> Option<&Arc<str>> {
        self.names.get(id)
    }

    /// Nesting depth of sub-workflows (0 when there is none).
    pub fn depth(&self) -> usize {
        self.depth
    }

    /// The static targets of `START` (without its route, if it has one: use
    /// [`DynWorkflow::start`] to include it).
    pub fn entry(&self) -> &[NodeId] {
        &self.shape.entry
    }

    /// Where a thread starts, given its initial state. De-duplicated, nodes in declaration order.
    ///
    /// # Errors
    /// [`RouteError`] if `START`'s route returns an undeclared target or cannot read the state.
    pub fn start(&self, state: &dyn DynState) -> Result<Vec<NextTarget>, RouteError> {
        let links = &self.shape.start;
        let route = self.start_route.as_ref();
        follow(self, START, links, route, state, &[])
    }

    /// Where a thread goes after node `from` completed with the chosen `goto` targets (empty:
    /// follow the static edges and route). De-duplicated, nodes in declaration order, `End` last.
    ///
    /// # Errors
    /// [`RouteError`] if the route returns an undeclared target, a goto is undeclared, a
    /// gotos-only node chose nothing, or `from` is not a node of this workflow.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NextTarget, NodeOutput, Replace, Target, Workflow, END, START};
    /// let wf = Workflow::<Replace<bool>>::builder("w", 1)
    ///     .node("check", |_s, _ctx| async { Ok(NodeOutput::none()) })
    ///     .node("fix", |_s, _ctx| async { Ok(NodeOutput::none()) })
    ///     .edge(START, "check")
    ///     .route("check", |s: &Replace<bool>| if s.0 { END } else { "fix" }, ["fix", END])
    ///     .edge("fix", "check")
    ///     .loop_bound("fix", 3)
    ///     .build()
    ///     .unwrap()
    ///     .erase();
    /// let check = wf.node_id("check").unwrap();
    /// let bad = wf.state_from_json(&serde_json::json!(false)).unwrap();
    /// assert_eq!(wf.next(check, &*bad, &[]).unwrap(), [NextTarget::Node(1)]);
    /// let undeclared = wf.next(check, &*bad, &[Target::End]);
    /// assert!(undeclared.is_err()); // "check" declared no gotos
    /// ```
    pub fn next(
        &self,
        from: NodeId,
        state: &dyn DynState,
        goto: &[Target],
    ) -> Result<Vec<NextTarget>, RouteError> {
        let (node, links) = self
            .nodes
            .get(from)
            .zip(self.shape.nodes.get(from))
            .ok_or(RouteError::UnknownNode(from))?;
        let route = self.routes.get(from).and_then(Option::as_ref);
        follow(self, &node.name, links, route, state, goto)
    }

    /// Whether [`next`](Self::next) from `from` with these `goto` targets reads the state: only
    /// a node's route does, when the node chose no goto. A caller that has no state at hand
    /// (the one after a step's updates) needs to make one only then.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Replace, Target, Workflow, END, START};
    /// let wf = Workflow::<Replace<bool>>::builder("w", 1)
    ///     .node("check", |_s, _ctx| async { Ok(NodeOutput::none()) })
    ///     .node("fix", |_s, _ctx| async { Ok(NodeOutput::none()) })
    ///     .edge(START, "check")
    ///     .route("check", |s: &Replace<bool>| if s.0 { END } else { "fix" }, ["fix", END])
    ///     .edge("fix", "check")
    ///     .loop_bound("fix", 3)
    ///     .build()
    ///     .unwrap()
    ///     .erase();
    /// let (check, fix) = (wf.node_id("check").unwrap(), wf.node_id("fix").unwrap());
    /// assert!(wf.routes_on_state(check, &[]));
    /// assert!(!wf.routes_on_state(fix, &[])); // a static edge
    /// assert!(!wf.routes_on_state(check, &[Target::End])); // a goto decides
    /// ```
    pub fn routes_on_state(&self, from: NodeId, goto: &[Target]) -> bool {
        let declared = self.shape.nodes.get(from).is_some_and(|l| l.route.is_some());
        goto.is_empty() && declared && self.routes.get(from).is_some_and(Option::is_some)
    }

    /// The branches a join node waits for, or `None` if `node` is not a join.
    pub fn join_sources(&self, node: NodeId) -> Option<&[NodeId]> {
        self.shape.joins.get(node)?.as_deref()
    }

    /// Every target `from` may lead to (static edges, route targets, gotos), for inspection.
    pub fn successors(&self, from: NodeId) -> Vec<NextTarget> {
        self.shape.nodes.get(from).map(|l| l.successors()).unwrap_or_default()
    }

    /// Decodes a state of this workflow's type from JSON (the thread's input is its initial
    /// state).
    ///
    /// # Errors
    /// [`StateError::Codec`] if `value` is not a state of this workflow's type.
    pub fn state_from_json(&self, value: &Value) -> Result<Box<dyn DynState>, StateError> {
        (self.state_codec)(value)
    }

    fn resolve(&self, name: &str) -> Option<NextTarget> {
        if name == END { Some(NextTarget::End) } else { self.node_id(name).map(NextTarget::Node) }
    }
}

fn follow(
    wf: &DynWorkflow,
    name: &str,
    links: &Links,
    route: Option<&DynRoute>,
    state: &dyn DynState,
    goto: &[Target],
) -> Result<Vec<NextTarget>, RouteError> {
    let mut out = Vec::with_capacity(links.edges.len() + 1);
    if goto.is_empty() {
        out.extend_from_slice(&links.edges);
        if let (Some(route), Some(targets)) = (route, &links.route) {
            let chosen = route(state)?;
            let target = wf.resolve(&chosen).filter(|t| targets.contains(t)).ok_or_else(|| {
                RouteError::UndeclaredRoute { node: name.to_owned(), returned: chosen.clone() }
            })?;
            out.push(target);
        }
        if out.is_empty() {
            return Err(RouteError::MissingGoto { node: name.to_owned() });
        }
    } else {
        for target in goto {
            let resolved = wf
                .resolve(target.name())
                .filter(|t| links.gotos.contains(t))
                .ok_or_else(|| RouteError::UndeclaredGoto {
                    node: name.to_owned(),
                    target: target.name().to_owned(),
                })?;
            out.push(resolved);
        }
    }
    out.sort_unstable();
    out.dedup();
    Ok(out)
}

/// The typed state behind a [`DynState`]: shared until changed.
pub(crate) struct TypedState<S: State>(pub(crate) Arc<S>);

impl<S: State> fmt::Debug for TypedState<S> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match serde_json::to_string(&*self.0) {
            Ok(json) => write!(f, "{json}"),
            Err(_) => write!(f, "<{}>", std::any::type_name::<S>()),
        }
    }
}

impl<S: State> DynState for TypedState<S> {
    fn to_json(&self) -> Result<Value, StateError> {
        serde_json::to_value(&*self.0).map_err(|e| StateError::codec("state", e))
    }

    fn apply_json(&mut self, update: &Value) -> Result<(), StateError> {
        let update = S::Update::deserialize(update).map_err(|e| StateError::codec("update", e))?;
        Arc::make_mut(&mut self.0).apply(update);
        Ok(())
    }

    fn replace_json(&mut self, state: &Value) -> Result<(), StateError> {
        self.0 = Arc::new(S::deserialize(state).map_err(|e| StateError::codec("state", e))?);
        Ok(())
    }

    fn clone_box(&self) -> Box<dyn DynState> {
        Box::new(Self(Arc::clone(&self.0)))
    }

    fn as_any(&self) -> &dyn Any {
        &*self.0
    }

    fn shared_any(&self) -> Arc<dyn Any + Send + Sync> {
        Arc::clone(&self.0) as Arc<dyn Any + Send + Sync>
    }
}

pub(crate) fn state_codec<S: State>() -> DynStateCodec {
    Arc::new(|value: &Value| {
        let state = S::deserialize(value).map_err(|e| StateError::codec("state", e))?;
        Ok(Box::new(TypedState(Arc::new(state))) as Box<dyn DynState>)
    })
}

/// The typed snapshot of `state`: shared when it is an `S`, decoded from its JSON otherwise (a
/// state built by another implementation of [`DynState`]).
pub(crate) fn snapshot<S: State>(state: &dyn DynState) -> Result<Arc<S>, StateError> {
    match state.shared_any().downcast::<S>() {
        Ok(shared) => Ok(shared),
        Err(_) => {
            let json = state.to_json()?;
            S::deserialize(&json).map(Arc::new).map_err(|e| StateError::codec("state", e))
        }
    }
}
