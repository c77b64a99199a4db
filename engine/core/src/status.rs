//! The thread status machine: one table, in one place.
//!
//! Every status change of a thread goes through [`transition`], and every change is recorded as a
//! `StatusChanged` event by the runner. The table is the whole truth: a pair that is not listed is
//! an [`InvalidTransition`].

use cairn_storage::ThreadStatus;

// The error's words and what a caller attempted live with the core's error.
pub use crate::error::{InvalidTransition, Transition};

use crate::error::Error;
use crate::event::Body;
use crate::thread_ctx::EventAt;
use crate::thread_ctx::ThreadCtx;

/// The status machine: the status after `transition` from `from`, or why that is not allowed.
///
/// Terminal statuses (completed, failed, cancelled, timed out) absorb nothing: acting on a
/// finished thread is always reported, because a caller who cancels a completed thread should
/// learn that the work was done rather than believe it was stopped.
///
/// # Errors
/// [`InvalidTransition`] for every pair not in the table.
///
/// # Examples
/// ```
/// use cairn_core::status::{transition, Transition};
/// use cairn_storage::ThreadStatus;
/// assert_eq!(transition(ThreadStatus::Created, Transition::Run), Ok(ThreadStatus::Running));
/// assert!(transition(ThreadStatus::Completed, Transition::Cancel).is_err());
/// ```
pub fn transition(
    from: ThreadStatus,
    transition: Transition,
) -> Result<ThreadStatus, InvalidTransition> {
    use ThreadStatus as S;
    use Transition as T;
    let to = match (from, transition) {
        (S::Created | S::Paused | S::WaitingInput | S::Sleeping | S::Blocked, T::Run) => S::Running,
        // The store admitted it (its record says Created; a log whose last status is Queued,
        // after a pause and a resume in line, is run from there).
        (S::Queued, T::Run) => S::Running,
        // A Running thread whose runner died (crash) is picked up again by the next runner.
        (S::Running, T::Run) => S::Running,
        (
            S::Created | S::Running | S::Sleeping | S::WaitingInput | S::Blocked | S::Queued,
            T::Pause,
        ) => S::Paused,
        (S::Paused, T::Requeue) => S::Queued,
        // A node asked for input or started a timer; or a thread paused in that wait was
        // resumed back into it.
        (S::Running | S::Paused, T::WaitInput) => S::WaitingInput,
        (S::Running | S::Paused, T::Sleep) => S::Sleeping,
        (S::Running, T::Complete) => S::Completed,
        (S::Created | S::Running | S::Blocked, T::Fail) => S::Failed,
        // Every status that is not terminal may be cancelled (or abandoned) or time out.
        (from, T::Cancel | T::Abandon) if !from.is_terminal() => S::Cancelled,
        (from, T::TimeOut) if !from.is_terminal() => S::TimedOut,
        (S::Created | S::Running | S::Paused, T::Block) => S::Blocked,
        _ => return Err(InvalidTransition { from, transition }),
    };
    Ok(to)
}

/// Folds the status's part of `e` into `ctx`.
///
/// # Errors
/// [`Error::Record`] for a `thread_created` (only a thread's first event is one, and
/// [`ThreadCtx::created`](crate::thread_ctx::ThreadCtx::created) folds it).
pub(crate) fn fold(ctx: &mut ThreadCtx, e: EventAt<'_>) -> Result<(), Error> {
    match e.body {
        Body::ThreadCreated { .. } => {
            let detail = "thread_created after the first event";
            return Err(Error::record(&ctx.meta.thread, e.seq, detail));
        }
        Body::StatusChanged { to, .. } => ctx.meta.status = *to,
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const ALL_STATUSES: [ThreadStatus; 11] = [
        ThreadStatus::Created,
        ThreadStatus::Running,
        ThreadStatus::Paused,
        ThreadStatus::WaitingInput,
        ThreadStatus::Sleeping,
        ThreadStatus::Completed,
        ThreadStatus::Failed,
        ThreadStatus::Cancelled,
        ThreadStatus::TimedOut,
        ThreadStatus::Blocked,
        ThreadStatus::Queued,
    ];
    const ALL_TRANSITIONS: [Transition; 11] = [
        Transition::Run,
        Transition::Pause,
        Transition::WaitInput,
        Transition::Sleep,
        Transition::Complete,
        Transition::Fail,
        Transition::Cancel,
        Transition::Abandon,
        Transition::TimeOut,
        Transition::Block,
        Transition::Requeue,
    ];

    /// Walks every (status, transition) pair: terminal statuses accept nothing, every other status
    /// can be cancelled, and exactly the listed pairs succeed.
    #[test]
    fn every_pair() {
        let mut allowed = 0;
        for from in ALL_STATUSES {
            for t in ALL_TRANSITIONS {
                match transition(from, t) {
                    Ok(to) => {
                        allowed += 1;
                        assert!(!from.is_terminal(), "{from} must absorb nothing, took {t:?}");
                        if matches!(t, Transition::Cancel | Transition::Abandon) {
                            assert_eq!(to, ThreadStatus::Cancelled);
                        }
                    }
                    Err(e) => {
                        assert_eq!(e.from, from);
                        if !from.is_terminal()
                            && matches!(t, Transition::Cancel | Transition::Abandon)
                        {
                            panic!("{from} must be cancellable and abandonable");
                        }
                    }
                }
            }
        }
        assert_eq!(allowed, 46, "the table changed: update this count and the docs");
    }
}
