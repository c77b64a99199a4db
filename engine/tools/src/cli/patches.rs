//! `cairn patches ID [--workflow W] [--limit N]`: the unfinished threads that ran without the
//! marker of patch `ID` (`ctx.patched`), which may still need its old branch: while any is
//! listed, keep the `else` branch of `if ctx.patched(ID)` (see `docs/patching.md`). Read-only;
//! a scan of every unfinished thread's log (`Engine::threads_without_patch`). No endpoint
//! answers it: while an engine holds the file it reads a snapshot (a copy in memory).

use std::sync::Arc;

use cairn_dsl::DynWorkflow;

use super::common::{Common, open_read_only_or_copy, parse_positive, print_json, print_text};
use super::table::Table;

/// Arguments of `cairn patches`.
#[derive(Debug, clap::Args)]
pub struct PatchesArgs {
    #[command(flatten)]
    common: Common,
    /// The patch id (what the code passes to `ctx.patched`).
    patch: String,
    /// Only threads of this workflow id.
    #[arg(long)]
    workflow: Option<String>,
    /// List at most this many threads.
    #[arg(long, default_value_t = 100, value_parser = parse_positive)]
    limit: usize,
}

pub(super) async fn patches(args: PatchesArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let engine = open_read_only_or_copy(&args.common.db, wfs).await?;
    let found =
        engine.threads_without_patch(&args.patch, args.workflow.as_deref(), args.limit).await;
    engine.shutdown().await;
    let found = found?;
    if args.common.json {
        return print_json(&serde_json::json!({ "patch": args.patch, "threads": found }));
    }
    if found.is_empty() {
        print_text(&format!(
            "no unfinished thread ran without patch {:?}: its old branch can go \
             (ctx.deprecate_patch)",
            args.patch
        ));
        return Ok(());
    }
    let mut table = Table::new(&["THREAD", "WORKFLOW", "STATUS", "EVENTS READ"]);
    for t in &found {
        table.row(vec![
            t.thread.clone(),
            format!("{} v{}", t.workflow, t.version),
            format!("{:?}", t.status),
            t.events.to_string(),
        ]);
    }
    print_text(&table.render());
    Ok(())
}
