//! The workflow every batch runs as (`cairn.batch`, `batch.rs`): one node, `page`, visited once
//! per page of matching threads. A visit reads the next page after the cursor through a
//! recorded tool call (so a replay reads the same page), applies the operation to each thread
//! through a recorded tool call of its own, and commits the new cursor and counts with its step.
//! It ends when a page comes back short (or `BATCH_THREADS_MAX` threads are handled).

use std::sync::{Arc, Weak};

use cairn_dsl::{Ctx, END, NodeError, NodeOutput, START, ToolError, Workflow};
use cairn_storage::{DeleteOptions, ThreadId};
use serde::{Deserialize, Serialize};

use super::batch::{Applied, BatchFilter, BatchOp, BatchState};
use super::engine::Engine;
use crate::error::Error;
use crate::exec::shell::Shell;
use crate::limits::{BATCH_PAGE_THREADS, BATCH_THREADS_MAX};

/// The workflow id of batch threads.
pub const WORKFLOW: &str = "cairn.batch";

/// One page read: the matching thread ids, and where the next read starts.
#[derive(Debug, Serialize, Deserialize)]
struct Page {
    /// The matching threads, in id order.
    threads: Vec<String>,
    /// The last id read (matching or not); `None`: nothing was left.
    last: Option<String>,
    /// The page was the last one.
    short: bool,
    /// Ids the filter names of no thread (skipped, counted so).
    #[serde(default)]
    unknown: Vec<String>,
}

impl Engine {
    /// Registers the batch workflow, applying operations on this engine.
    pub(crate) fn register_batches(&self) -> Result<(), Error> {
        self.register(&workflow(Arc::downgrade(&self.shell)))
    }
}

/// The batch workflow, applying operations on the engine of `shell`.
pub(crate) fn workflow(shell: Weak<Shell>) -> Workflow<BatchState> {
    Workflow::<BatchState>::builder(WORKFLOW, 1)
        .node("page", move |s: Arc<BatchState>, ctx: Ctx| {
            let shell = shell.clone();
            async move { page(&s, &ctx, &shell).await }
        })
        .edge(START, "page")
        // A page handles up to BATCH_PAGE_THREADS threads; pages of threads that the filter's
        // in-memory parts (version, creation time) leave out handle none, so the bound is the
        // engine's, not BATCH_THREADS_MAX / BATCH_PAGE_THREADS.
        .loop_bound("page", cairn_dsl::limits::LOOP_BOUND_MAX)
        .route("page", |s: &BatchState| if s.finished { END } else { "page" }, ["page", END])
        .build()
        .expect("the batch workflow is well formed")
}

async fn page(
    s: &BatchState,
    ctx: &Ctx,
    shell: &Weak<Shell>,
) -> Result<NodeOutput<BatchState>, NodeError> {
    let (filter, me) = (s.filter.clone(), ctx.thread_id().to_owned());
    let engine = engine_of(shell);
    let read: Page = ctx
        .tool("page", s.after.clone(), move |after: Option<String>, _| async move {
            read_page(&engine?, &filter, after, &me)
                .await
                .map_err(|e| ToolError::retryable(e.to_string()))
        })
        .await?;
    let mut next = s.clone();
    for thread in &read.unknown {
        next.count(thread, &Applied::Skipped("no such thread".into()));
    }
    for thread in read.threads {
        let (op, batch) = (s.op.clone(), ctx.thread_id().to_owned());
        let engine = engine_of(shell);
        let applied: Applied = ctx
            .tool("apply", thread.clone(), move |thread: String, _| async move {
                apply(&engine?, &op, &thread, &batch).await
            })
            .await?;
        next.count(&thread, &applied);
    }
    next.after = read.last.or(next.after);
    next.finished = read.short || next.done >= BATCH_THREADS_MAX as u64;
    Ok(NodeOutput::update(next))
}

/// The engine of `shell`, or a retryable error while it closes.
fn engine_of(shell: &Weak<Shell>) -> Result<Engine, ToolError> {
    let shell = shell.upgrade().ok_or_else(|| ToolError::retryable("the engine is closing"))?;
    Ok(Engine { shell })
}

/// The page of threads after `after` that `filter` matches, but the batch `me` itself.
async fn read_page(
    engine: &Engine,
    filter: &BatchFilter,
    after: Option<String>,
    me: &str,
) -> Result<Page, Error> {
    if !filter.ids.is_empty() {
        return read_ids(engine, filter, after).await;
    }
    let after = after.map(ThreadId::new).transpose()?;
    let store = engine.store();
    let records = store
        .list_threads_after(&filter.store_filter(), after.as_ref(), BATCH_PAGE_THREADS)
        .await?;
    let short = records.len() < BATCH_PAGE_THREADS;
    let last = records.last().map(|r| r.id.to_string());
    let threads = records
        .iter()
        .filter(|r| r.id.as_str() != me && filter.matches(r) && !made_by(r, me))
        .map(|r| r.id.to_string())
        .collect();
    Ok(Page { threads, last, short, unknown: Vec::new() })
}

/// The page of the filter's own ids after `after`: each read by id, those of no thread
/// `unknown`, those the rest of the filter leaves out dropped.
async fn read_ids(
    engine: &Engine,
    filter: &BatchFilter,
    after: Option<String>,
) -> Result<Page, Error> {
    let ids = filter.sorted_ids();
    let rest: Vec<String> = ids
        .into_iter()
        .filter(|id| after.as_ref().is_none_or(|a| id > a))
        .take(BATCH_PAGE_THREADS)
        .collect();
    let short = rest.len() < BATCH_PAGE_THREADS;
    let (mut threads, mut unknown) = (Vec::new(), Vec::new());
    for id in &rest {
        match engine.store().thread(&ThreadId::new(id.as_str())?).await? {
            Some(record) if filter.matches(&record) => threads.push(id.clone()),
            Some(_) => {}
            None => unknown.push(id.clone()),
        }
    }
    Ok(Page { threads, last: rest.last().cloned(), short, unknown })
}

/// Whether the thread of `record` is one the batch `me` made: the new thread of a reset under
/// its key (a reset batch over a filter its new threads match would reset them in turn).
fn made_by(record: &cairn_storage::ThreadRecord, me: &str) -> bool {
    record.parent.as_ref().is_some_and(|(origin, _)| {
        super::reset::reset_thread_id(origin.as_str(), me) == record.id.as_str()
    })
}

/// Applies `op` to `thread` for the batch `batch`: applied, or skipped with why (a thread that
/// has ended, gone, or is in no status the operation takes). Only an engine closing is an
/// error (retried).
async fn apply(
    engine: &Engine,
    op: &BatchOp,
    thread: &str,
    batch: &str,
) -> Result<Applied, ToolError> {
    let done = match op {
        BatchOp::Cancel { reason } => engine.cancel(thread, reason).await,
        BatchOp::Pause => engine.pause(thread).await,
        BatchOp::Resume => engine.resume(thread).await,
        BatchOp::Signal { name, value } => {
            let key = format!("{WORKFLOW}:{batch}");
            engine.signal_once(thread, name, value, &key).await.map(drop)
        }
        BatchOp::Delete => match engine.delete(thread, DeleteOptions::default()).await {
            Ok(Some(_)) => Ok(()),
            Ok(None) => Err(Error::UnknownThread(thread.to_owned())),
            Err(e) => Err(e),
        },
        BatchOp::Migrate { to_version } => engine.migrate(thread, *to_version).await,
        BatchOp::Repin { build } => engine.repin(thread, build.as_deref()).await,
        BatchOp::Reset { point } => engine.reset_as(thread, *point, batch).await.map(drop),
    };
    match done {
        Ok(()) => Ok(Applied::Applied),
        Err(e) if transient(&e) => Err(ToolError::retryable(e.to_string())),
        Err(e) => Ok(Applied::Skipped(e.to_string())),
    }
}

/// Whether `e` may pass if the operation is tried again (the engine closing, a store that does
/// not answer), not a refusal of this thread.
fn transient(e: &Error) -> bool {
    use cairn_storage::Error as S;
    match e {
        Error::ShutDown => true,
        Error::Storage(s) => !matches!(
            s,
            S::Unfinished { .. }
                | S::Invalid { .. }
                | S::LimitExceeded { .. }
                | S::GuardFailed { .. }
        ),
        _ => false,
    }
}
