//! `cairn reset THREAD --to start|checkpoint|seq:N [--key K]`: ends a thread's run and goes on
//! in a new thread from an earlier point of its history (`Engine::reset_as`, docs/batches.md):
//! the new thread `<THREAD>.reset.<K>` forked at the point, the original cancelled naming it.
//! The same `--key` again makes no second fork (it prints the same new thread). Through the
//! endpoint of the engine serving the file when one is announced (`remote.rs`; that engine runs
//! the new thread), else on the file opened for writing (the new thread is left created: `cairn
//! resume` runs it). A `--to` that is no reset point is a usage error (exit 2) before anything
//! is written; so is a seq outside the thread's log.

use std::sync::Arc;

use cairn::ResetPoint;
use cairn_dsl::DynWorkflow;
use serde_json::json;

use super::common::{Common, argument_error, open_writable, print_json, print_text, record_of};
use super::remote;

/// Arguments of `cairn reset`.
#[derive(Debug, clap::Args)]
pub struct ResetArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id (not a sub-workflow's: reset its parent).
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// Where the new thread starts: `start` (the thread's input), `checkpoint` (its latest
    /// checkpoint taken while it went on) or `seq:N` (just after the event at seq N).
    #[arg(long, value_parser = parse_point)]
    to: ResetPoint,
    /// The reset's key: the new thread is `<THREAD>.reset.<K>`, and the same key again makes
    /// no second fork (default: a fresh key).
    #[arg(long, value_parser = super::common::parse_thread_id)]
    key: Option<String>,
}

/// `s` as a reset point.
fn parse_point(s: &str) -> Result<ResetPoint, String> {
    s.parse().map_err(|e: cairn::Error| e.to_string())
}

pub(super) async fn reset(args: ResetArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let (common, thread, key) = (&args.common, args.thread.as_str(), args.key.as_deref());
    let body = json!({ "to": args.to.to_string(), "key": key });
    if let Some(answer) = remote::post(&common.db, thread, "reset", &body)? {
        return report(common.json, thread, &answer.thread, &answer.status, true);
    }
    let engine = open_writable(&common.db, wfs).await?;
    let result = async {
        record_of(&engine, thread).await?;
        let handle = match key {
            Some(key) => engine.reset_as(thread, args.to, key).await,
            None => engine.reset(thread, args.to).await,
        };
        let handle = handle.map_err(argument_error)?;
        Ok::<_, anyhow::Error>((handle.id().as_str().to_owned(), handle.status().await?))
    }
    .await;
    engine.shutdown().await;
    let (new, status) = result?;
    report(common.json, thread, &new, status.as_str(), false)
}

/// Prints the new thread: its id alone on the first line (for a script), then what was done.
fn report(json: bool, thread: &str, new: &str, status: &str, remote: bool) -> anyhow::Result<()> {
    if json {
        return print_json(&json!({"thread": new, "status": status, "reset_from": thread}));
    }
    let how = if remote {
        "through the engine serving the file".to_owned()
    } else if status == "created" {
        format!("not run here: `cairn resume {new}` runs it")
    } else {
        "on the file".to_owned()
    };
    print_text(&format!(
        "{new}\n{thread} reset into {new}, now {status} ({how}); {thread} is cancelled unless it had ended"
    ));
    Ok(())
}
