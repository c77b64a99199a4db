//! The checks behind Cairn's fuzz targets, kept in a library so that regular tests can replay the
//! corpus and every crash input through exactly the code the fuzzer runs.
//!
//! `record_decode` has no dependency but `cairn-storage`, so `storage/tests/fuzz_regressions.rs`
//! includes the same file by path and replays `fuzz/corpus/record_decode` and `fuzz/artifacts`.

pub mod record_decode;
pub mod store_ops;
