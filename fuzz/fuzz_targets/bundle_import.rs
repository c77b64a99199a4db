//! Arbitrary bytes to the debug-bundle reader (`cairn::debug::Bundle::from_bytes`, what
//! `import_bundle` and `cairn bundle import` run first): never a panic, only a path-naming error;
//! and a bundle it accepts serialises to bytes it accepts again.
#![no_main]

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    match cairn::debug::Bundle::from_bytes(data) {
        Ok(bundle) => {
            let bytes = bundle.to_bytes(false).expect("an accepted bundle serialises");
            cairn::debug::Bundle::from_bytes(&bytes).expect("its own bytes are accepted again");
        }
        Err(cairn::Error::Bundle { path, .. }) => assert!(path.starts_with('$'), "{path}"),
        Err(other) => panic!("not a bundle error: {other}"),
    }
});
