//! The connections of a [`super::PgStore`]: a small tokio runtime of the store's own that drives
//! them, and the pool of reader connections (`deadpool-postgres`).
//!
//! Every connection's socket is driven by a task on the store's runtime ([`Driver`]), whatever
//! its caller runs on: a read is a future on a pooled connection that the caller's task awaits
//! (the request goes to the connection's task over a channel, the answer comes back the same
//! way), so the store works inside any runtime, or none, and an async read blocks no thread. A
//! sync read ([`Readers::run`]) blocks its own thread for the round trip, as a redb read blocks
//! it for the disk. The pool's size bounds how many reads run at once; more wait for a
//! connection, suspended, within a deadline of its own ([`crate::limits::PG_READ_CONNECTION_WAIT_MAX`]:
//! a connection held by a read nobody drives any more is never freed). Every connection opens
//! within the connect timeout and every read waits for its answer within the answer deadline
//! (`deadline.rs`); the writer's [`Link`] gives each of its statements the same deadline.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};

use super::deadline::Timeouts;
use super::tls::Tls;
use crate::error::Error;
use crate::reading::Reading;
use crate::telemetry::StoreMetrics;

/// A reader connection of the pool, with its cache of prepared statements.
pub(crate) type Conn = deadpool_postgres::ClientWrapper;

/// A read's future, borrowing its connection.
pub(crate) type BoxRead<'c, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'c>>;

/// Opens a fresh connection for the writer, set up as its first one was (blocking: the writer's
/// thread is no runtime's worker).
pub(crate) type Connect = Arc<dyn Fn() -> Result<Link, Error> + Send + Sync>;

/// A connection used by a thread of its own (the writer's), whose every request is waited for
/// with a deadline ([`Link::wait`]); dropped, its socket is closed.
pub(crate) struct Link {
    client: tokio_postgres::Client,
    /// The task driving the connection's socket: ended to give the connection up.
    task: tokio::task::AbortHandle,
    handle: tokio::runtime::Handle,
    answer: Option<std::time::Duration>,
    metrics: StoreMetrics,
}

impl Link {
    /// Blocks this thread until `request` (a request on this connection) completes. With no
    /// answer within the answer deadline ([`Timeouts::answer`]), the connection is given up:
    /// `request` fails as on a connection the network dropped, and [`Client::is_closed`](tokio_postgres::Client::is_closed) says so.
    pub fn wait<F: Future>(&self, request: F) -> F::Output {
        self.wait_for(self.answer, request)
    }

    /// [`Link::wait`] with another deadline.
    pub fn wait_for<F: Future>(&self, limit: Option<std::time::Duration>, request: F) -> F::Output {
        let metrics = &self.metrics;
        let late = |limit: std::time::Duration| {
            metrics.database_failed(&format!(
                "the writer's connection got no answer within {} ms",
                limit.as_millis()
            ));
        };
        super::deadline::within(&self.handle, limit, &self.task, late, request)
    }
}

impl std::ops::Deref for Link {
    type Target = tokio_postgres::Client;

    fn deref(&self) -> &tokio_postgres::Client {
        &self.client
    }
}

impl Drop for Link {
    fn drop(&mut self) {
        // A connection given up may still have a request in flight: its socket goes with it.
        self.task.abort();
    }
}

/// Threads of the store's runtime: the connections' tasks only parse and route messages.
const DRIVER_THREADS: usize = 1;

/// The store's runtime; shut down (without waiting) when the last store handle is dropped,
/// which may happen on another runtime's thread.
pub(crate) struct Driver(Option<tokio::runtime::Runtime>);

impl Driver {
    pub fn start() -> Result<Driver, Error> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(DRIVER_THREADS)
            .thread_name("cairn-pg")
            .enable_all()
            .build()
            .map_err(|e| Error::Storage {
                op: "start the connections' runtime",
                source: Arc::new(e),
            })?;
        Ok(Driver(Some(runtime)))
    }

    pub fn handle(&self) -> tokio::runtime::Handle {
        match &self.0 {
            Some(runtime) => runtime.handle().clone(),
            None => unreachable!("the runtime is only taken when the driver is dropped"),
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(runtime) = self.0.take() {
            runtime.shutdown_background();
        }
    }
}

/// How to open a connection: the parsed URL, its TLS, and what every connection of a role is
/// set to once open.
#[derive(Clone)]
pub(crate) struct Target {
    pub config: tokio_postgres::Config,
    pub tls: Tls,
    /// Statements run once on each new connection (`SET ...`).
    pub setup: String,
    pub handle: tokio::runtime::Handle,
    /// The deadlines of its connections.
    pub timeouts: Timeouts,
    /// Where a connection's failures and answers are told (the database's state).
    pub metrics: StoreMetrics,
}

impl Target {
    /// `url` (a `postgres://` URL or a key=value string) for connections named `role` in
    /// `pg_stat_activity.application_name` (`cairn-writer`, `cairn-reader`, `cairn-listener`)
    /// unless the URL names it: an operator (or a test) can tell the writer's connection from
    /// the others. Over TLS when the URL requires it (`tls.rs`).
    /// Its deadlines are the URL's, with defaults for what it leaves out (`deadline.rs`).
    pub fn new(
        url: &str,
        role: &str,
        handle: tokio::runtime::Handle,
        metrics: StoreMetrics,
    ) -> Result<Target, Error> {
        let (url, root) = super::tls::split_root_cert(url);
        let mut config: tokio_postgres::Config =
            url.parse().map_err(super::pg_error("parse the URL"))?;
        if config.get_application_name().is_none() {
            config.application_name(role);
        }
        let timeouts = Timeouts::apply(&mut config);
        let setup = timeouts.setup(&config);
        let tls = Tls::for_config(&mut config, root)?;
        Ok(Target { config, tls, setup, handle, timeouts, metrics })
    }

    /// Adds `statement` to what each new connection runs once open.
    pub fn set_up(&mut self, statement: &str) {
        if !self.setup.is_empty() {
            self.setup.push_str("; ");
        }
        self.setup.push_str(statement);
    }

    /// Opens a connection, its socket driven by a task on the store's runtime (which the
    /// returned handle names), and runs the setup statements on it, all within the connect
    /// timeout (tokio-postgres's own bounds only the socket's connect: a server that accepts
    /// and then says nothing would hold the startup forever). A failure is told to the
    /// store's metrics.
    pub async fn open(
        &self,
        notices: Option<super::tls::Notices>,
    ) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), tokio_postgres::Error> {
        let limit = self.timeouts.connect;
        let opening = async move {
            // Made inside the store's runtime (see `Entered`): its timer is that runtime's.
            let within = tokio::time::timeout(limit, async {
                let (client, task) =
                    super::tls::connect(&self.config, &self.tls, &self.handle, notices).await?;
                if !self.setup.is_empty() {
                    // A connection that fails its setup closes with its client; its task goes.
                    if let Err(e) = client.batch_execute(&self.setup).await {
                        task.abort();
                        return Err(e);
                    }
                }
                Ok((client, task))
            });
            // `__private_api_timeout` is how tokio-postgres's own sync client reports one.
            within.await.unwrap_or_else(|_| Err(tokio_postgres::Error::__private_api_timeout()))
        };
        // Polled inside the store's runtime: its socket belongs to that reactor, whoever awaits.
        let opened = Entered { handle: &self.handle, future: Box::pin(opening) }.await;
        match &opened {
            Ok(_) => self.metrics.database_answered(),
            // With its causes: "error connecting to server: Connection refused (os error 111)".
            Err(e) => self.metrics.database_failed(&super::tls::connect_error_text(e)),
        }
        opened
    }

    /// A connection for a blocking caller (the writer's thread, `connect`).
    pub fn open_blocking(&self) -> Result<Link, Error> {
        let (client, task) =
            crate::pending::block_on(self.open(None)).map_err(super::tls::connect_error)?;
        Ok(Link {
            client,
            task: task.abort_handle(),
            handle: self.handle.clone(),
            answer: self.timeouts.answer(),
            metrics: self.metrics.clone(),
        })
    }
}

/// A future polled with the store's runtime entered (its I/O registers with that runtime's
/// reactor, which then drives it), on whatever executor awaits it.
struct Entered<H, F> {
    handle: H,
    future: Pin<Box<F>>,
}

impl<H: std::borrow::Borrow<tokio::runtime::Handle> + Unpin, F: Future> Future for Entered<H, F> {
    type Output = F::Output;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let _entered = self.handle.borrow().enter();
        self.future.as_mut().poll(cx)
    }
}

/// The pool's way to open a connection: [`Target::open`].
struct Opener(Target);

impl deadpool_postgres::Connect for Opener {
    fn connect(
        &self,
        _: &tokio_postgres::Config,
    ) -> Pin<
        Box<
            dyn Future<
                    Output = Result<
                        (tokio_postgres::Client, tokio::task::JoinHandle<()>),
                        tokio_postgres::Error,
                    >,
                > + Send
                + '_,
        >,
    > {
        Box::pin(self.0.open(None))
    }
}

/// The reader connections of one store.
#[derive(Clone)]
pub(crate) struct Readers {
    pool: Pool,
    /// How long a read waits for its answer before it gives its connection up.
    answer: Option<std::time::Duration>,
    /// How long a read waits for a free connection before it fails
    /// ([`crate::limits::PG_READ_CONNECTION_WAIT_MAX`], or the answer deadline if shorter).
    connection_wait: std::time::Duration,
    handle: tokio::runtime::Handle,
    metrics: StoreMetrics,
}

impl Readers {
    /// A pool of `n` connections to `target`, all opened now (so a server that refuses them
    /// says so at connect, and every connection of the store is there from the start).
    pub fn start(target: Target, n: usize) -> Result<Readers, Error> {
        let config = target.config.clone();
        let (answer, handle) = (target.timeouts.answer(), target.handle.clone());
        let metrics = target.metrics.clone();
        // A connection is checked only by whether its task still runs: one the server dropped
        // in the middle of a read is caught by that read (`run_async`).
        let manager = Manager::from_connect(
            config,
            Opener(target),
            ManagerConfig { recycling_method: RecyclingMethod::Fast },
        );
        let pool = Pool::builder(manager)
            .max_size(n)
            .build()
            .map_err(|e| Error::Storage { op: "build the reader pool", source: Arc::new(e) })?;
        let most = crate::limits::PG_READ_CONNECTION_WAIT_MAX;
        let connection_wait = answer.map_or(most, |answer| answer.min(most));
        let readers = Readers { pool, answer, connection_wait, handle, metrics };
        let warm =
            crate::pending::block_on(futures::future::join_all((0..n).map(|_| readers.pool.get())));
        for got in warm {
            drop(got.map_err(pool_error)?);
        }
        Ok(readers)
    }

    /// The store's runtime and the answer deadline of a read's statements, for a read that
    /// waits for them one by one (`verify`, through the blocking client).
    pub fn deadline(&self) -> (tokio::runtime::Handle, Option<std::time::Duration>) {
        (self.handle.clone(), self.answer)
    }

    /// Runs the read `f`, named `call` in its errors (`read thread`), on a reader's connection;
    /// the answer is awaited (or waited for: see [`Reading::wait`]). A read that fails
    /// because the connection was dropped (the server restarted, an administrator ended it) is
    /// run again once on a fresh connection: reads change nothing, so that is safe. A read
    /// with no answer within the answer deadline gives its connection up (closed, out of the
    /// pool) and fails. With every connection busy, the read waits for one, suspended (each
    /// busy one is freed within its own deadline), for at most the connection wait
    /// ([`crate::limits::PG_READ_CONNECTION_WAIT_MAX`]): past it, it fails with
    /// [`Error::TimedOut`] naming `call`. While the store knows the database does
    /// not answer (its check, a connection or a deadline said so), a read fails at once with
    /// [`Error::Unavailable`] naming why, and one waiting when the store learns it fails then.
    pub fn run<T: Send + 'static>(
        &self,
        call: &'static str,
        f: impl for<'c> Fn(&'c Conn) -> BoxRead<'c, T> + Send + Sync + 'static,
    ) -> Reading<T> {
        Reading::later(self.read(call, f))
    }

    fn read<T: Send + 'static>(
        &self,
        call: &'static str,
        f: impl for<'c> Fn(&'c Conn) -> BoxRead<'c, T> + Send + Sync + 'static,
    ) -> impl Future<Output = Result<T, Error>> + Send + 'static {
        let deadlines = Deadlines { call, answer: self.answer, connection: self.connection_wait };
        let (pool, metrics) = (self.pool.clone(), self.metrics.clone());
        let reading = async move {
            // A database known not to answer is not asked: the caller hears why at once.
            let mut changes = metrics.database_changes();
            if let Some(e) = changes.borrow_and_update().as_ref().and_then(|s| s.unavailable()) {
                return Err(e);
            }
            let answer = read_on(&pool, deadlines, &metrics, &mut changes, &f).await;
            match answer {
                Ok(answer) => {
                    metrics.database_answered();
                    Ok(answer)
                }
                // A read that failed on its connection as the database went away says so.
                Err(e @ Error::Storage { .. }) => {
                    Err(metrics.database().and_then(|s| s.unavailable()).unwrap_or(e))
                }
                Err(e) => Err(e),
            }
        };
        // Polled inside the store's runtime: the deadlines' timers are that runtime's.
        Entered { handle: self.handle.clone(), future: Box::pin(reading) }
    }
}

/// What one read may wait for, and its name in the errors that say it waited too long.
#[derive(Clone, Copy)]
struct Deadlines {
    call: &'static str,
    /// The answer to its statement (`None`: the statement timeout is off).
    answer: Option<std::time::Duration>,
    /// A free connection.
    connection: std::time::Duration,
}

/// [`Readers::read`] on a pooled connection, and once more on a fresh one if that one was
/// dropped; each wait ends early when the store learns the database does not answer.
async fn read_on<T>(
    pool: &Pool,
    deadlines: Deadlines,
    metrics: &StoreMetrics,
    changes: &mut Changes,
    f: &(impl for<'c> Fn(&'c Conn) -> BoxRead<'c, T> + Send + Sync),
) -> Result<T, Error> {
    let mut again = true;
    loop {
        let conn = tokio::select! {
            got = pool.get() => got.map_err(pool_error)?,
            e = unavailable(changes) => return Err(e),
            () = tokio::time::sleep(deadlines.connection) => return Err(Error::TimedOut {
                call: deadlines.call,
                after_ms: u64::try_from(deadlines.connection.as_millis()).unwrap_or(u64::MAX),
                waited_for: "every reader connection stayed busy",
            }),
        };
        match within(deadlines, metrics, changes, f(&conn)).await {
            Err(gone) => return Err(gone.give_up(deadlines.call, conn)),
            Ok(Err(e)) if again && dropped(&conn, &e) => {
                metrics.connection_lost(&format!("a reader's connection: {e}"));
                drop(Object::take(conn));
                again = false;
            }
            Ok(answer) => return answer,
        }
    }
}

/// The database's state as it changes ([`StoreMetrics::database_changes`]).
type Changes = tokio::sync::watch::Receiver<Option<crate::telemetry::DatabaseState>>;

/// Why a read stopped waiting for its answer.
enum Gone {
    /// None came within its deadline (in it).
    Late(std::time::Duration),
    /// The store learnt meanwhile that the database does not answer (the error says why).
    Unavailable(Error),
}

impl Gone {
    /// The read's error; its connection, which may still have the request in flight, is
    /// closed and out of the pool for good.
    fn give_up(self, call: &'static str, conn: Object) -> Error {
        drop(Object::take(conn));
        match self {
            Gone::Late(limit) => super::deadline::late(call, limit),
            Gone::Unavailable(e) => e,
        }
    }
}

/// `read`'s answer, or why none came: not within its answer deadline (told to `metrics`,
/// naming the read), or the store learnt that the database does not answer (from `changes`).
async fn within<T>(
    deadlines: Deadlines,
    metrics: &StoreMetrics,
    changes: &mut Changes,
    read: BoxRead<'_, T>,
) -> Result<Result<T, Error>, Gone> {
    let limit = deadlines.answer;
    let late = async {
        match limit {
            Some(limit) => tokio::time::sleep(limit).await,
            None => std::future::pending().await,
        }
    };
    tokio::select! {
        answer = read => Ok(answer),
        e = unavailable(changes) => Err(Gone::Unavailable(e)),
        () = late => {
            let limit = limit.unwrap_or_default();
            metrics.database_failed(&format!(
                "a read ({}) got no answer within {} ms",
                deadlines.call,
                limit.as_millis()
            ));
            Err(Gone::Late(limit))
        }
    }
}

/// Resolves once the database's state says it does not answer, with the error that says why.
async fn unavailable(changes: &mut Changes) -> Error {
    crate::telemetry::unavailable_for(changes, std::time::Duration::ZERO).await
}

/// Whether a read that failed with `e` failed because its connection did (rather than on the
/// read's own terms: a damaged record, a limit, a statement the server refused).
pub(crate) fn dropped(client: &tokio_postgres::Client, e: &Error) -> bool {
    let Error::Storage { source, .. } = e else { return false };
    if client.is_closed() {
        return true;
    }
    let Some(e) = source.downcast_ref::<tokio_postgres::Error>() else { return false };
    if e.is_closed() {
        return true;
    }
    match e.code() {
        // The server ends the backend (`pg_terminate_backend`, a shutdown: class 57) or the
        // connection failed (class 08); the client may not have seen it close yet.
        Some(code) => code.code().starts_with("57") || code.code().starts_with("08"),
        // Not an answer of the server: the socket failed.
        None => e.as_db_error().is_none(),
    }
}

/// A pool that could not hand out a connection (it could not open one).
fn pool_error(e: deadpool_postgres::PoolError) -> Error {
    match e {
        deadpool_postgres::PoolError::Backend(e) => super::tls::connect_error(e),
        e => Error::Storage { op: "connect", source: Arc::new(e) },
    }
}
