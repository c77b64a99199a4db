//! The imperative shell: drives threads step by step and writes what they do.

pub(crate) mod locks;
pub(crate) mod pipeline;
pub(crate) mod resume_check;
pub(crate) mod runner;
pub(crate) mod start;
pub(crate) mod subgraph;
pub(crate) mod task;
pub(crate) mod timers;
