//! Cairn's reliability suite: the figures `docs/reliability.md` quotes.
//!
//! Every test prints one `RELIABILITY <test> key=value...` line (to stderr, which the test
//! runner shows in the CI log) and asserts its must-be-zero counters. Sizes scale with
//! environment variables so that `scripts/soak.sh` runs the same code at soak size:
//! `CAIRN_REL_RANDOM_CASES` (T1 random cases), `CAIRN_REL_KILLS` and `CAIRN_REL_ABORTS` (T2),
//! `CAIRN_REL_CORRUPTIONS` (T4), `CAIRN_REL_LOAD_THREADS` (T8), `CAIRN_REL_PG_THREADS` (the
//! multi-worker chaos test on PostgreSQL). A failing randomised test prints
//! the seed (or case) that replays it.
#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "the suite prints its RELIABILITY summary lines"
)]
#![allow(missing_docs, reason = "test code")]

mod corruption;
mod crash_points;
mod crash_testing_example;
mod env;
mod fixtures;
mod fuzz_corpus;
mod io_faults;
mod load;
#[cfg(feature = "postgres")]
mod pg_chaos_workflow;
#[cfg(feature = "postgres")]
mod pg_workers;
mod processes;
mod workflows;
