//! An operator pauses a running import at a step boundary, the process restarts, and the
//! operator resumes it later: nothing is lost, nothing is imported twice.
//!
//! The import handles one batch per step (a recorded tool call). The operator's
//! [`Engine::pause`] is a request: the batch under way finishes, its step is committed, and the
//! thread stops Paused before the next one (the pause is recorded, so it survives a restart, and
//! recovery leaves a paused thread alone). [`Engine::resumable`] lists it for the operator;
//! [`Engine::resume`] runs it on from the next batch.
//!
//! To pause at a known point, the example holds batch 4 at a gate until its pause request is
//! in; a real operator pauses whenever they like, and the thread stops at the next boundary.
//!
//! ```text
//! START -> import --route--> import (one batch per step)
//!                   \------> END (after the last batch)
//! ```

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cairn::dsl::{Ctx, NodeOutput, Replace, Workflow};
use cairn::{END, Engine, START, StartOptions, ThreadStatus, ToolError};
use tokio::sync::watch;

/// Batches the import handles.
pub const BATCHES: u64 = 10;

/// The batch the example holds until its pause request is in.
pub const HELD_BATCH: u64 = 4;

/// What the example saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Status once the pause took effect.
    pub paused: ThreadStatus,
    /// Batches done then.
    pub done_when_paused: u64,
    /// Threads the reopened engine offers for resumption.
    pub resumable_after_restart: Vec<String>,
    /// Status after the restart (recovery does not resume a paused thread).
    pub after_restart: ThreadStatus,
    /// Final status after the operator resumed it.
    pub finished: ThreadStatus,
    /// Batches done at the end.
    pub done: u64,
    /// How many times the import tool really ran (once per batch, across both processes).
    pub imports: u64,
}

/// Holds [`HELD_BATCH`] until opened, and says when it got there.
#[derive(Clone)]
struct Gate {
    reached: watch::Sender<bool>,
    open: watch::Receiver<bool>,
}

fn workflow(gate: Gate, imports: Arc<AtomicU64>) -> anyhow::Result<Workflow<Replace<u64>>> {
    let wf = Workflow::<Replace<u64>>::builder("import", 1)
        .node("import", move |done: Arc<Replace<u64>>, ctx: Ctx| {
            let (mut gate, imports) = (gate.clone(), imports.clone());
            async move {
                let batch = done.0 + 1;
                if batch == HELD_BATCH {
                    gate.reached.send_replace(true);
                    let _ = gate.open.wait_for(|open| *open).await;
                }
                let rows: u64 = ctx
                    .tool("db.import", batch, move |batch: u64, _| async move {
                        imports.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, ToolError>(batch * 100)
                    })
                    .await?;
                ctx.progress(batch as u32, BATCHES as u32, format!("batch {batch}: {rows} rows"));
                Ok(NodeOutput::update(batch))
            }
        })
        .edge(START, "import")
        .route(
            "import",
            |done: &Replace<u64>| if done.0 < BATCHES { "import" } else { END },
            ["import", END],
        )
        .loop_bound("import", BATCHES as u32)
        .build()?;
    Ok(wf)
}

/// The engine on `db` with the import workflow registered, and the workflow.
async fn open(
    db: &Path,
    gate: Gate,
    imports: Arc<AtomicU64>,
) -> anyhow::Result<(Engine, Workflow<Replace<u64>>)> {
    let wf = workflow(gate, imports)?;
    Ok((Engine::builder(db).workflow(&wf).open().await?, wf))
}

/// Runs the operator's session on `db`.
///
/// # Errors
/// Engine errors; an error when the thread does not behave as described.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    let imports = Arc::new(AtomicU64::new(0));
    let (reached_tx, mut reached) = watch::channel(false);
    let (open_tx, open_rx) = watch::channel(false);
    let gate = Gate { reached: reached_tx, open: open_rx };
    let (engine, wf) = open(db, gate.clone(), imports.clone()).await?;
    let t = engine.start(&wf, Replace(0), StartOptions::id("nightly")).await?;
    reached.wait_for(|at| *at).await?;
    // The operator pauses; batch 4 then finishes and the thread stops before batch 5.
    let (paused, _) = tokio::join!(engine.pause("nightly"), async { open_tx.send_replace(true) });
    paused?;
    let paused = t.status().await?;
    let done_when_paused: u64 = serde_json::from_value(
        cairn_tools::Operator::new(&engine).state_at("nightly", None).await?.state,
    )?;
    engine.shutdown().await;
    drop((t, engine));

    // A new process: the import stays paused until the operator says otherwise.
    let (engine, wf) = open(db, gate, imports.clone()).await?;
    let resumable_after_restart =
        engine.resumable().await?.into_iter().map(|r| r.id.to_string()).collect();
    let t = engine.thread_of(&wf, "nightly").await?;
    let after_restart = t.status().await?;
    engine.resume("nightly").await?;
    let finished = t.finished().await?.status;
    let Replace(done) = t.output().await?;
    engine.shutdown().await;
    Ok(Summary {
        paused,
        done_when_paused,
        resumable_after_restart,
        after_restart,
        finished,
        done,
        imports: imports.load(Ordering::SeqCst),
    })
}
