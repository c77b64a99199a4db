//! `cargo run --example versioned_workers`: see `cairn_examples::versioned_workers`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::versioned_workers::run(&dir.path().join("approvals.db")).await?;
    println!("unfinished threads per build when the new build opened: {:?}", s.drain_at_open);
    println!("free approval (auto-upgrade), run by the new build: {}", s.free);
    println!("pinned approval before its repin: {}", s.pinned_before_repin);
    println!("pinned approval after its repin:  {}", s.pinned_after_repin);
    println!("unfinished threads per build at the end: {:?}", s.drain_at_end);
    Ok(())
}
