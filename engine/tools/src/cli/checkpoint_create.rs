//! `cairn checkpoint create THREAD` (a manual checkpoint with tags and a description) and
//! `cairn rollback THREAD --to ID` (the thread restored in place to one of its checkpoints).

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::{CheckpointId, CheckpointMeta};
use serde_json::json;

use super::common::{Common, open_writable, print_json, print_text};

/// Arguments of `cairn checkpoint create`.
#[derive(Debug, clap::Args)]
pub struct CreateArgs {
    #[command(flatten)]
    common: Common,
    /// The thread.
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// A tag for the checkpoint (repeatable); `cairn checkpoints --tag` finds it by it.
    #[arg(long)]
    tag: Vec<String>,
    /// What the checkpoint is for.
    #[arg(long, default_value = "")]
    description: String,
    /// Who made it.
    #[arg(long, default_value = "cli")]
    creator: String,
}

pub(super) async fn create(args: CreateArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let engine = open_writable(&args.common.db, wfs).await?;
    let meta = CheckpointMeta {
        creator: args.creator,
        description: args.description,
        tags: args.tag,
        ..CheckpointMeta::default()
    };
    let result = engine.checkpoint_now(&args.thread, meta).await;
    engine.shutdown().await;
    let id = result?;
    if args.common.json {
        return print_json(&json!({"id": id.0, "thread": args.thread}));
    }
    print_text(&format!("checkpoint {id} of thread {}", args.thread));
    Ok(())
}

/// Arguments of `cairn rollback`.
#[derive(Debug, clap::Args)]
pub struct RollbackArgs {
    #[command(flatten)]
    common: Common,
    /// The thread (paused, waiting for input, sleeping or blocked).
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// The id of the thread's checkpoint to go back to (`cairn checkpoints --thread`).
    #[arg(long)]
    to: u64,
    /// Why, recorded in the log.
    #[arg(long, default_value = "rolled back from the command line")]
    reason: String,
}

pub(super) async fn rollback(args: RollbackArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let engine = open_writable(&args.common.db, wfs).await?;
    let result = crate::Operator::new(&engine)
        .rollback(&args.thread, CheckpointId(args.to), &args.reason)
        .await;
    engine.shutdown().await;
    let written = result?;
    if args.common.json {
        return print_json(&json!({"thread": args.thread, "to": args.to, "checkpoint": written.0}));
    }
    print_text(&format!(
        "thread {} rolled back to checkpoint {} and paused (checkpoint {written}); `cairn resume {}` goes on from there",
        args.thread, args.to, args.thread
    ));
    Ok(())
}
