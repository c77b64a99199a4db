//! `cairn replay THREAD [--verify]`: re-runs a thread's nodes against the compiled-in code with
//! the recorded tool results, clock, randomness and input, and reports the first difference.
//! Read-only: works while an engine process holds the file.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;

use super::EXIT_FAILED;
use super::common::{Common, fail, open_read_only, print_json, print_text};
use crate::replay::ReplayOptions;

/// Arguments of `cairn replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id.
    thread: String,
    /// Exit with code 1 when the code no longer reproduces the record.
    #[arg(long)]
    verify: bool,
}

pub(super) async fn replay(args: ReplayArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let engine = open_read_only(&args.common.db, wfs).await?;
    let report = engine.replay(&args.thread, &ReplayOptions::default()).await?;
    if args.common.json {
        print_json(&report)?;
    } else {
        match &report.divergence {
            None => print_text(&format!(
                "{}: {} tasks replayed (with {} sub-workflow child threads), no divergence",
                report.thread, report.tasks_replayed, report.children_replayed
            )),
            Some(d) => print_text(&format!(
                "{}: divergence{} at step {} in {} (seq {}): {}\n  recorded: {}\n  produced: {}",
                report.thread,
                d.child.as_ref().map(|c| format!(" in child thread {c}")).unwrap_or_default(),
                d.step,
                d.task,
                d.seq,
                d.what,
                d.recorded,
                d.produced
            )),
        }
    }
    if args.verify && !report.is_deterministic() {
        return Err(fail(EXIT_FAILED, "replay diverged from the record"));
    }
    Ok(())
}
