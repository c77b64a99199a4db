//! A blocking face of a `tokio-postgres` client, for the store's code that runs on threads of
//! its own, off every runtime: the writer's group commit (its planner asks for rows as it
//! goes, synchronously), the schema's preparation at connect, `verify`. Each call sends its
//! statement and parks the thread until the answer comes; the connection's socket is driven
//! by its task on the store's runtime meanwhile (`pool.rs`).

use tokio_postgres::types::ToSql;
use tokio_postgres::{Error, Row};

use crate::pending::block_on;

/// A client whose calls block.
pub(crate) struct Client<'c>(&'c tokio_postgres::Client);

impl<'c> Client<'c> {
    pub(crate) fn new(client: &'c tokio_postgres::Client) -> Client<'c> {
        Client(client)
    }

    pub(crate) fn query(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, Error> {
        block_on(self.0.query(sql, params))
    }

    pub(crate) fn query_one(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, Error> {
        block_on(self.0.query_one(sql, params))
    }

    pub(crate) fn query_opt(
        &self,
        sql: &str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, Error> {
        block_on(self.0.query_opt(sql, params))
    }

    pub(crate) fn execute(&self, sql: &str, params: &[&(dyn ToSql + Sync)]) -> Result<u64, Error> {
        block_on(self.0.execute(sql, params))
    }

    pub(crate) fn batch_execute(&self, sql: &str) -> Result<(), Error> {
        block_on(self.0.batch_execute(sql))
    }

    /// Begins a transaction, rolled back unless committed.
    pub(crate) fn transaction(&mut self) -> Result<Transaction<'_>, Error> {
        self.batch_execute("BEGIN")?;
        Ok(Transaction { client: Client(self.0), done: false })
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
