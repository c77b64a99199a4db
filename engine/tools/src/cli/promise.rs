//! `cairn get-event THREAD KEY [--wait-ms N]` and `cairn promise complete ID (--value JSON |
//! --error MSG)` (`docs/promises.md`).
//!
//! `get-event` answers what the thread published under the key (`ctx.set_event`) as JSON:
//! `{"thread", "key", "state": "set" | "pending" | "never_set", "value"?, "status"}`. Through the
//! endpoint of an engine serving the file (a long poll of
//! `GET /api/threads/{id}/published/{key}?wait_ms=`), else from snapshots of the file, read
//! again while the wait lasts. Exit 0 when set, 1 when the thread ended without it,
//! [`super::EXIT_PENDING`] when it is not set by the end of the wait.
//!
//! `promise complete` completes a promise by its id: through the endpoint serving the file
//! (`POST /api/promises/{id}`), else on the file opened for writing, where a thread the
//! completion woke runs here until it ends or parks. The same completion again succeeds
//! (`"duplicate": true`); another one of a completed promise, or an unknown id, exits 1.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_dsl::DynWorkflow;
use serde_json::{Value, json};

use super::common::{
    Common, fail, json_arg, open_read_only_or_copy, open_writable, print_json, print_text,
};
use super::endpoint::{self, Endpoint};
use super::{EXIT_FAILED, EXIT_PENDING, remote};
use crate::limits::RESULT_WAIT_MS_MAX;

/// The pause between two snapshots of a file no endpoint serves, while a wait lasts.
const SNAPSHOT_PAUSE_MS: u64 = 250;

/// Arguments of `cairn get-event`.
#[derive(Debug, clap::Args)]
pub struct GetEventArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id.
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// The key (what `ctx.set_event(key, ..)` published).
    key: String,
    /// Wait up to this many ms for a key not yet published (default: answer at once).
    #[arg(long, value_name = "N", default_value_t = 0)]
    wait_ms: u64,
}

/// `cairn promise ...`.
#[derive(Debug, clap::Args)]
pub struct PromiseCommand {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Completes a promise by its id with a value or an error (idempotent: the same again is a
    /// success that changes nothing).
    Complete(CompleteArgs),
}

/// Arguments of `cairn promise complete`.
#[derive(Debug, clap::Args)]
struct CompleteArgs {
    #[command(flatten)]
    common: Common,
    /// The promise's id (what `ctx.promise()` handed out).
    id: String,
    /// The value, as JSON (a bare word is taken as a string).
    #[arg(long, conflicts_with = "error", required_unless_present = "error")]
    value: Option<String>,
    /// The error, for a person.
    #[arg(long)]
    error: Option<String>,
}

pub(super) async fn get_event(args: GetEventArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let deadline = Instant::now() + Duration::from_millis(args.wait_ms);
    // Bounded by the deadline: each turn reads once, then pauses.
    let answer = loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let (db, thread, key) = (args.common.db.clone(), args.thread.clone(), args.key.clone());
        let through = tokio::task::spawn_blocking(move || {
            endpoint::through(&db, |ep| poll(ep, &thread, &key, left))
        })
        .await??;
        let answer = match through {
            Some(answer) => answer,
            None => from_snapshot(&args, wfs).await?,
        };
        let left = deadline.saturating_duration_since(Instant::now());
        if answer["state"] != "pending" || left.is_zero() {
            break answer;
        }
        tokio::time::sleep(left.min(Duration::from_millis(SNAPSHOT_PAUSE_MS))).await;
    };
    print_json(&answer)?;
    match answer["state"].as_str() {
        Some("set") => Ok(()),
        Some("never_set") => Err(fail(EXIT_FAILED, format!("{} was never set", args.key))),
        _ => Err(fail(EXIT_PENDING, format!("{} is not set yet", args.key))),
    }
}

/// The endpoint's answer, long-polled up to `wait`.
fn poll(ep: &Endpoint, thread: &str, key: &str, wait: Duration) -> anyhow::Result<Value> {
    let path =
        format!("/api/threads/{}/published/{}", endpoint::segment(thread), endpoint::segment(key));
    let ms = u64::try_from(wait.as_millis()).unwrap_or(u64::MAX).min(RESULT_WAIT_MS_MAX);
    ep.get(&path, &[("wait_ms", ms.to_string())])
}

/// The answer from the file as it is now.
async fn from_snapshot(args: &GetEventArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<Value> {
    let engine = open_read_only_or_copy(&args.common.db, wfs).await?;
    let got = engine.get_event(&args.thread, &args.key, None).await;
    engine.shutdown().await;
    let mut answer = serde_json::to_value(got?)?;
    answer["thread"] = json!(args.thread);
    answer["key"] = json!(args.key);
    Ok(answer)
}

pub(super) async fn command(cmd: PromiseCommand, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let Action::Complete(args) = cmd.action;
    let (outcome, body) = match (&args.value, &args.error) {
        (Some(v), _) => {
            let value = json_arg(v, "the value")?;
            (Ok(value.clone()), json!({ "value": value }))
        }
        (None, Some(e)) => (Err(e.clone()), json!({ "error": e })),
        (None, None) => return Err(super::common::usage("give --value or --error")),
    };
    let path = format!("/api/promises/{}", endpoint::segment(&args.id));
    if let Some(answer) = remote::post_to(&args.common.db, &path, &body)? {
        return report(&answer, args.common.json);
    }
    let engine = open_writable(&args.common.db, wfs).await?;
    let done = cairn::admin::complete_promise_and_wake(&engine, &args.id, outcome).await;
    let (done, woke) = match done {
        Ok(done) => done,
        Err(e) => {
            engine.shutdown().await;
            return Err(e.into());
        }
    };
    // A thread the completion woke runs here until it ends or parks again.
    if woke {
        let handle = engine.thread(&done.thread).await?;
        handle.wait().await?;
    }
    engine.shutdown().await;
    report(&serde_json::to_value(&done)?, args.common.json)
}

/// Prints what a completion did.
fn report(answer: &Value, json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(answer);
    }
    let again =
        if answer["duplicate"] == true { " before (a duplicate: nothing stored)" } else { "" };
    print_text(&format!(
        "promise {} of {} completed{again}",
        answer["promise"].as_str().unwrap_or("?"),
        answer["thread"].as_str().unwrap_or("?"),
    ));
    Ok(())
}
