//! `cairn stream THREAD [--since SEQ]`: a running thread's stream (what its nodes write with
//! `ctx.stream`) printed as it comes, then its final value. The chunks live in the memory of the
//! engine that runs the thread, so they are read through the endpoint serving the file
//! (`GET /api/threads/{id}/stream`, Server-Sent Events): when the connection ends before the
//! thread's end (the engine restarted, say), the command connects again with the seq of the
//! last durable item it printed (`Last-Event-ID`), as the clients do. Without an endpoint, a
//! finished thread's stream is read from the file (its tasks' ends and its own, no chunks); an
//! unfinished one's cannot be, which is said (exit 1).
//!
//! Text: each chunk on its own line (a string as it is, other values as JSON), then the
//! thread's output as JSON; a gap is noted on stderr. `--json`: every item (`chunk`, `gap`,
//! `closed`, `ended`) as one JSON object per line. Exit 0 when the thread completed, 1 when it
//! ended otherwise.

use std::io::{BufRead, BufReader, Read as _};
use std::sync::Arc;
use std::time::Duration;

use cairn_dsl::DynWorkflow;
use futures::StreamExt as _;
use serde_json::Value;

use super::EXIT_FAILED;
use super::common::{Common, fail, open_read_only, print_text, record_of};
use super::endpoint::{self, Endpoint};

/// Times in a row the command connects again after the stream's connection ended without the
/// thread's end (an engine restarting comes back within a few), before it gives up.
const RECONNECTS_MAX: u32 = 20;

/// How long it waits before it connects again, in ms.
const RECONNECT_PAUSE_MS: u64 = 250;

/// Bytes of one line of the event stream: a chunk is at most 64 KiB of JSON (the engine's
/// `STREAM_CHUNK_BYTES_MAX`); an `ended` item carries the thread's output, as a page would.
const LINE_BYTES_MAX: u64 = crate::limits::SERVE_ANSWER_BYTES_MAX;

/// Arguments of `cairn stream`.
#[derive(Debug, clap::Args)]
pub struct StreamArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id.
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// Resume after this seq (of a `closed` or `ended` item printed before): only what comes
    /// after it.
    #[arg(long, default_value_t = 0)]
    since: u64,
}

/// How one connection's stream ended.
enum Read {
    /// With the thread's end: completed or not.
    Ended(bool),
    /// Cut before it (the engine went away): connect again.
    Cut,
}

pub(super) async fn stream(args: StreamArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let mut after = (args.since > 0).then_some(args.since);
    let mut cuts = 0;
    loop {
        let read = match endpoint::find(&args.common.db) {
            Some(ep) => match connection(&ep, &args, &mut after) {
                Err(e) if endpoint::is_gone(&e) => Read::Cut,
                read => read?,
            },
            None => match from_file(&args, wfs, after.unwrap_or(0)).await {
                Ok(Some(read)) => read,
                // Cut from an engine that stopped: the next one may serve the file in a moment
                // (and hold it while it opens, which the file's open says).
                Ok(None) | Err(_) if cuts > 0 => Read::Cut,
                Ok(None) => return Err(unserved(&args)),
                Err(e) => return Err(e),
            },
        };
        match read {
            Read::Ended(completed) => return ended(&args, completed),
            Read::Cut if cuts < RECONNECTS_MAX => {
                cuts += 1;
                tracing::info!(thread = %args.thread, after, "the stream was cut: connecting again");
                tokio::time::sleep(Duration::from_millis(RECONNECT_PAUSE_MS)).await;
            }
            Read::Cut => {
                return Err(fail(
                    EXIT_FAILED,
                    format!(
                        "the stream of thread {} was cut {RECONNECTS_MAX} times in a row; \
                         `cairn stream {} --since {}` goes on from the last durable item",
                        args.thread,
                        args.thread,
                        after.unwrap_or(0)
                    ),
                ));
            }
        }
    }
}

/// One connection: prints its items as they come, moving `after` to each durable one's seq.
fn connection(ep: &Endpoint, args: &StreamArgs, after: &mut Option<u64>) -> anyhow::Result<Read> {
    let path = format!("/api/threads/{}/stream", endpoint::segment(&args.thread));
    let mut lines = BufReader::new(ep.get_events(&path, *after)?.into_reader());
    let (mut name, mut data) = (String::new(), String::new());
    loop {
        let mut line = String::new();
        let n = (&mut lines).take(LINE_BYTES_MAX).read_line(&mut line);
        // A connection that breaks or ends mid-stream is a cut, as a clean end before `ended`.
        let Ok(n) = n else { return Ok(Read::Cut) };
        if n == 0 {
            return Ok(Read::Cut);
        }
        let line = line.trim_end_matches(['\n', '\r']);
        if !line.is_empty() {
            let (field, value) = line.split_once(':').unwrap_or((line, ""));
            let value = value.strip_prefix(' ').unwrap_or(value);
            match field {
                "event" => value.clone_into(&mut name),
                "data" => data.push_str(value),
                // `id` repeats the seq the data holds; a comment keeps the connection alive.
                _ => {}
            }
            continue;
        }
        if data.is_empty() {
            continue;
        }
        let item: Value = serde_json::from_str(&data).map_err(|e| {
            fail(EXIT_FAILED, format!("the engine sent a {name:?} item that is not JSON: {e}"))
        })?;
        if name == "error" {
            let error = item.get("error").and_then(Value::as_str).unwrap_or("an unknown error");
            return Err(fail(
                EXIT_FAILED,
                format!("the stream of thread {}: {error}", args.thread),
            ));
        }
        name.clear();
        data.clear();
        if let Some(end) = printed(args, &item, after)? {
            return Ok(Read::Ended(end));
        }
    }
}

/// Prints `item`; `Some(completed)` for the thread's end.
fn printed(
    args: &StreamArgs,
    item: &Value,
    after: &mut Option<u64>,
) -> anyhow::Result<Option<bool>> {
    let kind = item.get("kind").and_then(Value::as_str).unwrap_or_default();
    if let Some(seq) = item.get("seq").and_then(Value::as_u64) {
        *after = Some(seq);
    }
    if args.common.json {
        print_text(&item.to_string());
    }
    match kind {
        "chunk" if !args.common.json => print_text(&shown(&item["value"])),
        "gap" if !args.common.json => gap(item["missed"].as_u64().unwrap_or(0)),
        "ended" => {
            let completed = item["status"] == "completed";
            if completed && !args.common.json {
                print_text(&item["output"].to_string());
            }
            if !completed {
                tracing::info!(thread = %args.thread, status = %item["status"], "ended");
            }
            return Ok(Some(completed));
        }
        _ => {}
    }
    Ok(None)
}

/// A chunk's value as text: a string as it is, anything else as JSON.
fn shown(value: &Value) -> String {
    match value {
        Value::String(s) => s.clone(),
        other => other.to_string(),
    }
}

/// Says that chunks were missed (on stderr: stdout holds the stream only).
#[allow(clippy::print_stderr, reason = "a note beside the stream goes to stderr")]
fn gap(missed: u64) {
    eprintln!("note: {missed} chunks were missed (the reader fell behind the engine's buffer)");
}

/// The end: exit 0 when the thread completed, 1 naming it otherwise.
fn ended(args: &StreamArgs, completed: bool) -> anyhow::Result<()> {
    if completed {
        return Ok(());
    }
    Err(fail(
        EXIT_FAILED,
        format!(
            "thread {} did not complete (`cairn result {}` says how it ended)",
            args.thread, args.thread
        ),
    ))
}

/// Without an endpoint: a finished thread's stream from the file (its tasks' ends and its own),
/// printed; `None` for an unfinished thread, whose stream the file does not hold.
async fn from_file(
    args: &StreamArgs,
    wfs: &[Arc<DynWorkflow>],
    after: u64,
) -> anyhow::Result<Option<Read>> {
    let engine = open_read_only(&args.common.db, wfs).await?;
    let record = record_of(&engine, &args.thread).await?;
    if !record.status.is_terminal() {
        return Ok(None);
    }
    let mut items = engine.stream_after(&args.thread, after).await?;
    let mut last = (after > 0).then_some(after);
    while let Some(item) = items.next().await {
        let item = serde_json::to_value(item?)?;
        if let Some(completed) = printed(args, &item, &mut last)? {
            return Ok(Some(Read::Ended(completed)));
        }
    }
    Ok(Some(Read::Cut))
}

/// The refusal of an unfinished thread's stream with no engine serving the file.
fn unserved(args: &StreamArgs) -> anyhow::Error {
    fail(
        EXIT_FAILED,
        format!(
            "thread {} has not finished: its stream lives in the engine that runs it, and no \
             engine serves {} (read it through one: `cairn serve`, or an application's \
             `cairn_tools::serve::ServingBuilder`)",
            args.thread,
            args.common.db.display()
        ),
    )
}
