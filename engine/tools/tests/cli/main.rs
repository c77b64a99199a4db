//! Tests of the `cairn` command line: the real binary on real database files made by the demo.
#![allow(missing_docs, reason = "test code")]
#![allow(clippy::print_stderr, reason = "tests may report what they see")]

mod accepted;
mod batch;
mod bounds;
mod checkpoint;
mod control;
mod debug;
mod emit;
mod exit_codes;
mod files;
mod follow;
mod harness;
mod health;
mod in_place;
mod inspect;
mod load;
mod misc;
#[cfg(feature = "otel")]
mod otlp;
#[cfg(feature = "otel")]
#[path = "../../../tests/it/otlp_receiver.rs"]
mod otlp_receiver;
mod paths;
mod postgres;
mod promises;
mod prune;
mod query;
mod queue;
mod readme;
mod reset;
mod resume;
mod retention;
mod schedule;
mod schedule_run;
mod sealed;
mod seed_import;
mod seen;
mod serve;
mod signal_types;
mod start;
mod starting;
mod stream;
mod stuck;
mod through;
mod through_writes;
mod update;
mod versions;
mod worker_talk;
