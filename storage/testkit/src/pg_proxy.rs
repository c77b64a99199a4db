//! A proxy between PostgreSQL clients and a [`Cluster`] that cuts a connection at the COMMIT
//! boundary, for tests of what a store does when the answer to its COMMIT never comes.
//!
//! It listens on a Unix socket of its own and passes bytes both ways; it reads just enough of
//! the wire protocol (the startup packet's `application_name`, then each message's type and
//! length) to find a simple-query `COMMIT` sent on a connection of a chosen name. Armed with a
//! [`Cut`], it drops that connection (both ways) before the COMMIT reaches the server, right
//! after it does, or after the server answered it (so the transaction committed, but the
//! client never hears so). Armed with [`Proxy::hold_next_commit`], it keeps that COMMIT until
//! the test releases it (a transaction that has written everything and not committed yet).
//! With [`Proxy::delay_queries`], it holds every query of connections of a name for a while
//! before passing it on (a slow network, or a slow server). With [`Proxy::blackhole`], it stops
//! passing bytes either way on every connection, new ones included, without closing anything
//! (a half-open connection, a network partition: each side waits, hearing nothing) until
//! [`Proxy::resume`], when what was held goes on, as TCP delivers what it retransmitted once a
//! partition heals.
//!
//! # Examples
//! ```no_run
//! use cairn_storage_testkit::pg_cluster::Cluster;
//! use cairn_storage_testkit::pg_proxy::{Cut, Proxy};
//! let Some(cluster) = Cluster::start("my_test") else { return };
//! let url = cluster.new_database();
//! let proxy = Proxy::start(&cluster).unwrap();
//! let store = cairn_storage::PgStore::connect(&proxy.url(&url), cairn_storage::Durability::Immediate).unwrap();
//! proxy.cut_next_commit("cairn-writer", Cut::AfterAnswer);
//! ```

use std::io::{Read, Write};
use std::net::Shutdown;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};

use crate::pg_cluster::{Cluster, TempDir, encode_host};

/// Where a connection is cut, relative to its COMMIT.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Cut {
    /// The COMMIT never reaches the server: the transaction aborts.
    BeforeCommit,
    /// The COMMIT reaches the server and the connection drops at once: either outcome.
    AfterCommit,
    /// The server answered the COMMIT (it committed); the answer is dropped with the connection.
    AfterAnswer,
}

/// What is armed for the next COMMIT of connections of a name.
type Armed<T> = Mutex<Option<(String, T)>>;

/// A running proxy; it stops accepting when dropped (connections already made go on).
pub struct Proxy {
    dir: TempDir,
    shared: Arc<Shared>,
}

/// What the proxy's threads share with it.
#[derive(Default)]
struct Shared {
    armed: Armed<Cut>,
    held: Armed<Arc<Gate>>,
    cuts: AtomicU64,
    stop: AtomicBool,
    delay: Delay,
    blackhole: Blackhole,
}

/// Whether bytes are held (both ways, every connection), and the pumps' wake-up when not.
#[derive(Default)]
struct Blackhole {
    on: Mutex<bool>,
    changed: Condvar,
}

impl Blackhole {
    /// Waits while the blackhole is on.
    fn pass(&self) {
        let mut on = self.on.lock().unwrap_or_else(PoisonError::into_inner);
        while *on {
            on = self.changed.wait(on).unwrap_or_else(PoisonError::into_inner);
        }
    }

    fn set(&self, on: bool) {
        *self.on.lock().unwrap_or_else(PoisonError::into_inner) = on;
        self.changed.notify_all();
    }
}

/// How long queries of connections of a name are held before they go on.
type Delay = Mutex<Option<(String, std::time::Duration)>>;

/// A COMMIT kept by the proxy until [`Held::release`] (or until the [`Held`] is dropped).
#[derive(Default)]
pub struct Gate {
    /// (the COMMIT reached the proxy, the test released it)
    state: Mutex<(bool, bool)>,
    changed: Condvar,
}

/// The test's end of a held COMMIT; dropping it releases the COMMIT.
pub struct Held(Arc<Gate>);

impl Held {
    /// Waits until the COMMIT reached the proxy (the transaction is written, not committed);
    /// false if it did not within `timeout`.
    pub fn wait_reached(&self, timeout: std::time::Duration) -> bool {
        let state = self.0.state.lock().unwrap_or_else(PoisonError::into_inner);
        let (state, _) = self
            .0
            .changed
            .wait_timeout_while(state, timeout, |(reached, _)| !*reached)
            .unwrap_or_else(PoisonError::into_inner);
        state.0
    }

    /// Lets the COMMIT go on to the server.
    pub fn release(&self) {
        self.0.state.lock().unwrap_or_else(PoisonError::into_inner).1 = true;
        self.0.changed.notify_all();
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        self.release();
    }
}

impl Gate {
    /// Marks the COMMIT reached and waits for the release.
    fn pass(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        state.0 = true;
        self.changed.notify_all();
        while !state.1 {
            state = self.changed.wait(state).unwrap_or_else(PoisonError::into_inner);
        }
    }
}

/// The socket file name a server on the default port listens on.
const SOCKET: &str = ".s.PGSQL.5432";

/// How the simple-query message of a COMMIT ends, after its type byte and length: a bare
/// `COMMIT`, or statements ending with one (a writer's commit mark and its COMMIT).
const COMMIT: &[u8] = b"COMMIT\0";

/// A startup packet longer than this is not one.
const STARTUP_MAX: usize = 10_000;

impl Proxy {
    /// A proxy in front of `cluster`.
    ///
    /// # Errors
    /// When its socket cannot be made.
    pub fn start(cluster: &Cluster) -> std::io::Result<Proxy> {
        let dir = TempDir::new()?;
        let listener = UnixListener::bind(dir.path().join(SOCKET))?;
        let upstream = cluster.host().join(SOCKET);
        let proxy = Proxy { dir, shared: Arc::default() };
        let shared = proxy.shared.clone();
        std::thread::Builder::new().name("pg-proxy".into()).spawn(move || {
            for client in listener.incoming() {
                if shared.stop.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(client) = client else { continue };
                let Ok(server) = UnixStream::connect(&upstream) else { continue };
                let shared = shared.clone();
                std::thread::spawn(move || relay(client, server, shared));
            }
        })?;
        Ok(proxy)
    }

    /// `url` (a URL of the proxied cluster, as [`Cluster::new_database`] gives) through this
    /// proxy: the same user and database, the proxy's socket.
    pub fn url(&self, url: &str) -> String {
        let (head, rest) = url.split_once('@').unwrap_or(("postgresql://postgres", url));
        let db = rest.rsplit_once('/').map_or("postgres", |(_, db)| db);
        format!("{head}@{}/{db}", encode_host(self.dir.path()))
    }

    /// Cuts the next connection named `application_name` that sends a COMMIT (a simple query ending with one), at `cut`
    /// (one cut per call).
    pub fn cut_next_commit(&self, application_name: &str, cut: Cut) {
        *self.shared.armed.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((application_name.to_owned(), cut));
    }

    /// Keeps the next COMMIT (a simple query ending with one) of a connection named `application_name` until the returned
    /// [`Held`] is released or dropped (one COMMIT per call).
    pub fn hold_next_commit(&self, application_name: &str) -> Held {
        let gate = Arc::new(Gate::default());
        *self.shared.held.lock().unwrap_or_else(PoisonError::into_inner) =
            Some((application_name.to_owned(), gate.clone()));
        Held(gate)
    }

    /// Holds every query of connections named `application_name` (a simple query, or the Sync
    /// that ends an extended one) for `delay` before passing it on, from now on, until called
    /// again (a zero `delay` stops it).
    pub fn delay_queries(&self, application_name: &str, delay: std::time::Duration) {
        *self.shared.delay.lock().unwrap_or_else(PoisonError::into_inner) =
            (!delay.is_zero()).then(|| (application_name.to_owned(), delay));
    }

    /// Stops passing bytes, both ways, on every connection (those made from now on too),
    /// closing nothing: each side's reads wait, its writes fill the socket's buffers, until
    /// [`Proxy::resume`]. A connection a side closes meanwhile is closed on the other side only
    /// after the resume, as a partition hides a FIN. A request the client began sending goes
    /// up whole (an extended query's messages up to its `Sync`): the silence falls between
    /// requests. (A cut inside one leaves the server's session waiting for the rest, which only
    /// its TCP keepalive ends, and keepalives do not apply to this proxy's Unix sockets; the
    /// store sets them on the server's side, `storage it::pg_tls` checks that.)
    pub fn blackhole(&self) {
        self.shared.blackhole.set(true);
    }

    /// Passes bytes again after [`Proxy::blackhole`], those held first.
    pub fn resume(&self) {
        self.shared.blackhole.set(false);
    }

    /// How many connections were cut so far.
    pub fn cuts(&self) -> u64 {
        self.shared.cuts.load(Ordering::SeqCst)
    }

    /// The proxy's socket directory.
    pub fn host(&self) -> &Path {
        self.dir.path()
    }
}

impl Drop for Proxy {
    fn drop(&mut self) {
        self.resume();
        self.shared.stop.store(true, Ordering::SeqCst);
        // Wake the accepting thread so it sees the stop.
        let _ = UnixStream::connect(self.dir.path().join(SOCKET));
    }
}

/// Passes one connection's bytes both ways until either side closes or a cut drops it.
fn relay(client: UnixStream, server: UnixStream, shared: Arc<Shared>) {
    let (Ok(client_r), Ok(server_w), Ok(server_r), Ok(client_w)) =
        (client.try_clone(), server.try_clone(), server.try_clone(), client.try_clone())
    else {
        return;
    };
    // Set once the COMMIT to cut after its answer went up: the next bytes down are dropped.
    let drop_answer = Arc::new(AtomicBool::new(false));
    let (down_drop, down_shared) = (drop_answer.clone(), shared.clone());
    let down = std::thread::spawn(move || {
        pump_down(server_r, client_w, &down_drop, &down_shared.blackhole);
    });
    let cut = pump_up(client_r, server_w, &shared, &drop_answer);
    // A side that closed while the network was down is seen closed once it is back.
    shared.blackhole.pass();
    if let Some(cut) = cut {
        shared.cuts.fetch_add(1, Ordering::SeqCst);
        if cut == Cut::AfterAnswer {
            // The answer is on its way down: the other pump drops it and the connection.
            let _ = down.join();
            return;
        }
    }
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
    let _ = down.join();
}

/// Server to client, until either closes or an answer is to be dropped.
fn pump_down(
    mut server: UnixStream,
    mut client: UnixStream,
    drop_answer: &AtomicBool,
    hole: &Blackhole,
) {
    let mut buf = [0u8; 16 * 1024];
    loop {
        let n = match server.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        hole.pass();
        if drop_answer.load(Ordering::SeqCst) {
            break;
        }
        if client.write_all(&buf[..n]).is_err() {
            break;
        }
    }
    hole.pass();
    let _ = client.shutdown(Shutdown::Both);
    let _ = server.shutdown(Shutdown::Both);
}

/// Client to server, message by message; the cut made, if any.
fn pump_up(
    mut client: UnixStream,
    mut server: UnixStream,
    shared: &Shared,
    drop_answer: &AtomicBool,
) -> Option<Cut> {
    let hole = &shared.blackhole;
    let name = startup(&mut client, &mut server, hole)?;
    // Inside an extended query: its messages go up whole (see `Proxy::blackhole`).
    let mut in_request = false;
    loop {
        let mut head = [0u8; 5];
        client.read_exact(&mut head).ok()?;
        let len = u32::from_be_bytes([head[1], head[2], head[3], head[4]]) as usize;
        let mut body = vec![0u8; len.checked_sub(4)?];
        client.read_exact(&mut body).ok()?;
        if matches!(head[0], b'Q' | b'S') {
            let wait = shared.delay.lock().unwrap_or_else(PoisonError::into_inner).clone();
            if let Some((n, wait)) = wait
                && n == name
            {
                std::thread::sleep(wait);
            }
        }
        let commit = head[0] == b'Q'
            && (body == COMMIT || body.ends_with(b"; COMMIT\0"))
            && !body.starts_with(b"BEGIN");
        if commit && let Some(gate) = take(&shared.held, &name) {
            gate.pass();
        }
        let cut = if commit { take(&shared.armed, &name) } else { None };
        match cut {
            Some(Cut::BeforeCommit) => return Some(Cut::BeforeCommit),
            Some(Cut::AfterAnswer) => drop_answer.store(true, Ordering::SeqCst),
            _ => {}
        }
        if !in_request {
            hole.pass();
        }
        // Parse, Bind, Describe, Execute, Close and Flush begin or go on with an extended
        // query, which its Sync ends; a simple Query is one message.
        in_request = matches!(head[0], b'P' | b'B' | b'D' | b'E' | b'C' | b'H');
        server.write_all(&head).ok()?;
        server.write_all(&body).ok()?;
        if cut.is_some() {
            return cut;
        }
    }
}

/// Passes the startup packets up (an SSL or GSS request first, if any) and returns the
/// connection's `application_name` (empty if it has none).
fn startup(client: &mut UnixStream, server: &mut UnixStream, hole: &Blackhole) -> Option<String> {
    loop {
        let mut len = [0u8; 4];
        client.read_exact(&mut len).ok()?;
        let n = u32::from_be_bytes(len) as usize;
        if !(8..=STARTUP_MAX).contains(&n) {
            return None;
        }
        let mut body = vec![0u8; n - 4];
        client.read_exact(&mut body).ok()?;
        hole.pass();
        server.write_all(&len).ok()?;
        server.write_all(&body).ok()?;
        let code = u32::from_be_bytes([body[0], body[1], body[2], body[3]]);
        // 80877103: SSLRequest, 80877104: GSSENCRequest; the real startup packet follows.
        if code == 80_877_103 || code == 80_877_104 {
            continue;
        }
        let mut fields = body[4..].split(|b| *b == 0);
        while let Some(key) = fields.next() {
            let value = fields.next().unwrap_or_default();
            if key == b"application_name" {
                return Some(String::from_utf8_lossy(value).into_owned());
            }
        }
        return Some(String::new());
    }
}

/// What is armed, if it is for connections named `name` (taken: once per arming).
fn take<T>(armed: &Armed<T>, name: &str) -> Option<T> {
    let mut armed = armed.lock().unwrap_or_else(PoisonError::into_inner);
    match armed.as_ref() {
        Some((n, _)) if n == name => armed.take().map(|(_, what)| what),
        _ => None,
    }
}
