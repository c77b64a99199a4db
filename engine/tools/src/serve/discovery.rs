//! Discovery: a running engine with an endpoint writes `<db>.endpoint` beside its database, one
//! JSON object `{"address": "127.0.0.1:PORT", "pid": N, "token_file": "<db>.token"}`, and removes
//! it when the endpoint shuts down. A reader (the CLI, a script) finds the address there; a file
//! whose pid is no longer running is stale (the engine crashed) and is overwritten by the next
//! engine.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use cairn::error::Error;

/// What `<db>.endpoint` holds.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Endpoint {
    /// Where the endpoint listens.
    pub address: SocketAddr,
    /// The process serving it.
    pub pid: u32,
    /// The file holding the bearer token controls (and a public endpoint's reads) need.
    pub token_file: PathBuf,
}

/// Where the endpoint of the database at `db` is announced: `<db>.endpoint`.
pub fn endpoint_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".endpoint");
    PathBuf::from(name)
}

/// Writes `endpoint` to `path` (through a temporary file and a rename, so a reader never sees
/// half of it).
///
/// # Errors
/// [`Error::Invalid`] naming the file when it cannot be written.
pub fn announce(path: &Path, endpoint: &Endpoint) -> Result<(), Error> {
    let fail = |e: std::io::Error| Error::Invalid(format!("writing {}: {e}", path.display()));
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let text = serde_json::to_vec(endpoint)?;
    std::fs::write(&tmp, text).map_err(fail)?;
    std::fs::rename(&tmp, path).map_err(fail)
}

/// Reads the endpoint announced for the database at `db`, if any.
///
/// # Errors
/// [`Error::Codec`] for a file that is not an endpoint announcement.
pub fn find(db: &Path) -> Result<Option<Endpoint>, Error> {
    match std::fs::read(endpoint_path(db)) {
        Ok(bytes) => Ok(Some(serde_json::from_slice(&bytes)?)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(Error::Invalid(format!("reading the endpoint file: {e}"))),
    }
}

/// Removes the announcement (at shutdown); a missing file is fine.
pub fn withdraw(path: &Path) {
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(path = %path.display(), error = %e, "cannot remove the endpoint file");
    }
}
