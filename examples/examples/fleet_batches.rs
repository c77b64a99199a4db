//! `cargo run --example fleet_batches`: see `cairn_examples::fleet_batches`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::fleet_batches::run(&dir.path().join("fleet.db")).await?;
    let [eu, us, failed] = s.counted;
    println!("dry runs: {eu} EU orders waiting, {us} US orders waiting, {failed} failed");
    for (name, p) in ["signal paid (EU)", "cancel (US)", "reset failed"].iter().zip(&s.batches) {
        println!(
            "{name}: {} of {} done, {} applied, {} skipped",
            p.done, p.total, p.applied, p.skipped
        );
    }
    for (id, status) in &s.statuses {
        println!("{id}: {status:?}");
    }
    Ok(())
}
