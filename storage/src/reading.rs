//! [`Reading`]: the answer to a read of the [`crate::Store`]'s async methods (`thread_async`,
//! `read_since_async`...), known at once or arriving from a reader of the store's own.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::oneshot;

use crate::Error;

/// A read that the caller awaits. A store whose reads are local (a redb file: a read costs
/// memory and page-cache lookups, like any computation) answers at once with
/// [`Reading::ready`], at no cost beyond the read itself; a store whose reads cross the network
/// (PostgreSQL) hands the read to a connection of its own and the answer arrives on a channel,
/// so the caller's task is suspended, and no thread is blocked but the reader's, meanwhile.
///
/// Dropping a `Reading` abandons the read: its answer is thrown away when it arrives.
///
/// # Examples
/// ```
/// use cairn_storage::*;
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Error> {
/// let dir = tempfile::tempdir().expect("temp dir");
/// let store = RedbStore::open(dir.path().join("cairn.db"), Options::default())?;
/// let reading: Reading<Option<ThreadRecord>> = store.thread_async(&ThreadId::new("t1")?);
/// assert!(reading.await?.is_none());
/// assert_eq!(Reading::ready(Ok(7)).await?, 7);
/// # Ok(())
/// # }
/// ```
#[derive(Debug)]
#[must_use = "a read does nothing for its caller until it is awaited"]
pub struct Reading<T> {
    inner: Inner<T>,
}

enum Inner<T> {
    /// Answered; `None` once taken.
    Ready(Option<Result<T, Error>>),
    /// Answered by a reader on this channel.
    Waiting(oneshot::Receiver<Result<T, Error>>),
    /// Handed over when the store's queue of reads has room (a full queue is rare: the read
    /// waits there, suspended, and allocates this once).
    Queued(Pin<Box<dyn Future<Output = Result<T, Error>> + Send>>),
}

impl<T> std::fmt::Debug for Inner<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Inner::Ready(_) => "ready",
            Inner::Waiting(_) => "waiting",
            Inner::Queued(_) => "queued",
        })
    }
}

impl<T> Reading<T> {
    /// A read answered already (for `Store` implementations whose reads are local).
    pub fn ready(result: Result<T, Error>) -> Reading<T> {
        Reading { inner: Inner::Ready(Some(result)) }
    }

    /// A read whose answer will arrive on `receiver` (for `Store` implementations); a sender
    /// dropped without an answer reads as [`Error::Closed`].
    pub fn new(receiver: oneshot::Receiver<Result<T, Error>>) -> Reading<T> {
        Reading { inner: Inner::Waiting(receiver) }
    }

    /// A read whose answer `future` gives (for `Store` implementations).
    pub fn later(future: impl Future<Output = Result<T, Error>> + Send + 'static) -> Reading<T> {
        Reading { inner: Inner::Queued(Box::pin(future)) }
    }

    /// The answer with `f` applied to it.
    pub async fn map<U>(self, f: impl FnOnce(T) -> U) -> Result<U, Error> {
        self.await.map(f)
    }
}

impl<T> Future for Reading<T> {
    type Output = Result<T, Error>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        match &mut self.get_mut().inner {
            Inner::Ready(answer) => Poll::Ready(answer.take().unwrap_or(Err(Error::Closed))),
            Inner::Waiting(receiver) => {
                Pin::new(receiver).poll(cx).map(|answer| answer.unwrap_or(Err(Error::Closed)))
            }
            Inner::Queued(future) => future.as_mut().poll(cx),
        }
    }
}

impl<T> Unpin for Reading<T> {}
