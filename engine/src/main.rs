//! The `cairn` command line.
fn main() {}
