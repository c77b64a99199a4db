//! `cargo run --example operator`: see `cairn_examples::operator`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::operator::run(&dir.path().join("import.db")).await?;
    println!("paused by the operator: {} after {} batches", s.paused, s.done_when_paused);
    println!(
        "after a restart: {} (offered for resumption: {})",
        s.after_restart,
        s.resumable_after_restart.join(", ")
    );
    println!(
        "resumed: {} after {} batches; the import tool ran {} times",
        s.finished, s.done, s.imports
    );
    Ok(())
}
