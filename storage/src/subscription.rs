//! [`Subscription`]: history then live events of one thread or of the whole store.
//!
//! It holds no event buffer fed by the writer: it reads committed events with a cursor (the last
//! seq or lsn it returned) and sleeps on a `watch` of the last committed lsn. The cursor is marked
//! *before* each read, so a commit that lands after the read wakes the next wait; nothing can be
//! missed, nothing is returned twice, and memory stays bounded by one read page.

use std::collections::VecDeque;
use std::sync::Arc;

use tokio::sync::watch;

use crate::error::Error;
use crate::event::Event;
use crate::ids::{Lsn, Seq};
use crate::store::{Scope, Store};

/// Events read per refill; small enough to keep a read transaction short.
const FILL_EVENTS: usize = 256;

/// How often a subscription to a shared store's whole log reads again without a wake-up. There,
/// a read stops below the oldest transaction still running (PostgreSQL's watermark); one that
/// ends without committing, or a stopped writer's ended by the server, announces nothing, and
/// the events held back behind it would otherwise wait for the next commit.
const SHARED_LOG_POLL: std::time::Duration = std::time::Duration::from_secs(1);

/// A cursor over a thread's or the store's events; see the module doc.
pub struct Subscription {
    store: Arc<dyn Store>,
    scope: Scope,
    cursor: u64,
    buffer: VecDeque<Event>,
    committed: watch::Receiver<u64>,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("scope", &self.scope)
            .field("cursor", &self.cursor)
            .field("buffered", &self.buffer.len())
            .finish()
    }
}

impl Subscription {
    /// A subscription reading from `store` after `after` (a seq for [`Scope::Thread`], an lsn for
    /// [`Scope::All`]), woken by `committed`, which the store's writer sets to the last committed
    /// lsn after every commit and drops when it stops (for `Store` implementations).
    pub fn new(
        store: Arc<dyn Store>,
        scope: Scope,
        after: u64,
        committed: watch::Receiver<u64>,
    ) -> Subscription {
        Subscription { store, scope, cursor: after, buffer: VecDeque::new(), committed }
    }

    /// The same subscription (cursor, wake-ups), reading its events through `store`: a
    /// decorator that changes what reads answer (one that opens sealed bodies) hands its own
    /// subscribers the events as it reads them.
    pub fn reading_through(self, store: Arc<dyn Store>) -> Subscription {
        Subscription { store, ..self }
    }

    /// The next event, waiting for one to be committed if none is.
    ///
    /// # Errors
    ///
    /// Read errors ([`Error::Corrupted`], [`Error::Pruned`] if the cursor's events were pruned);
    /// [`Error::Closed`] once the store is closed (reads stop with it).
    pub async fn next(&mut self) -> Result<Event, Error> {
        loop {
            if let Some(event) = self.pop() {
                return Ok(event);
            }
            self.committed.borrow_and_update();
            self.fill().await?;
            if !self.buffer.is_empty() {
                continue;
            }
            let woken = if matches!(self.scope, Scope::All) && self.store.shared().is_some() {
                match tokio::time::timeout(SHARED_LOG_POLL, self.committed.changed()).await {
                    Ok(woken) => woken,
                    Err(_) => continue,
                }
            } else {
                self.committed.changed().await
            };
            if woken.is_err() {
                // The writer stopped: return what it committed before stopping, then Closed.
                self.fill().await?;
                return self.pop().ok_or(Error::Closed);
            }
        }
    }

    /// The next event if one is committed, without waiting for a commit (the read of what is
    /// committed is awaited: on PostgreSQL a round trip, made without blocking the runtime).
    ///
    /// # Errors
    ///
    /// As [`Subscription::next`], except that a closed store yields `Ok(None)` here.
    pub async fn try_next(&mut self) -> Result<Option<Event>, Error> {
        if self.buffer.is_empty() {
            self.fill().await?;
        }
        Ok(self.pop())
    }

    /// The seq or lsn of the last event returned (or the starting point).
    pub fn cursor(&self) -> u64 {
        self.cursor
    }

    /// Reads the events after the cursor into the buffer, with the store's async reads.
    async fn fill(&mut self) -> Result<(), Error> {
        let events = match &self.scope {
            Scope::Thread(thread) => {
                match self.store.read_since(thread, Seq(self.cursor), FILL_EVENTS).await {
                    Err(Error::UnknownThread(_)) => Vec::new(),
                    other => other?,
                }
            }
            Scope::All => self.store.read_all_since(Lsn(self.cursor), FILL_EVENTS).await?,
        };
        self.buffer.extend(events);
        Ok(())
    }

    fn pop(&mut self) -> Option<Event> {
        let event = self.buffer.pop_front()?;
        let position = match self.scope {
            Scope::Thread(_) => event.bookmark.seq.0,
            Scope::All => event.bookmark.lsn.0,
        };
        assert!(position > self.cursor, "subscription reads went backwards");
        self.cursor = position;
        Some(event)
    }
}
