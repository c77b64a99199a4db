//! `cargo run --example human_input`: see `cairn_examples::human_input`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = cairn_examples::human_input::run(&dir.path().join("approvals.db")).await?;
    println!("{out:#?}");
    Ok(())
}
