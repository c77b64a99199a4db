//! `cargo run --example order_events`: see `cairn_examples::order_events`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::order_events::run(&dir.path().join("orders.db")).await?;
    println!("{} deliveries created {} threads, once per event id:", s.deliveries, s.created);
    for (thread, done) in &s.threads {
        println!("  {thread}: {done}");
    }
    Ok(())
}
