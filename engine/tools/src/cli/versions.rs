//! `cairn versions`: the drain view. Per workflow version, the threads that have not finished
//! (by status), and whether this binary carries the version: one at 0 runs nowhere any more.
//! Then the same per worker build (the `cairn.build` pin; `-` for unpinned threads).

use std::sync::Arc;

use cairn_dsl::DynWorkflow;

use super::common::{Common, open_read_only_or_copy, print_json, print_text};
use super::table::Table;

/// Arguments of `cairn versions`.
#[derive(Debug, clap::Args)]
pub struct VersionsArgs {
    #[command(flatten)]
    common: Common,
}

pub(super) async fn versions(args: VersionsArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let engine = open_read_only_or_copy(&args.common.db, wfs).await?;
    let drain = engine.drain().await?;
    if args.common.json {
        return print_json(&drain);
    }
    let mut table = Table::new(&["WORKFLOW", "VERSION", "UNFINISHED", "BY STATUS", "HERE"]);
    for v in &drain.versions {
        let by_status: Vec<String> = v.unfinished.iter().map(|(s, n)| format!("{s} {n}")).collect();
        table.row(vec![
            v.workflow.clone(),
            v.version.to_string(),
            v.total.to_string(),
            by_status.join(", "),
            if v.registered_here { "yes" } else { "no" }.to_owned(),
        ]);
    }
    let mut builds = Table::new(&["BUILD", "UNFINISHED", "BY STATUS"]);
    for b in &drain.builds {
        let by_status: Vec<String> = b.unfinished.iter().map(|(s, n)| format!("{s} {n}")).collect();
        builds.row(vec![
            b.build.clone().unwrap_or_else(|| "- (unpinned)".to_owned()),
            b.total.to_string(),
            by_status.join(", "),
        ]);
    }
    let partial = if drain.partial { "\n(partial: the read stopped at its bound)" } else { "" };
    print_text(&format!("{}\n{}{partial}", table.render(), builds.render()));
    Ok(())
}
