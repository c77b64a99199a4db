//! Driving a thread: claim it, restore it, check it against the code, run it, let it go.
//!
//! [`spawn_drive`] queues a thread under the engine's concurrency limit; [`drive_under`] drives
//! it inline (a sub-workflow's child, under its parent's cancellation). Either way one runner
//! at a time: the coordinator's claim decides.

use std::sync::Arc;

use cairn_storage::{ThreadId, ThreadStatus};
use tokio_util::sync::CancellationToken;
use tracing::Instrument as _;

use super::child_drive::LiveChildren;
use super::env::ThreadEnv;
use super::fetch;
use super::pipeline::Pipeline;
use super::runner::{Exit, Runner};
use super::shell::Shell;
use super::stop::{StopSlot, in_doubt};
use crate::coord::{Control, Due};
use crate::core::restore::{Restore, Restored};
use crate::core::thread_ctx::ThreadCtx;
use crate::error::Error;

/// Longest pause before a thread whose runner stopped on a failed write is driven again.
const DRIVE_AGAIN_BACKOFF_MAX: std::time::Duration = std::time::Duration::from_secs(5);

/// Drives `thread` in the background under the concurrency limit. If something else holds the
/// thread at that moment (another runner, or a control writing to it), waits until it lets go
/// and looks again: the runner then finds the thread as that holder left it (running on,
/// parked, ended), so a wake is never dropped because of a passing claim.
pub(crate) fn spawn_drive(shell: &Arc<Shell>, thread: ThreadId, reason: &'static str) {
    drive_queued(shell, thread, reason, false);
}

/// [`spawn_drive`] after the first pause of a drive that stopped on a failed write.
pub(super) fn spawn_drive_after(shell: &Arc<Shell>, thread: ThreadId, reason: &'static str) {
    drive_queued(shell, thread, reason, true);
}

fn drive_queued(shell: &Arc<Shell>, thread: ThreadId, reason: &'static str, pause_first: bool) {
    let s = shell.clone();
    let counted = shell.queued.enter(&thread);
    shell.tasks.spawn(async move {
        let _counted = counted;
        let mut backoff = std::time::Duration::from_millis(s.config.poll_ms.max(1));
        let mut pause = pause_first;
        loop {
            if std::mem::take(&mut pause) {
                tokio::select! {
                    () = pause_before_driving_again(&s, backoff) => {}
                    () = s.tasks.stopping().cancelled() => return,
                }
                backoff = (backoff * 2).min(DRIVE_AGAIN_BACKOFF_MAX);
            }
            let waiting = s.metrics.waiting_permit();
            let Ok(permit) = s.permits.clone().acquire_owned().await else { return };
            drop(waiting);
            if s.tasks.is_stopping() {
                return;
            }
            // Boxed: a task waiting for its permit holds only this small future, not the
            // runner's whole state machine (10,000 queued threads must stay cheap).
            match Box::pin(drive_under(s.clone(), thread.clone(), 0, reason, None)).await {
                Ok(Exit::Busy) => {
                    drop(permit);
                    s.coord.wait_released(&thread).await;
                }
                // Another engine drives it: it is that engine's until its lease lapses, when
                // the shared-database poller finds it again.
                Ok(_) => return,
                // Accounted for by `stopped_by`; driven again after a pause (the permit goes back
                // meanwhile).
                Err(e) if stopped_by(&s, &thread, &e) => pause = true,
                Err(_) => return,
            }
        }
    });
}

/// Waits `backoff`, and then, on a store that refuses writes as a whole after a failed commit
/// (see [`cairn_storage::Backend::refusals`]), until it takes them again.
async fn pause_before_driving_again(shell: &Shell, backoff: std::time::Duration) {
    tokio::time::sleep(backoff).await;
    if let Some(mut refusals) = shell.store.refusals() {
        // An error: the store is gone, and so is the engine's work with it.
        let _ = refusals.wait_for(Option::is_none).await;
    }
}

/// Accounts for a runner of `thread` that stopped with `e`; true if the thread is to be driven
/// again from its log after a pause.
pub(super) fn stopped_by(shell: &Shell, thread: &ThreadId, e: &Error) -> bool {
    match e {
        e if failed_commit(e) && shell.store.refusals().is_some() => {
            // The store refuses writes until it has reopened its database (a full disk, an I/O
            // error): driven again from its log once it takes them (recovery would not find it
            // if it ran before this runner let the thread go).
            tracing::warn!(thread = %thread, error = %e, "runner stopped by a failed commit; driving the thread again once the store takes writes");
            true
        }
        e if fenced(e) && shell.coord.has_peers() => {
            // Another engine took the thread over (this one stalled past its lease) or changed
            // it (a control from another process): the refusal is the fence doing its work, and
            // the thread goes on under whoever holds it now.
            shell.acks.fenced();
            shell.metrics.runners_fenced.increment(1);
            tracing::info!(thread = %thread, error = %e, "runner fenced off its thread");
            false
        }
        e if in_doubt(e) && shell.coord.has_peers() => {
            // A write failed or went unanswered on a shared database, whose store reconnects:
            // drive the thread again from its log, after a pause (this engine's lease is still
            // on it, so nobody else would for its ttl).
            tracing::warn!(thread = %thread, error = %e, "runner stopped by a failed write; driving the thread again from its log");
            true
        }
        e => {
            tracing::error!(thread = %thread, error = %e, "runner stopped with an error");
            false
        }
    }
}

/// Drives `thread` until it ends, parks, or the engine shuts down; with `parent`, cancelling
/// the parent's token cancels it too (a sub-workflow's child thread).
///
/// # Errors
/// Storage errors (a failed commit ends the run; nothing unacknowledged is visible), an unknown
/// or changed workflow, a log that does not fold.
pub(crate) async fn drive_under(
    shell: Arc<Shell>,
    thread: ThreadId,
    depth: usize,
    reason: &str,
    parent: Option<CancellationToken>,
) -> Result<Exit, Error> {
    let span = tracing::info_span!(
        "thread",
        thread = %thread,
        workflow = tracing::field::Empty,
        version = tracing::field::Empty,
        depth,
        reason,
    );
    crate::telemetry::adopt_thread_trace(&span, thread.as_str());
    async move {
        let Some(control) = shell.coord.claim(&thread, parent.as_ref()) else {
            return Ok(Exit::Busy);
        };
        let result = drive_claimed(&shell, &thread, depth, reason, &control).await;
        released(&shell, &thread, &result).await;
        wake_if_signalled(&shell, &thread, &result).await;
        if matches!(result, Ok(Exit::Status(s)) if s.is_terminal()) {
            wake_selecting_parent(&shell, &thread);
        }
        result
    }
    .instrument(span)
    .await
}

/// Lets `thread` go after a drive that ended with `result`: releases its claim, tells its
/// watchers where it stands, and arms a parked thread's deadline.
pub(super) async fn released(shell: &Shell, thread: &ThreadId, result: &Result<Exit, Error>) {
    released_then(shell, thread, result, || {}).await;
}

/// [`released`], calling `then` once the thread is let go and its end (if it ended) published
/// to its waiters, before anything that reads the store.
pub(super) async fn released_then(
    shell: &Shell,
    thread: &ThreadId,
    result: &Result<Exit, Error>,
    then: impl FnOnce(),
) {
    // A thread that ended may have freed a queue slot somebody waits for (`api/queues.rs`).
    if shell.queue_waiting.load(std::sync::atomic::Ordering::Relaxed) {
        shell.admit.notify_one();
    }
    shell.coord.release(thread);
    then();
    match result {
        Ok(Exit::Status(s)) => {
            shell.coord.status_changed(thread, *s).await;
            if s.is_terminal() {
                shell.verified.forget(thread);
            } else {
                arm_parked_deadline(shell, thread).await;
            }
        }
        // Nothing drives the thread now, and nothing will until the store recovers or another
        // engine takes it: its waiters hear why at once instead of waiting on a Running status.
        Err(e) if !moved_on_by_another(shell, e) => shell.coord.stopped(thread, &stop_cause(e)),
        _ => {}
    }
}

/// What a runner's waiters hear when it stopped with `e`: the failure that poisoned the store
/// when `e` is a write refused because of it ([`cairn_storage::Error::Poisoned`]), else `e`.
/// A runner whose batch was still in flight when the disk filled stops on the refusal of its
/// next batch, after the in-flight one failed with the cause; its waiters must hear that cause
/// whichever they notice first, the runner's stop or the store's refusal (which a wait
/// watches too, and which carries the cause): it used to depend on the race.
fn stop_cause(e: &Error) -> Error {
    match e {
        Error::Storage(cairn_storage::Error::Poisoned { cause }) => {
            Error::Storage(cairn_storage::Error::clone(cause))
        }
        e => e.clone(),
    }
}

/// Whether a runner that stopped with `e` leaves its thread to another writer, whose change
/// reaches the waiters as any does: the one whose write fenced it off (a control, another
/// engine), the next engine to open after a shutdown, or on a shared database this engine again
/// after a pause (a write in doubt, see [`stopped_by`]).
fn moved_on_by_another(shell: &Shell, e: &Error) -> bool {
    fenced(e) || matches!(e, Error::ShutDown) || (shell.coord.has_peers() && in_doubt(e))
}

/// A thread its runner left waiting for input (in `recv`) or sleeping (in a select with a
/// deadline) may be waiting for a signal sent after its node looked and before this park (the
/// send found the thread still running, so nobody woke it): it looks at its inbox again now
/// that it is parked and let go.
pub(super) async fn wake_if_signalled(
    shell: &Arc<Shell>,
    thread: &ThreadId,
    result: &Result<Exit, Error>,
) {
    if !matches!(result, Ok(Exit::Status(ThreadStatus::WaitingInput | ThreadStatus::Sleeping))) {
        return;
    }
    match super::signals::wake_if_sent(shell, thread).await {
        Ok(Some(top)) => spawn_drive(shell, top, "signal received"),
        Ok(None) => {}
        Err(e) => {
            tracing::warn!(thread = %thread, error = %e, "parked thread not woken by its signal");
        }
    }
}

/// The thread `child` has ended (durably): the parent that started it, if it is parked in a
/// select that waits for `child`'s end, is woken and driven, in the background. A wake lost here
/// (a crash, a failed read) is not lost for good: the parent looks again after it parks, and
/// recovery looks at every parked thread.
pub(crate) fn wake_selecting_parent(shell: &Arc<Shell>, child: &ThreadId) {
    let (s, child) = (shell.clone(), child.clone());
    shell.tasks.spawn(async move {
        match super::signals::selecting_parent_woken(&s, &child).await {
            Ok(Some(top)) => spawn_drive(&s, top, "a child it selects ended"),
            Ok(None) => {}
            Err(e) => {
                tracing::warn!(thread = %child, error = %e, "its parent, selecting it, not woken");
            }
        }
    });
}

async fn drive_claimed(
    shell: &Arc<Shell>,
    thread: &ThreadId,
    depth: usize,
    reason: &str,
    control: &Arc<Control>,
) -> Result<Exit, Error> {
    let record = fetch::record(shell.store.as_ref(), thread).await?;
    if record.status.is_terminal() {
        return Ok(Exit::Status(record.status));
    }
    if record.status == ThreadStatus::Paused {
        // Paused since this run was queued (between the write that woke or started the thread
        // and this claim, the window in which `pause` records Paused itself): only `resume`
        // moves a thread out of Paused, so the acknowledged pause holds.
        return Ok(Exit::Status(ThreadStatus::Paused));
    }
    if crate::core::child_start::pinned_elsewhere(&record.labels, shell.config.build_id.as_deref())
    {
        // Pinned to another worker build: its engines drive it (`Engine::repin` moves it).
        tracing::debug!(thread = %thread, "not driven: pinned to another build");
        return Ok(Exit::Status(record.status));
    }
    let wf = shell.registry.workflow_for(&record)?;
    let span = tracing::Span::current();
    span.record("workflow", wf.id());
    span.record("version", wf.version());
    // A thread driven for the first time in this process is checked against the code (below):
    // its restore keeps the context it starts from, for the check's replay.
    let check = super::resume_check::needed(shell, thread, reason);
    let entry = || {
        let restore = Restore::new(&wf, thread.clone(), None);
        if check { restore.keeping_start() } else { restore }
    };
    let Restored { ctx, from, start } =
        fetch::restored(shell.store.as_ref(), thread, entry).await?;
    let ctx = *ctx;
    if ctx.meta.status.is_terminal() || ctx.meta.status == ThreadStatus::Paused {
        // The log moved on since the record was read (another engine ended or paused it).
        return Ok(Exit::Status(ctx.meta.status));
    }
    if ctx.meta.waiting.is_some() || matches!(record.status, ThreadStatus::Blocked) {
        // Waiting for input or a timer: only `send_input` or the timer may wake it.
        return Ok(Exit::Status(ctx.meta.status));
    }
    if super::delayed_start::hold(shell, thread, &record, &ctx) {
        return Ok(Exit::Status(ctx.meta.status));
    }
    // Replayed since where its restore started: if the code now diverges from what it
    // recorded, it is blocked, not run.
    if let Some(start) = start
        && let Some(s) =
            super::resume_check::check(shell, &wf, thread, &ctx, &record, *start).await?
    {
        return Ok(Exit::Status(s));
    }
    // The events after its latest intact checkpoint: the ones its restore folded.
    let tail = ctx.meta.seq.saturating_sub(from.covered());
    let (pipeline, acknowledger) = Pipeline::start(shell, thread, ctx.meta.seq, tail);
    let checkpointed_at_ms = from.checkpoint_at_ms();
    let claimed = Claimed { thread, depth, reason, control, wf, checkpointed_at_ms };
    let run = std::pin::pin!(run_claimed(shell, claimed, ctx, record, pipeline, false));
    acknowledger.beside(run).await.0
}

/// A thread this engine holds the claim of, and what it runs.
pub(super) struct Claimed<'a> {
    pub thread: &'a ThreadId,
    pub depth: usize,
    pub reason: &'a str,
    pub control: &'a Arc<Control>,
    pub wf: Arc<cairn_dsl::DynWorkflow>,
    /// When its latest checkpoint was written (the one its restore started from), if it has one.
    pub checkpointed_at_ms: Option<u64>,
}

/// Runs a claimed thread from `ctx` (its record `record`) with `pipeline` as its write path,
/// until it ends, parks or the engine stops. `begun`: its Running status and this engine's lease
/// are written already (a thread that `start` created running); otherwise the runner writes
/// them first.
///
/// The runner is made here, before the returned future is first polled, and boxed: the future
/// holds the box, not the context it was made from beside the runner that took it, so it stays
/// small where it is copied (into a spawned task's box, or a box of its own).
///
/// # Errors
/// As [`drive_under`].
pub(super) fn run_claimed<'a>(
    shell: &'a Arc<Shell>,
    claimed: Claimed<'a>,
    ctx: ThreadCtx,
    record: cairn_storage::ThreadRecord,
    pipeline: Pipeline,
    begun: bool,
) -> impl std::future::Future<Output = Result<Exit, Error>> + Send + 'a {
    let env = thread_env(shell, &claimed, &ctx, pipeline, begun);
    let Claimed { thread, reason, control, checkpointed_at_ms, .. } = claimed;
    if let Some(at) = ctx.meta.policy.deadline_at_ms {
        watch_deadline(shell, at, control);
    }
    let mut runner = Box::new(Runner::new(shell.clone(), env, ctx, record, checkpointed_at_ms));
    async move {
        if !begun && !runner.begin(reason).await? {
            return Ok(Exit::Elsewhere);
        }
        // Requests other processes stored while nobody here drove the thread are not left
        // behind (`update_inbox.rs`). A thread begun here from its creation has none: a
        // request is stored only once the creation is durable, and its sender then tells this
        // engine, whose lease the creation wrote (again until heard).
        if !begun && shell.store.shared().is_some() {
            control.note_update_requests();
        }
        let exit = runner.run(control).await?;
        if let Exit::Status(status) = exit
            && status.is_terminal()
        {
            // Counted here, where this engine ran it to its end (labelled with its workflow).
            let meta = &runner.ctx.meta;
            let took_ms = meta.updated_at_ms.saturating_sub(meta.created_at_ms);
            runner.env.metrics.thread_ended(status, took_ms);
        }
        if exit == Exit::Status(ThreadStatus::Failed)
            && let Some(hook) = &shell.on_failure
        {
            hook(shell, thread).await;
        }
        Ok(exit)
    }
}

/// What the runner of a claimed thread shares with its tasks (`env.rs`).
fn thread_env(
    shell: &Arc<Shell>,
    claimed: &Claimed<'_>,
    ctx: &ThreadCtx,
    pipeline: Pipeline,
    begun: bool,
) -> Arc<ThreadEnv> {
    let Claimed { thread, depth, control, ref wf, .. } = *claimed;
    let wf = wf.clone();
    let stop = StopSlot::default();
    let children = LiveChildren {
        shell: shell.clone(),
        parent: thread.clone(),
        depth,
        cancel: control.cancel.clone(),
        stop: stop.clone(),
    };
    let metrics = shell.metrics.for_workflow(wf.id(), wf.nodes().iter().map(|n| n.name.as_str()));
    Arc::new(ThreadEnv {
        thread: thread.clone(),
        cancel: control.cancel.clone(),
        retry: control.retry.clone(),
        tool_calls_before: ctx.meta.telemetry.tool_calls,
        budgets: ctx.meta.budgets(&wf).clone(),
        permissions: ctx.meta.permissions(&wf).clone(),
        wf,
        depth,
        seed: ctx.meta.seed.unwrap_or(shell.ids.seed),
        pipeline,
        clock: shell.clock.clone(),
        cancel_grace_ms: shell.config.cancel_grace_ms,
        coord: shell.coord.clone(),
        children: Arc::new(children),
        stop,
        metrics,
        signals: super::signal_cursor::SignalCursor::new(shell.store.clone(), ctx),
        published: crate::core::published::PublishedKeys::at_step_start(&ctx.meta).into(),
        // A thread begun here from its creation took no lock before this runner.
        may_hold_locks: (!begun).into(),
        stream: shell.streams.of(thread),
    })
}

/// Watches a running thread's deadline: when it passes, its runner is told to time out.
fn watch_deadline(shell: &Shell, at_ms: u64, control: &Arc<Control>) {
    let clock = shell.clock.clone();
    let control = control.clone();
    shell.tasks.spawn(async move {
        tokio::select! {
            () = clock.sleep_until(at_ms) => control.time_out(),
            () = control.cancel.cancelled() => {}
            () = control.done.cancelled() => {}
        }
    });
}

/// Arms the deadline of a parked thread from the deadline kept in its record's summary.
pub(crate) async fn arm_parked_deadline(shell: &Shell, thread: &ThreadId) {
    let Ok(Some(record)) = shell.store.thread(thread).await else { return };
    if let Some(due) = Due::deadline_of(&record) {
        shell.coord.arm(thread, due);
    }
}

/// Whether `e` is a commit that failed, or a write refused because one did.
fn failed_commit(e: &Error) -> bool {
    use cairn_storage::Error as S;
    matches!(e, Error::Storage(S::Storage { .. } | S::DiskFull { .. } | S::Poisoned { .. }))
}

/// Whether `e` is a write refused because the thread is someone else's now (its lease taken
/// over, or its log moved on by another writer).
fn fenced(e: &Error) -> bool {
    matches!(
        e,
        Error::Storage(
            cairn_storage::Error::LeaseNotHeld { .. }
                | cairn_storage::Error::LeaseHeld { .. }
                | cairn_storage::Error::GuardFailed { .. }
        )
    )
}
