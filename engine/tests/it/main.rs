//! Integration tests of the engine: one binary, one module per concern.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "tests print RELIABILITY summary lines"
)]
#![allow(missing_docs, reason = "test code")]

mod accepted;
mod batch;
mod batch_crash;
mod batch_ids;
mod batch_repin;
mod bounded_history;
mod bundle_export_options;
mod bundle_replay;
mod bundle_seed;
mod cdp;
mod checkpoint_requests;
mod checkpoints;
mod children;
mod common;
mod compensation;
mod continue_as_new;
mod controls;
mod core_pure;
mod crash;
mod crash_children;
mod crash_controls;
#[cfg(feature = "postgres")]
mod crash_pg;
mod debug;
mod debug_bundle;
mod delayed_start;
mod disk_full;
mod emit;
mod events_promises;
mod execution;
mod hand_over;
mod layers;
mod locks;
mod node_runs;
mod openapi;
mod operator;
#[cfg(feature = "otel")]
mod otel;
#[cfg(feature = "otel")]
mod otlp_receiver;
mod patching;
#[cfg(feature = "postgres")]
mod pg_debug_endpoint;
#[cfg(feature = "postgres")]
mod pg_debug_reads;
#[cfg(feature = "postgres")]
mod pg_hang;
#[cfg(feature = "postgres")]
mod pg_lease;
#[cfg(feature = "postgres")]
mod pg_outage;
#[cfg(feature = "postgres")]
mod pg_public_reads;
#[cfg(feature = "postgres")]
mod pg_reads;
#[cfg(feature = "postgres")]
mod postgres;
#[cfg(feature = "postgres")]
mod postgres_wake;
mod published_keys;
mod queries;
mod queue_flow;
mod queues;
mod queues_crash;
mod queues_many;
#[cfg(feature = "postgres")]
mod queues_pg;
mod recovered_child;
mod recovery;
mod recovery_kinds;
mod recovery_paging;
mod recovery_policy;
mod replay;
mod reserved_labels;
mod reset;
mod restore_reads;
mod resume_check;
mod retention;
mod scale;
mod schedule_chain;
mod schedule_overlap;
mod schedule_overlap_crash;
mod schedules;
#[cfg(feature = "encryption")]
mod sealing;
mod search_labels;
mod select;
mod select_child;
mod select_fork;
mod serve;
mod serve_auth;
mod serve_batch_reset;
mod serve_checkpoint_requests;
mod serve_repin;
mod serve_reset;
mod serve_start;
mod signal_once;
mod signal_once_race;
mod signal_types;
mod signals;
mod spans;
mod streams;
#[cfg(feature = "postgres")]
mod streams_pg;
mod stuck_retry;
mod telemetry;
#[cfg(feature = "postgres")]
mod telemetry_pg;
mod telemetry_recorder;
mod trace;
mod trace_session;
mod typed_start;
mod updates;
#[cfg(feature = "postgres")]
mod updates_pg;
mod variables;
mod versions;
mod versions_pg;
mod versions_updates;
mod web_view;
mod web_view_batch;
mod web_view_batch_migrate;
mod web_view_batch_repin;
mod web_view_chain;
mod web_view_continued;
mod web_view_pages;
mod web_view_queues;
mod web_view_reset;
mod web_view_sealed;
mod web_view_seen;
mod web_view_signal;
mod web_view_start;
mod web_view_talk;
mod web_view_update_start;
