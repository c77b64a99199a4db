//! `cairn interactions [CORRELATION_ID] [--thread T]... --output FILE`: who talks to whom in a
//! session's (or the whole store's) messages, one edge per sender and addressee, as an HTML page
//! with a drawing, Graphviz DOT, Mermaid or JSON (seed 004's `visualize interactions`).

use std::path::PathBuf;
use std::sync::Arc;

use cairn_dsl::DynWorkflow;

use super::common::{Common, open_read_only_or_copy, print_json, print_text, usage};
use crate::debug::{InteractionGraph, TraceQuery, TraceScope};

/// How `cairn interactions` draws its graph.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Drawing {
    /// A page with an SVG drawing and a table (no script, no request).
    Html,
    /// Graphviz DOT.
    Dot,
    /// Mermaid.
    Mermaid,
}

/// Arguments of `cairn interactions`.
#[derive(Debug, clap::Args)]
pub struct InteractionsArgs {
    #[command(flatten)]
    common: Common,
    /// Only messages carrying this correlation id.
    correlation_id: Option<String>,
    /// Only this session: the thread and the threads it started (repeatable; default: every
    /// thread).
    #[arg(long, value_parser = super::common::parse_thread_id)]
    thread: Vec<String>,
    /// Only messages written at or after this engine-clock time (ms since the epoch).
    #[arg(long)]
    from_ms: Option<u64>,
    /// Only messages written at or before this time.
    #[arg(long)]
    to_ms: Option<u64>,
    /// The drawing (default: from the output's extension, `.html`, `.dot` or `.mmd`; else DOT).
    #[arg(long, value_enum)]
    format: Option<Drawing>,
    /// Where to write it (default: standard output).
    #[arg(long, short)]
    output: Option<PathBuf>,
}

pub(super) async fn interactions(
    args: InteractionsArgs,
    wfs: &[Arc<DynWorkflow>],
) -> anyhow::Result<()> {
    if args.correlation_id.as_deref().is_some_and(|c| c.trim().is_empty()) {
        return Err(usage("the correlation id is empty: give one, or none for every message"));
    }
    let engine = open_read_only_or_copy(&args.common.db, wfs).await?;
    let scope = match args.thread.is_empty() {
        true => TraceScope::All,
        false => TraceScope::Threads(args.thread.clone()),
    };
    let mut query = TraceQuery::new(scope);
    query.correlation_id.clone_from(&args.correlation_id);
    (query.from_ms, query.to_ms) = (args.from_ms, args.to_ms);
    let messages = crate::Operator::new(&engine).trace(&query).await?;
    let graph = InteractionGraph::of(&messages);
    if args.common.json {
        return print_json(&graph);
    }
    let title = match &args.thread[..] {
        [] => "Interactions".to_owned(),
        threads => format!("Interactions of {}", threads.join(", ")),
    };
    let drawn = match drawing(&args) {
        Drawing::Html => graph.to_html(&title),
        Drawing::Dot => graph.to_dot(),
        Drawing::Mermaid => graph.to_mermaid(),
    };
    match &args.output {
        Some(path) => {
            std::fs::write(path, drawn)
                .map_err(|e| anyhow::anyhow!("cannot write {}: {e}", path.display()))?;
            let (parties, edges) = (graph.parties.len(), graph.edges.len());
            print_text(&format!("{parties} parties, {edges} edges: {}", path.display()));
        }
        None => print_text(drawn.trim_end()),
    }
    Ok(())
}

/// The drawing asked for, else the one the output's extension names, else DOT.
fn drawing(args: &InteractionsArgs) -> Drawing {
    let extension = args.output.as_ref().and_then(|p| p.extension()).and_then(|e| e.to_str());
    args.format.unwrap_or(match extension {
        Some("html" | "htm") => Drawing::Html,
        Some("mmd" | "mermaid") => Drawing::Mermaid,
        _ => Drawing::Dot,
    })
}
