//! The writer's transaction: a group's statements on the writer's connection, each prepared once
//! per connection. A leaf the writer and every table's write code share (`write.rs`, `group.rs`,
//! `queues.rs`, `signals.rs`, `correlations.rs`, `delete.rs`).

use std::collections::HashMap;

use tokio_postgres::types::ToSql;
use tokio_postgres::{Row, Statement};

use super::pool::Link as Client;

/// The writer's prepared statements, by their SQL: each is parsed once per connection, not at
/// every use (a statement given as text costs a round trip to prepare it first).
#[derive(Default)]
pub(crate) struct Statements(HashMap<&'static str, Statement>);

/// The group's transaction (on the writer's connection, between its BEGIN and COMMIT) with the
/// writer's prepared statements. Each call blocks the writer's thread for its answer;
/// [`Tx::execute_all`] sends several statements before it waits.
pub(crate) struct Tx<'a, 'b> {
    pub(super) client: &'a Client,
    pub(super) cache: &'b mut Statements,
}

/// A statement and its parameters, for [`Tx::execute_all`].
pub(crate) type Sql<'p> = (&'static str, Vec<&'p (dyn ToSql + Sync)>);

impl Tx<'_, '_> {
    pub(super) fn prepared(
        &mut self,
        sql: &'static str,
    ) -> Result<Statement, tokio_postgres::Error> {
        if let Some(s) = self.cache.0.get(sql) {
            return Ok(s.clone());
        }
        let s = self.client.wait(self.client.prepare(sql))?;
        self.cache.0.insert(sql, s.clone());
        Ok(s)
    }

    pub(super) fn execute(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<u64, tokio_postgres::Error> {
        let s = self.prepared(sql)?;
        self.client.wait(self.client.execute(&s, params))
    }

    /// Runs `statements` in order, sent one after the other without waiting for each answer
    /// (the server runs them in the order sent): one round trip for all. The first error, in
    /// their order (a statement after a failed one fails too, the transaction being aborted).
    pub(super) fn execute_all(
        &mut self,
        statements: &[Sql<'_>],
    ) -> Result<(), tokio_postgres::Error> {
        let prepared =
            statements.iter().map(|(sql, _)| self.prepared(sql)).collect::<Result<Vec<_>, _>>()?;
        let client = self.client;
        let runs = prepared
            .iter()
            .zip(statements)
            .map(|(s, (_, params))| client.execute(s, params.as_slice()));
        self.client.wait(futures::future::join_all(runs)).into_iter().try_for_each(|r| r.map(drop))
    }

    pub(super) fn query(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Vec<Row>, tokio_postgres::Error> {
        let s = self.prepared(sql)?;
        self.client.wait(self.client.query(&s, params))
    }

    pub(super) fn query_one(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Row, tokio_postgres::Error> {
        let s = self.prepared(sql)?;
        self.client.wait(self.client.query_one(&s, params))
    }

    pub(super) fn query_opt(
        &mut self,
        sql: &'static str,
        params: &[&(dyn ToSql + Sync)],
    ) -> Result<Option<Row>, tokio_postgres::Error> {
        let s = self.prepared(sql)?;
        self.client.wait(self.client.query_opt(&s, params))
    }

    pub(super) fn batch_execute(&mut self, sql: &str) -> Result<(), tokio_postgres::Error> {
        self.client.wait(self.client.batch_execute(sql))
    }
}
