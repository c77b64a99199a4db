//! Delayed starts (`StartOptions::start_at_ms`): a thread created to start later stays
//! `created` with its start time in its policy (recorded in `thread_created`, so durable), and
//! any drive of it before that time arms its start instead of running it.
//!
//! Every path that drives a created thread goes through [`hold`]: the start call's own drive,
//! recovery at open (which resumes created threads, so a restart before the time arms the start
//! again, one after it runs the thread), a shared database's poller. When the start comes due
//! (`Due::Start`, `wake.rs`) the thread is driven, and [`hold`] lets it through.

use cairn_storage::{ThreadId, ThreadRecord, ThreadStatus};

use super::shell::Shell;
use crate::coord::Due;
use crate::core::thread_ctx::ThreadCtx;

/// Whether the created thread `ctx` (its record `record`) is to start later: then its start is
/// armed and the caller leaves it as it is.
pub(crate) fn hold(
    shell: &Shell,
    thread: &ThreadId,
    record: &ThreadRecord,
    ctx: &ThreadCtx,
) -> bool {
    let Some(at_ms) = ctx.meta.policy.start_at_ms else { return false };
    if record.status != ThreadStatus::Created || ctx.meta.step > 0 || at_ms <= shell.clock.now_ms()
    {
        return false;
    }
    tracing::debug!(thread = %thread, at_ms, "created to start later: its start armed");
    shell.coord.arm(thread, Due::Start { at_ms });
    true
}
