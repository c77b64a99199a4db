//! `cargo run --example bookmarks`: see `cairn_examples::bookmarks`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = cairn_examples::bookmarks::run(&dir.path().join("bookmarks.db")).await?;
    println!("{out:#?}");
    Ok(())
}
