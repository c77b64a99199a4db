//! Bookmarks: read a thread's events since a bookmark, subscribe (history then live,
//! no gap), and resume after a crash from where the log ends.

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Replace, Workflow};
use cairn::{Durability, END, Engine, START, Scope, StartOptions};

/// Five steps that each add one.
///
/// # Errors
/// Never for this definition.
pub fn workflow() -> Result<Workflow<Replace<u32>>, cairn::dsl::BuildError> {
    Workflow::<Replace<u32>>::builder("steps", 1)
        .node("step", |s: Arc<Replace<u32>>, ctx: Ctx| async move {
            ctx.progress(s.0 + 1, 5, format!("step {}", s.0 + 1));
            Ok(NodeOutput::update(s.0 + 1))
        })
        .edge(START, "step")
        .route("step", |s: &Replace<u32>| if s.0 >= 5 { END } else { "step" }, ["step", END])
        .loop_bound("step", 5)
        .build()
}

/// What the example observed.
#[derive(Debug)]
pub struct Seen {
    /// Seq of the bookmark read from before the crash.
    pub bookmark_seq: u64,
    /// Seqs read since that bookmark after the resume (history then live), in order.
    pub since: Vec<u64>,
    /// The final value.
    pub value: u32,
}

/// Runs two steps, "crashes", reopens (recovery resumes the thread) and follows the thread from
/// the bookmark taken before the crash.
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> anyhow::Result<Seen> {
    let wf = workflow()?;
    let engine = Engine::builder(db).durability(Durability::Immediate).workflow(&wf).open().await?;
    let (tx, rx) = tokio::sync::oneshot::channel();
    let tx = std::sync::Mutex::new(Some(tx));
    engine.on_step(Arc::new(move |_t, step, _total| {
        if step == 2
            && let Some(tx) = tx.lock().ok().and_then(|mut t| t.take())
        {
            let _ = tx.send(());
        }
    }));
    let thread = engine.start(&wf, Replace(0), StartOptions::id("bookmarked")).await?;
    rx.await?;
    engine.crash().await; // as if the process died here
    let bookmark = engine
        .store()
        .last_bookmark(thread.id())
        .wait()?
        .ok_or_else(|| anyhow::anyhow!("no events"))?;
    let id = thread.id().clone();
    // A handle holds the engine, and so the file: let go of both before reopening.
    drop(thread);
    drop(engine);

    let engine = Engine::builder(db).workflow(&wf).open().await?; // recovery resumes the thread
    let mut sub = engine.subscribe(Scope::Thread(id), bookmark.seq.0)?;
    let thread = engine.thread_of(&wf, "bookmarked").await?;
    let Replace(value) = thread.output().await?;
    let last = engine.store().last_bookmark(thread.id()).wait()?.map_or(0, |b| b.seq.0);
    let mut since = Vec::new();
    while since.last().copied().unwrap_or(bookmark.seq.0) < last {
        since.push(sub.next().await?.bookmark.seq.0);
    }
    engine.shutdown().await;
    Ok(Seen { bookmark_seq: bookmark.seq.0, since, value })
}
