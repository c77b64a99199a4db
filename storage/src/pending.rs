//! [`Pending`]: the answer to a queued write, resolved when the commit holding it completes.

use tokio::sync::oneshot;

use crate::{Appended, Error};

/// A write handed to the store's writer; resolves once the commit that holds it has completed
/// (durably, under [`Durability::Immediate`](crate::Durability::Immediate)).
///
/// Dropping a `Pending` does not cancel the write: it is applied or rejected all the same.
#[derive(Debug)]
#[must_use = "a write is acknowledged only when its Pending resolves"]
pub struct Pending<T = Appended> {
    inner: Inner<T>,
}

#[derive(Debug)]
enum Inner<T> {
    Ready(Result<T, Error>),
    Waiting(oneshot::Receiver<Result<T, Error>>),
}

impl<T> Pending<T> {
    /// A pending write whose answer will arrive on `receiver` (for `Store` implementations).
    pub fn new(receiver: oneshot::Receiver<Result<T, Error>>) -> Pending<T> {
        Pending { inner: Inner::Waiting(receiver) }
    }

    /// An already-known answer (for `Store` implementations).
    pub fn ready(result: Result<T, Error>) -> Pending<T> {
        Pending { inner: Inner::Ready(result) }
    }

    /// Waits for the commit.
    ///
    /// # Errors
    ///
    /// The batch's own error (a guard, a held lock, a limit), or [`Error::Storage`] /
    /// [`Error::Poisoned`] when the commit failed, or [`Error::Closed`] if the writer stopped.
    pub async fn wait(self) -> Result<T, Error> {
        match self.inner {
            Inner::Ready(result) => result,
            Inner::Waiting(receiver) => receiver.await.unwrap_or(Err(Error::Closed)),
        }
    }

    /// Waits for the commit, blocking this thread. Must not be called from inside an async
    /// runtime (tokio panics there); use [`Pending::wait`] instead.
    ///
    /// # Errors
    ///
    /// As [`Pending::wait`].
    pub fn wait_blocking(self) -> Result<T, Error> {
        match self.inner {
            Inner::Ready(result) => result,
            Inner::Waiting(receiver) => receiver.blocking_recv().unwrap_or(Err(Error::Closed)),
        }
    }
}
