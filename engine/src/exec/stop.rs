//! Stopping a runner from inside a node: an engine error that leaves the thread's log in doubt.
//!
//! A node's own writes (a tool call and its result, a lock, a retry) and its child threads'
//! runs can fail for reasons that are not the node's: a commit that failed or went unanswered,
//! a store gone away, the thread taken over by another engine, the engine stopping. Recording
//! such a failure as the node's would end the thread Failed for good although nothing about
//! it failed (on a shared database the store comes back a moment later and the record lands).
//! Instead, the site that meets the error hands it to the thread's [`StopSlot`], and the runner
//! stops without writing anything more once its tasks return: the thread stays as its log
//! says, and the next driver (this engine again, or another once the lease lapses) resumes it
//! from there. Errors that would recur on every run (a value that does not encode) still fail
//! the node.

use std::sync::{Arc, Mutex, PoisonError};

use cairn_dsl::NodeError;

use crate::error::Error;

/// The first error that stopped a thread's runner from inside one of its tasks.
#[derive(Clone, Default)]
pub(crate) struct StopSlot(Arc<Mutex<Option<Error>>>);

impl StopSlot {
    /// The node error for engine error `e`: one that leaves the log in doubt is kept here (the
    /// runner stops at the end of the step instead of recording the failure); any other fails
    /// the node.
    pub fn node_error(&self, e: Error) -> NodeError {
        let error = engine_error(&e);
        if in_doubt(&e) {
            let mut slot = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            slot.get_or_insert(e);
        }
        error
    }

    /// `Err` with the error that stopped the runner, if one did: the runner returns it at once,
    /// writing nothing more; the next driver goes on from the log.
    ///
    /// # Errors
    /// That error (taken: reported once).
    pub fn check(&self, thread: &cairn_storage::ThreadId) -> Result<(), Error> {
        match self.take() {
            Some(e) => {
                tracing::info!(%thread, error = %e, "runner stopped by a write of its node");
                Err(e)
            }
            None => Ok(()),
        }
    }

    /// The error that stopped the runner, if one did (taken: reported once).
    pub fn take(&self) -> Option<Error> {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

/// An engine error as a node error (not retryable: the engine's own failure), with the code
/// `"engine"`, or `"resource_exhausted"` for a limit of the engine or the store the node's
/// write went past (`cairn_dsl::FailureKind::ResourceExhausted`: its own recovery, if the
/// node's policy names one; a full disk leaves the log in doubt and stops the runner instead).
pub(crate) fn engine_error(e: &Error) -> NodeError {
    let code = match e {
        Error::LimitExceeded { .. }
        | Error::Storage(
            cairn_storage::Error::LimitExceeded { .. } | cairn_storage::Error::DiskFull { .. },
        ) => "resource_exhausted",
        _ => "engine",
    };
    NodeError::Failed { code: Some(code.into()), message: e.to_string(), retryable: false }
}

/// Whether `e` leaves the thread's log in doubt (see the module documentation).
pub(crate) fn in_doubt(e: &Error) -> bool {
    use cairn_storage::Error as S;
    match e {
        Error::Storage(s) => matches!(
            s,
            S::Storage { .. }
                | S::Unavailable { .. }
                | S::Closed
                | S::Poisoned { .. }
                | S::DiskFull { .. }
                | S::LeaseHeld { .. }
                | S::LeaseNotHeld { .. }
                | S::GuardFailed { .. }
        ),
        Error::ShutDown => true,
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_errors_that_leave_the_log_in_doubt_stop_the_runner() {
        let slot = StopSlot::default();
        let _ = slot.node_error(Error::Invalid("no such value".into()));
        assert!(slot.take().is_none(), "a deterministic error fails the node");
        let _ = slot.node_error(Error::Storage(cairn_storage::Error::Closed));
        let _ = slot.node_error(Error::ShutDown);
        assert!(matches!(slot.take(), Some(Error::Storage(cairn_storage::Error::Closed))));
        assert!(slot.take().is_none(), "reported once");
    }
}
