//! `cargo run --example vat_patch`: see `cairn_examples::vat_patch`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

use cairn_examples::vat_patch::PATCH;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::vat_patch::run(&dir.path().join("checkout.db")).await?;
    println!("orders that still need the code before patch {PATCH}: {:?}", s.unpatched);
    println!("old-1 (priced before the change): gross {} cents, {}", s.old.gross, s.statuses[0]);
    println!("new-1 (priced after the change):  gross {} cents, {}", s.new.gross, s.statuses[1]);
    println!("replays diverged: old-1 {}, new-1 {}", s.diverged[0], s.diverged[1]);
    Ok(())
}
