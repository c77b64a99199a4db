//! `cargo run --example quickstart`: see `cairn_examples::quickstart`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = cairn_examples::quickstart::run(&dir.path().join("quickstart.db")).await?;
    println!("text:  {}", out.text);
    println!("words: {}", out.words);
    println!("shout: {}", out.shout);
    Ok(())
}
