//! `cairn replay THREAD [--verify]`: re-runs a thread's nodes against the compiled-in code with
//! the recorded tool results, clock, randomness and input, and reports the first difference.
//! Read-only. With a running engine serving the file, that engine replays the thread against
//! its own code on its live store (`GET /api/threads/{id}/replay`): no copy of the file.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;

use super::EXIT_FAILED;
use super::common::{Common, fail, open_read_only, print_json, print_text, record_of};
use super::endpoint;
use crate::serve::wire;
use cairn::replay::{ReplayOptions, ReplayReport};

/// Arguments of `cairn replay`.
#[derive(Debug, clap::Args)]
pub struct ReplayArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id.
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// Exit with code 1 when the code no longer reproduces the record.
    #[arg(long)]
    verify: bool,
}

pub(super) async fn replay(args: ReplayArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    // A running engine replays against its own code, reading its live store: no copy.
    let path = format!("/api/threads/{}/replay", endpoint::segment(&args.thread));
    let found = endpoint::through(&args.common.db, |ep| {
        Ok(wire::read::<ReplayReport>(ep.get(&path, &[])?, "replay report")?)
    })?;
    let report = match found {
        Some(report) => report,
        None => {
            let engine = open_read_only(&args.common.db, wfs).await?;
            record_of(&engine, &args.thread).await?;
            engine.replay(&args.thread, &ReplayOptions::default()).await?
        }
    };
    let thread = &report.thread;
    match &report.divergence {
        _ if args.common.json => print_json(&report)?,
        None => print_text(&format!(
            "{thread}: {} tasks replayed (with {} sub-workflow child threads), no divergence",
            report.tasks_replayed, report.children_replayed
        )),
        Some(d) => print_text(&format!(
            "{thread}: divergence{} at step {} in {} (seq {}): {}\n  recorded: {}\n  produced: {}",
            d.child.as_ref().map(|c| format!(" in child thread {c}")).unwrap_or_default(),
            d.step,
            d.task,
            d.seq,
            d.what,
            d.recorded,
            d.produced
        )),
    }
    if args.verify && report.divergence.is_some() {
        return Err(fail(EXIT_FAILED, "replay diverged from the record"));
    }
    Ok(())
}
