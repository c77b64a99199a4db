//! Changes to a thread nobody drives, written under a claim with a guard on its stored status:
//! waking it (input, timer), pausing it, ending it from outside (cancel, deadline), and the
//! handing of a control to its runner when somebody does drive it.

use cairn_dsl::DynWorkflow;
use cairn_storage::{Batch, Guard, LockOp, ThreadId, ThreadRecord, ThreadStatus};
use serde_json::Value;

use super::shell::Shell;
use crate::coord::Request;
use crate::core::codec;
use crate::core::event::Body;
use crate::core::status::{Transition, transition};
use crate::core::thread_ctx::Waiting;
use crate::error::Error;

/// The stored record of `id`.
///
/// # Errors
/// [`Error::UnknownThread`]; storage errors.
pub(crate) async fn stored(shell: &Shell, id: &ThreadId) -> Result<ThreadRecord, Error> {
    super::fetch::record(shell.store.as_ref(), id).await
}

/// Appends events to a thread no runner drives, guarded by its expected status; with
/// `next`, the same batch moves it on: `Run` wakes it (so that nobody sees it waiting after
/// the input or timer that ends the wait is recorded), `WaitInput` or `Sleep` puts a paused
/// thread back into the wait it was paused in.
///
/// # Errors
/// [`Error::WrongStatus`] if the thread's status is not `expected` (or stops being it before
/// the write).
pub(crate) async fn write_parked(
    shell: &Shell,
    thread: &ThreadId,
    expected: ThreadStatus,
    bodies: Vec<Body>,
    next: Option<Transition>,
) -> Result<(), Error> {
    let record = stored(shell, thread).await?;
    write_read(shell, record, expected, bodies, next, false).await
}

/// [`write_parked`] of `record`, read by the caller, which may have looked into it; with
/// `same_log`, refused (as [`Error::WrongStatus`]) when the thread's log moved on since the read,
/// though its status is the same again.
pub(crate) async fn write_read(
    shell: &Shell,
    record: ThreadRecord,
    expected: ThreadStatus,
    mut bodies: Vec<Body>,
    next: Option<Transition>,
    same_log: bool,
) -> Result<(), Error> {
    let now = shell.clock.now_ms();
    let thread = &record.id.clone();
    if record.status != expected {
        return Err(Error::WrongStatus {
            thread: thread.to_string(),
            status: record.status,
            detail: format!("it is not {expected}"),
        });
    }
    let last = record.last.map_or(cairn_storage::Seq(0), |b| b.seq);
    let mut to = expected;
    if let Some(t) = next {
        to = transition(expected, t)
            .map_err(|source| Error::Transition { thread: thread.to_string(), source })?;
        let reason = if t == Transition::Run { "woken" } else { "resumed into its wait" };
        bodies.push(Body::StatusChanged { from: expected, to, reason: reason.into() });
    }
    let mut batch = move_batch(record, to, &bodies, now)?;
    if same_log {
        batch.guards.push(Guard::LastSeq { thread: thread.clone(), seq: last });
    }
    let store = shell.store.as_ref();
    let parked = || -> futures::future::BoxFuture<'_, bool> {
        Box::pin(async move {
            matches!(super::fetch::status(store, thread).await, Ok(Some(s)) if s == expected)
        })
    };
    let Some(_claim) = shell.coord.claim_parked(thread, &parked).await else {
        return Err(Error::WrongStatus {
            thread: thread.to_string(),
            status: ThreadStatus::Running,
            detail: "a runner is driving it".into(),
        });
    };
    let result = async { shell.store.append_async(batch).await?.wait().await }.await.map(|_| ());
    shell.coord.release(thread);
    match result {
        Ok(()) => {
            if next.is_some() {
                // Handles waiting on this thread must not see the old status any more.
                shell.coord.status_changed(thread, to).await;
            }
            Ok(())
        }
        // The status (or, with `same_log`, the log) moved between the read and the commit.
        Err(cairn_storage::Error::GuardFailed { .. }) => Err(Error::WrongStatus {
            thread: thread.to_string(),
            status: super::fetch::status(shell.store.as_ref(), thread).await?.unwrap_or(expected),
            detail: format!("it stopped being {expected}"),
        }),
        Err(e) => Err(e.into()),
    }
}

/// Times out a parked thread whose deadline passed (a running one times out through its
/// runner's own watcher).
pub(crate) async fn time_out_parked(shell: &Shell, thread: &ThreadId) -> Result<(), Error> {
    if shell.coord.is_driven(thread) {
        return Ok(());
    }
    let record = stored(shell, thread).await?;
    if record.status.is_terminal() || record.status == ThreadStatus::Running {
        return Ok(());
    }
    let why = "the thread's deadline passed";
    end_from_outside(shell, thread.as_str(), Transition::TimeOut, why).await
}

/// Ends a thread from outside, then its unfinished descendants (sub-workflow child
/// threads), found level by level without recursion.
pub(crate) async fn end_from_outside(
    shell: &Shell,
    thread: &str,
    t: Transition,
    reason: &str,
) -> Result<(), Error> {
    end_one(shell, thread, t, reason).await?;
    let mut parents = vec![ThreadId::new(thread)?];
    while let Some(parent) = parents.pop() {
        let children = super::fetch::children_of(shell.store.as_ref(), &parent).await?;
        for child in children.into_iter().filter(|c| !c.status.is_terminal()) {
            let why = format!("parent {parent} ended: {reason}");
            if let Err(e) = end_one(shell, child.id.as_str(), t, &why).await {
                tracing::warn!(thread = %child.id, error = %e, "child thread not ended");
            }
            parents.push(child.id);
        }
    }
    Ok(())
}

async fn end_one(shell: &Shell, thread: &str, t: Transition, reason: &str) -> Result<(), Error> {
    let id = ThreadId::new(thread)?;
    let wanted = transition(ThreadStatus::Running, t)
        .map_err(|source| Error::Transition { thread: id.to_string(), source })?;
    let mut asked = false;
    loop {
        let request = if t == Transition::TimeOut {
            Request::TimeOut
        } else {
            Request::Cancel(reason.into())
        };
        if shell.coord.deliver(&id, request).await {
            // Done only once the end is durable: wait for the runner to let go, then read
            // how it left the thread (it may have parked or ended before it saw the
            // request; a parked thread is ended below).
            shell.coord.wait_released(&id).await;
            asked = true;
            continue;
        }
        let record = stored(shell, &id).await?;
        if asked && record.status == wanted {
            return Ok(());
        }
        let to = transition(record.status, t)
            .map_err(|source| Error::Transition { thread: id.to_string(), source })?;
        let now = shell.clock.now_ms();
        let mut bodies = Vec::new();
        for lock in shell.store.locks().await?.into_iter().filter(|l| l.owner == id.as_str()) {
            bodies.push(Body::Lock { name: lock.name, acquired: false });
        }
        let released_locks = !bodies.is_empty();
        bodies.push(Body::StatusChanged { from: record.status, to, reason: reason.to_owned() });
        let mut batch = move_batch(ThreadRecord { lease: None, ..record }, to, &bodies, now)?;
        batch.locks.push(LockOp::ReleaseAll { owner: id.to_string() });
        let Some(_claim) = shell.coord.claim(&id, None) else { continue };
        let result = async { shell.store.append_async(batch).await?.wait().await }.await;
        shell.coord.release(&id);
        match result {
            Ok(_) => {
                shell.coord.disarm(&id);
                shell.coord.status_changed(&id, to).await;
                shell.coord.locks_released();
                if released_locks && let Ok(locks) = shell.store.locks().await {
                    shell.metrics.set_locks_held(locks.len());
                }
                shell.verified.forget(&id);
                return Ok(());
            }
            // The status moved under us (a timer fired, input arrived): look again.
            Err(cairn_storage::Error::GuardFailed { .. }) => continue,
            Err(e) => return Err(e.into()),
        }
    }
}

/// Asks a thread to pause at its next step boundary (a parked thread pauses at once: one
/// waiting for input then refuses input, and one sleeping does not wake, until resumed).
/// Survives a restart: the Paused status is recorded. Once this returns, only
/// [`crate::Engine::resume`] moves the thread out of Paused.
///
/// # Errors
/// [`Error::Transition`] if the thread cannot pause from its status.
pub(crate) async fn pause(shell: &Shell, thread: &str) -> Result<(), Error> {
    let id = ThreadId::new(thread)?;
    loop {
        if shell.coord.deliver(&id, Request::Pause).await {
            // As for cancel: done once the runner has let go with the pause durable, or
            // has parked otherwise (then the parked thread is paused below).
            shell.coord.wait_released(&id).await;
            continue;
        }
        let record = stored(shell, &id).await?;
        if record.status == ThreadStatus::Paused {
            return Ok(());
        }
        let to = transition(record.status, Transition::Pause)
            .map_err(|source| Error::Transition { thread: id.to_string(), source })?;
        let body = Body::StatusChanged { from: record.status, to, reason: "paused".into() };
        // A paused sleeper's timer stays armed: when it fires it finds the thread Paused and
        // does nothing (`resume` arms it again). Disarming it here could race a resume's
        // new timer.
        match write_status(shell, &record, to, vec![body]).await {
            // A runner took the thread (or its status moved) between our read and our
            // write: look again.
            Err(Error::WrongStatus { .. })
            | Err(Error::Storage(cairn_storage::Error::GuardFailed { .. })) => continue,
            other => return other,
        }
    }
}

async fn write_status(
    shell: &Shell,
    record: &ThreadRecord,
    to: ThreadStatus,
    bodies: Vec<Body>,
) -> Result<(), Error> {
    let id = &record.id;
    let batch = move_batch(record.clone(), to, &bodies, shell.clock.now_ms())?;
    let Some(_claim) = shell.coord.claim(id, None) else {
        return Err(Error::WrongStatus {
            thread: id.to_string(),
            status: ThreadStatus::Running,
            detail: "a runner is driving it".into(),
        });
    };
    let result = async { shell.store.append_async(batch).await?.wait().await }.await;
    shell.coord.release(id);
    result?;
    shell.coord.status_changed(id, to).await;
    Ok(())
}

/// One batch that records `bodies` at `now` and moves the thread record `rec` to status `to`,
/// guarded by the status in `rec` (refused if the stored one moved since it was read).
pub(crate) fn move_batch(
    mut rec: ThreadRecord,
    to: ThreadStatus,
    bodies: &[Body],
    now: u64,
) -> Result<Batch, Error> {
    let (id, expected) = (rec.id.clone(), rec.status);
    let mut batch = Batch::default();
    for body in bodies {
        codec::push_event(&mut batch, &id, body, now)?;
    }
    (rec.status, rec.updated_at_ms) = (to, now);
    batch.wakes.extend(crate::coord::wake_hint(&rec, None).map(|w| (id.clone(), w)));
    batch.threads.push(rec);
    batch.guards.push(Guard::Status { thread: id, expected });
    Ok(batch)
}

/// Records `value` as the input a waiting thread asked for.
///
/// # Errors
/// [`Error::WrongStatus`] if the thread is not waiting for input.
pub(crate) async fn deliver_input(
    shell: &Shell,
    wf: &DynWorkflow,
    id: &ThreadId,
    value: Value,
) -> Result<(), Error> {
    let ctx = super::fetch::restore(shell.store.as_ref(), wf, id, None).await?;
    let Some(Waiting::Input { task, .. }) = ctx.meta.waiting.clone() else {
        return Err(Error::WrongStatus {
            thread: id.to_string(),
            status: ctx.meta.status,
            detail: "it is not waiting for input".into(),
        });
    };
    write_parked(
        shell,
        id,
        ThreadStatus::WaitingInput,
        vec![Body::InputReceived { task, value }],
        Some(Transition::Run),
    )
    .await
}
