//! `cargo run --example human_input`: see `cairn_examples::human_input`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::human_input::run(&dir.path().join("approvals.db")).await?;
    println!("before the restart: {:?}", s.before_restart);
    println!("after the restart:  {:?}", s.after_restart);
    println!("the question asked: {}", s.prompt);
    println!("approved: {:?} -> transfer {:?}", s.approved.decision, s.approved.transfer);
    println!("rejected: {:?} -> {:?}", s.rejected.decision, s.rejected.notice);
    println!("a second answer to a paid report: {}", s.late_answer_error);
    Ok(())
}
