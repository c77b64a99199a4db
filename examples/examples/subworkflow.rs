//! `cargo run --example subworkflow`: see `cairn_examples::subworkflow`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let out = cairn_examples::subworkflow::run(&dir.path().join("subworkflow.db")).await?;
    let (order, children) = out;
    let items: Vec<String> = order.items.iter().map(u64::to_string).collect();
    println!("items (cents): {}", items.join(", "));
    println!(
        "total with tax: {} cents; shipped: {}",
        order.total,
        if order.shipped { "yes" } else { "no" }
    );
    for child in &children {
        println!("  child thread {child}");
    }
    Ok(())
}
