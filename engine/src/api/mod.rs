//! The embedding API: the engine, its builder, thread handles, controls and event channels.

pub mod channels;
pub(crate) mod controls;
pub mod engine;
pub mod handle;
