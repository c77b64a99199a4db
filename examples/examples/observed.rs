//! `cargo run --example observed`: see `cairn_examples::observed`. Runs the orders, prints the
//! engine's spans and events to stdout as they happen, says where its web view is, and serves it
//! until Ctrl-C (`OBSERVED_ADDR=127.0.0.1:8700` picks the address; any free port by default).
#![allow(clippy::print_stdout, reason = "an example prints its result")]

use tracing_subscriber::fmt::format::FmtSpan;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    // Tracing to stdout: the engine's spans (thread, step, node attempt, tool call, group
    // commit) as they close, at info and above unless RUST_LOG says otherwise.
    let filter = tracing_subscriber::EnvFilter::try_from_default_env()
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_writer(std::io::stdout)
        .with_env_filter(filter)
        .with_span_events(FmtSpan::CLOSE)
        .init();
    let addr = std::env::var("OBSERVED_ADDR").unwrap_or_else(|_| "127.0.0.1:0".to_owned());
    let dir = tempfile::tempdir()?;
    let (engine, server, seen) =
        cairn_examples::observed::start(&dir.path().join("observed.db"), addr.parse()?).await?;
    println!("completed: {} orders; waiting for approval: {}", seen.completed, seen.waiting);
    println!("payment attempts retried: {}", seen.payment_failures);
    let steps = seen.metrics.lines().find(|l| l.starts_with("cairn_steps_total"));
    println!("metrics: {}", steps.unwrap_or("(no steps recorded)"));
    println!("web view: http://{}/ui/threads", seen.address);
    if let Some(file) = server.token_file() {
        println!("controls token: {}", file.display());
    }
    println!("Ctrl-C stops it");
    tokio::signal::ctrl_c().await?;
    server.shutdown().await;
    engine.shutdown().await;
    Ok(())
}
