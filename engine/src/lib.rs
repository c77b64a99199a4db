//! Cairn: a durable workflow engine with embedded storage.
//!
//! Users define workflows with the DSL ([`dsl`]), open an [`Engine`] on a database file, and start
//! threads (one run of a workflow on an input). Every step of a thread is written as bookmarked
//! events to a CRC-checked log ([`storage`]) before it is acknowledged; after a crash the engine
//! restores each thread (latest checkpoint + the events after it) and carries on.
//!
//! This crate owns execution: the step loop ([`runner`](crate)), the node context, restore,
//! controls, and the `cairn` command line. Its invariant: for any workflow, input and crash point,
//! reopen + resume gives the same final state, outputs and recorded side effects as a run that
//! never crashed.

pub mod channels;
mod children;
mod claims;
#[cfg(feature = "cli")]
pub mod cli;
pub mod clock;
mod controls_api;
pub mod debug;
mod decide;
#[cfg(feature = "cli")]
pub mod demo;
mod drawn;
mod engine;
pub mod error;
mod handle;
pub mod limits;
mod locks;
pub mod log;
pub mod model;
mod pipeline;
pub mod record;
pub mod replay;
pub mod restore;
mod resume_check;
mod runner;
mod start;
pub mod status;
mod subgraph;
mod suspend;
mod task;
mod task_map;
#[cfg(feature = "testkit")]
pub mod testkit;
pub mod thread_ctx;
mod timers;

pub use cairn_dsl as dsl;
pub use cairn_storage as storage;

pub use cairn_dsl::{
    Ctx, END, NodeError, NodeOutput, NodeResult, Replace, START, State, Target, ToolError,
    Variables, Workflow,
};
pub use cairn_storage::{Bookmark, Durability, Lsn, Scope, Seq, ThreadId, ThreadStatus};
pub use engine::{
    Config, Engine, EngineBuilder, RecoveryPolicy, RecoveryReport, StartOptions, StepHook,
};
pub use error::Error;
pub use handle::{EventStream, Outcome, ThreadHandle};
