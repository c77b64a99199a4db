//! `cargo run --example job_engine`: see `cairn_examples::job_engine`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = cairn_examples::job_engine::run(&dir.path().join("jobs.db")).await?;
    for row in &out.rows {
        let result = row.result.map(|r| r.to_string()).unwrap_or_default();
        let error = row.error.as_deref().unwrap_or("");
        println!(
            "job {:>3}  {:<10} {:<15} attempts {} timeouts {}  {result:>4} {error}",
            row.n,
            row.status.as_str(),
            row.outcome,
            row.attempts,
            row.timeouts
        );
    }
    println!("by status:  {:?}", out.by_status);
    println!("by outcome: {:?}", out.by_outcome);
    println!("most attempts in flight at once: {}", out.max_in_flight);
    Ok(())
}
