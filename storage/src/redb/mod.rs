//! [`RedbStore`]: the embedded [`Store`] on one redb file.
//!
//! Owns: the file (through redb), the writer thread ([`writer`]), and the read paths ([`read`]).
//! Invariants: only the writer thread writes; every read is one redb read transaction, so it sees
//! one committed state; the meta table is checked before anything else is trusted (a file that
//! is not Cairn's, or is of a newer format, is refused without being written to).

mod apply;
mod cache;
mod correlations;
mod create;
mod delete;
mod guard;
mod in_place;
mod index;
mod index_check;
mod index_keys;
mod log;
mod meta;
mod migrate;
mod migrate_v6_indexes;
mod migrate_v6_log;
mod migrate_v7;
mod path;
mod poison;
mod prune;
mod queues;
mod read;
mod reopen;
mod rows;
mod signals;
mod snapshot;
mod tables;
mod thread_index;
mod thread_search;
mod verify;
mod writer;
mod writer_queue;

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, RwLock};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use ::redb::{
    Builder, Database, DatabaseError, ReadOnlyDatabase, ReadTransaction, ReadableDatabase,
};
use tokio::sync::{oneshot, watch};

use self::guard::guard;
use self::tables::{Counters, MetaState};
use self::writer::{Command, Write, Writer, WriterQueue};
use crate::batch::Batch;
use crate::checkpoint::{Checkpoint, CheckpointInfo};
use crate::error::Error;
use crate::event::Event;
use crate::ids::{Bookmark, CheckpointId, Lsn, PayloadRef, Seq, ThreadId};
use crate::lock::LockRecord;
use crate::pending::Pending;
use crate::reading::Reading;
use crate::store::{
    Append, Backend, Catalog, CheckpointFilter, Durability, Page, Scope, Store, ThreadFilter,
    ThreadLog,
};
use crate::subscription::Subscription;
use crate::thread::ThreadRecord;

/// The Cairn format version this build writes and the newest it reads (see `docs/format.md`).
pub const FORMAT_VERSION: u16 = 8;

/// How a [`RedbStore`] writes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Options {
    /// When appends are acknowledged (default [`Durability::Immediate`]).
    pub durability: Durability,
    /// Writes that may wait for the writer before `append` blocks (default 1024).
    pub queue_depth: usize,
    /// Most writes in one group commit (default 256).
    pub group_max_batches: usize,
    /// redb's page cache, in bytes (default 64 MiB).
    pub cache_bytes: usize,
}

impl Default for Options {
    fn default() -> Options {
        Options {
            durability: Durability::Immediate,
            queue_depth: 1024,
            group_max_batches: 256,
            cache_bytes: 64 * 1024 * 1024,
        }
    }
}

impl Options {
    /// These options with `durability`.
    ///
    /// # Examples
    ///
    /// ```
    /// use cairn_storage::{Durability, Options};
    /// let options = Options::default().with_durability(Durability::None);
    /// assert_eq!(options.durability, Durability::None);
    /// ```
    pub fn with_durability(mut self, durability: Durability) -> Options {
        self.durability = durability;
        self
    }

    fn builder(&self) -> Builder {
        let mut builder = Builder::new();
        builder.set_cache_size(self.cache_bytes);
        builder
    }
}

/// The redb-backed [`Store`]. Cheap to clone (clones share one file and one writer).
#[derive(Clone)]
pub struct RedbStore {
    inner: Arc<Inner>,
}

impl std::fmt::Debug for RedbStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RedbStore")
            .field("path", &self.inner.path)
            .field("durability", &self.inner.durability)
            .field("read_only", &self.inner.writer.is_none())
            .finish()
    }
}

struct Inner {
    /// `None` once closed (or while a reopen after a failed commit could not open the file;
    /// see [`reopen`]). Shared with the writer, which swaps it when it reopens the database.
    db: reopen::ReadSlot,
    /// `None` for a read-only store.
    writer: Option<WriterHandle>,
    durability: Durability,
    committed: watch::Receiver<u64>,
    path: Option<PathBuf>,
}

struct WriterHandle {
    /// Where commands go, and where the writer rests between groups.
    queue: Arc<WriterQueue>,
    poison: poison::Poison,
    thread: Mutex<Option<JoinHandle<()>>>,
    metrics: crate::telemetry::StoreMetrics,
    /// Writes announced by callers still computing them (see [`crate::WriteIntents`]).
    intents: Arc<crate::intent::WriteIntents>,
}

/// The redb handle a store reads through.
enum Db {
    /// A database open for writing (shared with the writer thread), or a snapshot copy.
    Full(Arc<Database>),
    /// The file opened read-only in place (`in_place.rs`).
    ReadOnly(ReadOnlyDatabase),
}

impl Db {
    fn begin_read(&self) -> Result<ReadTransaction, ::redb::TransactionError> {
        match self {
            Db::Full(db) => db.begin_read(),
            Db::ReadOnly(db) => db.begin_read(),
        }
    }

    fn close(self) -> Result<(), Error> {
        match self {
            // Another handle still holding it closes it on drop.
            Db::Full(db) => Arc::try_unwrap(db)
                .map_or(Ok(()), |db| db.close().map_err(|e| Error::storage("close", e))),
            Db::ReadOnly(db) => db.close().map_err(|e| Error::storage("close", e)),
        }
    }
}

/// How `open_path` treats a missing or existing file.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Mode {
    CreateOrOpen,
    CreateNew,
    OpenExisting,
}

impl RedbStore {
    /// Opens the database at `path`, creating it if it is missing.
    ///
    /// # Errors
    ///
    /// [`Error::NotCairn`] for a file that is not a Cairn database (left untouched),
    /// [`Error::NewerFormat`], [`Error::Locked`] if another handle has it open for writing (at
    /// once), or readers in place still hold it after [`READERS_WAIT_MS`]; storage errors.
    ///
    /// # Examples
    ///
    /// ```
    /// use cairn_storage::{Append, Options, RedbStore, Durability};
    /// let dir = tempfile::tempdir().expect("temp dir");
    /// let store = RedbStore::open(dir.path().join("a.db"), Options::default())?;
    /// assert_eq!(store.durability(), Durability::Immediate);
    /// store.close()?;
    /// # Ok::<(), cairn_storage::Error>(())
    /// ```
    pub fn open(path: impl AsRef<Path>, options: Options) -> Result<RedbStore, Error> {
        RedbStore::open_path(path.as_ref(), options, Mode::CreateOrOpen)
    }

    /// Creates a new database at `path`.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] if a non-empty file is already there; otherwise as [`RedbStore::open`].
    pub fn create(path: impl AsRef<Path>, options: Options) -> Result<RedbStore, Error> {
        RedbStore::open_path(path.as_ref(), options, Mode::CreateNew)
    }

    /// Opens an existing database at `path`.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`] if there is no file; otherwise as [`RedbStore::open`].
    ///
    /// # Examples
    ///
    /// ```
    /// use cairn_storage::{Error, Options, RedbStore};
    /// let dir = tempfile::tempdir().expect("temp dir");
    /// let missing = RedbStore::open_existing(dir.path().join("none.db"), Options::default());
    /// assert!(matches!(missing, Err(Error::NotFound(_))));
    /// ```
    pub fn open_existing(path: impl AsRef<Path>, options: Options) -> Result<RedbStore, Error> {
        RedbStore::open_path(path.as_ref(), options, Mode::OpenExisting)
    }

    /// Opens a database on any redb storage backend (the fault-injection tests use this). An
    /// empty backend is initialised.
    ///
    /// # Errors
    ///
    /// As [`RedbStore::open`].
    pub fn with_backend(
        backend: impl ::redb::StorageBackend,
        options: Options,
    ) -> Result<RedbStore, Error> {
        RedbStore::with_backend_and_clock(backend, options, Arc::new(crate::clock::SystemClock))
    }

    /// [`RedbStore::with_backend`] whose writer goes by `clock` for
    /// [`Durability::Periodic`](crate::Durability) (tests move a [`crate::ManualClock`] and
    /// call [`RedbStore::tick`] instead of sleeping).
    ///
    /// # Errors
    ///
    /// As [`RedbStore::open`].
    pub fn with_backend_and_clock(
        backend: impl ::redb::StorageBackend,
        options: Options,
        clock: Arc<dyn crate::clock::Clock>,
    ) -> Result<RedbStore, Error> {
        let db =
            guard("open", || options.builder().create_with_backend(backend).map_err(open_error))?;
        RedbStore::start(db, options, None, true, clock, None)
    }

    /// [`RedbStore::with_backend`] on a backend the store may be given again (a clone that
    /// reaches the same storage, as `cairn_storage_testkit::fault::FaultBackend`'s clones do):
    /// after a failed commit the store reopens its database on a clone by itself, as a store on a
    /// path reopens its file (see [`RedbStore::open`]).
    ///
    /// # Errors
    ///
    /// As [`RedbStore::open`].
    pub fn with_reopening_backend<B>(backend: B, options: Options) -> Result<RedbStore, Error>
    where
        B: ::redb::StorageBackend + Clone,
    {
        let first = backend.clone();
        let db =
            guard("open", || options.builder().create_with_backend(first).map_err(open_error))?;
        let open: reopen::Opener = Box::new(move || {
            let backend = backend.clone();
            guard("open", || options.builder().create_with_backend(backend).map_err(open_error))
        });
        RedbStore::start(db, options, None, true, Arc::new(crate::clock::SystemClock), Some(open))
    }

    /// Makes the writer look at its clock now, and returns once it has: a periodic flush that
    /// is due by then is durable when this returns. The writer does this by itself when the
    /// interval passes; a test that moves a manual clock calls it instead of waiting.
    ///
    /// # Errors
    ///
    /// The flush's error; [`Error::ReadOnly`], [`Error::Closed`].
    pub fn tick(&self) -> Result<(), Error> {
        let writer = self.inner.writer.as_ref().ok_or(Error::ReadOnly)?;
        let (reply_tx, reply_rx) = std::sync::mpsc::channel();
        writer.queue.send(Command::Tick(reply_tx)).map_err(|_| Error::Closed)?;
        reply_rx.recv().unwrap_or(Err(Error::Closed))
    }

    /// Opens a read-only snapshot of the database at `path`, which another process may be
    /// writing. See the `snapshot` module for exactly what it guarantees: the snapshot is the last
    /// durable commit at the time of the call, verified by redb's checksums; it does not follow
    /// later commits (open again for newer data) and holds no lock on the file.
    ///
    /// # Errors
    ///
    /// [`Error::NotFound`], [`Error::NotCairn`], [`Error::NewerFormat`],
    /// [`Error::SnapshotUnstable`] if the writer kept changing the file during every attempt.
    pub fn open_read_only(path: impl AsRef<Path>) -> Result<RedbStore, Error> {
        let path = path.as_ref();
        let db = snapshot::open(path)?;
        Ok(RedbStore::read_only(Db::Full(Arc::new(db)), path))
    }

    /// Opens the database at `path` read-only where it is, without copying it: reads go to the
    /// file (memory does not grow with it), and a shared lock is held until the store is
    /// dropped, so no engine can open the file for writing meanwhile (an engine's open waits up
    /// to [`READERS_WAIT_MS`] for readers to let it go). A file left unclean by a
    /// crash, or of an older format, is read as a snapshot copy instead (as
    /// [`RedbStore::open_read_only`]): redb may not repair or migrate a file it opens
    /// read-only.
    ///
    /// # Errors
    ///
    /// [`Error::Locked`] while another process (or another handle in this one) has the file
    /// open for writing, before any data is read; otherwise as [`RedbStore::open_read_only`].
    ///
    /// # Examples
    ///
    /// ```
    /// use cairn_storage::{Error, Options, RedbStore, ThreadLog};
    /// let dir = tempfile::tempdir().expect("temp dir");
    /// let path = dir.path().join("cairn.db");
    /// let writer = RedbStore::open(&path, Options::default())?;
    /// assert!(matches!(RedbStore::open_read_only_in_place(&path), Err(Error::Locked)));
    /// writer.close()?;
    /// let reader = RedbStore::open_read_only_in_place(&path)?;
    /// assert_eq!(reader.last_lsn().0, 0);
    /// # Ok::<(), cairn_storage::Error>(())
    /// ```
    pub fn open_read_only_in_place(path: impl AsRef<Path>) -> Result<RedbStore, Error> {
        let path = path.as_ref();
        let db = match ahead::take(path) {
            Some(db) => db,
            None => RedbStore::in_place_db(path)?,
        };
        Ok(RedbStore::read_only(db, path))
    }

    /// Opens `path` as [`RedbStore::open_read_only_in_place`] does, now, and keeps it for the
    /// next `open_read_only_in_place` of the same path in this process, which takes it over.
    /// For a reader that decides, before opening, how to read (through an engine's endpoint, or
    /// the file): what it decided holds when it opens, since its shared lock (or its copy of an
    /// unclean file) is taken at the moment it decides; an engine opening in between would
    /// otherwise make its open [`Error::Locked`]. An open for writing of the same path in this
    /// process lets the kept one go first. Keeps at most one (a second call replaces it).
    ///
    /// # Errors
    ///
    /// As [`RedbStore::open_read_only_in_place`] ([`Error::Locked`] while a writer holds it).
    ///
    /// # Examples
    ///
    /// ```
    /// use cairn_storage::{Options, RedbStore, ThreadLog};
    /// let dir = tempfile::tempdir().expect("temp dir");
    /// let path = dir.path().join("cairn.db");
    /// RedbStore::open(&path, Options::default())?.close()?;
    /// RedbStore::open_read_only_in_place_ahead(&path)?;
    /// let reader = RedbStore::open_read_only_in_place(&path)?; // the one opened ahead
    /// assert_eq!(reader.last_lsn().0, 0);
    /// # Ok::<(), cairn_storage::Error>(())
    /// ```
    pub fn open_read_only_in_place_ahead(path: impl AsRef<Path>) -> Result<(), Error> {
        let path = path.as_ref();
        let db = RedbStore::in_place_db(path)?;
        ahead::keep(path, db);
        Ok(())
    }

    fn in_place_db(path: &Path) -> Result<Db, Error> {
        Ok(match in_place::open(path, Options::default().cache_bytes)? {
            in_place::Opened::InPlace(db) => Db::ReadOnly(db),
            in_place::Opened::Copy(db) => Db::Full(Arc::new(db)),
        })
    }

    /// Whether a process (this one included) holds the database file at `path` open for
    /// writing: an engine runs on it. False for a file only readers hold, a file nobody holds,
    /// and anything that is not a database file. It takes and drops a shared lock on the file.
    ///
    /// # Examples
    ///
    /// ```
    /// use cairn_storage::{Options, RedbStore};
    /// let dir = tempfile::tempdir().expect("temp dir");
    /// let path = dir.path().join("cairn.db");
    /// let writer = RedbStore::open(&path, Options::default())?;
    /// assert!(RedbStore::held_for_writing(&path));
    /// writer.close()?;
    /// assert!(!RedbStore::held_for_writing(&path));
    /// # Ok::<(), cairn_storage::Error>(())
    /// ```
    pub fn held_for_writing(path: impl AsRef<Path>) -> bool {
        let path = path.as_ref();
        path.is_file() && in_place::held_for_writing(path)
    }

    /// A store without a writer reading through `db`.
    fn read_only(db: Db, path: &Path) -> RedbStore {
        let (sender, committed) = watch::channel(0);
        drop(sender);
        let inner = Inner {
            db: Arc::new(RwLock::new(Some(Arc::new(db)))),
            writer: None,
            durability: Durability::Immediate,
            committed,
            path: Some(path.to_path_buf()),
        };
        RedbStore { inner: Arc::new(inner) }
    }

    /// Makes every acknowledged write durable, stops the writer and releases the file (once
    /// subscriptions and other clones holding it are dropped, reads through them return
    /// [`Error::Closed`]).
    ///
    /// # Errors
    ///
    /// The error of the final durable commit, if it failed.
    pub fn close(self) -> Result<(), Error> {
        let result = self.inner.stop();
        let db = self.inner.db.write().map_err(|_| Error::Closed)?.take();
        if let Some(db) = db {
            // Another handle (a subscription's store) still holding it closes it on drop.
            guard("close", move || Arc::try_unwrap(db).map_or(Ok(()), Db::close))?;
        }
        result
    }

    fn open_path(path: &Path, options: Options, mode: Mode) -> Result<RedbStore, Error> {
        // Judged before a byte is read or written: only a regular file is opened, and a new
        // database is only created where nothing exists (see `path.rs`).
        match (mode, path::inspect(path)?) {
            (Mode::OpenExisting, path::Found::Nothing) => {
                return Err(Error::NotFound(path.to_path_buf()));
            }
            (Mode::CreateNew, path::Found::File) => {
                return Err(Error::Invalid {
                    detail: format!("{} already exists", path.display()),
                });
            }
            (_, path::Found::Empty) => {
                return Err(Error::NotCairn { detail: path::EMPTY_FILE.into() });
            }
            (_, path::Found::Nothing) => {
                // Never created in place: a crash part way would leave a file every open
                // refuses. Linked into place, never over anything; whatever is there then
                // (ours, or what another process put there meanwhile) is judged again.
                create::create_file(path, &options, create::Target::Absent)?;
                if path::inspect(path)? != path::Found::File {
                    return Err(Error::NotCairn {
                        detail: "something else appeared at the path while the database was \
                                 being created"
                            .into(),
                    });
                }
            }
            (_, path::Found::File) => {}
        }
        RedbStore::open_file(path, options)
    }

    /// Opens the regular, non-empty file at `path` for writing, after checking (read-only) that
    /// it is a Cairn database this build reads.
    fn open_file(path: &Path, options: Options) -> Result<RedbStore, Error> {
        // This process's own read kept ahead would hold the writer out: let go first.
        drop(ahead::take(path));
        guard("open", || snapshot::precheck(path, &options))?;
        let db = open_past_readers(path, &options)?;
        let at = path.to_path_buf();
        let open: reopen::Opener = Box::new(move || open_past_readers(&at, &options));
        let clock = Arc::new(crate::clock::SystemClock);
        RedbStore::start(db, options, Some(path.to_path_buf()), false, clock, Some(open))
    }

    /// Makes a new database at `path` where there is nothing, or in a zero-length regular file
    /// (which is replaced, atomically, by the complete new database): the explicit way to
    /// initialise an empty file, which [`RedbStore::open`] refuses to touch.
    ///
    /// # Errors
    ///
    /// [`Error::Invalid`] if a file with content is there; [`Error::NotAFile`] for anything
    /// but a regular file; as [`RedbStore::open`].
    ///
    /// # Examples
    ///
    /// ```
    /// use cairn_storage::{Error, Options, RedbStore};
    /// let dir = tempfile::tempdir().expect("temp dir");
    /// let path = dir.path().join("empty.db");
    /// std::fs::write(&path, b"").expect("an empty file");
    /// assert!(matches!(RedbStore::open(&path, Options::default()), Err(Error::NotCairn { .. })));
    /// let store = RedbStore::initialise(&path, Options::default())?;
    /// store.close()?;
    /// # Ok::<(), cairn_storage::Error>(())
    /// ```
    pub fn initialise(path: impl AsRef<Path>, options: Options) -> Result<RedbStore, Error> {
        let path = path.as_ref();
        let target = match path::inspect(path)? {
            path::Found::Nothing => create::Target::Absent,
            path::Found::Empty => create::Target::Empty,
            path::Found::File => {
                return Err(Error::Invalid {
                    detail: format!("{} already holds data", path.display()),
                });
            }
        };
        // Through a link, the link's target is the file initialised (the link stays).
        let real = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
        let real = if target == create::Target::Empty { real } else { path.to_path_buf() };
        create::create_file(&real, &options, target)?;
        RedbStore::open_file(&real, options)
    }

    /// Starts the writer on `db`. With `open`, the writer reopens the database after a failed
    /// commit, when every acknowledged write is durable (see [`reopen`]); a store on `path`
    /// reads through a copy of its last durable commit while it cannot.
    fn start(
        db: Database,
        options: Options,
        path: Option<PathBuf>,
        may_initialise: bool,
        clock: Arc<dyn crate::clock::Clock>,
        open: Option<reopen::Opener>,
    ) -> Result<RedbStore, Error> {
        let counters = match guard("open", || tables::check_meta(&db))? {
            MetaState::Cairn(counters, version) => {
                migrate::upgrade(&db, version, "migrate")?;
                counters
            }
            MetaState::Empty if may_initialise => {
                guard("initialise", || initialise(&db))?;
                Counters::default()
            }
            MetaState::Empty => {
                return Err(Error::NotCairn { detail: "an empty redb database".into() });
            }
        };
        let db = Arc::new(db);
        let (committed_tx, committed) = watch::channel(counters.last_lsn);
        let queue = Arc::new(WriterQueue::new(options.queue_depth));
        let nudge = queue.clone();
        // A full queue wakes the writer anyway; a closed one has no writer left to wake.
        let intents = crate::intent::WriteIntents::new(move || _ = nudge.try_send(Command::Nudge));
        let mut writer =
            Writer::new(db.clone(), counters, &options, committed_tx, clock, intents.clone());
        let readers: reopen::ReadSlot = Arc::new(RwLock::new(Some(Arc::new(Db::Full(db)))));
        if let Some(open) = open.filter(|_| options.durability == Durability::Immediate) {
            let fallback = path
                .clone()
                .map(|path| -> reopen::Opener { Box::new(move || snapshot::open(&path)) });
            writer.reopen = Some(reopen::Reopen::new(open, fallback, readers.clone()));
        }
        let (poison, metrics) = (writer.poison.clone(), writer.metrics.clone());
        queue.rest(Box::new(writer), false);
        let serving = queue.clone();
        let thread = std::thread::Builder::new()
            .name("cairn-writer".into())
            .spawn(move || Writer::run(serving))
            .map_err(|e| Error::storage("spawn writer", e))?;
        let inner = Inner {
            db: readers,
            writer: Some(WriterHandle {
                queue,
                poison,
                thread: Mutex::new(Some(thread)),
                metrics,
                intents,
            }),
            durability: options.durability,
            committed,
            path,
        };
        Ok(RedbStore { inner: Arc::new(inner) })
    }

    /// Runs `f` in one read transaction, guarded: a panic inside redb on a damaged page is an
    /// error, not a panic.
    fn read<T>(&self, f: impl FnOnce(&ReadTransaction) -> Result<T, Error>) -> Reading<T> {
        let read = || {
            let db = self.inner.db.read().map_err(|_| Error::Closed)?.clone();
            let db = db.ok_or_else(|| self.unreadable())?;
            guard("read", || {
                let txn = db.begin_read().map_err(|e| Error::storage("begin read", e))?;
                f(&txn)
            })
        };
        Reading::ready(read())
    }

    /// Why there is no database to read: the refusal while a reopen could not open it again,
    /// else closed.
    fn unreadable(&self) -> Error {
        let refusal = self.inner.writer.as_ref().and_then(|w| w.poison.refusal());
        refusal.unwrap_or(Error::Closed)
    }

    fn send<T>(
        &self,
        make: impl FnOnce(oneshot::Sender<Result<T, Error>>) -> Write,
    ) -> Result<Pending<T>, Error> {
        let writer = self.inner.writer.as_ref().ok_or(Error::ReadOnly)?;
        if let Some(refused) = writer.poison.refusal() {
            return Err(refused);
        }
        let (tx, rx) = oneshot::channel();
        writer.queue.send(Command::Write(make(tx))).map_err(|_| Error::Closed)?;
        Ok(Pending::new(rx))
    }
}

impl Inner {
    /// Stops the writer after a final durable commit; idempotent.
    fn stop(&self) -> Result<(), Error> {
        let Some(writer) = &self.writer else { return Ok(()) };
        let Some(thread) = writer.thread.lock().map_err(|_| Error::Closed)?.take() else {
            return Ok(());
        };
        let (reply_tx, reply_rx) = std::sync::mpsc::channel();
        let result = match writer.queue.send(Command::Close(reply_tx)) {
            Ok(()) => reply_rx.recv().unwrap_or(Err(Error::Closed)),
            Err(_) => Err(Error::Closed),
        };
        if thread.join().is_err() {
            return Err(Error::Closed);
        }
        result
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if let Err(error) = self.stop() {
            tracing::error!(%error, "closing the store on drop failed");
        }
        // Dropping the last handle closes redb, which may read damaged pages: guarded.
        let db = self.db.write().ok().and_then(|mut db| db.take());
        if let Err(error) = guard("close", move || {
            drop(db);
            Ok(())
        }) {
            tracing::error!(%error, "closing the database on drop failed");
        }
    }
}

fn initialise(db: &Database) -> Result<(), Error> {
    let created_at_ms =
        SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64);
    let txn = db.begin_write().map_err(|e| Error::storage("begin write", e))?;
    tables::initialise(&txn, created_at_ms)?;
    txn.commit().map_err(|e| Error::storage("commit", e))
}

/// The read in place kept by [`RedbStore::open_read_only_in_place_ahead`] until its open.
mod ahead {
    use std::path::{Path, PathBuf};
    use std::sync::{Mutex, PoisonError};

    use super::Db;

    static KEPT: Mutex<Option<(PathBuf, Db)>> = Mutex::new(None);

    /// Paths compare as the files they name (`a.db` and `./a.db` are one file).
    fn key(path: &Path) -> PathBuf {
        std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
    }

    pub(super) fn keep(path: &Path, db: Db) {
        let previous = KEPT.lock().unwrap_or_else(PoisonError::into_inner).replace((key(path), db));
        // Dropped outside the lock: closing a database may take a moment.
        drop(previous);
    }

    /// The read kept for `path`, if any (taken: kept no more).
    pub(super) fn take(path: &Path) -> Option<Db> {
        let mut kept = KEPT.lock().unwrap_or_else(PoisonError::into_inner);
        if kept.as_ref().is_some_and(|(at, _)| *at == key(path)) {
            return kept.take().map(|(_, db)| db);
        }
        None
    }
}

/// Longest an open for writing waits for readers in place (a CLI read holding the file's shared
/// lock while it reads: a listing, a `show`, a `verify`) to let the file go before it is refused
/// as [`Error::Locked`]. A read in place of a page takes milliseconds, a `verify` of a large
/// file a few seconds; an engine started while one runs waits for it instead of failing. A file
/// held for writing (another engine) is refused at once, without this wait.
pub const READERS_WAIT_MS: u64 = 5_000;

/// How often an open waiting for readers tries again.
const READERS_RETRY_MS: u64 = 20;

/// Opens `path` for writing; while only readers in place hold it (their shared lock refuses a
/// writer, see [`in_place::held_for_writing`]), tries again for up to [`READERS_WAIT_MS`].
fn open_past_readers(path: &Path, options: &Options) -> Result<Database, Error> {
    let started = std::time::Instant::now();
    let mut waited = false;
    loop {
        match guard("open", || options.builder().create(path).map_err(open_error)) {
            Err(Error::Locked)
                if started.elapsed() < Duration::from_millis(READERS_WAIT_MS)
                    && !in_place::held_for_writing(path) =>
            {
                if !waited {
                    tracing::info!(path = %path.display(), "waiting for readers to let the file go");
                    waited = true;
                }
                std::thread::sleep(Duration::from_millis(READERS_RETRY_MS));
            }
            other => return other,
        }
    }
}

/// Maps redb's open errors onto ours.
fn open_error(error: DatabaseError) -> Error {
    match error {
        DatabaseError::DatabaseAlreadyOpen | DatabaseError::LockProtocolMismatch => Error::Locked,
        DatabaseError::UpgradeRequired(version) => Error::NotCairn {
            detail: format!("a redb file of format {version}, older than Cairn's"),
        },
        other => Error::storage("open database", other),
    }
}

impl Append for RedbStore {
    fn append(&self, batch: Batch) -> Result<Pending, Error> {
        batch.check_limits()?;
        if batch.is_empty() {
            self.inner.writer.as_ref().ok_or(Error::ReadOnly)?;
            return Ok(Pending::ready(Ok(crate::batch::Appended::default())));
        }
        self.send(|tx| Write::Append(batch, tx))
    }

    /// Queueing never waits on the network: [`RedbStore::append`]'s.
    fn append_async(&self, batch: Batch) -> Reading<Pending> {
        Reading::ready(self.append(batch))
    }

    /// One command for the writer (one wake), its writes applied in order in one group; as the
    /// trait says, the first batch refused up front ends the hand-over there. A small hand-over
    /// that need not be durable, while the writer rests and nobody else has a write announced,
    /// is committed on the calling thread instead (see `writer::commit_alone`).
    fn append_all(&self, batches: &mut Vec<Batch>) -> Vec<Pending> {
        let writer = self
            .inner
            .writer
            .as_ref()
            .ok_or(Error::ReadOnly)
            .and_then(|writer| writer.poison.refusal().map_or(Ok(writer), Err));
        let mut refused = writer.as_ref().err().cloned();
        let mut pending = Vec::with_capacity(batches.len());
        let mut writes = Vec::with_capacity(batches.len());
        for batch in batches.drain(..) {
            if refused.is_none() {
                refused = batch.check_limits().err();
            }
            if let Some(error) = &refused {
                pending.push(Pending::ready(Err(error.clone())));
            } else if batch.is_empty() {
                pending.push(Pending::ready(Ok(crate::batch::Appended::default())));
            } else {
                let (tx, rx) = oneshot::channel();
                pending.push(Pending::new(rx));
                writes.push(Write::Append(batch, tx));
            }
        }
        // A write the writer never answers (it stopped) reads as closed through its `Pending`.
        if let (Ok(writer), false) = (writer, writes.is_empty())
            && let Err(writes) = writer::commit_alone(&writer.queue, writes)
        {
            drop(writer.queue.send(Command::Writes(writes)));
        }
        pending
    }

    fn durability(&self) -> Durability {
        self.inner.durability
    }
}

/// A file only this process writes (its lock says so); intents, metrics and refusals where it
/// has a writer (none read-only).
impl Backend for RedbStore {
    fn shared(&self) -> Option<&dyn crate::store::SharedDatabase> {
        None
    }

    fn intend_write(&self) -> Option<crate::intent::WriteIntent> {
        self.inner.writer.as_ref().map(|w| w.intents.hold())
    }

    fn metrics(&self) -> Option<&crate::telemetry::StoreMetrics> {
        self.inner.writer.as_ref().map(|w| &w.metrics)
    }

    fn refusals(&self) -> Option<watch::Receiver<Option<Error>>> {
        self.inner.writer.as_ref().map(|w| w.poison.watch())
    }
}

// Reads are local (memory and the page cache, microseconds, like any computation on a runtime
// worker): each answers at once, ready, with no allocation.
impl ThreadLog for RedbStore {
    fn read_since(&self, thread: &ThreadId, after: Seq, limit: usize) -> Reading<Vec<Event>> {
        self.read(|txn| read::read_since(txn, thread, after, limit, None))
    }

    fn read_range(&self, thread: &ThreadId, from: Seq, to: Seq) -> Reading<Vec<Event>> {
        self.read(|txn| read::read_range(txn, thread, from, to))
    }

    fn last_lsn(&self) -> Lsn {
        Lsn(*self.inner.committed.borrow())
    }

    fn read_all_since(&self, after: Lsn, limit: usize) -> Reading<Vec<Event>> {
        self.read(|txn| read::read_all_since(txn, after, limit))
    }

    fn read_correlated(
        &self,
        query: &crate::correlation::CorrelationQuery,
        after: Lsn,
        limit: usize,
    ) -> Reading<Vec<Event>> {
        self.read(|txn| correlations::read_correlated(txn, query, after, limit))
    }

    fn subscribe(&self, scope: Scope, after: u64) -> Result<Subscription, Error> {
        if self.inner.db.read().map_err(|_| Error::Closed)?.is_none() {
            return Err(Error::Closed);
        }
        let store: Arc<dyn Store> = Arc::new(self.clone());
        Ok(Subscription::new(store, scope, after, self.inner.committed.clone()))
    }

    fn payload(&self, r: &PayloadRef) -> Reading<Vec<u8>> {
        self.read(|txn| read::payload(txn, r))
    }

    fn checkpoint(&self, id: CheckpointId) -> Reading<Option<Checkpoint>> {
        self.read(|txn| read::checkpoint(txn, id))
    }

    fn checkpoint_exists(&self, id: CheckpointId) -> Reading<bool> {
        self.read(|txn| read::checkpoint_exists(txn, id))
    }

    fn latest_checkpoint_at_or_before(
        &self,
        thread: &ThreadId,
        seq: Seq,
    ) -> Reading<Option<Checkpoint>> {
        self.read(|txn| read::latest_checkpoint_at_or_before(txn, thread, seq))
    }

    fn checkpoint_covering(&self, thread: &ThreadId, seq: Seq) -> Reading<Option<CheckpointId>> {
        self.read(|txn| read::checkpoint_covering(txn, thread, seq))
    }

    fn list_checkpoints(
        &self,
        filter: &CheckpointFilter,
        page: Page,
    ) -> Reading<Vec<CheckpointInfo>> {
        self.read(|txn| read::list_checkpoints(txn, filter, page))
    }
}

impl Catalog for RedbStore {
    fn thread(&self, id: &ThreadId) -> Reading<Option<ThreadRecord>> {
        self.read(|txn| read::thread(txn, id))
    }

    fn last_bookmark(&self, thread: &ThreadId) -> Reading<Option<Bookmark>> {
        self.read(|txn| read::last_bookmark(txn, thread))
    }

    fn list_threads(&self, filter: &ThreadFilter, page: Page) -> Reading<Vec<ThreadRecord>> {
        self.read(|txn| read::list_threads(txn, filter, page))
    }

    fn list_threads_after(
        &self,
        filter: &ThreadFilter,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Reading<Vec<ThreadRecord>> {
        self.read(|txn| read::list_threads_after(txn, filter, after, limit))
    }

    fn locks(&self) -> Reading<Vec<LockRecord>> {
        self.read(read::locks)
    }

    fn signals(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Reading<Vec<crate::signal::Signal>> {
        self.read(|txn| signals::read(txn, thread, after, limit))
    }

    fn queues(&self) -> Reading<Vec<crate::queue::QueueState>> {
        self.read(queues::read_all)
    }

    fn queue_member(&self, thread: &ThreadId) -> Reading<Option<crate::queue::QueueMember>> {
        self.read(|txn| queues::read_member(txn, thread))
    }
}

crate::request::maintenance_through_writer!(RedbStore, |store| store.read(verify::verify).wait());

impl Store for RedbStore {}
