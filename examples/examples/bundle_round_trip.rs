//! `cargo run --example bundle_round_trip`: see `cairn_examples::bundle_round_trip`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::bundle_round_trip::run(
        &dir.path().join("machine-one.db"),
        &dir.path().join("machine-two.db"),
        &dir.path().join("ticket-7.bundle.json.gz"),
    )
    .await?;
    println!("exported ticket-7: {} events in a {} byte gzip bundle", s.events, s.bundle_bytes);
    println!("the API key anywhere in the bundle: {}", if s.key_in_bundle { "yes" } else { "no" });
    println!("imported on another database: {}", s.imported.answer);
    println!(
        "replayed against the code: {} ({} tasks compared)",
        if s.replay_agrees { "agrees with its record" } else { "DIVERGES" },
        s.tasks_replayed
    );
    println!("forked after the classification, friendlier: {}", s.fork.answer);
    Ok(())
}
