//! `cargo run --example agent_runtime`: see `cairn_examples::agent_runtime`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

/// `lock by task, ...`, or `none`.
fn locks(held: &[(String, String)]) -> String {
    if held.is_empty() {
        return "none".to_owned();
    }
    held.iter().map(|(lock, owner)| format!("{lock} by {owner}")).collect::<Vec<_>>().join(", ")
}

/// `1, 2, 3`.
fn steps(progress: &[u32]) -> String {
    progress.iter().map(u32::to_string).collect::<Vec<_>>().join(", ")
}

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
    let c = &s.cache;
    println!(
        "  cache: {} hits, {} misses, {} expired, {} evicted",
        c.hits, c.misses, c.expired, c.evicted
    );
    let w = &s.written;
    println!("written: {} -> {} (progress {})", w.task, w.article.path, steps(&w.progress));
    let t = &w.telemetry;
    let models: Vec<String> =
        t.by_model.iter().map(|(m, u)| format!("{m}: {} tokens", u.tokens)).collect();
    println!(
        "  tokens {} ({}), cost {} micros, {} tool calls, {} steps; locks after: {}",
        t.tokens,
        models.join(", "),
        t.cost_micros,
        t.tool_calls,
        t.steps,
        locks(&w.locks_after)
    );
    println!("{}", w.file);
    let c = &s.cancelled;
    let seen: Vec<String> = c.chunks_seen.iter().map(|chunk| format!("\"{chunk}\"")).collect();
    println!(
        "cancelled: {} after reading {} (progress {}) -> {}",
        c.task,
        seen.join(" "),
        steps(&c.progress),
        c.status
    );
    println!(
        "  locks while writing: {}; after: {}",
        locks(&c.locks_while_writing),
        locks(&c.locks_after)
    );
    let x = &s.restarted;
    println!(
        "after the crash: resumable {}; locks {}",
        x.resumable.join(", "),
        locks(&x.locks_after_restart)
    );
    let calls: Vec<String> =
        x.model_calls_after_restart.iter().map(|(purpose, n)| format!("{purpose} x{n}")).collect();
    println!(
        "  resumed -> {} (progress {}, model calls after the restart: {}); same article as without a crash: {}",
        x.resumed_status,
        steps(&x.progress),
        calls.join(", "),
        if x.resumed == x.uninterrupted { "yes" } else { "no" }
    );
    println!("  abandoned -> {}; locks at the end: {}", x.abandoned_status, locks(&x.locks_after));
    let st = &s.stalled;
    println!(
        "watchdog: {} stalled holding {} -> {} ({}); locks after: {}",
        st.task,
        locks(&st.locks_while_stalled),
        st.status,
        st.error.as_deref().unwrap_or("no error"),
        locks(&st.locks_after)
    );
    Ok(())
}
