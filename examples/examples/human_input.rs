//! `cargo run --example human_input`: see `cairn_examples::human_input`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::human_input::run(&dir.path().join("approvals.db")).await?;
    let statuses = |threads: &[(String, cairn::ThreadStatus)]| -> String {
        threads.iter().map(|(t, st)| format!("{t} {st}")).collect::<Vec<_>>().join(", ")
    };
    println!("before the restart: {}", statuses(&s.before_restart));
    println!("after the restart:  {}", statuses(&s.after_restart));
    println!("the question asked: {}", s.prompt);
    let decision = |e: &cairn_examples::human_input::Expense| match &e.decision {
        Some(d) => format!(
            "{} by {} ({})",
            if d.approved { "approved" } else { "rejected" },
            d.approver,
            d.note
        ),
        None => "no decision".to_owned(),
    };
    println!(
        "{}: {} -> transfer {}",
        s.approved.id,
        decision(&s.approved),
        s.approved.transfer.as_deref().unwrap_or("none")
    );
    println!(
        "{}: {} -> {}",
        s.rejected.id,
        decision(&s.rejected),
        s.rejected.notice.as_deref().unwrap_or("no notice")
    );
    println!("a second answer to a paid report: {}", s.late_answer_error);
    Ok(())
}
