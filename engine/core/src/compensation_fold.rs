//! How compensation folds: the undos a completed task registered, and where a failed thread's
//! unwinding stands (the records are in `compensation.rs`).

use crate::compensation::{Unwinding, registered};
use crate::error::Error;
use crate::event::Body;
use crate::thread_ctx::{EventAt, ThreadCtx};

/// Folds compensation's part of `e` into `ctx`: the undos a completion registers (read from
/// its task's journal, so it runs after the journals), and the unwinding's progress.
///
/// # Errors
/// None: every event folds.
pub(crate) fn fold(ctx: &mut ThreadCtx, e: EventAt<'_>) -> Result<(), Error> {
    let m = &mut ctx.meta;
    match e.body {
        Body::NodeCompleted { step, task, .. } => {
            let values = m.open.get(task).map_or(&[][..], |j| &j.values);
            let undos = registered(task, *step, values);
            m.undos.extend(undos);
        }
        Body::CompensationBegan { reason, .. } => {
            let reason = reason.clone();
            m.unwinding = Some(Unwinding { reason, done: 0, running: None });
        }
        Body::UndoStarted { index, .. } => {
            if let Some(u) = &mut m.unwinding {
                u.running = Some(*index);
            }
        }
        Body::UndoFinished { .. } => {
            if let Some(u) = &mut m.unwinding {
                u.running = None;
                u.done += 1;
            }
        }
        _ => {}
    }
    Ok(())
}
