//! `cairn workflows`: the workflows compiled into this binary (the ones `resume`, `fork`,
//! `state` and `graph` can use), with their versions, fingerprints and sizes.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::json;

use super::common::{print_json, print_text};
use super::table::Table;

/// Arguments of `cairn workflows`.
#[derive(Debug, clap::Args)]
pub struct WorkflowsArgs {
    /// Machine output: one JSON document.
    #[arg(long)]
    json: bool,
}

pub(super) fn workflows(args: &WorkflowsArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let mut all: Vec<&Arc<DynWorkflow>> = wfs.iter().collect();
    // Sub-workflows run by these are compiled in too.
    let mut i = 0;
    while i < all.len() {
        for node in all[i].nodes() {
            if let cairn_dsl::DynNodeKind::Subgraph { child, .. } = &node.kind
                && !all.iter().any(|w| w.id() == child.id() && w.version() == child.version())
            {
                all.push(child);
            }
        }
        i += 1;
    }
    all.sort_by(|a, b| (a.id(), a.version()).cmp(&(b.id(), b.version())));
    if args.json {
        let rows: Vec<_> = all
            .iter()
            .map(|w| {
                json!({
                    "id": w.id(),
                    "version": w.version(),
                    "fingerprint": w.fingerprint().to_string(),
                    "nodes": w.nodes().len(),
                })
            })
            .collect();
        return print_json(&rows);
    }
    let mut table = Table::new(&["WORKFLOW", "VERSION", "NODES", "FINGERPRINT"]);
    for w in &all {
        table.row(vec![
            w.id().to_owned(),
            w.version().to_string(),
            w.nodes().len().to_string(),
            w.fingerprint().to_string(),
        ]);
    }
    if table.is_empty() {
        print_text("no workflows compiled into this binary");
    } else {
        print_text(&table.render());
    }
    Ok(())
}
