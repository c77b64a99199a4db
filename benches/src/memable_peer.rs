//! The engine benchmark's 10-node linear workflow on `memable` (Rust, redb, key-based
//! memoisation; the closest embedded peer, `research/mission-anchors.md`): one invocation at a
//! time on a file with redb's default durability (every step's commit is fsynced, as Cairn's
//! `Durability::Immediate`). Each node adds one to a `u64`, as `linear_workflow`'s do.

use std::path::Path;
use std::time::{Duration, Instant};

use memable::{Context, Engine, EngineError, WorkflowState};

/// The workflow's name in memable's registry.
const WORKFLOW: &str = "linear";

/// The step keys, one per node (static: memable's step future holds its key across awaits).
const KEYS: [&str; 10] = ["n0", "n1", "n2", "n3", "n4", "n5", "n6", "n7", "n8", "n9"];

/// Runs `threads` invocations of a `nodes`-step workflow one after the other on a memable engine
/// (at most 10) over a fresh redb file at `path`; returns the time from the first invocation to the last
/// one's end (the engine's opening left out, as the Cairn figures leave it out).
///
/// # Errors
/// memable's errors, or an invocation that did not complete with the expected sum.
pub async fn one_at_a_time(path: &Path, threads: usize, nodes: u64) -> anyhow::Result<Duration> {
    anyhow::ensure!(nodes as usize <= KEYS.len(), "at most {} nodes", KEYS.len());
    let mut engine = Engine::builder().open(path)?.build();
    engine.register(WORKFLOW, move |ctx: Context| linear(ctx, nodes));
    engine.start().await?;
    let start = Instant::now();
    for n in 0..threads {
        let state = engine.invoke(WORKFLOW).await?.wait().await;
        anyhow::ensure!(state == WorkflowState::Completed(None), "invocation {n} ended {state:?}");
    }
    let elapsed = start.elapsed();
    engine.stop().await;
    Ok(elapsed)
}

/// The workflow: `nodes` steps, each adding one to the sum the last one returned.
async fn linear(ctx: Context, nodes: u64) -> Result<(), EngineError> {
    let mut sum = 0u64;
    for key in KEYS.iter().take(nodes as usize) {
        let last = sum;
        sum = ctx.step(key).run(async move || Ok(last + 1)).await?;
    }
    if sum == nodes {
        Ok(())
    } else {
        Err(EngineError::step_failed("end", format!("the sum is {sum}, not {nodes}"), false))
    }
}
