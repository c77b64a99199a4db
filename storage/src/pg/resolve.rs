//! A COMMIT that got no answer: the connection dropped after the writer sent it (the server
//! restarted, an administrator ended the backend, the network failed). The transaction may or
//! may not have committed; guessing either way is wrong (reporting a committed group failed
//! makes its callers redo what is already in the log; reporting a lost one committed
//! acknowledges events that are not there). The writer asks the server instead: on a fresh
//! connection, `txid_status` of the group's transaction id says `committed` or `aborted`, or
//! `in progress` while the old backend is still finishing (then it asks again).

use std::sync::Arc;
use std::time::{Duration, Instant};

use super::pg_error;
use super::pool::{Connect, Link as Client};
use crate::Error;

/// How long the writer keeps asking (the server may be restarting) before it reports the
/// outcome unknown.
const RESOLVE_WAIT_MAX: Duration = Duration::from_secs(30);

/// Longest pause between two questions.
const RESOLVE_BACKOFF_MAX: Duration = Duration::from_secs(1);

/// Whether transaction `xid`, whose COMMIT failed with `cut`, committed after all, with the
/// fresh connection the answer came on.
///
/// # Errors
/// [`Error::Storage`] with op `commit (outcome unknown)` when the server cannot say within
/// [`RESOLVE_WAIT_MAX`] (down all that time), or no longer knows the transaction (wrapped
/// around: billions of transactions later).
pub(crate) fn commit_outcome(
    reconnect: &Connect,
    xid: i64,
    cut: &Error,
) -> Result<(Client, bool), Error> {
    let started = Instant::now();
    let mut backoff = Duration::from_millis(20);
    loop {
        match ask(reconnect, xid) {
            Ok((client, Some(status))) if status == "committed" || status == "aborted" => {
                let committed = status == "committed";
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

/// The status of `xid` (`None` when the server no longer keeps it), on a fresh connection.
fn ask(reconnect: &Connect, xid: i64) -> Result<(Client, Option<String>), Error> {
    let client = reconnect()?;
    let row = client
        .wait(client.query_one("SELECT txid_status($1)", &[&xid]))
        .map_err(pg_error("read a transaction's status"))?;
    let status: Option<String> = row.get(0);
    Ok((client, status))
}

fn unknown(cut: &Error, why: &str) -> Error {
    tracing::warn!(error = %cut, why, "a commit's outcome is unknown");
    Error::Storage {
        op: "commit (outcome unknown)",
        source: Arc::new(std::io::Error::other(format!("{cut}; {why}"))),
    }
}
