//! Commits of other processes, heard through LISTEN/NOTIFY: the writer of every store sends the
//! last lsn of each group after its commit; a task of the store's runtime listens on a connection
//! of its own (its notifications read by the connection's task, `tls.rs`), and
//! moves the store's `committed` watch, which wakes subscriptions and the engines' pollers.
//!
//! A notification can be lost (the listening connection drops, the server restarts): after any
//! error the listener reconnects and reads the last lsn from the log at once, so a gap in
//! notifications costs a delay, never an event. Subscriptions read the log by cursor, so a late
//! or duplicated wake-up changes nothing they return.
//!
//! A listening connection sends nothing of its own: a network that silently stopped passing
//! its bytes would leave it waiting for ever (keepalives cover TCP only). So the listener
//! checks it every second with an empty query that must be answered within a bound
//! ([`super::deadline::Timeouts::check`]): this is how the store notices (and says,
//! `cairn_database_up`, [`crate::Error::Unavailable`] for the reads meanwhile) that its
//! database is gone, within a few seconds whatever it reads or writes. While it is gone, the
//! listener's reconnection attempts are the check that says when it is back.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};

use super::pool::Target;

/// The channel commits are announced on.
pub(crate) const CHANNEL: &str = "cairn_commits";

/// The channel of messages to threads' drivers (`thread` TAB `message`; a thread id has no
/// control character).
pub(crate) const DRIVERS: &str = "cairn_drivers";

/// Longest wait between reconnection attempts.
const RECONNECT_BACKOFF_MAX: Duration = Duration::from_secs(2);

/// Notifications read from the connection and not yet handled, at most (the listener handles
/// each at once; the connection waits while the queue is full).
const NOTIFICATIONS_QUEUED_MAX: usize = 1024;

/// The store's view of commits: all of them, and those of other stores only.
pub(crate) struct Heard {
    /// The last lsn committed by anyone.
    pub committed: Arc<watch::Sender<u64>>,
    /// The last lsn another store committed (this store's own commits leave it alone).
    pub remote: watch::Sender<u64>,
    /// This store's token in notifications.
    pub token: u64,
    /// Messages to threads' drivers, as heard.
    pub drivers: tokio::sync::broadcast::Sender<crate::store::DriverMessage>,
}

/// Starts the listener, a task on the store's runtime; it ends when every receiver of
/// `committed` is gone (or with the runtime).
pub(crate) fn start(target: Target, heard: Heard) {
    let handle = target.handle.clone();
    handle.spawn(async move { listen(&target, &heard).await });
}

async fn listen(target: &Target, heard: &Heard) {
    let mut backoff = Duration::from_millis(50);
    loop {
        tokio::select! {
            () = heard.committed.closed() => return,
            Err(e) = serve(target, heard) => {
                tracing::debug!(error = %e, "listener connection lost; reconnecting");
            }
        }
        tokio::select! {
            () = heard.committed.closed() => return,
            () = tokio::time::sleep(backoff) => {}
        }
        backoff = (backoff * 2).min(RECONNECT_BACKOFF_MAX);
    }
}

/// Listens on a connection of its own until it fails: the notifications its task reads from
/// the server (`AsyncMessage::Notification`) come in order on a channel.
async fn serve(
    target: &Target,
    heard: &Heard,
) -> Result<std::convert::Infallible, crate::error::Error> {
    let committed = &heard.committed;
    let (notices, mut incoming) = mpsc::channel(NOTIFICATIONS_QUEUED_MAX);
    let (client, task) = target.open(Some(notices)).await.map_err(super::tls::connect_error)?;
    // Given up (a deadline missed, an error), the connection is closed with its task.
    let _closes = Closes(task);
    let (every, limit) = target.timeouts.check();
    let answer = target.timeouts.answer().unwrap_or(limit);
    let listen = format!("LISTEN {CHANNEL}; LISTEN {DRIVERS}");
    within(target, answer, client.batch_execute(&listen))
        .await?
        .map_err(super::pg_error("listen"))?;
    // Whatever was committed while nobody listened: read it now.
    let last = within(target, answer, last_lsn(&client)).await??;
    publish(committed, last);
    // What was missed may have been anyone's: the pollers look.
    publish(&heard.remote, last);
    let mut check = tokio::time::interval(every);
    check.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    // The channel closes when the connection's task ends: the connection failed.
    loop {
        let n = tokio::select! {
            n = incoming.recv() => n,
            _ = check.tick() => {
                within(target, limit, client.simple_query("")).await?
                    .map_err(super::pg_error("check the listening connection"))?;
                target.metrics.database_answered();
                continue;
            }
        };
        let Some(n) = n else { break };
        if n.channel() == DRIVERS {
            driver_message(&heard.drivers, n.payload());
            continue;
        }
        let mut parts = n.payload().split(' ');
        let lsn = parts.next().and_then(|l| l.parse::<u64>().ok());
        let token = parts.next().and_then(|t| u64::from_str_radix(t, 16).ok());
        if let Some(lsn) = lsn {
            publish(committed, lsn);
            if token != Some(heard.token) {
                publish(&heard.remote, lsn);
            }
        }
    }
    Err(crate::error::Error::Closed)
}

/// Ends a connection's task when dropped.
struct Closes(tokio::task::JoinHandle<()>);

impl Drop for Closes {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// `request`'s answer, or an error (told to the store's metrics) if none came within `limit`.
async fn within<T>(
    target: &Target,
    limit: Duration,
    request: impl std::future::Future<Output = T>,
) -> Result<T, crate::error::Error> {
    tokio::time::timeout(limit, request).await.map_err(|_| {
        target.metrics.database_failed(&format!(
            "the listening connection got no answer within {} ms",
            limit.as_millis()
        ));
        super::deadline::late("listen", limit)
    })
}

/// Wakes the receivers of `committed` (every commit: one whose lsns sort below another's
/// already heard may be what held a reader's watermark back).
fn publish(committed: &watch::Sender<u64>, lsn: u64) {
    committed.send_modify(|last| *last = (*last).max(lsn));
}

/// The highest lsn in the log (0 for none).
///
/// # Errors
/// A failed query.
pub(crate) async fn last_lsn(client: &tokio_postgres::Client) -> Result<u64, crate::error::Error> {
    let last: i64 = client
        .query_one(
            "SELECT coalesce((SELECT last_lsn FROM cairn_event_batches \
             ORDER BY first_lsn DESC LIMIT 1), 0)",
            &[],
        )
        .await
        .map_err(super::pg_error("read the last lsn"))?
        .get(0);
    Ok(u64::try_from(last).unwrap_or(0))
}

/// Passes a message to a thread's driver on to this store's receivers (none listening is fine;
/// one that cannot be read is dropped: the sender's wait covers a lost message).
fn driver_message(
    drivers: &tokio::sync::broadcast::Sender<crate::store::DriverMessage>,
    payload: &str,
) {
    let Some((thread, message)) = payload.split_once('\t') else { return };
    let Ok(thread) = crate::ids::ThreadId::new(thread) else { return };
    let _ = drivers.send(crate::store::DriverMessage { thread, message: message.to_owned() });
}
