//! Update requests another engine stored in the inbox of a parked thread pinned to this
//! engine's worker build (`api/update_elsewhere.rs`): the sender's build must not run its own
//! handler on a thread pinned to another build (docs/patching.md, "Worker build ids"), so it
//! stores the request and tells the engines (a driver message through the shared database);
//! an engine of the pinned build that hears it, and finds the thread parked (nobody drives it),
//! applies each request with its own handler as [`super::updates::apply_parked`] does, the
//! outcome (`update_applied`, or `update_refused` with the refusal's words, so that the
//! waiting caller hears it) written with the thread's record, guarded by its status and last
//! seq. A thread it drives takes them at its step boundary instead (`update_inbox.rs`).
//!
//! Engines of other builds, and engines without the thread's workflow version, leave it alone;
//! two engines of the pinned build racing for one request write it once (the second's write is
//! refused by the guard, and its next look finds the id applied).

use std::sync::Arc;

use cairn_storage::{ThreadId, ThreadStatus};

use super::shell::Shell;
use super::update_inbox::{UPDATE_SIGNAL, outcome, request_of};
use crate::coord::UpdateRequest;
use crate::core::child_start::pinned_elsewhere;
use crate::error::Error;
use crate::limits::UPDATE_INBOX_PAGE;

/// Applies the update requests in `thread`'s inbox if it is a parked thread this engine may
/// take (pinned to its build or unpinned, its workflow version registered here, no runner on
/// it); nothing otherwise. Errors are logged: the caller, waiting on the log, tells again.
pub(crate) async fn answer_parked(shell: &Arc<Shell>, thread: &ThreadId) {
    if let Err(e) = answer(shell, thread).await {
        tracing::debug!(%thread, error = %e, "update requests of a parked thread not applied");
    }
}

/// Whether `status` is one in which nobody drives the thread and it takes updates (as
/// `apply_parked` sees it).
fn parked(status: ThreadStatus) -> bool {
    !status.is_terminal() && status != ThreadStatus::Running
}

async fn answer(shell: &Arc<Shell>, thread: &ThreadId) -> Result<(), Error> {
    let mut after = 0;
    loop {
        let page = shell.store.signals(thread, after, UPDATE_INBOX_PAGE).await?;
        for signal in &page {
            after = signal.n;
            if signal.name != UPDATE_SIGNAL {
                continue;
            }
            let Some(request) = request_of(thread, signal) else { continue };
            if !answer_one(shell, thread, &request).await? {
                return Ok(());
            }
        }
        if page.len() < UPDATE_INBOX_PAGE {
            return Ok(());
        }
    }
}

/// Decides one request on the thread as stored now and writes its outcome; false when the
/// thread is not (or no longer) a parked one of this engine's.
async fn answer_one(
    shell: &Arc<Shell>,
    thread: &ThreadId,
    request: &UpdateRequest,
) -> Result<bool, Error> {
    let record = super::parked::stored(shell, thread).await?;
    let elsewhere = pinned_elsewhere(&record.labels, shell.config.build_id.as_deref());
    if elsewhere || !parked(record.status) || shell.coord.is_driven(thread) {
        return Ok(false);
    }
    let Ok(wf) = shell.registry.workflow_for(&record) else { return Ok(false) };
    let last = record.last.map_or(0, |b| b.seq.0);
    let ctx = super::fetch::restore(shell.store.as_ref(), &wf, thread, Some(last)).await?;
    let Some(body) = outcome(&wf, &ctx, thread, request)? else { return Ok(true) };
    let status = record.status;
    super::parked::write_read(shell, record, status, vec![body], None, true).await?;
    tracing::info!(%thread, id = %request.id, "an update request applied to a parked thread");
    Ok(true)
}
