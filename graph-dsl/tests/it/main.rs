//! Integration tests of cairn-dsl: one binary, one module per concern.

#![allow(
    clippy::print_stdout,
    clippy::print_stderr,
    reason = "tests print RELIABILITY summaries and failing pictures"
)]
#![allow(missing_docs, reason = "test helpers")]

mod common;
mod ctx;
mod erased;
mod fingerprint;
mod pictures;
mod props;
mod recovery;
mod seeds;
mod validation;
