//! Shared helpers for the benchmark binaries in `benches/benches/`.
