//! Cairn's operator tooling: what a person (or a script) uses to look at and steer the threads of
//! an engine, built on the engine crate `cairn` and nothing of its internals.
//!
//! - [`Operator`]: operations on a thread from outside its workflow: time travel (its state at a
//!   seq or a time, diffs), node runs, message traces, forks, rollbacks, debug bundles (export,
//!   import, the seed-format importer), the failure export policy.
//! - [`debug`]: the types of those operations (state views, fork options, bundles, redaction).
//! - [`serve`] (feature `http`): the local HTTP endpoint and its web view.
//! - [`cli`] (feature `cli`): the `cairn` command line, and [`demo`] with [`model`] (the
//!   scripted language model the demo workflow calls).
//! - [`prometheus`] (feature `prometheus`): the Prometheus exporter of the engine's metrics.
//!
//! A library user embedding the engine does not compile any of it: `cairn` does not depend on
//! this crate.

#[cfg(feature = "cli")]
pub mod cli;
pub mod debug;
#[cfg(feature = "cli")]
pub mod demo;
pub mod demo_signoff;
pub mod limits;
pub mod model;
mod operator;
#[cfg(feature = "prometheus")]
pub mod prometheus;
#[cfg(feature = "http")]
pub mod serve;

pub use operator::Operator;
