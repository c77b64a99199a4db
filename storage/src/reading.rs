//! [`Reading`]: the answer to a read of the [`crate::Store`], known at once or arriving from a
//! reader of the store's own; awaited by async callers, waited for by sync ones.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

use tokio::sync::oneshot;

use crate::error::Error;

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
/// let reading: Reading<Option<ThreadRecord>> = store.thread(&ThreadId::new("t1")?);
/// assert!(reading.await?.is_none());
/// assert_eq!(Reading::ready(Ok(7)).await?, 7);
/// assert_eq!(Reading::ready(Ok(7)).map(|n| n + 1).wait()?, 8);
/// # Ok(())
/// # }
/// ```
#[must_use = "a read does nothing for its caller until it is awaited"]
pub struct Reading<T> {
    inner: Inner<T>,
    /// Told when a sync caller waits for this read on an async runtime's thread.
    on_block: Option<OnBlock>,
}

/// What a store counts when a sync caller blocks a runtime thread on one of its reads (see
/// [`Reading::counting_blocks`]).
pub type OnBlock = std::sync::Arc<dyn Fn(&'static str) + Send + Sync>;

enum Inner<T> {
    /// Answered; `None` once taken.
    Ready(Option<Result<T, Error>>),
    /// Answered by a reader on this channel.
    Waiting(oneshot::Receiver<Result<T, Error>>),
    /// Handed over when the store's queue of reads has room (a full queue is rare: the read
    /// waits there, suspended, and allocates this once).
    Queued(Pin<Box<dyn Future<Output = Result<T, Error>> + Send>>),
}

impl<T> std::fmt::Debug for Reading<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Reading").field("inner", &self.inner).finish_non_exhaustive()
    }
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
        Reading { inner: Inner::Ready(Some(result)), on_block: None }
    }

    /// A read whose answer will arrive on `receiver` (for `Store` implementations); a sender
    /// dropped without an answer reads as [`Error::Closed`].
    pub fn new(receiver: oneshot::Receiver<Result<T, Error>>) -> Reading<T> {
        Reading { inner: Inner::Waiting(receiver), on_block: None }
    }

    /// A read whose answer `future` gives (for `Store` implementations).
    pub fn later(future: impl Future<Output = Result<T, Error>> + Send + 'static) -> Reading<T> {
        Reading { inner: Inner::Queued(Box::pin(future)), on_block: None }
    }

    /// Calls `on_block` (with the read's type name) whenever a sync caller [`Reading::wait`]s
    /// for this read on a thread of an async runtime: a store whose reads cross the network
    /// counts such waits, each of which holds a runtime thread for a round trip.
    pub fn counting_blocks(mut self, on_block: OnBlock) -> Reading<T> {
        self.on_block = Some(on_block);
        self
    }

    /// The answer with `f` applied to it: applied at once to an answer known already (no
    /// allocation), else when it arrives.
    pub fn map<U>(self, f: impl FnOnce(T) -> U + Send + 'static) -> Reading<U>
    where
        T: Send + 'static,
        U: Send + 'static,
    {
        match self.inner {
            Inner::Ready(answer) => {
                let answer = answer.unwrap_or(Err(Error::Closed)).map(f);
                Reading { inner: Inner::Ready(Some(answer)), on_block: self.on_block }
            }
            _ => {
                let on_block = self.on_block.clone();
                let mapped = Reading::later(async move { self.await.map(f) });
                Reading { on_block, ..mapped }
            }
        }
    }

    /// The answer passed through `f`, which may refuse it: as [`Reading::map`], and an `Err`
    /// from `f` is the read's error (a decorator that checks or opens what it reads).
    pub fn and_then<U>(self, f: impl FnOnce(T) -> Result<U, Error> + Send + 'static) -> Reading<U>
    where
        T: Send + 'static,
        U: Send + 'static,
    {
        match self.inner {
            Inner::Ready(answer) => {
                let answer = answer.unwrap_or(Err(Error::Closed)).and_then(f);
                Reading { inner: Inner::Ready(Some(answer)), on_block: self.on_block }
            }
            _ => {
                let on_block = self.on_block.clone();
                let mapped = Reading::later(async move { self.await.and_then(f) });
                Reading { on_block, ..mapped }
            }
        }
    }

    /// The same read, with `f` shown its answer first: at once for an answer known already (no
    /// allocation), else when it arrives (a decorator counting or checking reads).
    pub fn inspect(self, f: impl FnOnce(&Result<T, Error>) + Send + 'static) -> Reading<T>
    where
        T: Send + 'static,
    {
        match self.inner {
            Inner::Ready(answer) => {
                let answer = answer.unwrap_or(Err(Error::Closed));
                f(&answer);
                Reading { inner: Inner::Ready(Some(answer)), on_block: self.on_block }
            }
            _ => {
                let on_block = self.on_block.clone();
                let inspected = Reading::later(async move {
                    let answer = self.await;
                    f(&answer);
                    answer
                });
                Reading { on_block, ..inspected }
            }
        }
    }

    /// Waits for the answer, blocking this thread: for sync callers (the command line, tests,
    /// `spawn_blocking`). An answer known already (a local store's read) costs nothing more.
    /// Called on a thread of an async runtime, the wait is counted (see
    /// [`Reading::counting_blocks`]) and, on a multi-thread runtime, goes through
    /// `block_in_place`, so the runtime hands the thread's other tasks to another meanwhile;
    /// async code awaits instead.
    ///
    /// # Errors
    ///
    /// The read's.
    pub fn wait(mut self) -> Result<T, Error> {
        use tokio::runtime::{Handle, RuntimeFlavor};
        if let Inner::Ready(answer) = &mut self.inner {
            return answer.take().unwrap_or(Err(Error::Closed));
        }
        match Handle::try_current() {
            Ok(handle) => {
                if let Some(on_block) = &self.on_block {
                    on_block(std::any::type_name::<T>());
                }
                if handle.runtime_flavor() == RuntimeFlavor::MultiThread {
                    tokio::task::block_in_place(|| crate::pending::block_on(self))
                } else {
                    crate::pending::block_on(self)
                }
            }
            Err(_) => crate::pending::block_on(self),
        }
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
