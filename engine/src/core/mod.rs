//! The functional core: what a thread is and how its log folds, with no I/O of its own.
//!
//! Event bodies ([`event`]) and their codec to storage records ([`codec`]), the thread context
//! and its fold ([`thread_ctx`]), the status table ([`status`]), the step decision
//! (`decide`: what a step's task runs mean for the thread), and restore ([`restore`]: the
//! latest checkpoint and the log after it, folded: a machine that says which read it needs
//! next). Nothing here reads, awaits, spawns or writes: `exec/fetch.rs` makes the reads with the
//! store's async reads and `exec/blocking.rs` with its sync ones (`it::core_pure` checks that no
//! file here names the store).

pub mod checkpoint_plan;
pub(crate) mod children;
pub mod codec;
pub mod compensation;
pub(crate) mod continuation;
pub(crate) mod decide;
pub mod drawn;
pub mod event;
pub(crate) mod labels;
pub(crate) mod marks;
pub mod node_runs;
pub(crate) mod patch;
pub(crate) mod recovery;
pub(crate) mod recovery_fold;
pub mod restore;
pub mod status;
pub(crate) mod summary;
pub(crate) mod suspend;
pub(crate) mod task_map;
pub mod telemetry;
pub mod thread_ctx;
