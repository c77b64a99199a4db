//! Arbitrary builder operations to the workflow DSL: never a panic; a workflow that builds has a
//! deterministic fingerprint and renders. The check lives in the reliability suite, which
//! replays this target's corpus (engine/tests/reliability/fuzz_corpus.rs).
#![no_main]

#[path = "../../engine/tests/reliability/fuzz_checks/dsl_builder.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
