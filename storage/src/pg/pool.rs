//! The connections of a [`super::PgStore`], each owned by a thread of its own.
//!
//! The `postgres` client blocks on a runtime of its own, so it cannot run on a tokio worker: every
//! query runs on one of these threads. A caller hands a job over a bounded channel and gets its
//! answer on a oneshot channel: an async caller awaits it ([`Readers::run_async`]: its task is
//! suspended, no thread but the reader's is blocked), a sync caller blocks its thread for the
//! round trip ([`Readers::run`], as a redb read blocks it for the disk). The reader threads
//! bound how many queries run at once.

use std::sync::{Arc, Mutex};

use postgres::Client;
use tokio::sync::{mpsc, oneshot};

use super::pg_error;
use crate::{Error, Reading};

/// A job: runs on a connection's thread, which hands it its connection and the way to
/// replace that connection.
type Job = Box<dyn FnOnce(&mut Client, &Connect) + Send>;

/// Opens a fresh connection, set up as the store's first one was.
pub(crate) type Connect = Arc<dyn Fn() -> Result<Client, Error> + Send + Sync>;

/// How long a reader waits for a connection it suspects to answer a check.
const CONNECTION_CHECK: std::time::Duration = std::time::Duration::from_secs(2);

/// Jobs waiting for a reader thread, at most.
const QUEUED_JOBS_MAX: usize = 256;

/// Reader threads sharing one queue of jobs.
pub(crate) struct Readers {
    jobs: mpsc::Sender<Job>,
}

impl Readers {
    /// `n` reader threads, each with its own connection to `url`.
    pub fn start(connect: &Connect, n: usize) -> Result<Readers, Error> {
        let (jobs, queue) = mpsc::channel::<Job>(QUEUED_JOBS_MAX);
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..n {
            let client = connect()?;
            let queue = queue.clone();
            let connect = connect.clone();
            std::thread::Builder::new()
                .name(format!("cairn-pg-reader-{i}"))
                .spawn(move || serve(client, &connect, &queue))
                .map_err(|e| Error::Storage { op: "start a reader thread", source: Arc::new(e) })?;
        }
        Ok(Readers { jobs })
    }

    /// Runs the read `f` on a reader's connection and returns its answer, blocking this thread
    /// until it comes (see [`Readers::run_async`] for the rest).
    pub fn run<T: Send + 'static>(
        &self,
        f: impl Fn(&mut Client) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let (tx, rx) = oneshot::channel();
        let job = job(f, tx);
        match self.jobs.try_send(job) {
            Ok(()) => {}
            Err(mpsc::error::TrySendError::Full(job)) => {
                crate::pending::block_on(self.jobs.send(job)).map_err(|_| Error::Closed)?;
            }
            Err(mpsc::error::TrySendError::Closed(_)) => return Err(Error::Closed),
        }
        crate::pending::block_on(rx).unwrap_or(Err(Error::Closed))
    }

    /// Runs the read `f` on a reader's connection; the answer is awaited. A read that fails
    /// because the connection was dropped (the server restarted, an administrator ended it) is
    /// run again once on a fresh connection: reads change nothing, so that is safe. With the
    /// queue full (`QUEUED_JOBS_MAX` reads waiting for a reader), the read waits for room,
    /// suspended.
    pub fn run_async<T: Send + 'static>(
        &self,
        f: impl Fn(&mut Client) -> Result<T, Error> + Send + 'static,
    ) -> Reading<T> {
        let (tx, rx) = oneshot::channel();
        match self.jobs.try_send(job(f, tx)) {
            Ok(()) => Reading::new(rx),
            Err(mpsc::error::TrySendError::Full(job)) => {
                let jobs = self.jobs.clone();
                Reading::later(async move {
                    jobs.send(job).await.map_err(|_| Error::Closed)?;
                    rx.await.unwrap_or(Err(Error::Closed))
                })
            }
            Err(mpsc::error::TrySendError::Closed(_)) => Reading::ready(Err(Error::Closed)),
        }
    }
}

/// The job that runs `f` and sends its answer on `tx` (dropped unsent if the caller is gone).
fn job<T: Send + 'static>(
    f: impl Fn(&mut Client) -> Result<T, Error> + Send + 'static,
    tx: oneshot::Sender<Result<T, Error>>,
) -> Job {
    Box::new(move |client, connect| {
        let mut answer = f(client);
        // The client may not know yet that its connection is gone (a reset seen by this
        // request before the connection's task ended): a failed read asks it.
        if matches!(answer, Err(Error::Storage { .. }))
            && (client.is_closed() || client.is_valid(CONNECTION_CHECK).is_err())
            && let Ok(fresh) = connect()
        {
            *client = fresh;
            answer = f(client);
        }
        let _ = tx.send(answer);
    })
}

fn serve(mut client: Client, connect: &Connect, queue: &Mutex<mpsc::Receiver<Job>>) {
    loop {
        let job = {
            let mut queue = queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            // A reader thread is no runtime's worker: it may block.
            queue.blocking_recv()
        };
        let Some(job) = job else { return };
        // A connection known to be dropped is replaced first; if that fails, the job reports it.
        if client.is_closed()
            && let Ok(fresh) = connect()
        {
            client = fresh;
        }
        job(&mut client, connect);
    }
}

/// A connection to `url` (a `postgres://` URL or a key=value string), named `role` in
/// `pg_stat_activity.application_name` (`cairn-writer`, `cairn-reader`, `cairn-listener`) unless
/// the URL names it: an operator (or a test) can tell the writer's connection from the others.
///
/// Over TLS when the URL requires it (`sslmode=require`, `sslrootcert`): `tls.rs`.
pub(crate) fn connect(url: &str, role: &str) -> Result<Client, Error> {
    let (url, root) = super::tls::split_root_cert(url);
    let mut config: postgres::Config = url.parse().map_err(pg_error("parse the URL"))?;
    if config.get_application_name().is_none() {
        config.application_name(role);
    }
    super::tls::connect(&config, root)
}
