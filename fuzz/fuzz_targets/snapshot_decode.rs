//! Arbitrary bytes as a checkpoint snapshot and as an event body applied to real thread
//! contexts: never a panic; accepted snapshots round-trip. The check lives in the reliability
//! suite, which replays this target's corpus (engine/tests/reliability/fuzz_corpus.rs).
#![no_main]

#[path = "../../engine/tests/reliability/fuzz_checks/snapshot_decode.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| check::check(data));
