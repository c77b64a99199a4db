//! Sizes from the environment (the soak script scales them) and the summary line printer.

use std::io::Write as _;

/// `name` from the environment as a number, or `default`.
pub fn size(name: &str, default: u64) -> u64 {
    std::env::var(name).ok().and_then(|v| v.trim().parse().ok()).unwrap_or(default)
}

/// A seed from `name` (decimal or 0x hex), or `default`.
pub fn seed(name: &str, default: u64) -> u64 {
    match std::env::var(name) {
        Ok(v) => {
            let v = v.trim();
            v.strip_prefix("0x")
                .map_or_else(|| v.parse().ok(), |hex| u64::from_str_radix(hex, 16).ok())
                .unwrap_or(default)
        }
        Err(_) => default,
    }
}

/// Prints a `RELIABILITY` line straight to the process's stderr, so that it reaches the CI log
/// even when the test runner captures output.
pub fn report(line: &str) {
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
    let _ = err.flush();
}

/// A splitmix64 stream: the suite's random choices, replayable from a seed.
pub struct Rng(pub u64);

impl Rng {
    /// A number below `n` (0 for `n` of 0).
    pub fn below(&mut self, n: u64) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        (z ^ (z >> 31)) % n.max(1)
    }
}

/// The `cairn` binary (package `cairn-tools`): in the target directory above this test's
/// `deps/`. `cargo test --workspace` builds it; alone, `cargo build -p cairn-tools --features
/// cli` first (a binary of another package has no `CARGO_BIN_EXE_` variable here).
pub fn cairn_bin() -> std::path::PathBuf {
    let exe = std::env::current_exe().expect("the test binary");
    let profile = exe.parent().and_then(std::path::Path::parent).expect("target/<profile>/deps");
    let bin = profile.join(format!("cairn{}", std::env::consts::EXE_SUFFIX));
    assert!(
        bin.is_file(),
        "{} is not built: run `cargo build -p cairn-tools --features cli` first",
        bin.display()
    );
    bin
}
