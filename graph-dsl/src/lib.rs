//! Cairn's workflow DSL: define workflows in Rust, validate them before they run, fingerprint
//! and draw them.
//!
//! This crate owns the *definition* of a workflow. It does no I/O and knows nothing of storage;
//! the engine (`cairn`) runs what it builds. Its invariant: **only a validated graph exists**. A
//! [`Workflow`] is made only by [`WorkflowBuilder::build`], which checks every rule below and
//! reports every problem at once, so the engine never re-validates.
//!
//! # Concepts
//!
//! - **State** ([`State`]): the user's serde type `S`. Nodes never mutate it: they return an
//!   update ([`State::Update`]) that the engine logs and applies with the pure reducer
//!   [`State::apply`]. Ready-made states: [`Replace`] (an update replaces the value) and
//!   [`Variables`] (named values with scopes, read-only flags, a declared [`VarType`] and
//!   metadata).
//! - **Node**: a named async handler `Fn(Arc<S>, Ctx) -> Future<Output = NodeResult<S::Update>>`.
//!   It reads a shared snapshot of the state, does its side effects through [`Ctx`] (recorded
//!   tool calls, clock, randomness, ids, human input, durable sleeps and locks) and returns a
//!   [`NodeOutput`]: an optional update plus optional run-time targets (`goto`). A **map** node
//!   runs its handler once per item of a list computed from the state; a **sub-workflow** node
//!   runs a whole child workflow.
//! - **Links**: edges (all taken), routes (exactly one declared target taken, chosen by a
//!   function of the state), gotos (targets a node may choose at run time; when it chooses, they
//!   replace its edges and route), joins (a node that waits for all its branches), loop bounds.
//!   [`START`] and [`END`] are the virtual entry and exit.
//! - **Policies**: per node ([`NodePolicy`]: retries, timeout, checkpoint after, phase, tags,
//!   version, loop bound) and per workflow ([`Budgets`], permissions, [`CheckpointPolicy`]).
//!
//! # Run-time semantics the engine implements
//!
//! A thread advances in steps: every node of the frontier runs on the same snapshot, and their
//! updates are applied in node order (map items in item order), so the result never depends on
//! timing. After a node, [`DynWorkflow::next`] gives the following nodes: the chosen gotos if the
//! output has any (each must be declared), else the static edges plus the route's choice. Only
//! task nodes may declare gotos (a map's items would disagree; a sub-workflow has no handler).
//! A join node runs once every one of its branches has completed since the join last ran. A
//! node with a loop bound is entered at most that many times per thread. A branch that reaches
//! [`END`] is finished.
//!
//! # The engine's view
//!
//! [`Workflow::erase`] gives an [`Arc<DynWorkflow>`](DynWorkflow) with no type parameter: nodes
//! by [`NodeId`] (declaration order), handlers as [`DynHandler`] taking a [`DynState`] and
//! returning the update as JSON, routing through [`DynWorkflow::start`] and
//! [`DynWorkflow::next`], joins through [`DynWorkflow::join_sources`], states through
//! [`DynWorkflow::state_from_json`]. A [`DynState`] holds the typed state behind an `Arc`, so
//! handing a snapshot to a handler costs a reference count, and applying an update copies the
//! state only while a snapshot is still held. The engine implements [`NodeContext`]; node code
//! sees it through [`Ctx`].
//!
//! # Validation
//!
//! `build()` reports, as a [`BuildError`] listing [`Problem`]s with the offending names: no
//! nodes, duplicate or reserved names, edges/routes/gotos to undeclared nodes, nothing leaving
//! `START`, nodes unreachable from `START`, nodes with no path to `END`, cycles without a loop
//! bound, joins whose branches cannot all arrive (e.g. they are alternatives of one route),
//! policies and settings out of range, and [`limits`] exceeded.
//!
//! # Identity and pictures
//!
//! [`Workflow::fingerprint`] hashes the structure with a hand-written canonical encoding, so it
//! is identical across runs, machines and compilers; the engine stores it with each thread to
//! notice a changed definition. [`Workflow::to_dot`] and [`Workflow::to_mermaid`] draw the graph
//! deterministically.
//!
//! # Examples
//!
//! Running a workflow needs the engine; these examples build, validate and draw.
//!
//! ## A linear pipeline
//!
//! A skill that outlines then writes an article, reporting progress and calling tools whose
//! results the engine records (on resume, a recorded result is returned and the tool not rerun).
//!
//! ```
//! use std::sync::Arc;
//! use cairn_dsl::{Ctx, NodeOutput, NodePolicy, NodeResult, RetryPolicy, State, Workflow, END, START};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Clone, Default, Serialize, Deserialize)]
//! struct Article { topic: String, outline: Vec<String>, body: String }
//!
//! #[derive(Clone, Serialize, Deserialize)]
//! enum Edit { Outline(Vec<String>), Body(String) }
//!
//! impl State for Article {
//!     type Update = Edit;
//!     fn apply(&mut self, edit: Edit) {
//!         match edit {
//!             Edit::Outline(outline) => self.outline = outline,
//!             Edit::Body(body) => self.body = body,
//!         }
//!     }
//! }
//!
//! async fn outline(article: Arc<Article>, ctx: Ctx) -> NodeResult<Edit> {
//!     ctx.progress(1, 2, "outlining");
//!     let sections: Vec<String> = ctx
//!         .tool("llm.outline", article.topic.clone(), |topic: String, _tool| async move {
//!             Ok(vec![format!("Why {topic}"), format!("How {topic}")])
//!         })
//!         .await?;
//!     Ok(NodeOutput::update(Edit::Outline(sections)))
//! }
//!
//! async fn write(article: Arc<Article>, ctx: Ctx) -> NodeResult<Edit> {
//!     ctx.progress(2, 2, "writing");
//!     Ok(NodeOutput::update(Edit::Body(article.outline.join("\n\n"))))
//! }
//!
//! let workflow = Workflow::<Article>::builder("write-article", 1)
//!     .node("outline", outline)
//!     .node_with(
//!         "write",
//!         write,
//!         NodePolicy::default()
//!             .retry(RetryPolicy::exponential(3, 500, 5_000).non_retryable("content_policy"))
//!             .timeout_ms(60_000)
//!             .checkpoint_after(true),
//!     )
//!     .edge(START, "outline")
//!     .edge("outline", "write")
//!     .edge("write", END)
//!     .build()?;
//!
//! let dot = workflow.to_dot();
//! assert!(dot.contains("\"outline\" -> \"write\";"));
//! assert_eq!(workflow.fingerprint().to_hex().len(), 64);
//! # Ok::<(), cairn_dsl::BuildError>(())
//! ```
//!
//! ## A router with a loop
//!
//! A review either publishes or sends the draft back for revision; the loop is bounded, as every
//! cycle must be.
//!
//! ```
//! use cairn_dsl::{NodeOutput, Replace, Workflow, END, START};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Clone, Default, Serialize, Deserialize)]
//! struct Draft { text: String, score: u8 }
//!
//! let workflow = Workflow::<Replace<Draft>>::builder("review-loop", 1)
//!     .node("review", |draft, _ctx| async move {
//!         let mut next = draft.0.clone();
//!         next.score = next.text.len().min(10) as u8;
//!         Ok(NodeOutput::update(next))
//!     })
//!     .node("revise", |draft, _ctx| async move {
//!         let mut next = draft.0.clone();
//!         next.text.push_str(" More detail.");
//!         Ok(NodeOutput::update(next))
//!     })
//!     .node("publish", |_draft, _ctx| async { Ok(NodeOutput::none()) })
//!     .edge(START, "review")
//!     .route("review", |d: &Replace<Draft>| if d.0.score >= 8 { "publish" } else { "revise" }, ["publish", "revise"])
//!     .edge("revise", "review")
//!     .loop_bound("revise", 3)
//!     .edge("publish", END)
//!     .build()?;
//!
//! let dot = workflow.to_dot();
//! assert!(dot.contains("\"review\" -> \"revise\" [style=dashed, label=\"route\"];"));
//! assert!(dot.contains("(max 3 visits)"));
//!
//! // Without the bound, the cycle is refused, and the error names its nodes.
//! let unbounded = Workflow::<Replace<Draft>>::builder("review-loop", 1)
//!     .node("review", |_d, _ctx| async { Ok(NodeOutput::none()) })
//!     .node("revise", |_d, _ctx| async { Ok(NodeOutput::none()) })
//!     .edge(START, "review")
//!     .route("review", |_d: &Replace<Draft>| END, ["revise", END])
//!     .edge("revise", "review")
//!     .build()
//!     .unwrap_err();
//! assert!(unbounded.has(&cairn_dsl::Problem::UnboundedCycle(vec!["review".into(), "revise".into()])));
//! # Ok::<(), cairn_dsl::BuildError>(())
//! ```
//!
//! ## A map-reduce fan-out
//!
//! Two searches run in parallel and a join waits for both; then a map node summarises every
//! document found (one task per item, updates applied in item order), and a last node reduces.
//!
//! ```
//! use cairn_dsl::{Ctx, NodeOutput, State, Workflow, END, START};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Clone, Default, Serialize, Deserialize)]
//! struct Research { docs: Vec<String>, summaries: Vec<String>, report: String }
//!
//! #[derive(Clone, Serialize, Deserialize)]
//! enum Found { Docs(Vec<String>), Summary(String), Report(String) }
//!
//! impl State for Research {
//!     type Update = Found;
//!     fn apply(&mut self, found: Found) {
//!         match found {
//!             Found::Docs(mut d) => self.docs.append(&mut d),
//!             Found::Summary(s) => self.summaries.push(s),
//!             Found::Report(r) => self.report = r,
//!         }
//!     }
//! }
//!
//! let workflow = Workflow::<Research>::builder("research", 1)
//!     .node("plan", |_s, _ctx| async { Ok(NodeOutput::none()) })
//!     .node("web", |_s, _ctx| async { Ok(NodeOutput::update(Found::Docs(vec!["w1".into()]))) })
//!     .node("papers", |_s, _ctx| async { Ok(NodeOutput::update(Found::Docs(vec!["p1".into()]))) })
//!     .node("gather", |_s, _ctx| async { Ok(NodeOutput::none()) })
//!     .map("summarise", |s: &Research| s.docs.clone(), |_s, ctx: Ctx| async move {
//!         let doc: String = ctx.item()?;
//!         Ok(NodeOutput::update(Found::Summary(format!("summary of {doc}"))))
//!     })
//!     .node("report", |s, _ctx| async move {
//!         Ok(NodeOutput::update(Found::Report(s.summaries.join("; "))))
//!     })
//!     .edge(START, "plan")
//!     .fan_out("plan", ["web", "papers"])
//!     .join(["web", "papers"], "gather")
//!     .edge("gather", "summarise")
//!     .edge("summarise", "report")
//!     .edge("report", END)
//!     .build()?;
//!
//! let mermaid = workflow.to_mermaid();
//! assert!(mermaid.contains("n1 ==> n3"), "{mermaid}"); // web ==> gather (a join edge)
//! assert!(mermaid.contains("(join: web, papers)"));
//! assert!(mermaid.contains("(map)"));
//! # Ok::<(), cairn_dsl::BuildError>(())
//! ```
//!
//! ## A sub-workflow
//!
//! A parent keeps [`Variables`]; a child workflow over the same state type runs as one node. It
//! starts from the parent's global and thread variables and hands back its globals.
//!
//! ```
//! use cairn_dsl::{NodeOutput, Scope, Variables, VarUpdate, Workflow, END, START};
//!
//! let child = Workflow::<Variables>::builder("experiment", 2)
//!     .node("run", |vars, _ctx| async move {
//!         Ok(NodeOutput::update(vars.set("bleu", 27.5, Scope::Global)?))
//!     })
//!     .edge(START, "run")
//!     .edge("run", END)
//!     .build()?;
//!
//! let parent = Workflow::<Variables>::builder("session", 1)
//!     .node("setup", |vars, _ctx| async move {
//!         Ok(NodeOutput::update(vars.declare("dataset", "wmt14", Scope::Global, true)?))
//!     })
//!     .subgraph(
//!         "experiment",
//!         child,
//!         |vars: &Variables| vars.for_subgraph(),
//!         |done: &Variables| done.export_scope(Scope::Global),
//!     )
//!     .node("cleanup", |_vars, _ctx| async { Ok(NodeOutput::update(VarUpdate::ClearScope(Scope::Loop))) })
//!     .edge(START, "setup")
//!     .edge("setup", "experiment")
//!     .edge("experiment", "cleanup")
//!     .edge("cleanup", END)
//!     .build()?;
//!
//! assert_eq!(parent.as_dyn().depth(), 1);
//! let dot = parent.to_dot();
//! assert!(dot.contains("subgraph \"cluster_experiment\""));
//! assert!(dot.contains("\"experiment/run\""));
//! assert!(dot.contains("\"experiment/__end__\" -> \"cleanup\";"));
//! # Ok::<(), cairn_dsl::BuildError>(())
//! ```
//!
//! ## A human-approval step
//!
//! A research phase ends with a confirmation: the node asks a human and is suspended until the
//! answer arrives (the engine then runs it again and `interrupt` returns the answer). The answer
//! picks the next node with a `goto` among declared targets; completing the phase triggers a
//! phase checkpoint.
//!
//! ```
//! use cairn_dsl::{NodeOutput, NodePolicy, Replace, Workflow, END, START};
//! use serde::Deserialize;
//! use serde_json::json;
//!
//! #[derive(Deserialize)]
//! struct Answer { approved: bool }
//!
//! let workflow = Workflow::<Replace<Vec<String>>>::builder("idea-to-plan", 1)
//!     .node_with("normalise_idea", |_s, _ctx| async {
//!         Ok(NodeOutput::update(vec!["sparse attention".to_owned()]))
//!     }, NodePolicy::default().phase(true))
//!     .node("confirm", |s, ctx| async move {
//!         let answer: Answer = ctx.interrupt(json!({ "question": "Approve these strategies?", "strategies": s.0 }))?;
//!         Ok(if answer.approved { NodeOutput::none().goto("plan") } else { NodeOutput::none().goto("normalise_idea") })
//!     })
//!     .node_with("plan", |_s, _ctx| async { Ok(NodeOutput::none()) }, NodePolicy::default().phase(true))
//!     .edge(START, "normalise_idea")
//!     .edge("normalise_idea", "confirm")
//!     .gotos("confirm", ["plan", "normalise_idea"])
//!     .loop_bound("normalise_idea", 5)
//!     .edge("plan", END)
//!     .build()?;
//!
//! assert!(workflow.to_dot().contains("\"confirm\" -> \"plan\" [style=dotted, label=\"goto\"];"));
//! # Ok::<(), cairn_dsl::BuildError>(())
//! ```

mod assemble;
mod builder;
mod child;
mod context;
mod ctx;
mod declared;
mod erased;
mod error;
mod fingerprint;
mod graph;
mod join;
pub mod limits;
mod long_lived;
mod output;
mod picture;
mod policy;
mod problem;
mod promise;
mod recovery;
mod resolve;
mod search;
mod signals;
mod state;
mod stream;
mod triggers;
mod updates;
mod validate;
mod var_type;
mod variables;
mod waits;

pub use builder::WorkflowBuilder;
pub use child::{ChildEnded, ChildHandle, ChildStart, ParentClose};
pub use context::{ErasedTool, Message, NodeContext, Progress, ToolCall, ToolCtx, Usage};
pub use ctx::Ctx;
pub use declared::{QueryDef, QueryName, SignalDef, SignalName, UpdateDef, UpdateName};
pub use erased::{
    DynHandler, DynInput, DynItems, DynNode, DynNodeKind, DynOutput, DynState, DynWorkflow,
    downcast_state,
};
pub use error::{HeldLock, NodeError, RouteError, StateError, ToolError, VarError};
pub use fingerprint::{Fingerprint, ParseFingerprintError};
pub use graph::{NextTarget, NodeId};
pub use long_lived::DynCompensation;
pub use output::{END, NodeOutput, NodeResult, START, Target};
pub use picture::LinkKind;
pub use policy::{Budgets, CheckpointPolicy, NodePolicy, RetryPolicy};
pub use problem::{BuildError, Problem};
pub use promise::Promise;
pub use recovery::{FailureKind, Recovery};
pub use signals::SignalError;
pub use state::{Replace, State};
pub use stream::StreamSink;
pub use updates::{UpdateError, UpdateOutcome};
pub use var_type::VarType;
pub use variables::{RejectedWrite, Scope, VarOp, VarUpdate, Variable, Variables};
pub use waits::{Select, Selected};
pub use workflow::Workflow;

mod workflow;
