//! The connections of a [`super::PgStore`]: a small tokio runtime of the store's own that drives
//! them, and the pool of reader connections (`deadpool-postgres`).
//!
//! Every connection's socket is driven by a task on the store's runtime ([`Driver`]), whatever
//! its caller runs on: a read is a future on a pooled connection that the caller's task awaits
//! (the request goes to the connection's task over a channel, the answer comes back the same
//! way), so the store works inside any runtime, or none, and an async read blocks no thread. A
//! sync read ([`Readers::run`]) blocks its own thread for the round trip, as a redb read blocks
//! it for the disk. The pool's size bounds how many reads run at once; more wait for a
//! connection, suspended.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;

use deadpool_postgres::{Manager, ManagerConfig, Object, Pool, RecyclingMethod};

use super::tls::Tls;
use crate::{Error, Reading};

/// A reader connection of the pool, with its cache of prepared statements.
pub(crate) type Conn = deadpool_postgres::ClientWrapper;

/// A read's future, borrowing its connection.
pub(crate) type BoxRead<'c, T> = Pin<Box<dyn Future<Output = Result<T, Error>> + Send + 'c>>;

/// Opens a fresh connection for the writer, set up as its first one was (blocking: the writer's
/// thread is no runtime's worker).
pub(crate) type Connect = Arc<dyn Fn() -> Result<tokio_postgres::Client, Error> + Send + Sync>;

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
}

impl Target {
    /// `url` (a `postgres://` URL or a key=value string) for connections named `role` in
    /// `pg_stat_activity.application_name` (`cairn-writer`, `cairn-reader`, `cairn-listener`)
    /// unless the URL names it: an operator (or a test) can tell the writer's connection from
    /// the others. Over TLS when the URL requires it (`tls.rs`).
    pub fn new(url: &str, role: &str, handle: tokio::runtime::Handle) -> Result<Target, Error> {
        let (url, root) = super::tls::split_root_cert(url);
        let mut config: tokio_postgres::Config =
            url.parse().map_err(super::pg_error("parse the URL"))?;
        if config.get_application_name().is_none() {
            config.application_name(role);
        }
        let tls = Tls::for_config(&mut config, root)?;
        Ok(Target { config, tls, setup: String::new(), handle })
    }

    /// Opens a connection, its socket driven by a task on the store's runtime (which the
    /// returned handle names), and runs the setup statements on it.
    pub async fn open(
        &self,
        notices: Option<super::tls::Notices>,
    ) -> Result<(tokio_postgres::Client, tokio::task::JoinHandle<()>), tokio_postgres::Error> {
        // Polled inside the store's runtime: its socket belongs to that reactor, whoever awaits.
        let connecting = super::tls::connect(&self.config, &self.tls, &self.handle, notices);
        let (client, task) = Entered { handle: &self.handle, future: Box::pin(connecting) }.await?;
        if !self.setup.is_empty() {
            client.batch_execute(&self.setup).await?;
        }
        Ok((client, task))
    }

    /// A connection for a blocking caller (the writer's thread, `connect`).
    pub fn open_blocking(&self) -> Result<tokio_postgres::Client, Error> {
        crate::pending::block_on(self.open(None))
            .map(|(client, _task)| client)
            .map_err(super::tls::connect_error)
    }
}

/// A future polled with the store's runtime entered (its I/O registers with that runtime's
/// reactor, which then drives it), on whatever executor awaits it.
struct Entered<'h, F> {
    handle: &'h tokio::runtime::Handle,
    future: Pin<Box<F>>,
}

impl<F: Future> Future for Entered<'_, F> {
    type Output = F::Output;

    fn poll(
        mut self: Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<F::Output> {
        let _entered = self.handle.enter();
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
}

impl Readers {
    /// A pool of `n` connections to `target`, all opened now (so a server that refuses them
    /// says so at connect, and every connection of the store is there from the start).
    pub fn start(target: Target, n: usize) -> Result<Readers, Error> {
        let config = target.config.clone();
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
        let readers = Readers { pool };
        let warm =
            crate::pending::block_on(futures::future::join_all((0..n).map(|_| readers.pool.get())));
        for got in warm {
            drop(got.map_err(pool_error)?);
        }
        Ok(readers)
    }

    /// Runs the read `f` on a reader's connection and returns its answer, blocking this thread
    /// until it comes (see [`Readers::run_async`] for the rest). Never called on a worker of
    /// the store's runtime (its callers are the store's users).
    pub fn run<T: Send + 'static>(
        &self,
        f: impl for<'c> Fn(&'c Conn) -> BoxRead<'c, T> + Send + Sync + 'static,
    ) -> Result<T, Error> {
        crate::pending::block_on(self.read(f))
    }

    /// Runs the read `f` on a reader's connection; the answer is awaited. A read that fails
    /// because the connection was dropped (the server restarted, an administrator ended it) is
    /// run again once on a fresh connection: reads change nothing, so that is safe. With every
    /// connection busy, the read waits for one, suspended.
    pub fn run_async<T: Send + 'static>(
        &self,
        f: impl for<'c> Fn(&'c Conn) -> BoxRead<'c, T> + Send + Sync + 'static,
    ) -> Reading<T> {
        Reading::later(self.read(f))
    }

    fn read<T: Send + 'static>(
        &self,
        f: impl for<'c> Fn(&'c Conn) -> BoxRead<'c, T> + Send + Sync + 'static,
    ) -> impl Future<Output = Result<T, Error>> + Send + 'static {
        let pool = self.pool.clone();
        async move {
            let conn = pool.get().await.map_err(pool_error)?;
            let answer = f(&conn).await;
            match answer {
                Err(e) if dropped(&conn, &e) => {
                    // Out of the pool for good: its connection is closed with it.
                    drop(Object::take(conn));
                    let conn = pool.get().await.map_err(pool_error)?;
                    f(&conn).await
                }
                answer => answer,
            }
        }
    }
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
