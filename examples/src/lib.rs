//! Runnable examples of Cairn. Each module holds one example's workflow and a `run` function
//! that the example binary (`cargo run --example NAME`) prints and the test suite asserts.

pub mod agent_runtime;
pub mod bookmarks;
pub mod budgets;
pub mod bundle_round_trip;
pub mod code_change;
pub mod credit_updates;
pub mod debounced_indexing;
pub mod fleet_batches;
pub mod human_input;
pub mod job_engine;
pub mod map_reduce;
pub mod observed;
pub mod operator;
pub mod order_events;
pub mod order_search;
pub mod order_signals;
pub mod overlapping_schedules;
pub mod payments;
pub mod polling_loop;
pub mod quickstart;
pub mod research_pipeline;
pub mod routing;
pub mod scheduled_reports;
pub mod sealed_orders;
pub mod streaming_agent;
pub mod subworkflow;
pub mod timers;
pub mod trip;
pub mod vat_patch;
pub mod versioned_workers;
