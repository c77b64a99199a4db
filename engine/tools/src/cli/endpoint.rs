//! Reads through a running engine's endpoint. When `<db>.endpoint` announces one (a
//! `cairn serve`, a `cairn demo`, or an application serving the file) and it is live (its process
//! runs and its address accepts a connection), the read commands ask it instead of copying the
//! file: the engine answers from its live store, a page at a time, and the command prints what it
//! would print reading the file (the endpoint serves the same JSON views, `crate::debug::views`).
//! A loopback endpoint needs no token to read; a public one does, so the token of
//! `<db>.token` is sent with every read when it can be read (the owner of the database can).

use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::time::Duration;

use cairn_storage::RedbStore;
use serde_json::Value;

use super::EXIT_FAILED;
use super::common::{fail, usage};
use crate::serve::discovery;
use crate::serve::wire::Refusal;
pub(super) use crate::serve::wire::path_segment as segment;

/// Seconds one read through the endpoint may take before the command gives up (a page is
/// bounded, so this is a bound on a hung engine, not on a large database).
const READ_TIMEOUT_S: u64 = 60;

/// How long the liveness check waits for the announced address to accept a connection.
const CONNECT_TIMEOUT_MS: u64 = 2_000;

/// A live endpoint serving a database file.
pub(super) struct Endpoint {
    base: String,
    db: PathBuf,
    agent: ureq::Agent,
    /// The bearer token from the announced token file, when it can be read.
    token: Option<String>,
}

/// Longest a read waits for an engine that holds the file, and announces no live endpoint yet,
/// to announce one. An engine that serves one (`cairn demo`, `cairn serve`) holds the file from
/// its open, through its recovery (which reads every unfinished thread), until its listener is
/// bound and announced: a read started in that window waits for the endpoint instead of saying
/// the file is held (exit 4). An engine that serves none keeps the file without announcing
/// anything: the read says so after this wait.
pub(super) const ENDPOINT_WAIT_MS: u64 = 5_000;

/// How often a read waiting for an endpoint looks again.
const ENDPOINT_RETRY_MS: u64 = 25;

/// The live endpoint announced for `db`, or `None` (no announcement, a malformed one, or one
/// left by an engine that is gone): then the command reads the file. While an engine holds the
/// file for writing without a live announcement (it is opening and recovering), waits up to
/// [`ENDPOINT_WAIT_MS`] for one.
///
/// `None` with the file free: the file is opened for reading here already
/// ([`RedbStore::open_read_only_in_place_ahead`]), and the command's own read-only open takes
/// that over. An engine starting between this look and the command's open would otherwise hold
/// the file by then, and the command, having looked for its endpoint too early, would say the
/// file is held (exit 4). A command that opens the file for writing instead lets it go first.
pub(super) fn find(db: &Path) -> Option<Endpoint> {
    let started = std::time::Instant::now();
    loop {
        if let Some(endpoint) = live(db) {
            tracing::info!(endpoint = %endpoint.base, "reading through the endpoint");
            return Some(endpoint);
        }
        if cairn::admin::is_postgres_url(db) {
            return None;
        }
        match RedbStore::open_read_only_in_place_ahead(db) {
            // An engine holds the file: it announces its endpoint once it is up.
            Err(cairn_storage::Error::Locked)
                if started.elapsed() < Duration::from_millis(ENDPOINT_WAIT_MS) =>
            {
                std::thread::sleep(Duration::from_millis(ENDPOINT_RETRY_MS));
            }
            // Opened ahead, held past the wait, or an error the command's own open says.
            opened => {
                tracing::info!(file = %db.display(), free = opened.is_ok(), "reading the file");
                return None;
            }
        }
    }
}

/// The live endpoint announced for `db` now, if any.
fn live(db: &Path) -> Option<Endpoint> {
    let endpoint = discovery::find(db).ok().flatten()?;
    if !process_runs(endpoint.pid) {
        return None;
    }
    let timeout = Duration::from_millis(CONNECT_TIMEOUT_MS);
    TcpStream::connect_timeout(&endpoint.address, timeout).ok()?;
    let agent = super::remote::agent(READ_TIMEOUT_S);
    let token = std::fs::read_to_string(&endpoint.token_file).ok().map(|t| t.trim().to_owned());
    let base = format!("http://{}", endpoint.address);
    Some(Endpoint { base, db: db.to_path_buf(), agent, token })
}

/// Whether process `pid` runs (on Linux, by `/proc`; elsewhere the connection decides).
fn process_runs(pid: u32) -> bool {
    if cfg!(target_os = "linux") { Path::new(&format!("/proc/{pid}")).exists() } else { true }
}

impl Endpoint {
    /// `GET {path}` with `query` (values percent-encoded here): the JSON answer.
    ///
    /// # Errors
    /// Exit 1 with the endpoint's own message for a refusal (a 404 of a thread or checkpoint
    /// says "... in this database", as the file path does; a 400, a bad argument, exits 2);
    /// exit 1 naming the endpoint when it stops answering.
    pub(super) fn get(&self, path: &str, query: &[(&str, String)]) -> anyhow::Result<Value> {
        let (url, bytes) = self.get_bytes(path, query)?;
        serde_json::from_slice(&bytes).map_err(|e| {
            fail(EXIT_FAILED, format!("{url} answered something that is not JSON: {e}"))
        })
    }

    /// `GET {path}` with `query`: the answer's bytes (a bundle), and the URL asked.
    ///
    /// # Errors
    /// As [`Endpoint::get`].
    pub(super) fn get_bytes(
        &self,
        path: &str,
        query: &[(&str, String)],
    ) -> anyhow::Result<(String, Vec<u8>)> {
        let url = format!("{}{path}", self.base);
        let mut request = self.agent.get(&url);
        if let Some(token) = &self.token {
            request = request.header("authorization", &format!("Bearer {token}"));
        }
        for (key, value) in query {
            request = request.query(*key, value);
        }
        let mut response = request.call().map_err(|e| {
            let message = format!(
                "the engine serving {} at {} stopped answering: {e}",
                self.db.display(),
                self.base
            );
            match e {
                // Its engine stopped (or is stopping) since it was found: the file is read.
                ureq::Error::Io(_) | ureq::Error::ConnectionFailed => {
                    anyhow::Error::new(Gone(message))
                }
                _ => fail(EXIT_FAILED, message),
            }
        })?;
        let status = response.status().as_u16();
        let bytes = response
            .body_mut()
            .with_config()
            .limit(crate::limits::SERVE_ANSWER_BYTES_MAX)
            .read_to_vec()
            .map_err(|e| fail(EXIT_FAILED, format!("reading the answer of {url}: {e}")))?;
        if status == 200 {
            return Ok((url, bytes));
        }
        Err(refused(status, &bytes))
    }

    /// `GET {path}` kept open as Server-Sent Events, with `Last-Event-ID: {last_event_id}` when
    /// given (a reader that reconnects): the answer's body, to read as it comes. It lasts as
    /// long as the engine sends (a live stream has no end the reader can know), so only the
    /// connection and the answer's head are bounded in time.
    ///
    /// # Errors
    /// As [`Endpoint::get`]: a refusal, or [`Gone`] when the engine stopped answering.
    pub(super) fn get_events(
        &self,
        path: &str,
        last_event_id: Option<u64>,
    ) -> anyhow::Result<ureq::Body> {
        let url = format!("{}{path}", self.base);
        let bound = Some(Duration::from_secs(READ_TIMEOUT_S));
        let config = ureq::Agent::config_builder().http_status_as_error(false);
        let agent: ureq::Agent =
            config.timeout_connect(bound).timeout_recv_response(bound).build().into();
        let mut request = agent.get(&url).header("accept", "text/event-stream");
        if let Some(token) = &self.token {
            request = request.header("authorization", &format!("Bearer {token}"));
        }
        if let Some(seq) = last_event_id {
            request = request.header("last-event-id", &seq.to_string());
        }
        let response = request.call().map_err(|e| {
            let message =
                format!("the engine serving {} stopped answering: {e}", self.db.display());
            anyhow::Error::new(Gone(message))
        })?;
        if response.status().as_u16() == 200 {
            return Ok(response.into_body());
        }
        let status = response.status().as_u16();
        let text = response.into_body().with_config().limit(1 << 20).read_to_vec();
        Err(refused(status, &text.unwrap_or_default()))
    }
}

/// The endpoint's refusal `bytes` with HTTP status `status`, as the command's error.
fn refused(status: u16, bytes: &[u8]) -> anyhow::Error {
    let Refusal { error, field } = Refusal::of(&String::from_utf8_lossy(bytes));
    let message = match field.as_deref() {
        Some("thread" | "checkpoint") if status == 404 => format!("{error} in this database"),
        _ => error,
    };
    // A 400 refuses what the command asked, built from its arguments: as the file's read
    // would, a usage error.
    if status == 400 { usage(message) } else { fail(EXIT_FAILED, message) }
}

/// The endpoint went away while a command read through it (its engine stopped): the command
/// reads the file instead (exit 1 if this ever reaches the user).
#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub(super) struct Gone(String);

/// Whether `error` is the endpoint going away ([`Gone`]).
pub(super) fn is_gone(error: &anyhow::Error) -> bool {
    error.downcast_ref::<Gone>().is_some()
}

/// `read` through the live endpoint serving `db`: `None` when there is none, or when it went
/// away during the read (then the caller reads the file, which its engine no longer holds).
///
/// # Errors
/// What `read` fails with otherwise.
pub(super) fn through<T>(
    db: &Path,
    read: impl FnOnce(&Endpoint) -> anyhow::Result<T>,
) -> anyhow::Result<Option<T>> {
    let Some(endpoint) = find(db) else { return Ok(None) };
    match read(&endpoint) {
        Ok(value) => Ok(Some(value)),
        Err(e) if is_gone(&e) => {
            tracing::info!(error = %e, "the endpoint went away: reading the file");
            Ok(None)
        }
        Err(e) => Err(e),
    }
}
