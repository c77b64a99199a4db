//! `cairn events THREAD` (a thread's log, optionally followed live) and `cairn trace ID`
//! (messages that carry one correlation id, across threads).

use std::sync::Arc;
use std::time::Duration;

use cairn_dsl::DynWorkflow;
use cairn_storage::EventKind;
use serde_json::Value;

use super::common::{Common, open_read_only, print_json, print_text, record_of};
use super::table::{Table, cut, time};
use crate::debug::views::{events_after, messages};

/// Arguments of `cairn events`.
#[derive(Debug, clap::Args)]
pub struct EventsArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id.
    thread: String,
    /// Only events after this seq.
    #[arg(long, default_value_t = 0)]
    since: u64,
    /// Only events of these kinds (repeatable), e.g. node_completed, tool_returned.
    #[arg(long)]
    kind: Vec<EventKind>,
    /// Keep printing new events (polling a read-only snapshot) until the thread ends or Ctrl-C;
    /// with --json, one JSON object per line.
    #[arg(long)]
    follow: bool,
    /// How often --follow looks for new events, in ms.
    #[arg(long, default_value_t = 500, hide = true)]
    poll_ms: u64,
}

/// Arguments of `cairn trace`.
#[derive(Debug, clap::Args)]
pub struct TraceArgs {
    #[command(flatten)]
    common: Common,
    /// The correlation id the messages carry.
    correlation_id: String,
}

fn event_row(table: &mut Table, e: &Value) {
    table.row(vec![
        e["seq"].to_string(),
        time(e["at_ms"].as_u64().unwrap_or(0)),
        e["kind"].as_str().unwrap_or("").to_owned(),
        e["node"].as_str().unwrap_or("").to_owned(),
        e["status"].as_str().unwrap_or("").to_owned(),
        cut(e["summary"].as_str().unwrap_or(""), 100),
    ]);
}

const EVENT_HEADERS: [&str; 6] = ["SEQ", "TIME", "KIND", "NODE", "STATUS", "SUMMARY"];

pub(super) async fn events(args: EventsArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let engine = open_read_only(&args.common.db, wfs).await?;
    let record = record_of(&engine, &args.thread)?;
    // Pruned events are gone: start at the first stored one rather than fail.
    let first_kept = record.first_seq.0.saturating_sub(1);
    let pruned = args.since < first_kept;
    let since = if pruned { first_kept } else { args.since };
    let (rows, mut last) =
        events_after(engine.store().as_ref(), &record.id, since, &args.kind, usize::MAX)?;
    if !args.follow {
        if args.common.json {
            return print_json(&rows);
        }
        if pruned {
            // Said where people read it, not in a log line they may never see.
            print_text(&format!(
                "the log of {} before seq {} was pruned; its stored log starts there \
                 (`cairn state {}` restores the thread from its checkpoint)",
                record.id, record.first_seq.0, record.id
            ));
        }
        let mut table = Table::new(&EVENT_HEADERS);
        for e in &rows {
            event_row(&mut table, e);
        }
        print_text(&table.render());
        return Ok(());
    }
    // Follow: print as we go, then poll fresh snapshots (a read-only snapshot does not see later
    // commits) until the thread reaches a terminal status.
    let print = |rows: &[Value], header: bool| {
        if args.common.json {
            for e in rows {
                print_text(&e.to_string());
            }
        } else {
            let mut table = Table::new(&EVENT_HEADERS);
            for e in rows {
                event_row(&mut table, e);
            }
            let text = table.render();
            let lines: Vec<&str> = text.lines().skip(usize::from(!header)).collect();
            if !lines.is_empty() {
                print_text(&lines.join("\n"));
            }
        }
    };
    print(&rows, true);
    let mut status = record.status;
    drop(engine);
    while !status.is_terminal() {
        tokio::time::sleep(Duration::from_millis(args.poll_ms)).await;
        let engine = open_read_only(&args.common.db, wfs).await?;
        let record = record_of(&engine, &args.thread)?;
        status = record.status;
        let (rows, seen) =
            events_after(engine.store().as_ref(), &record.id, last, &args.kind, usize::MAX)?;
        last = seen;
        print(&rows, false);
    }
    Ok(())
}

pub(super) async fn trace(args: TraceArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let engine = open_read_only(&args.common.db, wfs).await?;
    let found = messages(engine.store().as_ref(), &args.correlation_id)?;
    if args.common.json {
        return print_json(&found);
    }
    if found.is_empty() {
        print_text(&format!("no messages carry correlation id {}", args.correlation_id));
        return Ok(());
    }
    let mut table = Table::new(&["LSN", "TIME", "THREAD", "SEQ", "NODE", "FROM", "TO", "CONTENT"]);
    for m in &found {
        table.row(vec![
            m["lsn"].to_string(),
            time(m["at_ms"].as_u64().unwrap_or(0)),
            m["thread"].as_str().unwrap_or("").to_owned(),
            m["seq"].to_string(),
            m["node"].as_str().unwrap_or("").to_owned(),
            m["role"].as_str().unwrap_or("").to_owned(),
            m["to"].as_str().unwrap_or("").to_owned(),
            cut(m["content"].as_str().unwrap_or(""), 80),
        ]);
    }
    print_text(&table.render());
    Ok(())
}
