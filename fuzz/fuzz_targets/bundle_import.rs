//! Arbitrary bytes to the debug-bundle reader (`cairn_tools::debug::Bundle::from_bytes`, what
//! `import_bundle` and `cairn bundle import` run first): never a panic, only a path-naming error;
//! a bundle it accepts round-trips, plain and gzip. The check lives in the reliability suite,
//! which replays this target's corpus (engine/tests/reliability/fuzz_corpus.rs).
#![no_main]

#[path = "../../engine/tests/reliability/fuzz_checks/bundle_import.rs"]
mod check;

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    check::check(data);
});
