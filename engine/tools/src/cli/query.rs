//! `cairn query THREAD NAME [ARGS]`: a workflow's read-only query answered from a thread's
//! stored state (`Engine::query`); it writes nothing and reads a snapshot, so it also works
//! while an engine drives the thread.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::Value;

use super::common::{Common, argument_error, json_arg, open_read_only_or_copy, print_json};

/// Arguments of `cairn query`.
#[derive(Debug, clap::Args)]
pub struct QueryArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id.
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// The query's name (declared by the thread's workflow).
    name: String,
    /// Its arguments as JSON (none: `null`; a bare word is taken as a string; `@FILE` reads them
    /// from a file, `@-` from stdin).
    args: Option<String>,
}

pub(super) async fn query(args: QueryArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let input = match args.args.as_deref() {
        None => Value::Null,
        Some(text) => json_arg(text, "ARGS")?,
    };
    let engine = open_read_only_or_copy(&args.common.db, wfs).await?;
    let answer = engine.query(&args.thread, &args.name, input).await;
    engine.shutdown().await;
    // An unknown query, or arguments it does not take, are the command's arguments at fault.
    print_json(&answer.map_err(argument_error)?)
}
