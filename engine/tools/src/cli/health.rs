//! `cairn health`: the engine's health report for a database file (stuck threads, locks held
//! past their time to live, signals waiting that no node took; slow commits are an engine's own, so none read from the file, and
//! the running engine's through its endpoint), as text or JSON; exit 5 when something needs
//! attention.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;

use super::EXIT_UNHEALTHY;
use super::common::{Common, fail, open_read_only, print_json, print_text};
use super::endpoint;
use crate::serve::wire;
use cairn::telemetry::HealthReport;

/// Arguments of `cairn health`.
#[derive(Debug, clap::Args)]
pub struct HealthArgs {
    #[command(flatten)]
    common: Common,
    /// A running thread with no step for longer than this is stuck, in ms.
    #[arg(long, default_value_t = cairn::Config::default().watchdog_ms)]
    watchdog_ms: u64,
}

pub(super) async fn health(args: HealthArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    // The running engine's own report (its slow commits included), for this watchdog.
    let found = endpoint::through(&args.common.db, |ep| {
        let query = [("watchdog_ms", args.watchdog_ms.to_string())];
        Ok(wire::read::<HealthReport>(ep.get("/api/health", &query)?, "health report")?)
    })?;
    let report = match found {
        Some(report) => report,
        None => {
            let engine = open_read_only(&args.common.db, wfs).await?;
            engine.health_with_watchdog(args.watchdog_ms).await?
        }
    };
    if args.common.json {
        print_json(&report)?;
    } else {
        print_text(&text(&report));
    }
    if report.ok { Ok(()) } else { Err(fail(EXIT_UNHEALTHY, "attention needed: see the report")) }
}

fn text(report: &HealthReport) -> String {
    let mut out = String::new();
    let verdict = if report.ok { "ok" } else { "attention needed" };
    out.push_str(&format!("health: {verdict}\n"));
    let threads: Vec<String> = report
        .threads
        .iter()
        .filter(|(_, n)| **n > 0)
        .map(|(status, n)| format!("{status} {n}"))
        .collect();
    let threads = if threads.is_empty() { "none".to_owned() } else { threads.join(", ") };
    out.push_str(&format!("threads: {threads}\n"));
    out.push_str(&format!(
        "stuck threads (running, no step for over {} ms): {}\n",
        report.watchdog_ms, report.stuck_threads
    ));
    for s in &report.stuck {
        out.push_str(&format!(
            "  {}  {} v{}  idle {} ms\n",
            s.thread, s.workflow, s.version, s.idle_ms
        ));
    }
    out.push_str(&format!("locks held past their ttl: {}\n", report.expired_locks));
    for l in &report.expired {
        out.push_str(&format!(
            "  {}  held by {}  expired {} ms ago\n",
            l.name, l.holder, l.expired_ms
        ));
    }
    out.push_str(&format!(
        "signals no node took (waiting over {} ms): {}\n",
        report.signal_backlog_ms, report.signal_backlog
    ));
    for b in &report.backlogged {
        out.push_str(&format!(
            "  {}  {}  {} signals ({})  oldest {} ms\n",
            b.thread,
            b.workflow,
            b.signals,
            b.names.join(", "),
            b.oldest_ms
        ));
    }
    let c = &report.commits;
    out.push_str(&format!(
        "slow commits (over {} ms): {} since the last pass, {} in all, slowest {} us\n",
        c.slow_commit_ms, c.slow_recent, c.slow_total, c.slowest_us
    ));
    if let Some(r) = &report.resources {
        if let Some(d) = &r.disk {
            let short = if d.is_short() { " (short)" } else { "" };
            out.push_str(&format!(
                "disk of {}: {} of {} bytes free{short}\n",
                d.path, d.free_bytes, d.total_bytes
            ));
        }
        if let Some(m) = r.memory_bytes {
            let max = r.memory_max_bytes.map(|b| format!(" (bound {b})")).unwrap_or_default();
            out.push_str(&format!("memory: {m} bytes resident{max}\n"));
        }
    }
    for action in &report.actions {
        out.push_str(&format!("to do: {action}\n"));
    }
    out
}
