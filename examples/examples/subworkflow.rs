//! `cargo run --example subworkflow`: see `cairn_examples::subworkflow`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = cairn_examples::subworkflow::run(&dir.path().join("subworkflow.db")).await?;
    println!("{out:#?}");
    Ok(())
}
