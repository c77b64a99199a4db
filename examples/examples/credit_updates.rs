//! `cargo run --example credit_updates`: see `cairn_examples::credit_updates`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::credit_updates::run(&dir.path().join("credit.db")).await?;
    println!("c-1: raised to 2500 from {}", s.first_reply);
    println!("c-1: a limit over the cap: {}", s.refused);
    println!(
        "c-1: the same update id after a restart: {} (duplicate: {})",
        s.retried_reply, s.retry_was_duplicate
    );
    println!("c-1: {:?} with a limit of {}", s.decided.decision, s.decided.limit);
    println!(
        "c-2 (update-with-start): {:?} with a limit of {}",
        s.started.decision, s.started.limit
    );
    Ok(())
}
