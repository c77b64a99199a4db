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
}

pub(super) async fn signal(args: SignalArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let value = json_arg(&args.value, "the signal's value")?;
    let body = json!({ "name": args.name, "value": value });
    if let Some(answer) = remote::post(&args.common.db, &args.thread, "signal", &body)? {
        if args.common.json {
            return print_json(&answer);
        }
        print_text(&format!(
            "signal {} ({}) sent to {}: now {} (through the engine serving the file)",
            answer.signal.map_or_else(|| "?".to_owned(), |n| n.to_string()),
            args.name,
            args.thread,
            answer.status
        ));
        return Ok(());
    }
    let engine = open_writable(&args.common.db, wfs).await?;
    record_of(&engine, &args.thread).await?;
    let sent = cairn::admin::signal_and_wake(&engine, &args.thread, &args.name, value).await;
    let (n, woke) = match sent {
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
    if args.common.json {
        return print_json(&json!({
            "thread": args.thread,
            "signal": n,
            "status": status.as_str(),
        }));
    }
    let line = format!("signal {n} ({}) sent to {}: now {status}", args.name, args.thread);
    print_text(&line);
    super::control::ended(&args.thread, status)
}
