//! `cargo run --example order_signals`: see `cairn_examples::order_signals`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::order_signals::run(&dir.path().join("orders.db")).await?;
    println!("o-1 after its first payment: {}", s.after_first_payment);
    println!(
        "o-1: paid {:?}, shipped with {}",
        s.shipped.payments,
        s.shipped.tracking.as_deref().unwrap_or("nothing")
    );
    println!("o-2: cancelled ({})", s.cancelled.cancelled.as_deref().unwrap_or("?"));
    println!("a payment that is not one: {}", s.wrong_type_error);
    println!("a payment to the finished o-1: {}", s.late_signal_error);
    Ok(())
}
