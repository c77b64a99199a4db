//! `cargo run --example routing`: see `cairn_examples::routing`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = cairn_examples::routing::run(&dir.path().join("routing.db")).await?;
    println!("{out:#?}");
    Ok(())
}
