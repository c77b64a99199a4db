//! The connections of a [`super::PgStore`], each owned by a thread of its own.
//!
//! The `postgres` client blocks on a runtime of its own, so it cannot run on a tokio worker: every
//! query runs on one of these threads. A caller hands a job over a bounded channel and waits for
//! its answer, which blocks the caller's thread for the round trip (as a redb read blocks it for
//! the disk); the reader threads bound how many queries run at once.

use std::sync::mpsc::{Receiver, SyncSender, sync_channel};
use std::sync::{Arc, Mutex};

use postgres::{Client, NoTls};

use super::pg_error;
use crate::Error;

/// A job: runs on a connection's thread.
type Job = Box<dyn FnOnce(&mut Client) + Send>;

/// Jobs waiting for a reader thread, at most.
const QUEUED_JOBS_MAX: usize = 256;

/// Reader threads sharing one queue of jobs.
pub(crate) struct Readers {
    jobs: SyncSender<Job>,
}

impl Readers {
    /// `n` reader threads, each with its own connection to `url`.
    pub fn start(url: &str, n: usize) -> Result<Readers, Error> {
        let (jobs, queue) = sync_channel::<Job>(QUEUED_JOBS_MAX);
        let queue = Arc::new(Mutex::new(queue));
        for i in 0..n {
            let client = connect(url)?;
            let queue = queue.clone();
            std::thread::Builder::new()
                .name(format!("cairn-pg-reader-{i}"))
                .spawn(move || serve(client, &queue))
                .map_err(|e| Error::Storage { op: "start a reader thread", source: Arc::new(e) })?;
        }
        Ok(Readers { jobs })
    }

    /// Runs `f` on a reader's connection and returns its answer.
    pub fn run<T: Send + 'static>(
        &self,
        f: impl FnOnce(&mut Client) -> Result<T, Error> + Send + 'static,
    ) -> Result<T, Error> {
        let (tx, rx) = sync_channel(1);
        let job: Job = Box::new(move |client| {
            let _ = tx.send(f(client));
        });
        self.jobs.send(job).map_err(|_| Error::Closed)?;
        rx.recv().map_err(|_| Error::Closed)?
    }
}

fn serve(mut client: Client, queue: &Mutex<Receiver<Job>>) {
    loop {
        let job = {
            let queue = queue.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
            queue.recv()
        };
        let Ok(job) = job else { return };
        job(&mut client);
    }
}

/// A connection to `url` (a `postgres://` URL or a key=value string).
pub(crate) fn connect(url: &str) -> Result<Client, Error> {
    Client::connect(url, NoTls).map_err(pg_error("connect"))
}
