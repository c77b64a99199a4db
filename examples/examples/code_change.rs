//! `cargo run --example code_change`: see `cairn_examples::code_change`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::code_change::run(&dir.path().join("quotes.db")).await?;
    println!("before the code changed: {}", s.parked);
    println!("replay against the changed code: {}", s.divergence);
    println!("the approval arrives: {} ({})", s.after_answer, s.blocked_because);
    let q = &s.quote;
    println!(
        "migrated to v2 and resumed: {}; {} items, {} {}.{:02}, approved by {}",
        s.finished,
        q.items,
        q.currency,
        q.price_cents / 100,
        q.price_cents % 100,
        q.approved_by.as_deref().unwrap_or("nobody")
    );
    Ok(())
}
