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
