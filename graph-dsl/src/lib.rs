//! Cairn's workflow DSL: define workflows in Rust, validate them, fingerprint and draw them.
//!
//! (Full guide below is filled in with the examples.)

mod assemble;
mod builder;
mod context;
mod ctx;
mod erased;
mod error;
mod fingerprint;
mod graph;
mod join;
pub mod limits;
mod output;
mod picture;
mod policy;
mod problem;
mod state;
mod validate;
mod variables;

pub use builder::WorkflowBuilder;
pub use context::{ErasedTool, Message, NodeContext, Progress, ToolCall, ToolCtx, Usage};
pub use ctx::Ctx;
pub use erased::{
    DynHandler, DynInput, DynItems, DynNode, DynNodeKind, DynOutput, DynState, DynWorkflow,
    NextTarget, NodeId, downcast_state,
};
pub use error::{NodeError, RouteError, StateError, ToolError, VarError};
pub use fingerprint::{Fingerprint, ParseFingerprintError};
pub use output::{END, NodeOutput, NodeResult, START, Target};
pub use policy::{Budgets, CheckpointPolicy, NodePolicy, RetryPolicy};
pub use problem::{BuildError, Problem};
pub use state::{Replace, State};
pub use variables::{RejectedWrite, Scope, VarOp, VarUpdate, Variable, Variables};
pub use workflow::Workflow;

mod workflow;
