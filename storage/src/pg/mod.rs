//! [`PgStore`]: the [`Store`] on PostgreSQL, one database shared by many engine processes.
//!
//! The records are the CRC-framed records of a redb file, in `bytea` columns; batches are
//! planned by the same planner as redb's and committed in group commits, one SQL transaction
//! each, serialised across processes by a row lock (see `write.rs`). The client is
//! `tokio-postgres`; the store's connections are driven by a small runtime of its own
//! (`pool.rs`), so it works inside any runtime or none. A read (every read of the
//! [`Store`] answers a [`Reading`]) is a future on a pooled reader connection, awaited by the
//! engine's paths; a sync caller's [`Reading::wait`] blocks its thread for one round trip, as a
//! redb read blocks it for the disk. Durability: [`Durability::Immediate`] commits with `synchronous_commit =
//! on` (an acknowledged batch survives a crash of the server); the other modes with it off (a
//! server crash may lose the last few hundred milliseconds of acknowledged batches, never part
//! of one). Every wait on the network has a deadline (`deadline.rs`): a connection that misses
//! one is given up as one the network dropped, and the store says the database is unreachable
//! ([`Backend::database`], `cairn_database_up`) until a round trip is answered again: its check
//! (`listen.rs`) notices a silent database within a few seconds, and meanwhile reads fail at
//! once with [`Error::Unavailable`] naming the cause, as writes do once it has been away for
//! [`crate::limits::PG_WRITE_WAIT_UNAVAILABLE_MAX`] (`pool.rs`, `write.rs`).
//! `docs/postgres.md` has the schema, the setup, the timeouts and what is not yet there.
//!
//! # Examples
//! ```no_run
//! # fn run() -> Result<(), cairn_storage::Error> {
//! use cairn_storage::{Durability, Maintenance, PgStore};
//! let store = PgStore::connect("host=/tmp user=postgres dbname=cairn", Durability::Immediate)?;
//! assert!(store.verify()?.is_clean());
//! # Ok(()) }
//! ```

mod blocking;
mod correlations;
mod deadline;
mod delete;
mod events;
mod group;
mod labels;
mod listen;
mod lookups;
mod pool;
mod queues;
mod read;
mod resolve;
mod schema;
mod signals;
mod tls;
mod tx;
mod verify;
mod wake;
mod write;
mod xid;

pub use schema::PG_FORMAT_VERSION;

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use tokio::sync::{oneshot, watch};

use self::pool::{BoxRead, Conn, Driver, Readers, Target};
use self::write::{Write, Writer};
use crate::batch::Batch;
use crate::checkpoint::{Checkpoint, CheckpointInfo};
use crate::codec::table;
use crate::error::Error;
use crate::event::Event;
use crate::ids::{CheckpointId, Lsn, PayloadRef, Seq, ThreadId};
use crate::lock::LockRecord;
use crate::pending::Pending;
use crate::reading::{OnBlock, Reading};
use crate::store::{
    Append, Backend, Catalog, CheckpointFilter, Durability, Page, Scope, SharedDatabase, Store,
    ThreadFilter, ThreadLog,
};
use crate::subscription::Subscription;
use crate::thread::ThreadRecord;

/// Reader connections of one store (the pool's size: reads beyond it wait for one).
const READERS: usize = 4;

/// A read for [`Readers`]: `read_with!(a, b; |c| f(c, &a, &b))`, a closure that runs the future
/// `f(...)` on the connection `c`, with clones of the captured `a`, `b` (a read may run twice:
/// `pool.rs`).
macro_rules! read_with {
    ($($cap:ident),* ; |$c:ident| $body:expr) => {
        move |$c| {
            $(let $cap = $cap.clone();)*
            Box::pin(async move { $body.await })
        }
    };
}

/// A Cairn database in PostgreSQL.
#[derive(Clone)]
pub struct PgStore {
    inner: Arc<Inner>,
}

/// Fields drop in order: the runtime that drives the connections goes last.
struct Inner {
    /// Reads of thread records, queued and read together (`lookups.rs`).
    lookups: lookups::Lookups,
    readers: Readers,
    writer: Writer,
    durability: Durability,
    committed: watch::Receiver<u64>,
    /// Commits of other stores on the database.
    remote: watch::Receiver<u64>,
    /// Messages to threads' drivers, heard by the listener.
    drivers: tokio::sync::broadcast::Sender<crate::store::DriverMessage>,
    /// Sync reads made from inside an async runtime ([`PgStore::blocking_reads`]).
    blocking_reads: Arc<AtomicU64>,
    /// Counts such a read (into `blocking_reads` and the metrics).
    on_block: OnBlock,
    /// The runtime the connections' tasks run on: held, never read (the writer's thread holds
    /// it too, until it has answered its last write).
    _driver: Arc<Driver>,
}

impl std::fmt::Debug for PgStore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PgStore").field("durability", &self.inner.durability).finish()
    }
}

impl PgStore {
    /// Connects to the database at `url` (`postgres://user@host/db`, or `host=/run/postgresql
    /// user=... dbname=...`), creates Cairn's tables if they are missing, and checks the format
    /// of the ones found. Call from outside an async runtime, or inside `spawn_blocking`.
    ///
    /// # Errors
    /// [`Error::Storage`] when the server cannot be reached or refuses; [`Error::NewerFormat`]
    /// for a database written by a newer Cairn.
    pub fn connect(url: &str, durability: Durability) -> Result<PgStore, Error> {
        let url = url.to_owned();
        // The client blocks on a runtime of its own: never on a tokio worker.
        std::thread::scope(|s| s.spawn(|| PgStore::connect_here(&url, durability)).join())
            .unwrap_or_else(|_| Err(Error::Closed))
    }

    fn connect_here(url: &str, durability: Durability) -> Result<PgStore, Error> {
        let driver = Arc::new(Driver::start()?);
        let metrics = crate::telemetry::StoreMetrics::default();
        let sync = if durability == Durability::Immediate { "on" } else { "off" };
        let target = |role: &'static str| -> Result<Target, Error> {
            let mut target = Target::new(url, role, driver.handle(), metrics.clone())?;
            target.set_up(&format!("SET synchronous_commit = {sync}"));
            Ok(target)
        };
        // The writer's connection: a transaction it leaves open (its process stopped mid-group,
        // its network silent) is ended by the server, so it cannot hold other writers' rows or
        // the readers' watermark for long: after the answer deadline (when the writer gives the
        // connection up) or `IDLE_IN_GROUP_MAX`, whichever comes first.
        let mut writer_target = target("cairn-writer")?;
        let idle = writer_target
            .timeouts
            .answer()
            .map_or(write::IDLE_IN_GROUP_MAX, |a| a.min(write::IDLE_IN_GROUP_MAX));
        writer_target
            .set_up(&format!("SET idle_in_transaction_session_timeout = {}", idle.as_millis()));
        let connect: pool::Connect = Arc::new(move || writer_target.open_blocking());
        let client = connect()?;
        schema::prepare(&mut blocking::Client::on(&client))?;
        let last = client.wait(listen::last_lsn(&client))?;
        let (tx, committed) = watch::channel(last);
        let (remote_tx, remote) = watch::channel(last);
        let tx = Arc::new(tx);
        let token = token();
        let durable = durability == Durability::Immediate;
        let who = write::Identity { token, durable };
        let writer = Writer::start(
            client,
            connect.clone(),
            tx.clone(),
            who,
            metrics.clone(),
            driver.clone(),
        )?;
        let (drivers, _) =
            tokio::sync::broadcast::channel(crate::limits::DRIVER_MESSAGES_QUEUED_MAX);
        let heard =
            listen::Heard { committed: tx, remote: remote_tx, token, drivers: drivers.clone() };
        listen::start(target("cairn-listener")?, heard);
        let readers = Readers::start(target("cairn-reader")?, READERS)?;
        let lookups = lookups::Lookups::start(readers.clone(), &driver.handle());
        let blocking_reads = Arc::new(AtomicU64::new(0));
        let on_block = on_block(blocking_reads.clone(), metrics.clone());
        let inner = Inner {
            lookups,
            readers,
            writer,
            durability,
            committed,
            remote,
            drivers,
            blocking_reads,
            on_block,
            _driver: driver,
        };
        Ok(PgStore { inner: Arc::new(inner) })
    }

    /// Runs the read `f`, named `call` in its errors, on a reader's connection: an async caller awaits the answer, and no
    /// thread but the reader's waits for the server. A sync caller's [`Reading::wait`] on a
    /// thread of an async runtime (which the engine's paths never do) is counted
    /// ([`crate::telemetry::BLOCKING_READS`], [`PgStore::blocking_reads`], a debug event).
    fn read<T: Send + 'static>(
        &self,
        call: &'static str,
        f: impl for<'c> Fn(&'c Conn) -> BoxRead<'c, T> + Send + Sync + 'static,
    ) -> Reading<T> {
        self.inner.readers.run(call, f).counting_blocks(self.inner.on_block.clone())
    }

    /// Sync reads this store made from inside an async runtime, so far (each blocked a thread
    /// of it for a round trip; see [`crate::telemetry::BLOCKING_READS`]). The engine's paths
    /// await their reads: a count that grows while an engine runs on this store points at a
    /// read left to move.
    pub fn blocking_reads(&self) -> u64 {
        self.inner.blocking_reads.load(Ordering::Relaxed)
    }

    fn send<T>(
        &self,
        op: impl FnOnce(oneshot::Sender<Result<T, Error>>) -> Write,
    ) -> Result<Pending<T>, Error> {
        let (tx, rx) = oneshot::channel();
        self.inner.writer.send(op(tx))?;
        Ok(Pending::new(rx))
    }
}

impl Append for PgStore {
    fn append(&self, batch: Batch) -> Result<Pending, Error> {
        self.inner.writer.append(batch)
    }

    fn append_async(&self, batch: Batch) -> Reading<Pending> {
        self.inner.writer.append_async(batch)
    }

    fn durability(&self) -> Durability {
        self.inner.durability
    }
}

/// A database other processes write too, with no write intents (its commits are not
/// gathered) and never refusing writes as a whole (each is retried on a fresh connection).
impl Backend for PgStore {
    fn shared(&self) -> Option<&dyn SharedDatabase> {
        Some(self)
    }

    fn intend_write(&self) -> Option<crate::intent::WriteIntent> {
        None
    }

    fn metrics(&self) -> Option<&crate::telemetry::StoreMetrics> {
        Some(&self.inner.writer.metrics)
    }

    fn refusals(&self) -> Option<watch::Receiver<Option<Error>>> {
        None
    }
}

impl ThreadLog for PgStore {
    fn read_since(&self, thread: &ThreadId, after: Seq, limit: usize) -> Reading<Vec<Event>> {
        let thread = thread.clone();
        self.read(
            "read events",
            read_with!(thread; |c| read::read_since(c, &thread, after, limit, None)),
        )
    }

    fn read_range(&self, thread: &ThreadId, from: Seq, to: Seq) -> Reading<Vec<Event>> {
        let (from, count) = match crate::store::range(from, to) {
            Ok(Some(range)) => range,
            Ok(None) => return Reading::ready(Ok(Vec::new())),
            Err(e) => return Reading::ready(Err(e)),
        };
        let thread = thread.clone();
        self.read(
            "read events",
            read_with!(thread; |c| read::read_since(c, &thread, Seq(from - 1), count, Some(to))),
        )
    }

    fn last_lsn(&self) -> Lsn {
        Lsn(*self.inner.committed.borrow())
    }

    fn read_all_since(&self, after: Lsn, limit: usize) -> Reading<Vec<Event>> {
        self.read("read the global feed", read_with!(; |c| read::read_all_since(c, after, limit)))
    }

    fn read_correlated(
        &self,
        query: &crate::correlation::CorrelationQuery,
        after: Lsn,
        limit: usize,
    ) -> Reading<Vec<Event>> {
        let query = query.clone();
        self.read(
            "read correlated events",
            read_with!(query; |c| correlations::read_correlated(c, &query, after, limit)),
        )
    }

    fn subscribe(&self, scope: Scope, after: u64) -> Result<Subscription, Error> {
        let store: Arc<dyn Store> = Arc::new(self.clone());
        Ok(Subscription::new(store, scope, after, self.inner.committed.clone()))
    }

    fn payload(&self, r: &PayloadRef) -> Reading<Vec<u8>> {
        let r = *r;
        self.read("read a payload", read_with!(; |c| read::payload(c, &r)))
    }

    fn checkpoint(&self, id: CheckpointId) -> Reading<Option<Checkpoint>> {
        self.read("read a checkpoint", read_with!(; |c| read::checkpoint(c, id)))
    }

    fn checkpoint_exists(&self, id: CheckpointId) -> Reading<bool> {
        self.read("look for a checkpoint", read_with!(; |c| read::checkpoint_exists(c, id)))
    }

    fn latest_checkpoint_at_or_before(
        &self,
        thread: &ThreadId,
        seq: Seq,
    ) -> Reading<Option<Checkpoint>> {
        let thread = thread.clone();
        self.read(
            "read the latest checkpoint",
            read_with!(thread; |c| read::latest_checkpoint_at_or_before(c, &thread, seq)),
        )
    }

    fn list_checkpoints(
        &self,
        filter: &CheckpointFilter,
        page: Page,
    ) -> Reading<Vec<CheckpointInfo>> {
        let filter = filter.clone();
        self.read(
            "list checkpoints",
            read_with!(filter; |c| read::list_checkpoints(c, &filter, page)),
        )
    }
}

impl Catalog for PgStore {
    fn thread(&self, id: &ThreadId) -> Reading<Option<ThreadRecord>> {
        self.inner.lookups.thread(id.clone()).counting_blocks(self.inner.on_block.clone())
    }

    fn list_threads(&self, filter: &ThreadFilter, page: Page) -> Reading<Vec<ThreadRecord>> {
        let filter = filter.clone();
        self.read("list threads", read_with!(filter; |c| read::list_threads(c, &filter, page)))
    }

    fn list_threads_after(
        &self,
        filter: &ThreadFilter,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Reading<Vec<ThreadRecord>> {
        let (filter, after) = (filter.clone(), after.cloned());
        self.read("list threads", read_with!(filter, after; |c| read::list_threads_after(c, &filter, after.as_ref(), limit)))
    }

    fn signals(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Reading<Vec<crate::signal::Signal>> {
        let thread = thread.clone();
        self.read("read signals", read_with!(thread; |c| signals::read(c, &thread, after, limit)))
    }

    fn locks(&self) -> Reading<Vec<LockRecord>> {
        self.read("read locks", read_with!(; |c| read::locks(c)))
    }

    fn queues(&self) -> Reading<Vec<crate::queue::QueueState>> {
        self.read("read queues", read_with!(; |c| queues::read_all(c)))
    }

    fn queue_member(&self, thread: &ThreadId) -> Reading<Option<crate::queue::QueueMember>> {
        let thread = thread.clone();
        self.read("read a queue member", read_with!(thread; |c| queues::read_member(c, &thread)))
    }
}

crate::request::maintenance_through_writer!(PgStore, |store| {
    // A long series of statements, each waited for within the answer deadline, on this
    // thread (`blocking::Client`): it blocks, as `Reading::wait` says.
    let (handle, limit) = store.inner.readers.deadline();
    store
        .read(
            "verify",
            read_with!(handle; |c| async move {
                verify::verify(&mut blocking::Client::new(c, &handle, limit))
            }),
        )
        .wait()
});

impl SharedDatabase for PgStore {
    fn due_threads(
        &self,
        workflows: &[String],
        horizon_ms: u64,
        after: Option<&(u64, ThreadId)>,
        limit: usize,
    ) -> Reading<Vec<crate::store::DueThread>> {
        let (workflows, after) = (workflows.to_vec(), after.cloned());
        self.read("read due threads", read_with!(workflows, after; |c| wake::due_threads(c, &workflows, horizon_ms, after.as_ref(), limit)))
    }

    fn commits(&self) -> watch::Receiver<u64> {
        self.inner.remote.clone()
    }

    fn tell_driver(&self, thread: &ThreadId, message: &str) -> Reading<()> {
        let max = crate::limits::DRIVER_MESSAGE_BYTES_MAX;
        if let Err(e) = crate::limits::check("DRIVER_MESSAGE_BYTES_MAX", message.len(), max) {
            return Reading::ready(Err(e));
        }
        let payload = format!("{thread}\t{message}");
        // Outside any transaction: delivered when this statement commits, at once.
        self.read(
            "tell a thread's driver",
            read_with!(payload; |c| async {
                c.execute("SELECT pg_notify($1, $2)", &[&listen::DRIVERS, &payload])
                    .await
                    .map(drop)
                    .map_err(pg_error("tell a thread's driver"))
            }),
        )
    }

    fn driver_messages(&self) -> tokio::sync::broadcast::Receiver<crate::store::DriverMessage> {
        self.inner.drivers.subscribe()
    }
}

impl Store for PgStore {}

/// What a sync read on an async runtime's thread costs: counted in `count` and `metrics`.
fn on_block(count: Arc<AtomicU64>, metrics: crate::telemetry::StoreMetrics) -> OnBlock {
    Arc::new(move |read: &'static str| {
        count.fetch_add(1, Ordering::Relaxed);
        metrics.blocking_read();
        tracing::debug!(
            read,
            "sync PostgreSQL read on an async runtime: its thread waits for the round trip"
        );
    })
}

/// A number telling this store's notifications from others' (unique enough: time, process and
/// a counter, hashed).
fn token() -> u64 {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let n = NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    let mut h = std::collections::hash_map::DefaultHasher::new();
    std::hash::Hash::hash(&(now, std::process::id(), n), &mut h);
    std::hash::Hasher::finish(&h)
}

/// A client error as a storage error of `op`.
fn pg_error(op: &'static str) -> impl Fn(tokio_postgres::Error) -> Error {
    move |e| Error::Storage { op, source: Arc::new(e) }
}

/// A counter, seq or id as a `bigint`.
fn to_db(n: u64) -> Result<i64, Error> {
    i64::try_from(n).map_err(|_| Error::Invalid { detail: format!("{n} does not fit a bigint") })
}

/// A `bigint` read back as a counter, seq or id: negative only by damage.
fn from_db(n: i64) -> Result<u64, Error> {
    u64::try_from(n).map_err(|_| corrupt(table::META, None, None, format!("negative number {n}")))
}

fn corrupt(
    table: &'static str,
    thread: Option<&ThreadId>,
    seq: Option<Seq>,
    detail: String,
) -> Error {
    Error::Corrupted { table, thread: thread.cloned(), seq, detail }
}
