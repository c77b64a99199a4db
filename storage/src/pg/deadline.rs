//! The deadlines of a [`super::PgStore`]'s connections: what a network that hangs instead of
//! failing (a half-open connection, a partition, a server stopped mid-answer) costs at most.
//!
//! Every connection (the writer's, the readers', the listener's) is opened with the same
//! settings, read from the URL with defaults for what it leaves out:
//!
//! | setting | URL parameter | default | what it bounds |
//! |---|---|---|---|
//! | connect | `connect_timeout` (s) | [`CONNECT_DEFAULT`] | opening a connection: socket, TLS, startup, setup |
//! | statement | `options=-c statement_timeout=…` | [`STATEMENT_DEFAULT`] | one statement, on the server |
//! | answer | (the statement's, plus a grace) | statement + min(statement, [`GRACE_MAX`]) | the client's wait for any answer |
//! | keepalive | `keepalives_idle`, `keepalives_interval`, `keepalives_retries` (s) | [`KEEPALIVE_IDLE_DEFAULT`], [`KEEPALIVE_INTERVAL_DEFAULT`], [`KEEPALIVE_RETRIES_DEFAULT`] | a silent TCP peer while idle, on both sides ([`Timeouts::setup`]) |
//! | user timeout | `tcp_user_timeout` (s) | [`TCP_USER_TIMEOUT_DEFAULT`] | unacknowledged TCP data, on both sides |
//!
//! The server's `statement_timeout` answers a slow statement with an error; a statement whose
//! answer does not come by the answer deadline (the server has had its chance to say so) means
//! the network or the server is gone: the client gives that connection up for good (its task
//! is ended, so every request on it fails as on a connection the network dropped) and the
//! store goes on on a fresh one. For the writer this is exactly a dropped connection: a COMMIT
//! cut off from its answer is resolved by its transaction id (`resolve.rs`), never reported
//! failed when it may have committed. Keepalives and the TCP user timeout apply to TCP only
//! (a Unix socket's peer is on the same machine): the answer deadline covers both.

use std::future::Future;
use std::pin::pin;
use std::task::Poll;
use std::time::Duration;

use tokio::task::AbortHandle;

/// Opening a connection, when the URL sets no `connect_timeout` (the reason is with it).
pub(crate) const CONNECT_DEFAULT: Duration = crate::limits::PG_CONNECT_TIMEOUT_DEFAULT;

/// The server's `statement_timeout`, when the URL's `options` set none.
pub(crate) const STATEMENT_DEFAULT: Duration = crate::limits::PG_STATEMENT_TIMEOUT_DEFAULT;

/// The most the client waits past the statement timeout for the server's own answer.
pub(crate) const GRACE_MAX: Duration = crate::limits::PG_ANSWER_GRACE_MAX;

/// TCP keepalive: idle time before the first probe (tokio-postgres's own default, two hours,
/// would let a dead peer hold an idle connection that long).
pub(crate) const KEEPALIVE_IDLE_DEFAULT: Duration = Duration::from_secs(15);

/// TCP keepalive: time between probes.
pub(crate) const KEEPALIVE_INTERVAL_DEFAULT: Duration = Duration::from_secs(5);

/// TCP keepalive: probes unanswered before the connection is dropped.
pub(crate) const KEEPALIVE_RETRIES_DEFAULT: u32 = 3;

/// How long sent data may stay unacknowledged before the kernel drops the connection.
pub(crate) const TCP_USER_TIMEOUT_DEFAULT: Duration = Duration::from_secs(30);

/// tokio-postgres's keepalive idle when the URL sets none (so the store's default applies).
const KEEPALIVE_IDLE_UNSET: Duration = Duration::from_secs(2 * 60 * 60);

/// The deadlines of a store's connections (see the module documentation).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Timeouts {
    /// Opening a connection, setup included.
    pub connect: Duration,
    /// The server's `statement_timeout` (`None`: the URL turned it off with 0).
    pub statement: Option<Duration>,
}

impl Timeouts {
    /// The deadlines the URL parsed into `config` asks for, its defaults filled in (TCP
    /// keepalives and user timeout set on `config` itself).
    pub fn apply(config: &mut tokio_postgres::Config) -> Timeouts {
        let connect = config.get_connect_timeout().copied().unwrap_or(CONNECT_DEFAULT);
        config.connect_timeout(connect);
        if config.get_tcp_user_timeout().is_none() {
            config.tcp_user_timeout(TCP_USER_TIMEOUT_DEFAULT);
        }
        if config.get_keepalives() {
            if config.get_keepalives_idle() == KEEPALIVE_IDLE_UNSET {
                config.keepalives_idle(KEEPALIVE_IDLE_DEFAULT);
            }
            if config.get_keepalives_interval().is_none() {
                config.keepalives_interval(KEEPALIVE_INTERVAL_DEFAULT);
            }
            if config.get_keepalives_retries().is_none() {
                config.keepalives_retries(KEEPALIVE_RETRIES_DEFAULT);
            }
        }
        let statement = match config.get_options().and_then(statement_timeout) {
            Some(d) if d.is_zero() => None,
            Some(d) => Some(d),
            None => Some(STATEMENT_DEFAULT),
        };
        Timeouts { connect, statement }
    }

    /// The `SET`s a new connection runs: the default `statement_timeout` when the URL's
    /// `options` set none (the server has it from the startup packet otherwise), and an
    /// `idle_in_transaction_session_timeout` of the answer deadline, so that the transaction of
    /// a connection the client gave up on (a silent network) ends on the server about when the
    /// client stops waiting, and its row locks stop holding other engines back (a take-over of
    /// the silent engine's threads waited for the server's own idle timeout before).
    ///
    /// And the client's TCP keepalive and user timeout for the server's side of the connection
    /// (the server ignores them on a Unix socket): a request the network cut in the middle
    /// (its first messages arrived, its `Sync` did not) leaves the session waiting to read the
    /// rest, where neither timeout above runs, holding the row locks its transaction took. Its
    /// keepalive probes then go unanswered and the server ends it within idle + interval x
    /// retries (30 s by default), where the operating system's default keepalive took hours.
    pub fn setup(&self, config: &tokio_postgres::Config) -> String {
        let mut sets = Vec::new();
        if config.get_options().and_then(statement_timeout).is_none() {
            sets.push(format!("SET statement_timeout = {}", STATEMENT_DEFAULT.as_millis()));
        }
        if let Some(answer) = self.answer() {
            sets.push(format!("SET idle_in_transaction_session_timeout = {}", answer.as_millis()));
        }
        if config.get_keepalives() {
            let interval = config.get_keepalives_interval();
            let retries = config.get_keepalives_retries();
            sets.push(format!(
                "SET tcp_keepalives_idle = {}",
                seconds(config.get_keepalives_idle())
            ));
            sets.push(format!(
                "SET tcp_keepalives_interval = {}",
                seconds(interval.unwrap_or(KEEPALIVE_INTERVAL_DEFAULT))
            ));
            sets.push(format!(
                "SET tcp_keepalives_count = {}",
                retries.unwrap_or(KEEPALIVE_RETRIES_DEFAULT)
            ));
        }
        if let Some(user) = config.get_tcp_user_timeout() {
            sets.push(format!("SET tcp_user_timeout = {}", user.as_millis()));
        }
        sets.join("; ")
    }

    /// How long the client waits for the answer to one statement before it gives the
    /// connection up (`None`: the statement timeout is off, and so is this).
    pub fn answer(&self) -> Option<Duration> {
        self.statement.map(|s| s + s.min(GRACE_MAX))
    }

    /// How often the database is checked (on the listener's connection), and how long a
    /// check may go unanswered before the database is said to be unreachable.
    pub fn check(&self) -> (Duration, Duration) {
        (crate::limits::PG_CHECK_EVERY, self.connect.min(crate::limits::PG_CHECK_ANSWER_MAX))
    }
}

/// `d` in whole seconds, at least 1 (the server's keepalive settings are in seconds, and 0
/// would mean the operating system's default).
fn seconds(d: Duration) -> u64 {
    d.as_secs().max(1)
}

/// The `statement_timeout` that libpq `options` (`-c statement_timeout=5s`,
/// `-cstatement_timeout=500`, `--statement-timeout=1min`) set, if any and if it parses.
fn statement_timeout(options: &str) -> Option<Duration> {
    let mut words = options.split_whitespace();
    let mut found = None;
    while let Some(word) = words.next() {
        let setting = match word {
            "-c" => words.next().unwrap_or_default(),
            w => w.strip_prefix("--").or_else(|| w.strip_prefix("-c")).unwrap_or_default(),
        };
        if let Some((name, value)) = setting.split_once('=')
            && name.replace('-', "_") == "statement_timeout"
        {
            found = duration(value);
        }
    }
    found
}

/// A PostgreSQL time setting (`500`, `500ms`, `5s`, `1min`, `1h`, `1d`; a bare number is ms).
fn duration(value: &str) -> Option<Duration> {
    let value = value.trim().trim_matches('\'');
    let split = value.find(|c: char| !c.is_ascii_digit()).unwrap_or(value.len());
    let (n, unit) = value.split_at(split);
    let n: u64 = n.parse().ok()?;
    let ms = match unit.trim() {
        "" | "ms" => n,
        "s" => n.checked_mul(1_000)?,
        "min" => n.checked_mul(60_000)?,
        "h" => n.checked_mul(3_600_000)?,
        "d" => n.checked_mul(86_400_000)?,
        "us" => n / 1_000,
        _ => return None,
    };
    Some(Duration::from_millis(ms))
}

/// Blocks this thread (none of a runtime's workers: the writer's) until `request`, a request
/// on the connection whose task `task` is, completes. If it has not within `limit`, the
/// connection is closed (its task ended): `request` then fails as on a connection the network
/// dropped, and the caller goes the same way as for one; `on_late` is told first. The timer is
/// `handle`'s (the store's runtime).
pub(crate) fn within<F: Future>(
    handle: &tokio::runtime::Handle,
    limit: Option<Duration>,
    task: &AbortHandle,
    on_late: impl FnOnce(Duration),
    request: F,
) -> F::Output {
    let Some(limit) = limit else { return crate::pending::block_on(request) };
    let sleep = {
        let _entered = handle.enter();
        tokio::time::sleep(limit)
    };
    let (mut request, mut sleep) = (pin!(request), pin!(sleep));
    let mut on_late = Some(on_late);
    crate::pending::block_on(std::future::poll_fn(|cx| {
        if let Poll::Ready(answer) = request.as_mut().poll(cx) {
            return Poll::Ready(answer);
        }
        if on_late.is_some() && sleep.as_mut().poll(cx).is_ready() {
            if let Some(f) = on_late.take() {
                f(limit);
            }
            // The request fails once the connection's task is gone (its answer channel drops).
            task.abort();
        }
        Poll::Pending
    }))
}

/// The error of a connection given up after `limit` without an answer to `what`.
pub(crate) fn late(what: &'static str, limit: Duration) -> crate::error::Error {
    crate::error::Error::Storage {
        op: what,
        source: std::sync::Arc::new(std::io::Error::new(
            std::io::ErrorKind::TimedOut,
            format!("no answer from the database within {} ms", limit.as_millis()),
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_statement_timeout_is_read_from_libpq_options() {
        let ms = Duration::from_millis;
        assert_eq!(statement_timeout("-c statement_timeout=1500"), Some(ms(1500)));
        assert_eq!(statement_timeout("-cstatement_timeout=2s"), Some(ms(2000)));
        assert_eq!(statement_timeout("--statement-timeout=1min -c a=b"), Some(ms(60_000)));
        assert_eq!(statement_timeout("-c search_path=x"), None);
        assert_eq!(statement_timeout("-c statement_timeout=soon"), None);
        assert_eq!(statement_timeout("-c statement_timeout=0"), Some(ms(0)));
    }

    #[test]
    fn the_url_sets_every_deadline_and_the_rest_are_defaults() {
        let mut config: tokio_postgres::Config =
            "host=/tmp user=u connect_timeout=2 keepalives_idle=7".parse().unwrap();
        let t = Timeouts::apply(&mut config);
        assert_eq!(t.connect, Duration::from_secs(2));
        assert_eq!(t.statement, Some(STATEMENT_DEFAULT));
        assert_eq!(t.answer(), Some(STATEMENT_DEFAULT + GRACE_MAX));
        assert_eq!(config.get_keepalives_idle(), Duration::from_secs(7));
        assert_eq!(config.get_keepalives_interval(), Some(KEEPALIVE_INTERVAL_DEFAULT));
        assert_eq!(config.get_tcp_user_timeout(), Some(&TCP_USER_TIMEOUT_DEFAULT));
        assert_eq!(
            t.setup(&config),
            "SET statement_timeout = 10000; SET idle_in_transaction_session_timeout = 12000; \
             SET tcp_keepalives_idle = 7; SET tcp_keepalives_interval = 5; \
             SET tcp_keepalives_count = 3; SET tcp_user_timeout = 30000",
            "the default is set on each connection, and the keepalives on the server's side"
        );

        let mut config: tokio_postgres::Config =
            "postgresql://u@h/db?options=-c%20statement_timeout%3D800&tcp_user_timeout=3"
                .parse()
                .unwrap();
        let t = Timeouts::apply(&mut config);
        assert_eq!(t.connect, CONNECT_DEFAULT);
        assert_eq!(t.answer(), Some(Duration::from_millis(1600)));
        assert_eq!(config.get_tcp_user_timeout(), Some(&Duration::from_secs(3)));
        assert_eq!(
            t.setup(&config),
            "SET idle_in_transaction_session_timeout = 1600; SET tcp_keepalives_idle = 15; \
             SET tcp_keepalives_interval = 5; SET tcp_keepalives_count = 3; \
             SET tcp_user_timeout = 3000",
            "the server has the statement timeout from the URL"
        );
    }
}
