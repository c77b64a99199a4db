//! `cargo run --example bookmarks`: see `cairn_examples::bookmarks`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = cairn_examples::bookmarks::run(&dir.path().join("bookmarks.db")).await?;
    let since: Vec<String> = out.since.iter().map(u64::to_string).collect();
    println!("bookmark taken before the crash: seq {}", out.bookmark_seq);
    println!("read since it after the resume: seqs {}", since.join(", "));
    println!("final value: {}", out.value);
    Ok(())
}
