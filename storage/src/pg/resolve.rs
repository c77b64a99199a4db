//! A COMMIT that got no answer: the connection dropped after the writer sent it (the server
//! restarted, an administrator ended the backend, the network failed). The transaction may or
//! may not have committed; guessing either way is wrong (reporting a committed group failed
//! makes its callers redo what is already in the log; reporting a lost one committed
//! acknowledges events that are not there). The writer asks the server instead, on a fresh
//! connection.
//!
//! `txid_status` of the group's transaction id alone cannot say: it says `in progress` while the
//! old backend is still finishing (then the writer asks again), but after a server crash a
//! transaction id whose records never reached the WAL is given out again, and `committed` may
//! then be another transaction's answer (`it::pg::a_transaction_id_reused_after_a_crash_...`
//! shows PostgreSQL doing it). So every group's transaction also writes its id into this
//! writer's row of `cairn_commit_marks`, in the round trip of its COMMIT ([`mark_and_commit`]):
//! once `txid_status` says the transaction ended, the group committed exactly when the row holds
//! its id (another writer's transaction, under the same id, writes its own row).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::pg_error;
use super::pool::{Connect, Link as Client};
use crate::error::Error;

/// How long the writer keeps asking (the server may be restarting) before it reports the
/// outcome unknown.
const RESOLVE_WAIT_MAX: Duration = Duration::from_secs(30);

/// Longest pause between two questions.
const RESOLVE_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// The table of commit marks: a row per writer (its token), holding the transaction id of its
/// last committed group.
pub(crate) const SCHEMA: &str = "CREATE TABLE IF NOT EXISTS cairn_commit_marks (
    writer bigint PRIMARY KEY,
    xid bigint NOT NULL
)";

/// What ends a group's transaction: its mark in writer `token`'s row, then COMMIT (one simple
/// query, one round trip).
pub(crate) fn mark_and_commit(token: u64) -> String {
    // The token's bits as a bigint (a token above i64::MAX reads negative, the same each time).
    let writer = token.cast_signed();
    format!(
        "INSERT INTO cairn_commit_marks (writer, xid) VALUES ({writer}, txid_current()) \
         ON CONFLICT (writer) DO UPDATE SET xid = EXCLUDED.xid; COMMIT"
    )
}

/// Whether transaction `xid` of writer `token`, whose COMMIT failed with `cut`, committed after
/// all, with the fresh connection the answer came on.
///
/// # Errors
/// [`Error::Storage`] with op `commit (outcome unknown)` when the server cannot say within
/// [`RESOLVE_WAIT_MAX`] (down all that time), or no longer knows the transaction (wrapped
/// around: billions of transactions later).
pub(crate) fn commit_outcome(
    reconnect: &Connect,
    xid: i64,
    token: u64,
    cut: &Error,
) -> Result<(Client, bool), Error> {
    let started = Instant::now();
    let mut backoff = Duration::from_millis(20);
    loop {
        match ask(reconnect, xid, token) {
            Ok((client, Some((status, marked))))
                if status == "committed" || status == "aborted" =>
            {
                let committed = marked == Some(xid);
                if status == "committed" && !committed {
                    tracing::warn!(xid, "the transaction id was given out again after a crash");
                }
                tracing::info!(xid, committed, "a commit cut off from its answer was resolved");
                return Ok((client, committed));
            }
            Ok((_, None)) => return Err(unknown(cut, "the server no longer knows it")),
            // In progress (the old backend is still finishing), or the server is unreachable.
            Ok((_, Some(_))) | Err(_) => {}
        }
        if started.elapsed() >= RESOLVE_WAIT_MAX {
            return Err(unknown(cut, "the server did not answer in time"));
        }
        std::thread::sleep(backoff);
        backoff = (backoff * 2).min(RESOLVE_BACKOFF_MAX);
    }
}

/// The status of `xid` and the transaction id marked by writer `token` (`None` when the server
/// no longer keeps the status), on a fresh connection.
#[allow(clippy::type_complexity, reason = "a private pair read once")]
fn ask(
    reconnect: &Connect,
    xid: i64,
    token: u64,
) -> Result<(Client, Option<(String, Option<i64>)>), Error> {
    let client = reconnect()?;
    let sql = "SELECT txid_status($1), \
               (SELECT xid FROM cairn_commit_marks WHERE writer = $2)";
    let row = client
        .wait(client.query_one(sql, &[&xid, &token.cast_signed()]))
        .map_err(pg_error("read a transaction's status"))?;
    let status: Option<String> = row.get(0);
    Ok((client, status.map(|s| (s, row.get(1)))))
}

fn unknown(cut: &Error, why: &str) -> Error {
    tracing::warn!(error = %cut, why, "a commit's outcome is unknown");
    Error::Storage {
        op: "commit (outcome unknown)",
        source: Arc::new(std::io::Error::other(format!("{cut}; {why}"))),
    }
}
