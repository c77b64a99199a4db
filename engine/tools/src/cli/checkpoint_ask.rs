//! `cairn checkpoint every THREAD --ms N`, `cairn checkpoint cancel THREAD` and `cairn
//! checkpoint at-node THREAD NODE`: checkpoints asked for at run time (`docs/features.md`),
//! recorded in the thread's log, so they hold across restarts. Through the endpoint of the
//! engine serving the file when one is announced (`POST`/`DELETE
//! /api/threads/{id}/checkpoints/periodic`, `POST .../checkpoints/at-node`, `remote.rs`), else
//! on the file opened for writing.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::CheckpointMeta;
use serde_json::{Value, json};

use super::common::{Common, argument_error, open_writable, parse_label, print_json, print_text};
use super::remote;
use crate::serve::wire::path_segment;

/// The metadata stored with the checkpoints a request makes.
#[derive(Debug, clap::Args)]
pub struct MetaArgs {
    /// A tag for each checkpoint (repeatable); `cairn checkpoints --tag` finds them by it.
    #[arg(long)]
    tag: Vec<String>,
    /// What the checkpoints are for.
    #[arg(long, default_value = "")]
    description: String,
    /// Who asked for them.
    #[arg(long, default_value = "cli")]
    creator: String,
    /// A custom field `KEY=VALUE` (repeatable).
    #[arg(long, value_parser = parse_label)]
    meta: Vec<(String, String)>,
}

impl MetaArgs {
    /// The metadata as the endpoint's requests carry it (`meta` of their bodies).
    fn to_json(&self) -> Value {
        json!({
            "creator": self.creator,
            "description": self.description,
            "tags": self.tag,
            "custom": self.meta.iter().cloned().collect::<std::collections::BTreeMap<_, _>>(),
        })
    }

    fn into_meta(self) -> CheckpointMeta {
        CheckpointMeta {
            creator: self.creator,
            description: self.description,
            tags: self.tag,
            custom: self.meta.into_iter().collect(),
        }
    }
}

/// Arguments of `cairn checkpoint every`.
#[derive(Debug, clap::Args)]
pub struct EveryArgs {
    #[command(flatten)]
    common: Common,
    /// The thread.
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// The interval in ms (engine clock), counted from the thread's latest checkpoint.
    #[arg(long)]
    ms: u64,
    #[command(flatten)]
    meta: MetaArgs,
}

/// Arguments of `cairn checkpoint cancel`.
#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    #[command(flatten)]
    common: Common,
    /// The thread.
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
}

/// Arguments of `cairn checkpoint at-node`.
#[derive(Debug, clap::Args)]
pub struct AtNodeArgs {
    #[command(flatten)]
    common: Common,
    /// The thread.
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// The node whose next completion takes the checkpoint.
    node: String,
    #[command(flatten)]
    meta: MetaArgs,
}

pub(super) async fn every(args: EveryArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let body = json!({"interval_ms": args.ms, "meta": args.meta.to_json()});
    if remote::through(&args.common.db, requests(&args.thread, "periodic"), Some(body))
        .await?
        .is_none()
    {
        let engine = open_writable(&args.common.db, wfs).await?;
        let result = engine.checkpoint_every(&args.thread, args.ms, args.meta.into_meta()).await;
        engine.shutdown().await;
        result.map_err(argument_error)?;
    }
    let said = format!("thread {}: a periodic checkpoint every {} ms", args.thread, args.ms);
    done(&args.common, json!({"thread": args.thread, "every_ms": args.ms}), &said)
}

pub(super) async fn cancel(args: CancelArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    if remote::through(&args.common.db, requests(&args.thread, "periodic"), None).await?.is_none() {
        let engine = open_writable(&args.common.db, wfs).await?;
        let result = engine.cancel_periodic_checkpoint(&args.thread).await;
        engine.shutdown().await;
        result.map_err(argument_error)?;
    }
    let said = format!("thread {}: no periodic checkpoint asked any more", args.thread);
    done(&args.common, json!({"thread": args.thread, "every_ms": null}), &said)
}

pub(super) async fn at_node(args: AtNodeArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let body = json!({"node": args.node, "meta": args.meta.to_json()});
    if remote::through(&args.common.db, requests(&args.thread, "at-node"), Some(body))
        .await?
        .is_none()
    {
        let engine = open_writable(&args.common.db, wfs).await?;
        let meta = args.meta.into_meta();
        let result = engine.checkpoint_at_node(&args.thread, &args.node, meta).await;
        engine.shutdown().await;
        result.map_err(argument_error)?;
    }
    let said =
        format!("thread {}: a checkpoint when node {} completes next", args.thread, args.node);
    done(&args.common, json!({"thread": args.thread, "at_node": args.node}), &said)
}

/// The endpoint's path of `thread`'s checkpoint requests of `kind` (`periodic`, `at-node`).
fn requests(thread: &str, kind: &str) -> String {
    format!("/api/threads/{}/checkpoints/{kind}", path_segment(thread))
}

fn done(common: &Common, out: serde_json::Value, said: &str) -> anyhow::Result<()> {
    if common.json {
        return print_json(&out);
    }
    print_text(said);
    Ok(())
}
