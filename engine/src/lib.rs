//! Cairn: a durable workflow engine with embedded storage.
//!
//! Users define workflows with the DSL ([`dsl`]), open an [`Engine`] on a database file, and start
//! threads (one run of a workflow on an input). Every step of a thread is written as bookmarked
//! events to a CRC-checked log ([`storage`]) before it is acknowledged; after a crash the engine
//! restores each thread (latest checkpoint + the events after it) and carries on.
//!
//! This crate owns execution: the step loop ([`runner`](crate)), the node context, restore,
//! controls, and its telemetry ([`telemetry`]: metrics and the health report). The operator
//! tooling (the `cairn` command line, the HTTP endpoint and web view, debug tools and bundles)
//! is the `cairn-tools` crate, built on this one's API ([`admin`] holds what it needs beyond an
//! application's). Its invariant: for any workflow, input and crash point,
//! reopen + resume gives the same final state, outputs and recorded side effects as a run that
//! never crashed.

mod api;
pub mod clock;
pub mod config;
pub(crate) mod coord;
pub mod error;
mod exec;
pub(crate) mod limits;
pub mod replay;
pub mod sealing;
mod tasks;
pub mod telemetry;

pub use crate::api::admin;
pub use cairn_core::{event, status, thread_ctx};

/// The functional core (crate `cairn-core`: thread state, the step decision, restore, the codec
/// of event bodies), as the engine's modules name it. A user meets three of its modules, at the
/// root: [`event`], [`status`] and [`thread_ctx`]; tooling that needs the rest depends on
/// `cairn-core` itself.
mod core {
    pub(crate) use cairn_core::{
        checkpoint_plan, checkpoint_requests, child_start, children, codec, compensation, decide,
        drawn, event, marks, patch, published, restore, select, status, summary, suspend,
        thread_ctx,
    };
}

pub use exec::blocking;

pub use cairn_dsl as dsl;
pub use cairn_storage as storage;

pub use api::batch::{BatchFilter, BatchInfo, BatchOp, BatchState};
pub use api::builder::EngineBuilder;
pub use api::channels::Channel;
pub use api::create::Creation;
pub use api::emit::{Emitted, EventStart, event_thread_id};
pub use api::engine::Engine;
pub use api::handle::{EventStream, Outcome, ThreadHandle};
pub use api::health_policy::{ExpiredLockAction, HealthPolicy, StuckAction};
pub use api::outcome::Untyped;
pub use api::patches::Unpatched;
pub use api::promise::Completed;
pub use api::prune::PruneReport;
pub use api::published::EventValue;
pub use api::recover::RecoveryReport;
pub use api::reset::{ResetPoint, reset_thread_id};
pub use api::schedule::ScheduleInfo;
pub use api::schedule_backfill::Backfilled;
pub use api::schedule_flow::{ScheduleSpec, ScheduleState};
pub use api::schedule_overlap::Overlap;
pub use api::schedule_ticks::{CatchUp, Every};
pub use api::signal_once::{DEDUP_SIGNAL, Sent, SignalWithStart};
pub use api::stream::{StreamItem, StreamReader};
pub use api::update::{UpdateOptions, UpdateWithStart, Updated};
pub use api::versions::{BuildDrain, Drain, VersionDrain};
pub use cairn_dsl::{
    Ctx, END, NodeError, NodeOutput, NodeResult, Replace, START, State, Target, ToolError,
    Variables, Workflow,
};
pub use cairn_storage::{Bookmark, Durability, Lsn, Scope, Seq, ThreadId, ThreadStatus};
pub use config::{Config, RecoveryPolicy, RetentionPolicy, RetentionReport, StartOptions};
pub use error::Error;
pub use exec::shell::StepHook;
