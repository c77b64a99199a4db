//! `cargo run --example scheduled_reports`: see `cairn_examples::scheduled_reports`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::scheduled_reports::run(&dir.path().join("reports.db")).await?;
    println!("first week, reports started per schedule: {:?}", s.first_week);
    println!("acme's first report started at {} Berlin time", s.acme_first_local);
    println!("down until Wednesday noon; on waking, started: {:?}", s.caught_up);
    println!("missed ticks skipped by the catch-up policy: {:?}", s.skipped);
    println!("{} report threads, all {:?}", s.statuses.len(), s.statuses.first());
    Ok(())
}
