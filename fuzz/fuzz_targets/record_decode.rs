//! Arbitrary bytes to every record decoder, raw and inside valid frames: never a panic, and
//! whatever decodes re-encodes to the same value.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| cairn_fuzz::record_decode::check(data));
