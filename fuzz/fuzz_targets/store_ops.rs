//! Arbitrary operation sequences against a `RedbStore` on an in-memory backend, every read
//! compared with an in-memory model.
#![no_main]

libfuzzer_sys::fuzz_target!(|ops: Vec<cairn_fuzz::store_ops::Op>| cairn_fuzz::store_ops::run(&ops));
