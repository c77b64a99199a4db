//! A blocking face of a `tokio-postgres` client, for the store's code that runs on threads of
//! its own, off every runtime: the writer's group commit (its planner asks for rows as it
//! goes, synchronously), the schema's preparation at connect, `verify`. Each call sends its
//! statement and parks the thread until the answer comes; the connection's socket is driven
//! by its task on the store's runtime meanwhile (`pool.rs`). On a [`Link`] (the writer's
//! connection), each wait has the link's deadline.

use std::future::Future;

use tokio_postgres::types::ToSql;
use tokio_postgres::{Error, Row};

use super::pool::Link;
use crate::pending::block_on;

/// A client whose calls block.
#[derive(Clone, Copy)]
pub(crate) struct Client<'c> {
    client: &'c tokio_postgres::Client,
    /// The connection's deadline, when it has one.
    link: Option<&'c Link>,
}

impl<'c> Client<'c> {
    /// Calls that wait with no deadline of their own (a pooled reader's: `verify`).
    pub(crate) fn new(client: &'c tokio_postgres::Client) -> Client<'c> {
        Client { client, link: None }
    }

    /// Calls that wait within `link`'s deadline ([`Link::wait`]).
    pub(crate) fn on(link: &'c Link) -> Client<'c> {
        Client { client: link, link: Some(link) }
    }

    fn wait<F: Future>(&self, request: F) -> F::Output {
        match self.link {
            Some(link) => link.wait(request),
            None => block_on(request),
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
