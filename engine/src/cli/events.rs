//! `cairn events THREAD` (a thread's log, optionally followed live) and `cairn trace ID`
//! (messages that carry one correlation id, across threads).

use std::sync::Arc;
use std::time::Duration;

use cairn_dsl::DynWorkflow;
use cairn_storage::{Event, EventKind, Lsn, Seq, Store, ThreadId};
use serde_json::{Value, json};

use super::common::{Common, open_read_only, print_json, print_text, record_of};
use super::table::{Table, cut, time};
use crate::core::codec::{decode, decode_announced};
use crate::core::event::Body;
use crate::limits::READ_CHUNK_EVENTS;

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

/// One event as the CLI prints it (and as `--json` gives it).
fn event_json(store: &dyn Store, event: Event) -> anyhow::Result<Value> {
    let head = json!({
        "seq": event.bookmark.seq.0,
        "lsn": event.bookmark.lsn.0,
        "at_ms": event.bookmark.at_ms,
        "kind": event.kind.as_str(),
        "node": event.node,
        "status": event.status.as_str(),
        "summary": event.summary,
    });
    let body = decode_announced(store, event)?.body;
    let mut head = head;
    head["body"] = serde_json::to_value(&body)?;
    Ok(head)
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

/// Reads the events of `thread` after `after` that pass `kinds`, decoded; returns them and the
/// last seq read (matching or not).
fn read_after(
    store: &dyn Store,
    thread: &ThreadId,
    mut after: u64,
    kinds: &[EventKind],
) -> anyhow::Result<(Vec<Value>, u64)> {
    let mut out = Vec::new();
    loop {
        let events = store.read_since(thread, Seq(after), READ_CHUNK_EVENTS)?;
        let n = events.len();
        for event in events {
            after = event.bookmark.seq.0;
            if kinds.is_empty() || kinds.contains(&event.kind) {
                out.push(event_json(store, event)?);
            }
        }
        if n < READ_CHUNK_EVENTS {
            return Ok((out, after));
        }
    }
}

pub(super) async fn events(args: EventsArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let engine = open_read_only(&args.common.db, wfs).await?;
    let record = record_of(&engine, &args.thread)?;
    // Pruned events are gone: start at the first stored one rather than fail.
    let first_kept = record.first_seq.0.saturating_sub(1);
    let pruned = args.since < first_kept;
    let since = if pruned { first_kept } else { args.since };
    let (rows, mut last) = read_after(engine.store().as_ref(), &record.id, since, &args.kind)?;
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
        let (rows, seen) = read_after(engine.store().as_ref(), &record.id, last, &args.kind)?;
        last = seen;
        print(&rows, false);
    }
    Ok(())
}

pub(super) async fn trace(args: TraceArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let engine = open_read_only(&args.common.db, wfs).await?;
    let store = engine.store().as_ref();
    let mut after = 0u64;
    let mut found = Vec::new();
    loop {
        let events = store.read_all_since(Lsn(after), READ_CHUNK_EVENTS)?;
        let n = events.len();
        for event in events {
            after = event.bookmark.lsn.0;
            if event.kind != EventKind::Message {
                continue;
            }
            let rec = decode(store, event)?;
            let Body::Message { task, message } = rec.body else { continue };
            if message.correlation_id.as_deref() != Some(args.correlation_id.as_str()) {
                continue;
            }
            found.push(json!({
                "lsn": rec.bookmark.lsn.0,
                "thread": rec.thread.as_str(),
                "seq": rec.bookmark.seq.0,
                "at_ms": rec.bookmark.at_ms,
                "node": task.to_string(),
                "role": message.role,
                "to": message.to,
                "content": message.content,
            }));
        }
        if n < READ_CHUNK_EVENTS {
            break;
        }
    }
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
