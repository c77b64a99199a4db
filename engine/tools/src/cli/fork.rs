//! `cairn fork THREAD --at SEQ [--update JSON]`: a new thread from another's state at a seq (or
//! a checkpoint), run here until it ends or parks; the original is untouched.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::CheckpointId;
use serde_json::{Value, json};

use super::common::{
    Common, json_arg, open_writable, parse_label, print_json, print_text, record_of, usage,
};
use super::control::run_to_rest;
use crate::debug::{ForkFrom, ForkOptions};

/// Arguments of `cairn fork`.
#[derive(Debug, clap::Args)]
pub struct ForkArgs {
    #[command(flatten)]
    common: Common,
    /// The thread to fork.
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// Start from the state after the event at this seq.
    #[arg(long, required_unless_present = "checkpoint", conflicts_with = "checkpoint")]
    at: Option<u64>,
    /// Start from this checkpoint of the thread instead.
    #[arg(long)]
    checkpoint: Option<u64>,
    /// An update (JSON of the workflow's update type) applied before the fork runs; `@FILE`
    /// reads it from a file, `@-` (or `-`) from stdin.
    #[arg(long)]
    update: Option<String>,
    /// The new thread's id (default: a fresh one).
    #[arg(long, value_parser = super::common::parse_thread_id)]
    id: Option<String>,
    /// Labels of the new thread (KEY=VALUE, repeatable).
    #[arg(long, value_parser = parse_label)]
    label: Vec<(String, String)>,
    /// Create the fork without running it (`cairn resume` runs it later).
    #[arg(long)]
    no_run: bool,
}

/// Checks that `update` is an update of the thread's workflow (it decodes as one): one that
/// does not is a usage error, said before anything is written. (Whether it applies at the seq
/// forked from is the fork's own check; an update's decoding does not depend on the state.)
async fn check_update(
    engine: &cairn::Engine,
    record: &cairn_storage::ThreadRecord,
    update: &Value,
) -> anyhow::Result<()> {
    let wf = engine.workflow_of(&record.id).await?;
    let mut probe = wf.state_from_json(
        &crate::Operator::new(engine).state_at(record.id.as_str(), None).await?.state,
    )?;
    probe.apply_json(update).map_err(|e| {
        usage(format!("--update is not an update of {} v{}: {e}", wf.id(), wf.version()))
    })
}

pub(super) async fn fork(args: ForkArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let update = args.update.as_deref().map(|given| json_arg(given, "--update")).transpose()?;
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
    let handle = crate::Operator::new(&engine).fork(&args.thread, from, options).await?;
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
