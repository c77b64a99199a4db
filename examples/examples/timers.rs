//! `cargo run --example timers`: see `cairn_examples::timers`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

use cairn_examples::timers::{DAY_MS, START_MS};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::timers::run(&dir.path().join("reminders.db")).await?;
    let hours = |ms: u64| (ms - START_MS) as f64 / 3_600_000.0;
    println!("started at hour 0; parked {} until hour {}", s.parked, hours(s.due_ms));
    println!(
        "shut down, reopened at hour {}: still {}",
        hours(START_MS + DAY_MS / 2),
        s.after_reopen
    );
    println!(
        "at hour {} the timer fired: {}, reminder sent at hour {} ({} send)",
        hours(s.due_ms),
        s.finished,
        hours(s.sent_at_ms),
        s.sends
    );
    Ok(())
}
