//! `cairn events THREAD` (a thread's log, optionally followed live) and `cairn trace [ID]`
//! (conversation messages through `Operator::trace`: by correlation id, session, parties, time, chain).

use std::sync::Arc;
use std::time::Duration;

use cairn_dsl::DynWorkflow;
use cairn_storage::{EventKind, ThreadStatus};

use super::EXIT_FAILED;
use super::common::{Common, fail, open_read_only, print_json, print_text, record_of, usage};
use super::endpoint;
use super::table::{Table, cut, time};
use crate::debug::rows::{ChainStates, EventRow, EventsPage, MessageRow, Traced};
use crate::debug::views::{events_after, message_row};
use crate::debug::{TraceQuery, TraceScope};
use crate::limits::SERVE_PAGE_MAX;
use crate::serve::wire;

/// Arguments of `cairn events`.
#[derive(Debug, clap::Args)]
pub struct EventsArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id.
    #[arg(value_parser = super::common::parse_thread_id)]
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
    #[arg(long, value_parser = super::common::parse_thread_id)]
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
    /// With --chain: each message and the state of its thread right after it (a step-through
    /// of the chain, read from the file).
    #[arg(long, requires = "chain")]
    states: bool,
}

/// The events as an aligned table, headers first.
fn events_table(rows: &[EventRow]) -> String {
    let mut table = Table::new(&["SEQ", "TIME", "KIND", "NODE", "STATUS", "SUMMARY"]);
    for e in rows {
        table.row(vec![
            e.seq.to_string(),
            time(e.at_ms),
            e.kind.clone(),
            e.node.clone().unwrap_or_default(),
            e.status.clone(),
            cut(&e.summary, 100),
        ]);
    }
    table.render()
}

/// Where a thread's log is read: the live store through an endpoint, or a snapshot of the file.
enum Log {
    Through(endpoint::Endpoint),
    File,
}

/// A read of a thread's log after a seq: the events (all of them from there), the last seq read,
/// the thread's status as read before them, and the seq before its first stored event.
struct Read {
    rows: Vec<EventRow>,
    last: u64,
    status: ThreadStatus,
    first_kept: u64,
}

impl Log {
    /// [`Log::read`], from the file from now on once the endpoint has gone away (its engine
    /// stopped, so the file is no longer written).
    async fn read_any(
        &mut self,
        args: &EventsArgs,
        wfs: &[Arc<DynWorkflow>],
        since: u64,
    ) -> anyhow::Result<Read> {
        match self.read(args, wfs, since).await {
            Err(e) if endpoint::is_gone(&e) => {
                *self = Log::File;
                self.read(args, wfs, since).await
            }
            read => read,
        }
    }

    /// The events of `thread` after `since` (moved up to the first stored one when pruned).
    async fn read(
        &self,
        args: &EventsArgs,
        wfs: &[Arc<DynWorkflow>],
        since: u64,
    ) -> anyhow::Result<Read> {
        match self {
            Log::File => {
                let engine = open_read_only(&args.common.db, wfs).await?;
                let record = record_of(&engine, &args.thread).await?;
                let first_kept = record.first_seq.0.saturating_sub(1);
                let (rows, last) = events_after(
                    &engine,
                    &record.id,
                    since.max(first_kept),
                    &args.kind,
                    usize::MAX,
                )
                .await?;
                Ok(Read { rows, last, status: record.status, first_kept })
            }
            Log::Through(ep) => {
                let path = format!("/api/threads/{}/events", endpoint::segment(&args.thread));
                let kinds: Vec<&str> = args.kind.iter().map(|k| k.as_str()).collect();
                let mut rows = Vec::new();
                let mut after = since;
                // The status of the first page: read before any of the events.
                let mut first: Option<(ThreadStatus, u64)> = None;
                loop {
                    let mut query =
                        vec![("since", after.to_string()), ("limit", SERVE_PAGE_MAX.to_string())];
                    query.extend((!kinds.is_empty()).then(|| ("kind", kinds.join(","))));
                    let page: EventsPage = wire::read(ep.get(&path, &query)?, "page of events")?;
                    if first.is_none() {
                        let status = page.status.parse::<ThreadStatus>().map_err(|_| {
                            let status = &page.status;
                            fail(EXIT_FAILED, format!("the endpoint gave no status ({status:?})"))
                        })?;
                        first = Some((status, page.first_seq.saturating_sub(1)));
                    }
                    let full = page.events.len() >= SERVE_PAGE_MAX;
                    rows.extend(page.events);
                    after = page.next_since;
                    if !full {
                        break;
                    }
                }
                let (status, first_kept) = first.unwrap_or((ThreadStatus::Created, 0));
                Ok(Read { rows, last: after, status, first_kept })
            }
        }
    }
}

pub(super) async fn events(args: EventsArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let mut log = endpoint::find(&args.common.db).map_or(Log::File, Log::Through);
    let Read { rows, mut last, status, first_kept } = log.read_any(&args, wfs, args.since).await?;
    // Pruned events are gone: the read started at the first stored one rather than fail, and
    // says so where people read it, not in a log line they may never see.
    if args.since < first_kept {
        say_pruned(&args, first_kept + 1);
    }
    if !args.follow {
        if args.common.json {
            return print_json(&rows);
        }
        print_text(&events_table(&rows));
        return Ok(());
    }
    // Follow: print as we go, then poll (a fresh snapshot of the file, which does not see later
    // commits, or the endpoint) until the thread reaches a terminal status.
    let print = |rows: &[EventRow], header: bool| {
        if args.common.json {
            for e in rows {
                print_text(&serde_json::json!(e).to_string());
            }
        } else {
            let text = events_table(rows);
            let lines: Vec<&str> = text.lines().skip(usize::from(!header)).collect();
            if !lines.is_empty() {
                print_text(&lines.join("\n"));
            }
        }
    };
    print(&rows, true);
    let mut status = status;
    while !status.is_terminal() {
        tokio::time::sleep(Duration::from_millis(args.poll_ms)).await;
        let read = log.read_any(&args, wfs, last).await?;
        (status, last) = (read.status, read.last);
        print(&read.rows, false);
    }
    Ok(())
}

/// Says that the events of the thread before `first` were pruned: a line before the table, or
/// on stderr with `--json` (whose stdout is events only).
#[allow(clippy::print_stderr, reason = "a note beside JSON output goes to stderr")]
fn say_pruned(args: &EventsArgs, first: u64) {
    let thread = &args.thread;
    let note = format!(
        "the events of thread {thread} before seq {first} were pruned; the first available seq \
         is {first} (`cairn state {thread}` restores the thread from its checkpoint)"
    );
    if args.common.json {
        eprintln!("note: {note}");
    } else {
        print_text(&note);
    }
}

pub(super) async fn trace(args: TraceArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    if args.correlation_id.as_deref().is_some_and(|c| c.trim().is_empty()) {
        return Err(usage("the correlation id is empty: give one, or none for every message"));
    }
    if args.states {
        return chain_states(&args, wfs).await;
    }
    let through = endpoint::through(&args.common.db, |ep| {
        Ok(wire::read::<Traced>(ep.get("/api/trace", &trace_pairs(&args))?, "trace")?.messages)
    })?;
    let found: Vec<MessageRow> = match through {
        Some(rows) => rows,
        None => {
            let engine = open_read_only(&args.common.db, wfs).await?;
            let query = trace_query(&args);
            crate::Operator::new(&engine).trace(&query).await?.iter().map(message_row).collect()
        }
    };
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
            m.lsn.to_string(),
            time(m.at_ms),
            m.thread.clone(),
            m.seq.to_string(),
            m.node.clone(),
            m.role.clone(),
            m.to.clone().unwrap_or_default(),
            cut(&m.content, 80),
        ]);
    }
    print_text(&table.render());
    Ok(())
}

/// The query `args` describe, as `GET /api/trace` takes it.
fn trace_pairs(args: &TraceArgs) -> Vec<(&'static str, String)> {
    let mut query: Vec<(&str, String)> = Vec::new();
    query.extend(args.thread.iter().map(|t| ("thread", t.clone())));
    query.extend(args.correlation_id.iter().map(|c| ("correlation_id", c.clone())));
    query.extend(args.between.iter().map(|p| ("between", p.clone())));
    query.extend(args.from_ms.map(|ms| ("from_ms", ms.to_string())));
    query.extend(args.to_ms.map(|ms| ("to_ms", ms.to_string())));
    query.extend(args.chain.iter().map(|c| ("chain", c.clone())));
    query
}

/// The query `args` describe.
fn trace_query(args: &TraceArgs) -> TraceQuery {
    let scope = match args.thread.is_empty() {
        true => TraceScope::All,
        false => TraceScope::Threads(args.thread.clone()),
    };
    let mut query = TraceQuery::new(scope);
    query.correlation_id.clone_from(&args.correlation_id);
    if let [a, b] = &args.between[..] {
        query.between = Some((a.clone(), b.clone()));
    }
    (query.from_ms, query.to_ms, query.chain_to) = (args.from_ms, args.to_ms, args.chain.clone());
    query
}

/// `cairn trace --chain ID --states`: each message of the chain, then its thread's state
/// (through a running engine's endpoint, else from the file).
async fn chain_states(args: &TraceArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let through = endpoint::through(&args.common.db, |ep| {
        let mut query = trace_pairs(args);
        query.push(("states", "1".to_owned()));
        Ok(wire::read::<ChainStates>(ep.get("/api/trace", &query)?, "chain")?.steps)
    })?;
    let steps = match through {
        Some(steps) => steps,
        None => {
            let engine = super::common::open_read_only_or_copy(&args.common.db, wfs).await?;
            crate::Operator::new(&engine).replay_chain(&trace_query(args)).await?
        }
    };
    if args.common.json {
        return print_json(&steps);
    }
    if steps.is_empty() {
        print_text("no message of the chain matches");
        return Ok(());
    }
    let mut out = String::new();
    for (n, step) in steps.iter().enumerate() {
        let m = &step.message;
        let to = m.message.to.as_deref().map(|to| format!(" -> {to}")).unwrap_or_default();
        out.push_str(&format!(
            "{}. {} seq {} ({}{to}): {}\n{}\n",
            n + 1,
            m.thread,
            m.seq,
            m.message.role,
            cut(&m.message.content, 80),
            super::table::pretty(&step.state.state)
        ));
    }
    print_text(out.trim_end());
    Ok(())
}
