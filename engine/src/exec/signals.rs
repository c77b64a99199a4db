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
//!
//! A select that also waits for children's ends (`Select::child`) parks the same way, and the
//! end of one of its children wakes it as a signal would (`SignalArrived` naming
//! `cairn.child.<id>`): the end of the child looks at its parent ([`selecting_parent_woken`],
//! from the drive that ended it or the control that cancelled it), the parent looks at its
//! children after it parks, and recovery
//! looks at every parked thread, so a crash between the child's end and the wake loses nothing.
//!
//! A sub-workflow's child has one driver, its parent's node, and a parked child parks its
//! parent (waiting for input at the node that drives the child, level by level up to a
//! top-level thread). A signal to a parked child wakes the top of that chain: the chain is
//! followed down from the top (each level's waiting task is a subgraph node, its child's id a
//! function of the parent, task and step) to the thread parked in `recv`, and the top records
//! `SignalArrived` for its waiting task and runs. Its node runs the child again
//! (`child_run.rs` calls [`wake_parked`] for the child), which records `SignalArrived` in the child
//! before it drives it, and so on down. One write wakes the chain, so a crash leaves either
//! the whole chain parked (woken by recovery, which looks from any of its threads) or the top
//! running, whose re-run wakes the rest.

use std::sync::Arc;

use cairn_storage::{ThreadId, ThreadRecord, ThreadStatus};

use super::shell::Shell;
use crate::core::event::{Body, TaskKey};
use crate::core::status::Transition;
use crate::core::thread_ctx::Waiting;
use crate::error::Error;

/// Wakes the thread that drives `thread` if `thread` is parked waiting for a signal that has
/// been sent: `thread` itself, or for a sub-workflow's child the top-level thread whose chain
/// of subgraph nodes drives it. Returns the thread woken, which the caller then drives
/// (`drive::spawn_drive`); `None`: not parked on a signal, none sent yet, or somebody else woke
/// or changed it first.
///
/// # Errors
/// Storage errors; an unknown workflow.
pub(crate) async fn wake_if_sent(
    shell: &Arc<Shell>,
    thread: &ThreadId,
) -> Result<Option<ThreadId>, Error> {
    let store = shell.store.as_ref();
    let Some(mut record) = store.thread(thread).await? else { return Ok(None) };
    // Up to the thread nobody else drives: a child's driver is its unfinished parent's node.
    // Bounded: the depth of nesting is, and a damaged label must not loop.
    for _ in 0..=crate::limits::SUBGRAPH_DEPTH_MAX {
        let Some(parent) = super::fetch::unfinished_parent(store, &record).await? else {
            return Ok(wake_parked(shell, &record).await?.then(|| record.id.clone()));
        };
        let Some(up) = store.thread(&parent).await? else { return Ok(None) };
        record = up;
    }
    Ok(None)
}

/// Wakes `record`'s thread, which nobody drives, if it is parked on a signal that has been
/// sent, itself or through the chain of sub-workflow children its waiting task drives. True if
/// this call woke it.
///
/// # Errors
/// Storage errors; an unknown workflow.
pub(crate) async fn wake_parked(shell: &Arc<Shell>, record: &ThreadRecord) -> Result<bool, Error> {
    if crate::core::child_start::pinned_elsewhere(&record.labels, shell.config.build_id.as_deref())
    {
        // Pinned to another worker build: the signal waits in its inbox for an engine of that
        // build (its recovery and looks for work wake it) or for a `repin`.
        return Ok(false);
    }
    let Some((task, name)) = pending(shell, record).await? else { return Ok(false) };
    let body = Body::SignalArrived { task, name };
    // WaitingInput in `recv`, or Sleeping in a select with a deadline (`pending` saw which).
    let woke = super::parked::write_parked(
        shell,
        &record.id,
        record.status,
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

/// If `top` waits for a signal that is in its inbox (in `recv`, or in a select, which sleeps
/// when it has a deadline), or waits at a subgraph node whose child (and so on down) does: the
/// task `top` waits in and the signal's name.
async fn pending(shell: &Shell, top: &ThreadRecord) -> Result<Option<(TaskKey, String)>, Error> {
    let store = shell.store.as_ref();
    let mut record = top.clone();
    let mut top_task = None;
    for _ in 0..=crate::limits::SUBGRAPH_DEPTH_MAX {
        if !matches!(record.status, ThreadStatus::WaitingInput | ThreadStatus::Sleeping) {
            return Ok(None);
        }
        let wf = shell.registry.workflow_for(&record)?;
        let has_subgraph =
            wf.nodes().iter().any(|n| matches!(n.kind, cairn_dsl::DynNodeKind::Subgraph { .. }));
        // Cheap first look: a thread never sent a signal, whose waits cannot be a child's
        // (a sub-workflow's, or the end of one it selects), needs no restore.
        if !has_subgraph
            && !crate::core::summary::selecting_children(&record.summary)
            && store.signals(&record.id, 0, 1).await?.is_empty()
        {
            return Ok(None);
        }
        let ctx = super::fetch::restore(store, &wf, &record.id, None).await?;
        let selecting = |task: &TaskKey| {
            ctx.meta.open.get(task).and_then(|j| crate::core::select::pending_names(&j.values))
        };
        // The names a task waits for: its select's, else its `recv`'s.
        let waits_for = match &ctx.meta.waiting {
            Some(Waiting::Signal { task, name }) => {
                Some((task, selecting(task).unwrap_or_else(|| vec![name.clone()])))
            }
            Some(Waiting::Timer { task, .. }) => selecting(task).map(|names| (task, names)),
            _ => None,
        };
        if let Some((task, names)) = waits_for {
            let sent = match first_sent(store, &record.id, &ctx, &names).await? {
                Some(name) => Some(name),
                None => first_ended(store, &ctx, task).await?,
            };
            return Ok(sent.map(|name| (top_task.unwrap_or_else(|| task.clone()), name)));
        }
        match ctx.meta.waiting {
            Some(Waiting::Signal { .. }) => return Ok(None),
            Some(Waiting::Input { task, .. } | Waiting::Timer { task, .. }) => {
                let sub = wf.node_id(&task.node).is_some_and(|i| {
                    matches!(wf.nodes()[i].kind, cairn_dsl::DynNodeKind::Subgraph { .. })
                });
                if !sub {
                    return Ok(None);
                }
                let child = super::subgraph::child_id(&record.id, &task, ctx.meta.step + 1);
                top_task.get_or_insert(task);
                let Some(next) = store.thread(&ThreadId::new(child)?).await? else {
                    return Ok(None);
                };
                record = next;
            }
            None => return Ok(None),
        }
    }
    Ok(None)
}

/// The name a child's end wakes the select `task` is parked in by (`core/select.rs`
/// `child_end_name`), for the first of the children it waits for that has ended, if one has.
async fn first_ended(
    store: &dyn cairn_storage::Store,
    ctx: &crate::core::thread_ctx::ThreadCtx,
    task: &TaskKey,
) -> Result<Option<String>, Error> {
    let Some(journal) = ctx.meta.open.get(task) else { return Ok(None) };
    for child in crate::core::select::pending_children(&journal.values) {
        let id = ThreadId::new(child.clone())?;
        if store.thread(&id).await?.is_some_and(|r| r.status.is_terminal()) {
            return Ok(Some(crate::core::select::child_end_name(&child)));
        }
    }
    Ok(None)
}

/// The parent that started the thread `child` (`ctx.start_child`), which has ended, woken if it
/// is parked in a select that waits for `child`'s end: the thread woken, for the caller to
/// drive (`drive::wake_selecting_parent`); `None`: no such parent, or not so parked.
///
/// # Errors
/// Storage errors; an unknown workflow.
pub(crate) async fn selecting_parent_woken(
    shell: &Arc<Shell>,
    child: &ThreadId,
) -> Result<Option<ThreadId>, Error> {
    let Some(record) = shell.store.thread(child).await? else { return Ok(None) };
    let Some(parent) = record.labels.get(crate::core::child_start::STARTED_BY_LABEL) else {
        return Ok(None);
    };
    wake_if_sent(shell, &ThreadId::new(parent.clone())?).await
}

/// The name of a signal of `names` sent to `thread` and not yet received, if there is one.
async fn first_sent(
    store: &dyn cairn_storage::Store,
    thread: &ThreadId,
    ctx: &crate::core::thread_ctx::ThreadCtx,
    names: &[String],
) -> Result<Option<String>, Error> {
    for name in names {
        let after = ctx.meta.signals.get(name).copied().unwrap_or(0);
        if super::signal_cursor::next_of(store, thread, name, after).await?.is_some() {
            return Ok(Some(name.clone()));
        }
    }
    Ok(None)
}
