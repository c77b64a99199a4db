//! `cargo run --example routing`: see `cairn_examples::routing`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = cairn_examples::routing::run(&dir.path().join("routing.db")).await?;
    for (name, review) in [("easy", &out.0), ("hard", &out.1)] {
        let drafts: Vec<String> = review.drafts.iter().map(u32::to_string).collect();
        let verdict = if review.approved { "approved" } else { "not approved" };
        println!("{name}: bar {}, drafts {} -> {verdict}", review.bar, drafts.join(", "));
    }
    Ok(())
}
