//! `cairn fork THREAD --at SEQ [--update JSON]`: a new thread from another's state at a seq (or
//! a checkpoint), run here until it ends or parks; the original is untouched.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::CheckpointId;
use serde_json::{Value, json};

use super::common::{Common, open_writable, parse_label, print_json, print_text, record_of, usage};
use super::control::run_to_rest;
use crate::debug::{ForkFrom, ForkOptions};

/// Arguments of `cairn fork`.
#[derive(Debug, clap::Args)]
pub struct ForkArgs {
    #[command(flatten)]
    common: Common,
    /// The thread to fork.
    thread: String,
    /// Start from the state after the event at this seq.
    #[arg(long, required_unless_present = "checkpoint", conflicts_with = "checkpoint")]
    at: Option<u64>,
    /// Start from this checkpoint of the thread instead.
    #[arg(long)]
    checkpoint: Option<u64>,
    /// An update (JSON of the workflow's update type) applied before the fork runs; `@FILE`
    /// reads it from a file, `-` from stdin.
    #[arg(long)]
    update: Option<String>,
    /// The new thread's id (default: a fresh one).
    #[arg(long)]
    id: Option<String>,
    /// Labels of the new thread (KEY=VALUE, repeatable).
    #[arg(long, value_parser = parse_label)]
    label: Vec<(String, String)>,
    /// Create the fork without running it (`cairn resume` runs it later).
    #[arg(long)]
    no_run: bool,
}

/// The JSON text of `--update`: as given, or read from a file (`@FILE`) or stdin (`-`) for an
/// update too large for a command line.
fn update_text(given: &str) -> anyhow::Result<String> {
    use std::io::Read as _;
    if given == "-" {
        let mut text = String::new();
        std::io::stdin()
            .read_to_string(&mut text)
            .map_err(|e| usage(format!("--update -: cannot read stdin: {e}")))?;
        return Ok(text);
    }
    match given.strip_prefix('@') {
        Some(file) => std::fs::read_to_string(file)
            .map_err(|e| usage(format!("--update @{file}: cannot read the file: {e}"))),
        None => Ok(given.to_owned()),
    }
}

/// Checks that `update` is an update of the thread's workflow (it decodes as one): one that
/// does not is a usage error, said before anything is written. (Whether it applies at the seq
/// forked from is the fork's own check; an update's decoding does not depend on the state.)
async fn check_update(
    engine: &crate::Engine,
    record: &cairn_storage::ThreadRecord,
    update: &Value,
) -> anyhow::Result<()> {
    let wf = engine.workflow_of(&record.id).await?;
    let mut probe = wf.state_from_json(&engine.state_at(record.id.as_str(), None).await?.state)?;
    probe.apply_json(update).map_err(|e| {
        usage(format!("--update is not an update of {} v{}: {e}", wf.id(), wf.version()))
    })
}

pub(super) async fn fork(args: ForkArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let update = match &args.update {
        Some(given) => {
            let text = update_text(given)?;
            Some(
                serde_json::from_str::<Value>(&text)
                    .map_err(|e| usage(format!("--update is not valid JSON: {e}")))?,
            )
        }
        None => None,
    };
    let from = match (args.at, args.checkpoint) {
        (_, Some(cp)) => ForkFrom::Checkpoint(CheckpointId(cp)),
        (Some(seq), None) => ForkFrom::Seq(seq),
        (None, None) => return Err(usage("give --at SEQ or --checkpoint ID")),
    };
    let engine = open_writable(&args.common.db, wfs).await?;
    let record = record_of(&engine, &args.thread).await?;
    if let Some(update) = &update
        && let Err(e) = check_update(&engine, &record, update).await
    {
        engine.shutdown().await;
        return Err(e);
    }
    let options = ForkOptions {
        thread_id: args.id.clone(),
        update,
        labels: args.label.iter().cloned().collect::<BTreeMap<_, _>>(),
        start: !args.no_run,
    };
    let handle = engine.fork(&args.thread, from, options).await?;
    if args.no_run {
        let status = handle.status().await?;
        engine.shutdown().await;
        let id = handle.id().as_str();
        if args.common.json {
            return print_json(
                &json!({"thread": id, "status": status.as_str(), "parent": args.thread}),
            );
        }
        print_text(&format!(
            "forked {} into {id} (not run: `cairn resume {id}` runs it)",
            args.thread
        ));
        return Ok(());
    }
    let verb = format!("forked {} into", args.thread);
    run_to_rest(&engine, &handle, args.common.json, &verb).await
}
