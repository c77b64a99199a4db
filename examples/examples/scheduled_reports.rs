//! `cargo run --example scheduled_reports`: see `cairn_examples::scheduled_reports`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::scheduled_reports::run(&dir.path().join("reports.db")).await?;
    println!("first week, reports started per schedule: {}", per(&s.first_week));
    println!("acme's first report started at {} Berlin time", s.acme_first_local);
    println!("down until Wednesday noon; on waking, started: {}", per(&s.caught_up));
    println!("missed ticks skipped by the catch-up policy: {}", per(&s.skipped));
    let mut statuses = std::collections::BTreeMap::new();
    for status in &s.statuses {
        *statuses.entry(status.to_string()).or_insert(0_usize) += 1;
    }
    println!("{} report threads: {}", s.statuses.len(), per(&statuses));
    Ok(())
}

/// `name count, name count, ...` (or `none`).
fn per<N: std::fmt::Display>(counts: &std::collections::BTreeMap<String, N>) -> String {
    if counts.is_empty() {
        return "none".into();
    }
    counts.iter().map(|(name, n)| format!("{name} {n}")).collect::<Vec<_>>().join(", ")
}
