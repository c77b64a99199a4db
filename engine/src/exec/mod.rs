//! The imperative shell: drives threads step by step and writes what they do.
//!
//! Arrows inside: `drive` claims and restores a thread and hands it to `runner`, which runs its
//! steps through `task` (the attempt loop) and `node_context` (what node code sees), writing
//! through `pipeline`, the thread's one write path. Tasks see only their `env::ThreadEnv`;
//! subgraph nodes reach child threads through `env::ChildThreads`, which `child_run` implements
//! over the shell. `parked` changes threads nobody drives; `wake` acts on due timers.

mod acknowledge;
pub mod blocking;
mod budgets;
mod checkpoint_asks;
pub(crate) mod child_close;
pub(crate) mod child_drive;
pub(crate) mod child_run;
pub(crate) mod child_start;
mod compensate;
mod continue_as_new;
mod delayed_start;
pub(crate) mod drive;
pub(crate) mod env;
pub(crate) mod fetch;
mod idempotency;
pub(crate) mod locks;
pub(crate) mod node_context;
mod observe;
pub(crate) mod parked;
pub(crate) mod pipeline;
pub(crate) mod registry;
mod restore_retry;
pub(crate) mod resume_check;
pub(crate) mod runner;
pub(crate) mod shell;
pub(crate) mod signal_cursor;
pub(crate) mod signals;
pub(crate) mod start;
pub(crate) mod started;
pub(crate) mod stop;
pub(crate) mod stream_forward;
pub(crate) mod streams;
pub(crate) mod subgraph;
pub(crate) mod task;
pub(crate) mod update_inbox;
mod update_parked;
pub(crate) mod updates;
pub(crate) mod wake;
