//! `cargo run --example map_reduce`: see `cairn_examples::map_reduce`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = cairn_examples::map_reduce::run(&dir.path().join("map_reduce.db")).await?;
    for (doc, summary) in out.docs.iter().zip(&out.summaries) {
        println!("{doc:<24} -> {summary}");
    }
    println!("total length of the summaries: {}", out.total);
    Ok(())
}
