//! `cargo run --example streaming_agent`: see `cairn_examples::streaming_agent`. Without
//! arguments it runs two reviews on its own (one approved, one escalated at its deadline) and
//! prints them. With `--serve` it serves the live stream page for a person: it prints the
//! page's address, starts a review a few seconds later (so the page is open for the first
//! token), and waits for the Approve button, the 2-minute deadline or Ctrl-C
//! (`STREAMING_ADDR=127.0.0.1:8700` picks the address; any free port by default).
#![allow(clippy::print_stdout, reason = "an example prints its result")]

use cairn_examples::streaming_agent::{self as agent, Pace, Review};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let db = dir.path().join("streaming.db");
    if std::env::args().any(|a| a == "--serve") {
        return serve(&db).await;
    }
    let seen = agent::run(&db).await?;
    println!("streamed {} tokens: {}", seen.tokens.len(), seen.tokens.concat());
    let (status, review) = &seen.approved;
    println!("r-approved: {status}, {:?}", review.decision);
    let (status, review) = &seen.escalated;
    println!("r-late: {status}, {:?} to {:?}", review.decision, review.escalated_to);
    Ok(())
}

async fn serve(db: &std::path::Path) -> anyhow::Result<()> {
    let addr = std::env::var("STREAMING_ADDR").unwrap_or_else(|_| "127.0.0.1:0".to_owned());
    let (engine, server) = agent::open(db, addr.parse()?).await?;
    let pace = Pace { deadline_ms: 120_000, token_ms: 150, delay_ms: 5_000 };
    let review = agent::begin(&engine, "review-1", "What is a lease?", pace).await?;
    println!("open {} (the review starts in 5 s)", agent::page(&server, "review-1"));
    tokio::select! {
        outcome = review.finished() => {
            let review: Review = engine.thread("review-1").await?.output().await?;
            println!("review-1: {}, {:?}", outcome?.status, review.decision);
        }
        r = tokio::signal::ctrl_c() => r?,
    }
    server.shutdown().await;
    engine.shutdown().await;
    Ok(())
}
