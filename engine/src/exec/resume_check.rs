//! The resume check: a thread that this engine instance did not create is replayed, the first
//! time it is driven here, over its steps since its latest intact checkpoint (where the drive's
//! restore started) against the code now registered. If the code no longer reproduces what was
//! recorded (a node body changed under the same workflow id, version and graph, which the
//! fingerprint cannot see), the thread is not run: it is moved to Blocked with the divergence as
//! the reason, for a human to fix the code or migrate the thread, then resume it (which checks
//! again).
//!
//! Why only the tail: the checkpoint's state is what the thread goes on from, whatever code
//! produced it; the recorded outcomes after it are folded into the restored context without being
//! re-run, so they are what could silently disagree with the code that runs next. The cost is
//! the events after it, the same bound as restore's: the checkpoint's context is the one the
//! drive's restore loaded, kept for the check, not read again.
//!
//! Why once per instance: code cannot change inside one process, so a thread verified (or
//! created) by this instance stays verified until the instance is dropped.

use std::collections::BTreeMap;
use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::{Guard, LeaseOp, Seq, Store, ThreadId, ThreadRecord, ThreadStatus};

use super::fetch;
use super::shell::Shell;
use crate::core::event::Body;
use crate::core::restore::Restore;
use crate::core::status::{Transition, transition};
use crate::core::summary;
use crate::core::thread_ctx::ThreadCtx;
use crate::error::Error;
use crate::replay::{Divergence, ReplayReport, replay_after};

/// Whether the drive of `thread` for `reason` is to check it (its first here, of a thread this
/// instance did not create): its restore then keeps the context it starts from
/// ([`crate::core::restore::Restore::keeping_start`]) for [`check`]. A thread created here is
/// verified from now on.
pub(crate) fn needed(shell: &Shell, thread: &ThreadId, reason: &str) -> bool {
    if CREATED_HERE.contains(&reason) {
        shell.verified.insert(thread);
        return false;
    }
    !shell.verified.contains(thread)
}

/// The check the runner makes after restoring `thread` (`ctx`, from `record`; `start`, the
/// context its restore started from, at its latest intact checkpoint or its creation) and
/// before running it. Returns `Some(Blocked)` when it blocked the thread (the runner then
/// stops without running it), `None` to go on.
///
/// # Errors
/// Storage and record errors; [`Error::Transition`] if the thread's status cannot block.
pub(crate) async fn check(
    shell: &Shell,
    wf: &Arc<DynWorkflow>,
    thread: &ThreadId,
    ctx: &ThreadCtx,
    record: &ThreadRecord,
    start: ThreadCtx,
) -> Result<Option<ThreadStatus>, Error> {
    let report = replay_after(shell.store.as_ref(), wf, thread, start, &BTreeMap::new()).await?;
    tracing::debug!(
        thread = %thread,
        after_seq = report.after_seq,
        tasks_replayed = report.tasks_replayed,
        "resume check replayed the tail"
    );
    let Some(divergence) = report.divergence else {
        shell.verified.insert(thread);
        return Ok(None);
    };
    tracing::warn!(thread = %thread, %divergence, "resuming would diverge: thread blocked");
    block(shell, thread, ctx, record, &divergence).await?;
    Ok(Some(ThreadStatus::Blocked))
}

/// Reasons a thread is driven for that only occur for a thread this instance just created (an
/// idempotent start of an existing id does not drive it; a fork is always a new thread).
const CREATED_HERE: [&str; 2] = ["started", "forked"];

/// Prefix of the Blocked status reason; the divergence follows.
pub(crate) const BLOCK_REASON: &str = "resuming would diverge from the recorded history";

/// Replays `thread` from its latest intact checkpoint (or its creation) to its last event: the
/// context restore's checkpoint entry gives ([`Restore::at_checkpoint`]), replayed on.
pub(crate) async fn tail(
    store: &dyn Store,
    wf: &Arc<DynWorkflow>,
    thread: &ThreadId,
) -> Result<ReplayReport, Error> {
    let entry = || Restore::at_checkpoint(wf, thread.clone(), None);
    let start = fetch::restored(store, thread, entry).await?.ctx;
    replay_after(store, wf, thread, *start, &BTreeMap::new()).await
}

/// Writes, in one batch guarded by the status and last seq the runner restored, the move to
/// Blocked with the divergence as its reason, and the thread record (its summary's last error
/// says why, for listings and [`crate::ThreadHandle::outcome`]). A lease left by a dead runner is
/// released: a blocked thread has no runner.
async fn block(
    shell: &Shell,
    thread: &ThreadId,
    ctx: &ThreadCtx,
    record: &ThreadRecord,
    divergence: &Divergence,
) -> Result<(), Error> {
    let from = record.status;
    let to = transition(from, Transition::Block)
        .map_err(|source| Error::Transition { thread: thread.to_string(), source })?;
    let reason = format!("{BLOCK_REASON}: {divergence}");
    let now = shell.clock.now_ms();
    let summary = summary::with_last_error(&record.summary, &reason);
    let body = Body::StatusChanged { from, to, reason };
    let rec = ThreadRecord { summary, ..record.clone() };
    let mut batch = super::parked::move_batch(rec, to, &[body], now)?;
    if let Some(lease) = &record.lease {
        // The file is locked by this process, so the holder is this runner's predecessor.
        batch.leases.push(LeaseOp::Release { thread: thread.clone(), owner: lease.owner.clone() });
    }
    batch.guards.push(Guard::LastSeq { thread: thread.clone(), seq: Seq(ctx.meta.seq) });
    shell.store.append_async(batch).await?.wait().await?;
    Ok(())
}
