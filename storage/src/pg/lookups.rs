//! Reads of thread records by id, many in one query.
//!
//! Every engine start reads the thread it creates (does the id exist, and with which
//! workflow?), and handles read their thread's status: point reads, many at once under load.
//! Each asked alone costs a reader connection's checkout, two deadline timers and a round trip,
//! in the engine and in the server. Here they queue, and a task of the store's runtime reads
//! the queued ones together (`WHERE id = ANY($1)`), on at most [`LOOKUPS_IN_FLIGHT_MAX`]
//! reader connections at a time: a lone read goes at once, and reads asked while those are
//! answered wait for the next query, which reads them all.
//!
//! A read sees every commit acknowledged before it was asked (its query starts after that), as
//! a read of its own would; its deadlines and errors are those of any read ([`Readers::run`]),
//! shared by the reads of its query. A record that does not decode fails its own read alone.

use std::collections::HashMap;
use std::sync::Arc;

use tokio::sync::mpsc::error::TrySendError;
use tokio::sync::{Semaphore, mpsc, oneshot};
use tokio_postgres::Row;

use super::pg_error;
use super::pool::Readers;
use super::read::{decode_thread, query};
use crate::error::Error;
use crate::ids::ThreadId;
use crate::reading::Reading;
use crate::thread::ThreadRecord;

/// Reads waiting for a query, at most (a caller beyond it waits for room, suspended).
const LOOKUPS_QUEUED_MAX: usize = 1024;

/// Ids one query reads, at most.
const LOOKUP_IDS_MAX: usize = 256;

/// Queries in flight at once, at most: half the reader connections, so other reads always
/// find one.
const LOOKUPS_IN_FLIGHT_MAX: usize = super::READERS / 2;

/// One read: the id, and where its answer goes.
struct Lookup {
    id: ThreadId,
    answer: oneshot::Sender<Result<Option<ThreadRecord>, Error>>,
}

/// The queue of thread reads, served by a task of the store's runtime.
pub(crate) struct Lookups {
    queue: mpsc::Sender<Lookup>,
}

impl Lookups {
    /// Starts the task that serves the reads on `runtime` (the store's, which drives the
    /// readers' connections); it ends once the `Lookups` is dropped and the reads queued
    /// before are answered.
    pub fn start(readers: Readers, runtime: &tokio::runtime::Handle) -> Lookups {
        let (queue, waiting) = mpsc::channel(LOOKUPS_QUEUED_MAX);
        drop(runtime.spawn(serve(readers, waiting)));
        Lookups { queue }
    }

    /// The record of thread `id`, if it exists.
    pub fn thread(&self, id: ThreadId) -> Reading<Option<ThreadRecord>> {
        let (answer, read) = oneshot::channel();
        match self.queue.try_send(Lookup { id, answer }) {
            Ok(()) => Reading::new(read),
            Err(TrySendError::Closed(_)) => Reading::ready(Err(Error::Closed)),
            Err(TrySendError::Full(lookup)) => {
                let queue = self.queue.clone();
                Reading::later(async move {
                    queue.send(lookup).await.map_err(|_| Error::Closed)?;
                    read.await.unwrap_or(Err(Error::Closed))
                })
            }
        }
    }
}

/// Takes the queued reads, as many as one query reads, whenever a query may start, and
/// starts it.
async fn serve(readers: Readers, mut waiting: mpsc::Receiver<Lookup>) {
    let slots = Arc::new(Semaphore::new(LOOKUPS_IN_FLIGHT_MAX.max(1)));
    loop {
        let Ok(slot) = slots.clone().acquire_owned().await else { return };
        let Some(first) = waiting.recv().await else { return };
        let mut taken = vec![first];
        while taken.len() < LOOKUP_IDS_MAX {
            match waiting.try_recv() {
                Ok(lookup) => taken.push(lookup),
                Err(_) => break,
            }
        }
        // Reads whose callers went away are not asked for.
        taken.retain(|l| !l.answer.is_closed());
        if taken.is_empty() {
            continue;
        }
        let read = read_all(&readers, &taken);
        drop(tokio::spawn(async move {
            answer(taken, read.await);
            drop(slot);
        }));
    }
}

/// The stored rows (id, record) of the ids of `lookups`, each id once.
fn read_all(readers: &Readers, lookups: &[Lookup]) -> Reading<Vec<Row>> {
    let mut ids: Vec<String> = lookups.iter().map(|l| l.id.as_str().to_owned()).collect();
    ids.sort_unstable();
    ids.dedup();
    let ids = Arc::new(ids);
    readers.run("read thread", move |c| {
        let ids = ids.clone();
        Box::pin(async move {
            let sql = "SELECT id, record FROM cairn_threads WHERE id = ANY($1)";
            query(c, sql, &[&*ids]).await.map_err(pg_error("read thread"))
        })
    })
}

/// Answers each of `lookups` from `rows` (or with the query's error).
fn answer(lookups: Vec<Lookup>, rows: Result<Vec<Row>, Error>) {
    let rows = match rows {
        Ok(rows) => rows,
        Err(e) => {
            for lookup in lookups {
                let _ = lookup.answer.send(Err(e.clone()));
            }
            return;
        }
    };
    let stored: HashMap<&str, &[u8]> = rows.iter().map(|r| (r.get(0), r.get(1))).collect();
    for Lookup { id, answer } in lookups {
        let record = stored.get(id.as_str()).map(|bytes| decode_thread(&id, bytes)).transpose();
        // The caller may have gone away meanwhile: nobody to tell.
        let _ = answer.send(record);
    }
}
