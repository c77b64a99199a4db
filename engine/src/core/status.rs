//! The thread status machine: one table, in one place.
//!
//! Every status change of a thread goes through [`transition`], and every change is recorded as a
//! `StatusChanged` event by the runner. The table is the whole truth: a pair that is not listed is
//! an [`InvalidTransition`].

use cairn_storage::ThreadStatus;
use serde::{Deserialize, Serialize};

/// What happened to a thread, as seen by its status machine.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Transition {
    /// A runner picked the thread up (first run, resume after a restart, after input or a timer).
    Run,
    /// The thread stopped at a step boundary because somebody asked it to (or a budget ran out).
    Pause,
    /// A node interrupted and asked for human input (or a thread paused while it waited for
    /// input was resumed).
    WaitInput,
    /// A node started a durable timer (or a thread paused while it slept was resumed).
    Sleep,
    /// The frontier is empty: every branch reached END.
    Complete,
    /// A node failed for good (retries exhausted or not retryable), or the engine hit an error.
    Fail,
    /// Somebody cancelled the thread.
    Cancel,
    /// The thread's deadline passed.
    TimeOut,
    /// Resuming would diverge from the recorded history (changed code): held for a human.
    Block,
    /// A thread paused while it waited in a queue was resumed: it waits in line again
    /// (`docs/queues.md`). Admission itself is the store's (Queued to Created).
    Requeue,
}

/// A transition that the table does not allow from the current status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("{}; it cannot {}", InvalidTransition::status_words(*from), transition.verb())]
pub struct InvalidTransition {
    /// The status the thread was in.
    pub from: ThreadStatus,
    /// What was attempted.
    pub transition: Transition,
}

impl InvalidTransition {
    /// "is already cancelled" for an ended thread, "is paused" for another.
    fn status_words(from: ThreadStatus) -> String {
        let status = from.to_string().replace('_', " ");
        if from.is_terminal() {
            format!("it is already {status}")
        } else {
            format!("it is {status}")
        }
    }
}

impl Transition {
    /// What the transition does, as a verb ("be cancelled").
    pub fn verb(self) -> &'static str {
        match self {
            Transition::Run => "run",
            Transition::Pause => "be paused",
            Transition::WaitInput => "wait for input",
            Transition::Sleep => "sleep",
            Transition::Complete => "complete",
            Transition::Fail => "fail",
            Transition::Cancel => "be cancelled",
            Transition::TimeOut => "time out",
            Transition::Block => "be blocked",
            Transition::Requeue => "wait in its queue again",
        }
    }
}

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
/// use cairn::status::{transition, Transition};
/// use cairn::storage::ThreadStatus;
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
        (
            S::Created
            | S::Running
            | S::Paused
            | S::WaitingInput
            | S::Sleeping
            | S::Blocked
            | S::Queued,
            T::Cancel,
        ) => S::Cancelled,
        (
            S::Created
            | S::Running
            | S::Paused
            | S::WaitingInput
            | S::Sleeping
            | S::Blocked
            | S::Queued,
            T::TimeOut,
        ) => S::TimedOut,
        (S::Created | S::Running | S::Paused, T::Block) => S::Blocked,
        _ => return Err(InvalidTransition { from, transition }),
    };
    Ok(to)
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
    const ALL_TRANSITIONS: [Transition; 10] = [
        Transition::Run,
        Transition::Pause,
        Transition::WaitInput,
        Transition::Sleep,
        Transition::Complete,
        Transition::Fail,
        Transition::Cancel,
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
                        if t == Transition::Cancel {
                            assert_eq!(to, ThreadStatus::Cancelled);
                        }
                    }
                    Err(e) => {
                        assert_eq!(e.from, from);
                        if !from.is_terminal() && t == Transition::Cancel {
                            panic!("{from} must be cancellable");
                        }
                    }
                }
            }
        }
        assert_eq!(allowed, 39, "the table changed: update this count and the docs");
    }
}
