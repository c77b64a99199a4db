//! `cairn graph WORKFLOW --format dot|mermaid`: the graph of a workflow compiled into the binary.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::json;

use super::common::{print_json, print_text, usage};

/// Output format of `cairn graph`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum GraphFormat {
    /// Graphviz DOT.
    Dot,
    /// Mermaid flowchart.
    Mermaid,
}

/// Arguments of `cairn graph`.
#[derive(Debug, clap::Args)]
pub struct GraphArgs {
    /// Machine output: one JSON document. (No `--db`: the graph comes from the binary, and a
    /// database given here would be a mistake worth a usage error.)
    #[arg(long)]
    json: bool,
    /// The workflow id.
    workflow: String,
    /// The version (default: the newest compiled in).
    #[arg(long)]
    version: Option<u32>,
    /// dot or mermaid.
    #[arg(long, value_enum, default_value_t = GraphFormat::Dot)]
    format: GraphFormat,
}

pub(super) fn graph(args: &GraphArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let found = wfs
        .iter()
        .filter(|w| w.id() == args.workflow && args.version.is_none_or(|v| w.version() == v))
        .max_by_key(|w| w.version());
    let Some(wf) = found else {
        let known = wfs.iter().map(|w| (w.id(), w.version()));
        let unknown = cairn::Error::unknown_workflow(&args.workflow, args.version, known);
        return Err(usage(unknown.to_string()));
    };
    let text = match args.format {
        GraphFormat::Dot => wf.to_dot(),
        GraphFormat::Mermaid => wf.to_mermaid(),
    };
    if args.json {
        return print_json(&json!({
            "workflow": wf.id(),
            "version": wf.version(),
            "fingerprint": wf.fingerprint().to_string(),
            "format": match args.format { GraphFormat::Dot => "dot", GraphFormat::Mermaid => "mermaid" },
            "graph": text,
        }));
    }
    print_text(&text);
    Ok(())
}
