//! How the checkpoints asked for at run time fold (the requests are in
//! `checkpoint_requests.rs`): a `checkpoint_requested` event sets or cancels one, a node's
//! `node_completed` uses up that node's request.

use crate::error::Error;
use crate::event::Body;
use crate::thread_ctx::{EventAt, ThreadCtx};

/// Folds the requests' part of `e` into `ctx`.
///
/// # Errors
/// None: every event folds.
pub(crate) fn fold(ctx: &mut ThreadCtx, e: EventAt<'_>) -> Result<(), Error> {
    let requests = &mut ctx.meta.checkpoint_requests;
    match e.body {
        Body::CheckpointRequested { request } => requests.apply(request),
        Body::NodeCompleted { task, .. } => {
            requests.at_nodes.remove(&*task.node);
        }
        _ => {}
    }
    Ok(())
}
