//! `cargo run --example order_search`: see `cairn_examples::order_search`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::order_search::run(&dir.path().join("orders.db")).await?;
    println!("customer c-2, waiting for payment: {:?}", s.c2_waiting);
    println!("stage shipping: {:?}", s.shipping);
    Ok(())
}
