//! `cargo run --example budgets`: see `cairn_examples::budgets`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::budgets::run(&dir.path().join("crawl.db")).await?;
    for (kind, budget, used, limit) in &s.budget_events {
        println!("budget {kind}: {budget} {used} of {limit}");
    }
    println!("stopped {} after {} pages", s.stopped, s.fetched_when_stopped);
    println!(
        "budget raised to {}, resumed: {} ({})",
        cairn_examples::budgets::RAISED_BUDGET,
        s.finished,
        s.crawl.report.as_deref().unwrap_or("no report")
    );
    for page in &s.crawl.fetched {
        println!("  {page}");
    }
    Ok(())
}
