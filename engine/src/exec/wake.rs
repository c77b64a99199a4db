//! What happens when an armed timer or deadline comes due: the exec layer's side of the
//! coordinator's timers.

use std::sync::{Arc, Weak};

use cairn_storage::{ThreadId, ThreadStatus};
use futures::future::BoxFuture;

use super::drive::spawn_drive;
use super::parked::{time_out_parked, write_parked};
use super::shell::Shell;
use crate::coord::{Due, Wake};
use crate::core::event::Body;
use crate::core::status::Transition;

/// Records due timers and deadlines for the engine whose shell this points to (weakly: the
/// coordinator that holds this must not keep the engine alive).
pub(crate) struct Waker(pub Weak<Shell>);

impl Wake for Waker {
    fn due(&self, thread: ThreadId, due: Due) -> BoxFuture<'static, ()> {
        let shell = self.0.upgrade();
        Box::pin(async move {
            let Some(shell) = shell else { return };
            match due {
                Due::Timer { task, until_ms } => fire_timer(&shell, thread, task, until_ms).await,
                Due::Deadline { .. } => {
                    if let Err(e) = time_out_parked(&shell, &thread).await {
                        tracing::debug!(thread = %thread, error = %e, "deadline of a parked thread");
                    }
                }
            }
        })
    }
}

/// Records that a sleeping thread's timer fired and wakes it in the same batch; a thread that
/// is no longer Sleeping (cancelled, paused) is left alone: a resume arms a paused sleeper's
/// timer again.
async fn fire_timer(
    shell: &Arc<Shell>,
    thread: ThreadId,
    task: crate::core::event::TaskKey,
    until_ms: u64,
) {
    let body = Body::TimerFired { task, until_ms };
    let woken =
        write_parked(shell, &thread, ThreadStatus::Sleeping, vec![body], Some(Transition::Run))
            .await;
    match woken {
        Ok(()) => spawn_drive(shell, thread, "timer fired"),
        Err(e) => tracing::debug!(thread = %thread, error = %e, "timer not delivered"),
    }
}
