//! A throwaway PostgreSQL cluster for tests (Cairn's and its users'): `initdb` and `pg_ctl` from
//! Debian's `postgresql` package, in a temporary directory, listening on a Unix socket there
//! only; stopped and its files removed when dropped. As root, the server runs as the `postgres`
//! user. About a second to start.
//!
//! Under `CI=true` a cluster that cannot start panics (the test fails); elsewhere
//! [`Cluster::start`] returns `None` after a `SKIPPED` line on stderr, so a test can return.
//!
//! # Examples
//! ```no_run
//! use cairn_storage_testkit::pg_cluster::Cluster;
//! let Some(cluster) = Cluster::start("my_test") else { return };
//! let url = cluster.new_database();
//! let store = cairn_storage::PgStore::connect(&url, cairn_storage::Durability::Immediate).unwrap();
//! ```

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

/// A running cluster.
pub struct Cluster {
    dir: TempDir,
    bin: PathBuf,
    as_postgres: bool,
    databases: AtomicU32,
    /// With TLS: the TCP port on 127.0.0.1 it listens on (TLS only) besides its socket.
    tls_port: Option<u16>,
}

impl Cluster {
    /// Starts a cluster, or says why not (see the module documentation).
    ///
    /// # Panics
    /// Under `CI=true`, when the cluster does not start.
    pub fn start(test: &str) -> Option<Cluster> {
        Cluster::start_with(test, None)
    }

    /// Starts a cluster that also listens on 127.0.0.1 over TLS only (its Unix socket stays
    /// plain): `cert` and `key` are the server's PEM certificate and key. Its TCP URLs come
    /// from [`Cluster::tls_url`].
    ///
    /// # Panics
    /// As [`Cluster::start`].
    pub fn start_tls(test: &str, cert: &Path, key: &Path) -> Option<Cluster> {
        Cluster::start_with(test, Some((cert, key)))
    }

    fn start_with(test: &str, tls: Option<(&Path, &Path)>) -> Option<Cluster> {
        match Cluster::try_start(tls) {
            Ok(cluster) => Some(cluster),
            Err(why) if std::env::var("CI").is_ok_and(|v| v == "true") => {
                panic!("{test}: PostgreSQL is needed under CI=true and did not start: {why}")
            }
            Err(why) => {
                // Straight to the process's stderr, not through the test harness's captured
                // output: a skip must show even when the test passes.
                use std::io::Write as _;
                let _ = writeln!(
                    std::io::stderr().lock(),
                    "SKIPPED {test}: no PostgreSQL cluster could start here ({why})"
                );
                tracing::warn!(test, %why, "PostgreSQL test skipped");
                None
            }
        }
    }

    fn try_start(tls: Option<(&Path, &Path)>) -> Result<Cluster, String> {
        let bin =
            bin_dir().ok_or("no /usr/lib/postgresql/*/bin/initdb (apt-get install postgresql)")?;
        let dir = TempDir::new().map_err(|e| e.to_string())?;
        // The server refuses to run as root: as root, run it as the postgres user.
        let as_postgres = is_root();
        if as_postgres {
            to_postgres(dir.path())?;
        }
        let mut cluster =
            Cluster { dir, bin, as_postgres, databases: AtomicU32::new(0), tls_port: None };
        let data = cluster.data();
        cluster.run("initdb", &["-D", &data, "-A", "trust", "-U", "postgres", "--no-sync"])?;
        if let Some((cert, key)) = tls {
            cluster.set_up_tls(cert, key)?;
        }
        cluster.start_server()?;
        Ok(cluster)
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn run(&self, tool: &str, args: &[&str]) -> Result<(), String> {
        let exe = self.bin.join(tool);
        let mut command = Command::new(&exe);
        if self.as_postgres {
            command = Command::new("runuser");
            command.args(["-u", "postgres", "--"]).arg(&exe);
        }
        let output = command.args(args).output().map_err(|e| format!("{tool}: {e}"))?;
        if output.status.success() {
            Ok(())
        } else {
            Err(format!("{tool} failed: {}", String::from_utf8_lossy(&output.stderr)))
        }
    }

    /// The URL of database `db` of this cluster (`postgresql://postgres@<socket dir>/db`, the
    /// directory percent-encoded).
    pub fn url(&self, db: &str) -> String {
        let host = encode_host(self.dir.path());
        match self.tls_port {
            // The socket's name carries the server's port.
            Some(port) => format!("postgresql://postgres@{host}:{port}/{db}"),
            None => format!("postgresql://postgres@{host}/{db}"),
        }
    }

    /// A new empty database; its connection string.
    ///
    /// # Panics
    /// If the cluster refuses (it stopped).
    pub fn new_database(&self) -> String {
        let name = format!("t{}", self.databases.fetch_add(1, Ordering::SeqCst));
        let admin = self.url("postgres");
        // On a runtime of its own: off any async runtime's thread.
        std::thread::scope(|s| {
            s.spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build();
                runtime.expect("a runtime").block_on(async {
                    let (admin, connection) =
                        tokio_postgres::connect(&admin, tokio_postgres::NoTls)
                            .await
                            .expect("connect to the cluster");
                    let connection = tokio::spawn(connection);
                    let create = format!("CREATE DATABASE {name}");
                    admin.batch_execute(&create).await.expect("create database");
                    drop(admin);
                    let _ = connection.await;
                });
            })
            .join()
            .expect("create database");
        });
        self.url(&name)
    }

    /// The socket directory (for `psql -h`).
    pub fn host(&self) -> &Path {
        self.dir.path()
    }

    /// The process id of the server's postmaster (the first line of `postmaster.pid`): the
    /// parent of every backend and background process of the cluster, so a benchmark can read
    /// the server's CPU time from `/proc`.
    ///
    /// # Errors
    /// When the file cannot be read or does not start with a process id.
    pub fn server_pid(&self) -> Result<u32, String> {
        let file = self.dir.path().join("data").join("postmaster.pid");
        let text =
            std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
        text.lines()
            .next()
            .and_then(|l| l.trim().parse().ok())
            .ok_or_else(|| format!("{}: no process id on its first line", file.display()))
    }

    /// Stops the server abruptly (`pg_ctl stop -m immediate`: no shutdown checkpoint, as a crash
    /// leaves it; every connection drops) and starts it again; it recovers from its WAL.
    ///
    /// # Errors
    /// What `pg_ctl` said when it failed.
    pub fn restart(&self) -> Result<(), String> {
        self.stop()?;
        self.start_server()
    }

    /// Stops the server abruptly (as [`Cluster::restart`] does), leaving it down until
    /// [`Cluster::start_server`]: a server that is gone for as long as a test wants.
    ///
    /// # Errors
    /// What `pg_ctl` said when it failed.
    pub fn stop(&self) -> Result<(), String> {
        self.run("pg_ctl", &["-D", &self.data(), "-m", "immediate", "-w", "stop"])
    }

    /// Starts the server again after [`Cluster::stop`]; it recovers from its WAL.
    ///
    /// # Errors
    /// What `pg_ctl` said when it failed.
    pub fn start_server(&self) -> Result<(), String> {
        let data = self.data();
        let socket = self.dir.path().display().to_string();
        let log = self.dir.path().join("log").display().to_string();
        let options = match self.tls_port {
            None => format!("-k {socket} -c listen_addresses='' -c fsync=on"),
            Some(port) => format!(
                "-k {socket} -c listen_addresses=127.0.0.1 -p {port} -c fsync=on -c ssl=on \
                 -c ssl_cert_file=server.crt -c ssl_key_file=server.key"
            ),
        };
        self.run("pg_ctl", &["-D", &data, "-o", &options, "-l", &log, "-w", "start"])
    }

    /// Copies the certificate and key into the data directory (the key readable by the server
    /// alone), lets TCP connections in over TLS only, and picks a free port.
    fn set_up_tls(&mut self, cert: &Path, key: &Path) -> Result<(), String> {
        let data = PathBuf::from(self.data());
        let copy = |from: &Path, to: &str| -> Result<(), String> {
            let to = data.join(to);
            std::fs::copy(from, &to).map_err(|e| format!("{}: {e}", from.display()))?;
            use std::os::unix::fs::PermissionsExt as _;
            std::fs::set_permissions(&to, std::fs::Permissions::from_mode(0o600))
                .map_err(|e| e.to_string())?;
            if self.as_postgres { to_postgres(&to) } else { Ok(()) }
        };
        copy(cert, "server.crt")?;
        copy(key, "server.key")?;
        // Unix sockets stay plain (the tests' admin connections); TCP only over TLS.
        let hba = "local all all trust\nhostssl all all 127.0.0.1/32 trust\n\
                   hostnossl all all 127.0.0.1/32 reject\n";
        std::fs::write(data.join("pg_hba.conf"), hba).map_err(|e| e.to_string())?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .and_then(|l| l.local_addr())
            .map_err(|e| e.to_string())?
            .port();
        self.tls_port = Some(port);
        Ok(())
    }

    /// The URL of database `db` over TCP on 127.0.0.1 (a cluster started with
    /// [`Cluster::start_tls`]; `None` otherwise), without TLS parameters: the caller adds them.
    pub fn tls_url(&self, db: &str) -> Option<String> {
        self.tls_port.map(|port| format!("postgresql://postgres@127.0.0.1:{port}/{db}"))
    }
}

/// A socket directory as the host of a URL, percent-encoded.
pub(crate) fn encode_host(dir: &Path) -> String {
    dir.display()
        .to_string()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-._~".contains(c) {
                c.to_string()
            } else {
                format!("%{:02X}", c as u32)
            }
        })
        .collect()
}

impl Drop for Cluster {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

/// A directory under the system's temporary directory, removed with everything in it on drop.
pub(crate) struct TempDir(PathBuf);

impl TempDir {
    pub(crate) fn new() -> std::io::Result<TempDir> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let name =
            format!("cairn-pg-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::SeqCst));
        let path = std::env::temp_dir().join(name);
        std::fs::create_dir(&path)?;
        Ok(TempDir(path))
    }

    pub(crate) fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// Hands `path` to the postgres user.
fn to_postgres(path: &Path) -> Result<(), String> {
    let status = Command::new("chown").arg("postgres:postgres").arg(path).status();
    match status.map_err(|e| e.to_string())?.success() {
        true => Ok(()),
        false => Err(format!("cannot hand {} to the postgres user", path.display())),
    }
}

/// The newest installed server's binaries.
fn bin_dir() -> Option<PathBuf> {
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .ok()?
        .filter_map(|e| {
            let e = e.ok()?;
            let v: u32 = e.file_name().to_str()?.parse().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").exists().then_some((v, bin))
        })
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin)
}

/// Whether this process runs as root (read from /proc, no libc call).
fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("Uid:"))
                .and_then(|l| l.split_whitespace().nth(1).map(|u| u == "0"))
        })
        .unwrap_or(false)
}
