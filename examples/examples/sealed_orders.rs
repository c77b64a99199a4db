//! `cargo run --example sealed_orders`: see `cairn_examples::sealed_orders`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::sealed_orders::run(&dir.path().join("sealed.db")).await?;
    println!("order-1 (sealed with k1, read after the rotation): {:?}", s.first);
    println!("order-2 (sealed with k2):                          {:?}", s.second);
    println!("card number in the file in the clear: {}", s.card_in_file);
    println!("order-1 opened without a key: {}", s.without_key);
    Ok(())
}
