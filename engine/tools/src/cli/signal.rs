//! `cairn signal THREAD NAME JSON`: sends a signal to a running or waiting thread. Through the
//! endpoint of an engine serving the file (`POST /api/threads/{id}/signal`, `remote.rs`) when
//! one holds it; otherwise the file is opened for writing, the signal stored, and a thread that
//! was waiting for it runs here until it ends or parks again. A signal the thread's workflow
//! refuses (a name it does not declare, a value not of the declared type) exits 2 either way:
//! the endpoint's 400, or `Error::SignalRefused` here.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::json;

use super::common::{Common, json_arg, open_writable, print_json, print_text, record_of, usage};
use super::remote;

/// Arguments of `cairn signal`.
#[derive(Debug, clap::Args)]
pub struct SignalArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id (running or waiting; not finished).
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// The signal's name (what `ctx.recv(name)` receives).
    name: String,
    /// The signal's value, as JSON (a bare word is taken as a string).
    value: String,
    /// Stores the signal at most once per key on the thread: a key sent before stores nothing
    /// and answers the first signal's number (a retried webhook delivers once).
    #[arg(long)]
    dedup_key: Option<String>,
    /// Signal-with-start: creates the thread as a thread of this workflow first, if it does
    /// not exist (with `--input`).
    #[arg(long, value_name = "WORKFLOW", requires = "input")]
    start_with: Option<String>,
    /// The initial state of the thread `--start-with` creates, as JSON.
    #[arg(long, requires = "start_with")]
    input: Option<String>,
}

pub(super) async fn signal(args: SignalArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let value = json_arg(&args.value, "the signal's value")?;
    let input = args.input.as_deref().map(|i| json_arg(i, "the input")).transpose()?;
    let mut body = json!({ "name": args.name, "value": value });
    if let Some(key) = &args.dedup_key {
        body["dedup_key"] = json!(key);
    }
    if let (Some(workflow), Some(input)) = (&args.start_with, &input) {
        body["start"] = json!({ "workflow": workflow, "input": input });
    }
    if let Some(answer) = remote::post(&args.common.db, &args.thread, "signal", &body)? {
        if args.common.json {
            return print_json(&answer);
        }
        print_text(&format!(
            "signal {} ({}) sent to {}{}: now {} (through the engine serving the file)",
            answer.signal.map_or_else(|| "?".to_owned(), |n| n.to_string()),
            args.name,
            args.thread,
            if answer.duplicate == Some(true) {
                " before (a duplicate: nothing stored)"
            } else {
                ""
            },
            answer.status
        ));
        return Ok(());
    }
    let engine = open_writable(&args.common.db, wfs).await?;
    if args.start_with.is_none() {
        record_of(&engine, &args.thread).await?;
    }
    let sent = send_local(&engine, &args, value, input).await;
    let (sent, woke) = match sent {
        Ok(sent) => sent,
        Err(e) => {
            engine.shutdown().await;
            // A signal its workflow does not accept is bad input, as bad JSON is: exit 2.
            return Err(match e {
                e @ cairn::Error::SignalRefused { .. } => usage(e.to_string()),
                e => e.into(),
            });
        }
    };
    // A thread the signal woke runs here until it ends or parks again.
    let handle = engine.thread(&args.thread).await?;
    let status = if woke { handle.wait().await.map(|o| o.status) } else { handle.status().await };
    engine.shutdown().await;
    let status = status?;
    let n = sent.signal;
    if args.common.json {
        let mut out = json!({ "thread": args.thread, "signal": n, "status": status.as_str() });
        if args.dedup_key.is_some() {
            out["duplicate"] = json!(sent.duplicate);
        }
        return print_json(&out);
    }
    let before = if sent.duplicate { " before (a duplicate: nothing stored)" } else { "" };
    let line = format!("signal {n} ({}) sent to {}{before}: now {status}", args.name, args.thread);
    print_text(&line);
    super::control::ended(&args.thread, status)
}

/// Sends the signal `args` describe on `engine` (with a dedup key, or starting the thread
/// first): what was sent, and whether this engine now runs the thread (woken or created).
async fn send_local(
    engine: &cairn::Engine,
    args: &SignalArgs,
    value: serde_json::Value,
    input: Option<serde_json::Value>,
) -> Result<(cairn::Sent, bool), cairn::Error> {
    let key = args.dedup_key.as_deref();
    if let (Some(workflow), Some(input)) = (&args.start_with, input) {
        let options = cairn::StartOptions::id(&args.thread);
        let done =
            engine.signal_with_start(workflow, input, options, &args.name, value, key).await?;
        return Ok((done.sent, done.created));
    }
    match key {
        Some(key) => {
            cairn::admin::signal_once_and_wake(engine, &args.thread, &args.name, value, key).await
        }
        None => {
            let (n, woke) =
                cairn::admin::signal_and_wake(engine, &args.thread, &args.name, value).await?;
            Ok((cairn::Sent { signal: n, duplicate: false }, woke))
        }
    }
}
