//! A blocking face of a `tokio-postgres` client, for the store's code that runs on threads of
//! its own, off every runtime: the writer's group commit (its planner asks for rows as it
//! goes, synchronously), the schema's preparation at connect, `verify`. Each call sends its
//! statement and parks the thread until the answer comes; the connection's socket is driven
//! by its task on the store's runtime meanwhile (`pool.rs`). Each wait has a deadline: on a
//! [`Link`] (the writer's connection) the link's, which closes the connection when missed; on a
//! pooled reader (`verify`) the readers' answer deadline, whose miss fails the call, and the
//! read then gives the connection up (`pool.rs`).

use std::future::Future;

use tokio_postgres::types::ToSql;
use tokio_postgres::{Error, Row};

use super::pool::Link;
use crate::pending::block_on;

/// A client whose calls block.
#[derive(Clone, Copy)]
pub(crate) struct Client<'c> {
    client: &'c tokio_postgres::Client,
    deadline: Deadline<'c>,
}

/// How long a call waits for its answer.
#[derive(Clone, Copy)]
enum Deadline<'c> {
    /// The link's ([`Link::wait`]).
    Link(&'c Link),
    /// `None`: no deadline (the statement timeout is off); the timer is the store runtime's.
    Timer(&'c tokio::runtime::Handle, Option<std::time::Duration>),
}

impl<'c> Client<'c> {
    /// Calls on a pooled reader's connection, each failing with a timeout error when its
    /// answer has not come within `limit` (`handle`: the store's runtime, whose timer it is).
    pub(crate) fn new(
        client: &'c tokio_postgres::Client,
        handle: &'c tokio::runtime::Handle,
        limit: Option<std::time::Duration>,
    ) -> Client<'c> {
        Client { client, deadline: Deadline::Timer(handle, limit) }
    }

    /// Calls that wait within `link`'s deadline ([`Link::wait`]).
    pub(crate) fn on(link: &'c Link) -> Client<'c> {
        Client { client: link, deadline: Deadline::Link(link) }
    }

    fn wait<T>(&self, request: impl Future<Output = Result<T, Error>>) -> Result<T, Error> {
        match self.deadline {
            Deadline::Link(link) => link.wait(request),
            Deadline::Timer(_, None) => block_on(request),
            Deadline::Timer(handle, Some(limit)) => {
                let late = {
                    let _entered = handle.enter();
                    tokio::time::sleep(limit)
                };
                block_on(async {
                    tokio::select! {
                        answer = request => answer,
                        // How tokio-postgres's own sync client reports one.
                        () = late => Err(Error::__private_api_timeout()),
                    }
                })
            }
        }
    }

    pub(crate) fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        self.wait(self.client.query(sql, params))
    }

    pub(crate) fn query_one(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, Error> {
        self.wait(self.client.query_one(sql, params))
    }

    pub(crate) fn query_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, Error> {
        self.wait(self.client.query_opt(sql, params))
    }

    pub(crate) fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, Error> {
        self.wait(self.client.execute(sql, params))
    }

    pub(crate) fn batch_execute(&self, sql: &str) -> Result<(), Error> {
        self.wait(self.client.batch_execute(sql))
    }

    /// Runs `f` holding the database's advisory lock `key` (one process at a time), and lets
    /// it go whatever `f` answered; `op` names a failure to take or let go of the lock.
    pub(crate) fn advisory_locked<T>(
        &mut self,
        key: i64,
        op: &'static str,
        f: impl FnOnce(&mut Self) -> Result<T, crate::error::Error>,
    ) -> Result<T, crate::error::Error> {
        let op = super::pg_error(op);
        self.execute("SELECT pg_advisory_lock($1)", &[&key]).map_err(&op)?;
        let result = f(self);
        let unlocked = self.execute("SELECT pg_advisory_unlock($1)", &[&key]);
        let out = result?;
        unlocked.map_err(&op)?;
        Ok(out)
    }

    /// Begins a transaction, rolled back unless committed.
    pub(crate) fn transaction(&mut self) -> Result<Transaction<'_>, Error> {
        self.batch_execute("BEGIN")?;
        Ok(Transaction { client: *self, done: false })
    }
}

/// A transaction of a [`Client`]; dropped without [`Transaction::commit`], it rolls back.
pub(crate) struct Transaction<'c> {
    client: Client<'c>,
    done: bool,
}

impl Transaction<'_> {
    pub(crate) fn commit(mut self) -> Result<(), Error> {
        self.done = true;
        self.client.batch_execute("COMMIT")
    }
}

impl<'c> std::ops::Deref for Transaction<'c> {
    type Target = Client<'c>;

    fn deref(&self) -> &Client<'c> {
        &self.client
    }
}

impl Drop for Transaction<'_> {
    fn drop(&mut self) {
        if !self.done {
            // A connection that failed rolls back by itself; a live one is told to.
            let _ = self.client.batch_execute("ROLLBACK");
        }
    }
}
