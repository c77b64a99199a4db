//! `cargo run --example trip`: see `cairn_examples::trip`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::trip::run(&dir.path().join("trip.db")).await?;
    println!("the booking service saw:");
    for line in &s.service {
        println!("  {line}");
    }
    println!("the thread's log recorded:");
    for line in &s.unwinding {
        println!("  {line}");
    }
    println!("final status: {}", s.status);
    Ok(())
}
