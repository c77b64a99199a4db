//! `cargo run --example agent_runtime`: see `cairn_examples::agent_runtime`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let dir = tempfile::tempdir()?;
    let s = cairn_examples::agent_runtime::run(&dir.path().join("agent.db")).await?;
    println!("routing:");
    for r in &s.routed {
        let i = &r.intent;
        let skill = i.skill.as_deref().unwrap_or("(ask the user)");
        let cached = if i.cached { " [cached]" } else { "" };
        println!(
            "  {:<7} {:<14} {:.2} via {:<7} -> {skill}{cached}",
            r.task, i.intent, i.confidence, i.source
        );
    }
    println!("  cache: {:?}", s.cache);
    let w = &s.written;
    println!("written: {} -> {} (progress {:?})", w.task, w.article.path, w.progress);
    println!(
        "  tokens {} cost {} micros, {} tool calls, {} steps; locks after: {:?}",
        w.telemetry.tokens,
        w.telemetry.cost_micros,
        w.telemetry.tool_calls,
        w.telemetry.steps,
        w.locks_after
    );
    println!("{}", w.file);
    let c = &s.cancelled;
    println!(
        "cancelled: {} after {:?} (progress {:?}) -> {}",
        c.task, c.chunks_seen, c.progress, c.status
    );
    println!("  locks while writing {:?}, after {:?}", c.locks_while_writing, c.locks_after);
    let x = &s.restarted;
    println!("after the crash: resumable {:?}, locks {:?}", x.resumable, x.locks_after_restart);
    println!(
        "  resumed -> {} (progress {:?}, model calls after restart {:?}); same article as without a crash: {}",
        x.resumed_status,
        x.progress,
        x.model_calls_after_restart,
        x.resumed == x.uninterrupted
    );
    println!("  abandoned -> {}; locks at the end {:?}", x.abandoned_status, x.locks_after);
    Ok(())
}
