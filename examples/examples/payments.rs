//! `cargo run --example payments`: see `cairn_examples::payments`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let shown = cairn_examples::payments::run(&dir.path().join("payments.db")).await?;
    for checkout in &shown.checkouts {
        for charge in &checkout.charges {
            println!("{:<18} {:>8} cents  {}", charge.purpose, charge.amount_cents, charge.id);
        }
    }
    let ledger = &shown.ledger;
    println!(
        "payment service: {} requests, {} deduplicated by key, {} double charges",
        ledger.requests,
        ledger.deduplicated,
        ledger.double_charges()
    );
    Ok(())
}
