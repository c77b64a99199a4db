//! Integration tests of cairn-storage: one binary (see `docs/format.md` for the recovery table
//! each `recovery::` test implements).
#![allow(clippy::print_stderr, reason = "tests print RELIABILITY summary lines")]
#![allow(missing_docs, reason = "test modules")]

mod bad_input;
mod batch;
mod checkpoints;
mod common;
mod concurrency;
mod conformance;
mod correlations;
mod durability;
mod migrate_v6;
mod migrate_v7;
mod migrate_v8;
mod model;
#[cfg(feature = "postgres")]
mod pg;
#[cfg(feature = "postgres")]
mod pg_commit_marks;
#[cfg(feature = "postgres")]
mod pg_events;
#[cfg(feature = "postgres")]
mod pg_hang;
#[cfg(feature = "postgres")]
mod pg_read_deadline;
#[cfg(feature = "postgres")]
mod pg_reads;
#[cfg(feature = "tls")]
mod pg_tls;
#[cfg(feature = "postgres")]
mod pg_wake;
mod prune;
mod queue_flow;
mod queues;
mod raw;
mod recovery;
mod roundtrip;
mod search;
mod signals;
mod subscribe;
mod two_process;
mod v6_log;
