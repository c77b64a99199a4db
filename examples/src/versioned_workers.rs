//! Versioned workers: each deployment of a worker carries a build id, and a thread runs only on
//! the build that started it (or on any build, started with `auto_upgrade`). Build `2026.12.1`
//! starts two approvals that wait for a signal, one pinned to it and one free; build
//! `2026.12.2` then opens the same file: the drain view counts what each build still has
//! running, the new build finishes the free approval but leaves the pinned one alone, until an
//! operator repins it (`Engine::repin`, `cairn repin`, `POST /api/threads/{id}/repin`, or
//! `cairn batch repin` for every thread of a build).
//!
//! ```text
//! START -> wait (for the signal "go") -> END
//! ```

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, Replace, Workflow};
use cairn::{END, Engine, START, StartOptions, ThreadStatus};

/// The first deployment's build id.
pub const OLD_BUILD: &str = "2026.12.1";
/// The second deployment's build id.
pub const NEW_BUILD: &str = "2026.12.2";

/// What the example saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The drain view when the new build opened: (build, unfinished threads), builds in order
    /// (`None`: threads pinned to no build).
    pub drain_at_open: Vec<(Option<String>, u64)>,
    /// The free approval's status after the signal.
    pub free: ThreadStatus,
    /// The pinned approval's status after the same signal, before the repin.
    pub pinned_before_repin: ThreadStatus,
    /// The pinned approval's status after the repin.
    pub pinned_after_repin: ThreadStatus,
    /// The drain view at the end.
    pub drain_at_end: Vec<(Option<String>, u64)>,
}

/// The approval workflow: waits for one `go` signal, whose value becomes its state.
///
/// # Errors
/// A build error (none for this graph).
pub fn workflow() -> Result<Workflow<Replace<u64>>, cairn::dsl::BuildError> {
    Workflow::<Replace<u64>>::builder("approval", 1)
        .node("wait", |_s: Arc<Replace<u64>>, ctx: Ctx| async move {
            let n: u64 = ctx.recv("go").await?;
            Ok(NodeOutput::update(n))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .build()
}

/// Runs both deployments on the file at `path`.
///
/// # Errors
/// The engine's errors.
pub async fn run(path: &Path) -> anyhow::Result<Seen> {
    let wf = workflow()?;
    let old = Engine::builder(path).workflow(&wf).build_id(OLD_BUILD).open().await?;
    old.start_json("approval", 0u64, StartOptions::id("pinned")).await?;
    old.start_json("approval", 0u64, StartOptions::id("free").auto_upgrade()).await?;
    for id in ["pinned", "free"] {
        while old.thread(id).await?.status().await? != ThreadStatus::WaitingInput {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    }
    old.shutdown().await;
    drop(old);

    let new = Engine::builder(path).workflow(&wf).build_id(NEW_BUILD).open().await?;
    let drain_at_open = builds(&new).await?;
    new.signal("free", "go", 1u64).await?;
    new.signal("pinned", "go", 2u64).await?;
    let free = new.thread("free").await?.finished().await?.status;
    // The pinned approval has its signal but no engine of its build: it stays parked.
    tokio::time::sleep(Duration::from_millis(200)).await;
    let pinned = new.thread("pinned").await?;
    let pinned_before_repin = pinned.status().await?;
    new.repin("pinned", Some(NEW_BUILD)).await?;
    let pinned_after_repin = pinned.finished().await?.status;
    let drain_at_end = builds(&new).await?;
    new.shutdown().await;
    Ok(Seen { drain_at_open, free, pinned_before_repin, pinned_after_repin, drain_at_end })
}

/// The drain view's unfinished threads per build.
async fn builds(engine: &Engine) -> anyhow::Result<Vec<(Option<String>, u64)>> {
    Ok(engine.drain().await?.builds.into_iter().map(|b| (b.build, b.total)).collect())
}
