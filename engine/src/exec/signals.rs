//! Signals a thread's nodes receive (`ctx.recv`, `ctx.try_recv`), and waking a thread parked on
//! one.
//!
//! A sender writes only the thread's inbox (`Engine::signal`, storage's `Batch::signals`), never
//! its log: a runner's batches carry a `LastSeq` guard, so a write to the log behind its back
//! would fence it. A receipt is a recorded value of the receiving task (`core/drawn.rs`
//! `Drawn::Signal`: name, number, value) that goes to the log with the task's next record (a
//! tool call, its completion or suspension), before anything the node does with it can be seen;
//! folding it moves `ThreadMeta::signals`, the last number received per name. So a task that
//! runs again after a crash receives the same signals from its journal, and a signal whose
//! receipt a crash lost is received again by the same task: each is received once in the log.
//!
//! Tasks of one step share a cursor (`signal_cursor.rs`), reset from the thread context at
//! every step, so two tasks receiving the same name concurrently take different signals.
//!
//! Waking: a task that finds nothing parks the thread (`SignalAwaited`, WaitingInput). A
//! sender that finds the thread so parked wakes it ([`wake_if_sent`]: `SignalArrived` and
//! Running in one guarded write); a runner that has just parked looks again after letting go,
//! since a signal sent between its look and its park found the thread still running. The
//! status guard lets one of the two wake it.

use std::sync::Arc;

use cairn_storage::{ThreadId, ThreadStatus};

use super::shell::Shell;
use crate::core::event::Body;
use crate::core::status::Transition;
use crate::core::thread_ctx::Waiting;
use crate::error::Error;

/// Wakes `thread` if it is parked waiting for a signal that has been sent: records
/// `SignalArrived` and Running in one write guarded by its WaitingInput status. True if this
/// call woke it, and the caller then drives it (`drive::spawn_drive`); false: not parked on a
/// signal, none sent yet, or somebody else woke or changed it first.
///
/// # Errors
/// Storage errors; an unknown workflow.
pub(crate) async fn wake_if_sent(shell: &Arc<Shell>, thread: &ThreadId) -> Result<bool, Error> {
    let store = shell.store.as_ref();
    let Some(record) = store.thread_async(thread).await? else { return Ok(false) };
    if record.status != ThreadStatus::WaitingInput {
        return Ok(false);
    }
    // Cheap first look: a thread never sent a signal needs no restore.
    if store.signals_async(thread, 0, 1).await?.is_empty() {
        return Ok(false);
    }
    // A sub-workflow child has one driver, its parent's node: it is not driven on its own
    // (its signal waits in the inbox until the parent runs the child again).
    if super::fetch::unfinished_parent(store, &record).await?.is_some() {
        return Ok(false);
    }
    let wf = shell.registry.workflow_for(&record)?;
    let ctx = super::fetch::restore(store, &wf, thread, None).await?;
    let Some(Waiting::Signal { task, name }) = ctx.meta.waiting.clone() else { return Ok(false) };
    let after = ctx.meta.signals.get(&name).copied().unwrap_or(0);
    if super::signal_cursor::next_of(store, thread, &name, after).await?.is_none() {
        return Ok(false);
    }
    let body = Body::SignalArrived { task, name };
    let woke = super::parked::write_parked(
        shell,
        thread,
        ThreadStatus::WaitingInput,
        vec![body],
        Some(Transition::Run),
    )
    .await;
    match woke {
        Ok(()) => Ok(true),
        // Woken (or paused, cancelled) by somebody else between the read and the write.
        Err(Error::WrongStatus { .. }) => Ok(false),
        Err(e) => Err(e),
    }
}
