//! Parking and waits in the fold: what a parked thread waits for (input, a signal, a timer),
//! set by the event that parks it and cleared by the one that wakes it, and the number of the
//! last signal of each name its nodes received (a receive is among a task's drawn values).

use crate::drawn;
use crate::error::Error;
use crate::event::Body;
use crate::thread_ctx::EventAt;
use crate::thread_ctx::{ThreadCtx, Waiting};

/// Folds the waits' part of `e` into `ctx`.
///
/// # Errors
/// None: every event folds.
pub(crate) fn fold(ctx: &mut ThreadCtx, e: EventAt<'_>) -> Result<(), Error> {
    let m = &mut ctx.meta;
    if let Body::ToolCalled { values, .. }
    | Body::NodeCompleted { values, .. }
    | Body::InputRequested { values, .. }
    | Body::SignalAwaited { values, .. }
    | Body::TimerSet { values, .. } = e.body
    {
        for (name, n) in drawn::signals_in(values) {
            let last = m.signals.entry(name.to_owned()).or_default();
            *last = (*last).max(n);
        }
    }
    match e.body {
        Body::InputRequested { task, prompt, .. } => {
            m.waiting = Some(Waiting::Input { task: task.clone(), prompt: prompt.clone() });
        }
        Body::SignalAwaited { task, name, .. } => {
            m.waiting = Some(Waiting::Signal { task: task.clone(), name: name.clone() });
        }
        Body::TimerSet { task, until_ms, .. } => {
            m.waiting = Some(Waiting::Timer { task: task.clone(), until_ms: *until_ms });
        }
        Body::InputReceived { .. } | Body::SignalArrived { .. } | Body::TimerFired { .. } => {
            m.waiting = None;
        }
        _ => {}
    }
    Ok(())
}
