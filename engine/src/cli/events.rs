//! `cairn events THREAD` (a thread's log, optionally followed live) and `cairn trace [ID]`
//! (conversation messages through `Engine::trace`: by correlation id, session, parties, time, chain).

use std::sync::Arc;
use std::time::Duration;

use cairn_dsl::DynWorkflow;
use cairn_storage::EventKind;
use serde_json::{Value, json};

use super::common::{Common, open_read_only, print_json, print_text, record_of};
use super::table::{Table, cut, time};
use crate::debug::views::events_after;
use crate::debug::{TraceQuery, TraceScope};

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
    /// Only messages carrying this correlation id.
    correlation_id: Option<String>,
    /// Only this session: the thread and its sub-workflow threads (repeatable; default: every
    /// thread, read through the database's correlation index when a correlation id is given
    /// without --chain, else the whole log).
    #[arg(long)]
    thread: Vec<String>,
    /// Only messages between these two parties, either way (a role, node or thread, and an
    /// addressee).
    #[arg(long, num_args = 2, value_names = ["A", "B"])]
    between: Vec<String>,
    /// Only messages written at or after this engine-clock time (ms since the epoch).
    #[arg(long)]
    from_ms: Option<u64>,
    /// Only messages written at or before this time.
    #[arg(long)]
    to_ms: Option<u64>,
    /// The chain of parent ids ending at the message with this id, first message first.
    #[arg(long)]
    chain: Option<String>,
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
    let scope =
        if args.thread.is_empty() { TraceScope::All } else { TraceScope::Threads(args.thread) };
    let mut query = TraceQuery::new(scope);
    query.correlation_id.clone_from(&args.correlation_id);
    if let [a, b] = &args.between[..] {
        query.between = Some((a.clone(), b.clone()));
    }
    (query.from_ms, query.to_ms, query.chain_to) = (args.from_ms, args.to_ms, args.chain);
    let found: Vec<Value> = engine
        .trace(&query)?
        .into_iter()
        .map(|m| {
            json!({
                "lsn": m.lsn,
                "thread": m.thread,
                "seq": m.seq,
                "at_ms": m.at_ms,
                "node": m.task.to_string(),
                "role": m.message.role,
                "to": m.message.to,
                "content": m.message.content,
                "correlation_id": m.message.correlation_id,
                "id": m.message.id,
                "parent": m.message.parent,
            })
        })
        .collect();
    if args.common.json {
        return print_json(&found);
    }
    if found.is_empty() {
        print_text(&match &args.correlation_id {
            Some(id) => format!("no messages carry correlation id {id}"),
            None => "no messages match".to_owned(),
        });
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
