//! The functional core: what a thread is and how its log folds, with no I/O of its own.
//!
//! Event bodies ([`event`]) and their codec to storage records ([`codec`]), the thread context
//! and its fold ([`thread_ctx`]; each concern folds its part, in the order `fold` writes down),
//! the status table ([`status`]), the step decision ([`decide`]: what a step's task runs mean
//! for the thread; `step_end` holds the precedence between the concerns that end a step), and
//! restore ([`restore`]: the
//! latest checkpoint and the log after it, folded: a machine that says which read it needs
//! next). Nothing here reads, awaits, spawns or writes: `exec/fetch.rs` makes the reads with the
//! store's async reads and `exec/blocking.rs` with its sync ones (in the engine, crate `cairn`).
//!
//! The compiler keeps it so: this crate depends on no async runtime (it cannot name `tokio`),
//! and it names the store's plain types (ids, events, checkpoints, statuses, its error) but
//! never its traits or backends (`clippy.toml` beside `Cargo.toml` refuses them). Its errors are
//! its own ([`Error`]); the engine's error converts from them, with the same words.

pub(crate) mod budgets;
pub mod checkpoint_plan;
pub mod checkpoint_requests;
pub(crate) mod checkpoint_requests_fold;
pub mod child_start;
pub mod children;
pub mod codec;
pub mod compensation;
pub(crate) mod compensation_fold;
pub mod continuation;
pub mod decide;
pub mod drawn;
pub mod error;
pub mod event;
pub(crate) mod fold;
#[cfg(test)]
pub(crate) mod fold_samples;
pub(crate) mod journal;
pub mod labels;
pub mod limits;
pub mod marks;
pub mod node_runs;
pub mod patch;
pub mod published;
pub(crate) mod record;
pub mod recovery;
pub mod recovery_fold;
pub mod restore;
pub mod select;
pub mod status;
pub(crate) mod step_end;
pub mod summary;
pub mod suspend;
pub mod task_map;
pub mod telemetry;
pub(crate) mod telemetry_fold;
pub mod thread_ctx;
pub(crate) mod waits;

pub use error::Error;
