//! `cargo run --example overlapping_schedules`: see `cairn_examples::overlapping_schedules`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::overlapping_schedules::run(&dir.path().join("imports.db")).await?;
    let [skip, buffer] = &s.overlapped;
    println!("three ticks, first import still running: skip {skip:?}; buffer_one {buffer:?}");
    let [skip, buffer] = &s.after;
    println!("first imports answered: skip {skip:?}; buffer_one {buffer:?}");
    println!("buffer_one's runs: {:?}", s.buffer_runs);
    println!(
        "backfilled nights (tick ms): {:?}; a repeat started {}",
        s.backfilled.0, s.backfilled.1
    );
    Ok(())
}
