//! Coming back from a failed commit by itself: the writer reopens the database from what is
//! durable, as a restart would, once the cause (a full disk, an I/O error) has cleared.
//!
//! After a commit failed part way, redb trusts nothing of the open database (every later write
//! transaction fails) and repairs the file when it is opened again, so the store is poisoned
//! (see [`super::poison`]). The writer then tries, after a pause that doubles from
//! [`REOPEN_BACKOFF_MIN`] up to [`REOPEN_BACKOFF_MAX`]: it lets go of every handle on the
//! database (redb admits one per file in a process), opens the file again (redb's repair runs),
//! rereads the counters, makes one empty durable commit to prove the file takes writes, and
//! lifts the poison. Whoever watches the poison (the engine) then restores its threads.
//!
//! Only a cause that may clear is waited out (an I/O error, a full disk, a permission taken
//! away); a file redb panicked on (`Error::Corrupted`) stays poisoned.
//!
//! Invariants: only a store whose every acknowledged write is durable
//! ([`crate::Durability::Immediate`]) reopens by itself, so the reopen loses nothing
//! acknowledged; a store acknowledging before durability stays poisoned until its owner
//! reopens it (which goes back to the last durable commit, as a crash would). While the file
//! cannot be opened again, a store on a path reads through a copy of its last durable commit,
//! made once and kept until the file opens (a store on a backend answers reads with the
//! refusal).

use std::sync::{Arc, PoisonError, RwLock};
use std::time::{Duration, Instant};

use ::redb::Database;

use super::Db;
use super::guard::guard;
use super::tables::{Counters, MetaState};
use crate::error::Error;

/// How a store opens its database again: its path, or a backend it may be given again.
pub(crate) type Opener = Box<dyn Fn() -> Result<Database, Error> + Send>;

/// The handle every read of the store goes through (`None` once closed, or while the database
/// cannot be opened and there is nothing to read through instead).
pub(crate) type ReadSlot = Arc<RwLock<Option<Arc<Db>>>>;

/// The first pause before a reopen: a full disk is rarely freed within it, but an I/O error of
/// a moment (a reseated cable, a remount) is, and the first try costs one open.
pub const REOPEN_BACKOFF_MIN: Duration = Duration::from_millis(100);

/// The longest pause between two reopens: how late, at most, a store notices that the cause
/// cleared. Each try opens the file (redb's repair walks it), so not much more often than this.
pub const REOPEN_BACKOFF_MAX: Duration = Duration::from_secs(5);

/// How long a reopened store must take writes before a new failure starts the pauses from
/// [`REOPEN_BACKOFF_MIN`] again: a disk still full fails the first large write after a reopen,
/// and those cycles must slow down as the tries do.
const REOPEN_STABLE: Duration = Duration::from_secs(60);

/// How long a reopen waits for reads in flight to let the old handle go before it gives up
/// this try (each read is one read transaction: microseconds on a page in memory).
const READERS_LET_GO: Duration = Duration::from_secs(1);

/// The writer's means and schedule of reopening.
pub(crate) struct Reopen {
    open: Opener,
    /// A read-only copy of the last durable commit, to read through while the file cannot be
    /// opened for writing (a store on a path).
    fallback: Option<Opener>,
    readers: ReadSlot,
    /// Whether the readers read through the fallback copy (it holds no lock on the file: it
    /// stays until the file opens again, instead of being copied at every try).
    reading_copy: bool,
    backoff: Duration,
    next_at: Option<Instant>,
    last_recovered: Option<Instant>,
}

impl Reopen {
    /// Reopens with `open`, reading through `fallback` meanwhile, swapping the handle of
    /// `readers`.
    pub fn new(open: Opener, fallback: Option<Opener>, readers: ReadSlot) -> Reopen {
        Reopen {
            open,
            fallback,
            readers,
            reading_copy: false,
            backoff: REOPEN_BACKOFF_MIN,
            next_at: None,
            last_recovered: None,
        }
    }

    /// When the next try is due (scheduled now if none is: the store was just poisoned).
    pub fn due(&mut self, now: Instant) -> Instant {
        if let Some(at) = self.next_at {
            return at;
        }
        let recent = self.last_recovered.is_some_and(|at| now - at < REOPEN_STABLE);
        self.backoff =
            if recent { (self.backoff * 2).min(REOPEN_BACKOFF_MAX) } else { REOPEN_BACKOFF_MIN };
        *self.next_at.insert(now + self.backoff)
    }

    /// A try failed: the next one after a longer pause.
    pub fn failed(&mut self, now: Instant) {
        self.backoff = (self.backoff * 2).min(REOPEN_BACKOFF_MAX);
        self.next_at = Some(now + self.backoff);
    }

    /// A try succeeded: the next failure is scheduled afresh.
    pub fn recovered(&mut self, now: Instant) {
        self.next_at = None;
        self.last_recovered = Some(now);
    }

    /// Lets go of `writer`'s handle and the readers', opens the database again and gives both
    /// the new one, with its counters. On failure the readers read through the fallback copy,
    /// if there is one.
    ///
    /// # Errors
    /// Why the database could not be opened again (the try is over; the store stays poisoned).
    pub fn reopen(
        &mut self,
        writer: &mut Option<Arc<Database>>,
    ) -> Result<(Arc<Database>, Counters), Error> {
        let readers = Arc::clone(&self.readers);
        let mut slot = readers.write().unwrap_or_else(PoisonError::into_inner);
        if self.reading_copy {
            return self.open_again(&mut slot, writer);
        }
        let Some(old) = slot.take() else {
            // Closed meanwhile (or read through nothing since a failed try): nothing to hold.
            return self.open_again(&mut slot, writer);
        };
        let old = match let_go(old) {
            Ok(old) => old,
            Err(held) => {
                *slot = Some(held);
                let detail = "reads in flight held the database; tried again later".into();
                return Err(Error::Invalid { detail });
            }
        };
        // The writer's handle and the readers' were the last: dropping both closes the file.
        let mine = writer.take();
        guard("close", move || {
            drop(mine);
            drop(old);
            Ok(())
        })?;
        self.open_again(&mut slot, writer)
    }

    fn open_again(
        &mut self,
        slot: &mut Option<Arc<Db>>,
        writer: &mut Option<Arc<Database>>,
    ) -> Result<(Arc<Database>, Counters), Error> {
        drop(writer.take());
        let opened =
            (self.open)().and_then(|db| match guard("open", || super::tables::check_meta(&db))? {
                MetaState::Cairn(counters, _) => Ok((Arc::new(db), counters)),
                MetaState::Empty => {
                    Err(Error::NotCairn { detail: "an empty redb database".into() })
                }
            });
        match opened {
            Ok((db, counters)) => {
                *slot = Some(Arc::new(Db::Full(db.clone())));
                self.reading_copy = false;
                *writer = Some(db.clone());
                Ok((db, counters))
            }
            Err(error) => {
                if slot.is_none()
                    && let Some(fallback) = &self.fallback
                {
                    *slot = fallback().ok().map(|copy| Arc::new(Db::Full(Arc::new(copy))));
                    self.reading_copy = slot.is_some();
                }
                Err(error)
            }
        }
    }
}

/// `db` once no read holds it any more, or `Err` with it (to give back to the readers) if reads
/// held it for longer than [`READERS_LET_GO`].
fn let_go(db: Arc<Db>) -> Result<Arc<Db>, Arc<Db>> {
    let started = Instant::now();
    while Arc::strong_count(&db) > 1 {
        if started.elapsed() > READERS_LET_GO {
            return Err(db);
        }
        std::thread::sleep(Duration::from_millis(1));
    }
    Ok(db)
}

impl super::writer::Writer {
    /// When the writer must try to reopen the database: while the store is poisoned by a cause
    /// that may clear, and can reopen by itself.
    pub(crate) fn reopen_due(&mut self) -> Option<Instant> {
        if !self.poison.is_set() || !self.poison.may_clear() {
            return None;
        }
        Some(self.reopen.as_mut()?.due(Instant::now()))
    }

    /// One try at reopening the database (see the module documentation): on success the store
    /// takes writes again, from the counters of the file as reopened.
    pub(crate) fn recover(&mut self) {
        let Some(reopen) = self.reopen.as_mut() else { return };
        let tried = reopen.reopen(&mut self.db).and_then(|(db, counters)| {
            // One empty durable commit: the file takes a write and a sync again.
            guard("reopen", || {
                let txn = db.begin_write().map_err(|e| Error::storage("begin write", e))?;
                txn.commit().map_err(|e| Error::storage("commit", e))
            })?;
            Ok(counters)
        });
        let now = Instant::now();
        match tried {
            Ok(counters) => {
                reopen.recovered(now);
                self.counters = counters;
                self.cache = super::cache::ThreadCache::default();
                self.dirty = false;
                self.last_durable = self.clock.now();
                self.committed.send_replace(counters.last_lsn);
                self.poison.clear();
            }
            Err(error) => {
                reopen.failed(now);
                tracing::warn!(%error, "reopening the database failed; the store still refuses writes");
            }
        }
    }
}
