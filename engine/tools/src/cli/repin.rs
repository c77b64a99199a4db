//! `cairn repin THREAD BUILD` (or `--unpin`): moves an unfinished thread to another worker
//! build (`Engine::repin`, docs/patching.md): the `cairn.build` label and its
//! `labels_changed` event, in one write guarded by the thread's status and last seq. Through
//! the endpoint of the engine serving the file when one is announced (`remote.rs`), else on
//! the file opened for writing. A build id that is not one is a usage error (exit 2), refused
//! before anything is written.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::json;

use super::common::{
    Common, argument_error, open_writable, print_json, print_text, record_of, usage,
};
use super::remote;

/// Arguments of `cairn repin`.
#[derive(Debug, clap::Args)]
pub struct RepinArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id (unfinished; a thread this process would drive is paused first).
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// The worker build to pin it to (1 to 64 bytes of printable ASCII without spaces).
    #[arg(required_unless_present = "unpin", conflicts_with = "unpin")]
    build: Option<String>,
    /// Unpin it instead (auto-upgrade: any engine takes it).
    #[arg(long)]
    unpin: bool,
}

pub(super) async fn repin(args: RepinArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let (common, thread, build) = (&args.common, args.thread.as_str(), args.build.as_deref());
    if build.is_none() && !args.unpin {
        return Err(usage("give a BUILD or --unpin"));
    }
    if let Some(answer) = remote::post(&common.db, thread, "repin", &json!({ "build": build }))? {
        return remote::report(&answer, common.json);
    }
    let engine = open_writable(&common.db, wfs).await?;
    let result = async {
        record_of(&engine, thread).await?;
        engine.repin(thread, build).await.map_err(argument_error)?;
        Ok::<_, anyhow::Error>(engine.thread(thread).await?.status().await?)
    }
    .await;
    engine.shutdown().await;
    let status = result?;
    if common.json {
        return print_json(&json!({"thread": thread, "build": build, "status": status.as_str()}));
    }
    match build {
        Some(b) => print_text(&format!("{thread}: pinned to build {b}, now {status}")),
        None => print_text(&format!("{thread}: unpinned, now {status}")),
    }
    Ok(())
}
