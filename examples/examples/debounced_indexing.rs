//! `cargo run --example debounced_indexing`: see `cairn_examples::debounced_indexing`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = cairn_examples::debounced_indexing::run(&dir.path().join("index.db")).await?;
    for (doc, texts) in &out.runs {
        println!("{doc}: indexed {texts:?} (one run for its burst of saves)");
    }
    println!("saves superseded by a later save: {}", out.superseded);
    for (i, sent) in out.sends.iter().enumerate() {
        println!("email send {}: {} emails", i + 1, sent.len());
    }
    Ok(())
}
