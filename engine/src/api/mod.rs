//! The embedding API: the engine, its builder, thread handles, controls and event channels.

pub mod builder;
pub mod channels;
pub mod continued;
mod controls;
pub mod create;
pub mod engine;
pub mod handle;
mod health;
pub mod health_policy;
pub mod patches;
pub mod prune;
mod query;
mod queues;
pub mod recover;
mod replay;
mod result;
mod retention;
pub mod schedule;
pub mod schedule_flow;
pub mod schedule_links;
pub mod schedule_ticks;
mod signal;
