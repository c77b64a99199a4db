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
    let counts = |pairs: Vec<(String, usize)>| -> String {
        pairs.into_iter().map(|(k, n)| format!("{k} {n}")).collect::<Vec<_>>().join(", ")
    };
    println!(
        "by status:  {}",
        counts(out.by_status.iter().map(|(s, n)| (s.to_string(), *n)).collect())
    );
    println!(
        "by outcome: {}",
        counts(out.by_outcome.iter().map(|(o, n)| (o.to_string(), *n)).collect())
    );
    println!("most attempts in flight at once: {}", out.max_in_flight);
    Ok(())
}
