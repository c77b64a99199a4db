//! The child threads of one running parent ([`LiveChildren`]) and how the parent drives one of
//! them inline: to its end or its next park, whoever else drives it meanwhile. Used by the
//! sub-workflow children (`child_run.rs`) and the children a node starts (`child_start.rs`).

use std::sync::Arc;

use cairn_dsl::NodeError;
use cairn_storage::{ThreadId, ThreadStatus};
use tokio_util::sync::CancellationToken;

use super::drive::drive_under;
use super::runner::Exit;
use super::shell::Shell;
use super::stop::StopSlot;

/// The child threads of one running parent.
pub(crate) struct LiveChildren {
    pub shell: Arc<Shell>,
    /// The parent thread.
    pub parent: ThreadId,
    /// The parent's nesting depth.
    pub depth: usize,
    /// The parent's cancellation: it cancels the child too.
    pub cancel: CancellationToken,
    /// The parent runner's stop slot: a child run that leaves a log in doubt stops the parent's
    /// runner too (the parent goes on from its log with the child as it stands).
    pub stop: StopSlot,
}

/// Drives the child thread `id` to its end or its next park, and returns its status then. If
/// another runner drives it (one woken by the child's own timer, say), the parent waits for
/// that runner to let go and looks again: whoever drives the child, the parent goes on from
/// where the child stands, and is never failed because of who drove it.
pub(crate) async fn drive_child(
    shell: &Arc<Shell>,
    id: &ThreadId,
    depth: usize,
    cancel: &CancellationToken,
    stop: &StopSlot,
) -> Result<ThreadStatus, NodeError> {
    loop {
        let exit =
            drive_under(shell.clone(), id.clone(), depth + 1, "sub-workflow", Some(cancel.clone()))
                .await
                .map_err(|e| stop.node_error(e))?;
        match exit {
            Exit::Status(s) => return Ok(s),
            Exit::Shutdown => return Err(NodeError::Cancelled),
            Exit::Elsewhere => {
                // Another engine drives the child: look again after a while.
                let pause = std::time::Duration::from_millis(shell.config.poll_ms);
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = cancel.cancelled() => return Err(NodeError::Cancelled),
                }
            }
            Exit::Busy => {
                tokio::select! {
                    () = shell.coord.wait_released(id) => {}
                    () = cancel.cancelled() => return Err(NodeError::Cancelled),
                }
                // The other driver may have let go because the engine is stopping: do not pick
                // the child up again then (recovery will, at the next open).
                if shell.tasks.is_stopping() {
                    return Err(NodeError::Cancelled);
                }
            }
        }
    }
}
