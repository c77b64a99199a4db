//! [`Pending`]: the answer to a queued write, resolved when the commit holding it completes.

use std::future::Future;
use std::pin::pin;
use std::sync::Arc;
use std::task::{Context, Poll, Wake, Waker};

use tokio::sync::oneshot;

use crate::batch::Appended;
use crate::error::Error;

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
    /// [`Error::DiskFull`] / [`Error::Poisoned`] (naming the failure that poisoned the store)
    /// when the commit failed, or [`Error::Closed`] if the writer stopped.
    pub async fn wait(self) -> Result<T, Error> {
        match self.inner {
            Inner::Ready(result) => result,
            Inner::Waiting(receiver) => receiver.await.unwrap_or(Err(Error::Closed)),
        }
    }

    /// Waits for the commit, blocking this thread. Works inside or outside an async runtime
    /// (the commit is made by the store's own writer thread, so blocking cannot deadlock it), but
    /// blocks a runtime worker while it waits: prefer [`Pending::wait`] in async code.
    ///
    /// # Errors
    ///
    /// As [`Pending::wait`].
    pub fn wait_blocking(self) -> Result<T, Error> {
        match self.inner {
            Inner::Ready(result) => result,
            Inner::Waiting(receiver) => block_on(receiver).unwrap_or(Err(Error::Closed)),
        }
    }
}

/// Wakes a parked thread.
struct Unpark(std::thread::Thread);

impl Wake for Unpark {
    fn wake(self: Arc<Self>) {
        self.0.unpark();
    }
}

/// Polls `future` on this thread, parking between wake-ups. (tokio's `blocking_recv` panics
/// inside a runtime; this does not.)
pub(crate) fn block_on<F: Future>(future: F) -> F::Output {
    let waker = Waker::from(Arc::new(Unpark(std::thread::current())));
    let mut context = Context::from_waker(&waker);
    let mut future = pin!(future);
    loop {
        if let Poll::Ready(output) = future.as_mut().poll(&mut context) {
            return output;
        }
        std::thread::park();
    }
}
