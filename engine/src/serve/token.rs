//! The bearer token controls need: 32 random bytes as hex, made when the endpoint starts and
//! kept in a file only the owner can read (`<db>.token`, mode 0600), so that a local user who can
//! read the database can also control it, and nobody else on the machine can.

use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};

use crate::error::Error;

/// Where the token of the endpoint of the database at `db` is kept: `<db>.token`.
pub fn token_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".token");
    PathBuf::from(name)
}

/// A fresh token: 32 bytes from the operating system's random source, as 64 hex digits.
///
/// # Errors
/// [`Error::Invalid`] when the random source cannot be read.
pub fn generate() -> Result<String, Error> {
    let mut bytes = [0u8; 32];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut bytes))
        .map_err(|e| Error::Invalid(format!("cannot read /dev/urandom for a token: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes `token` to `path`, readable and writable by the owner only, replacing any older one.
///
/// # Errors
/// [`Error::Invalid`] naming the file when it cannot be written.
pub fn write(path: &Path, token: &str) -> Result<(), Error> {
    let fail = |e: std::io::Error| Error::Invalid(format!("writing {}: {e}", path.display()));
    // Removed first: an older file may have looser permissions, which `mode` would not change.
    match std::fs::remove_file(path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(fail(e)),
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(fail)?;
    file.write_all(token.as_bytes()).and_then(|()| file.sync_all()).map_err(fail)
}

/// Whether the `Authorization` header value `given` carries `token` (`Bearer <token>`),
/// compared in constant time over the token's length.
pub fn accepts(token: &str, given: Option<&str>) -> bool {
    let Some(given) = given.and_then(|g| g.strip_prefix("Bearer ")) else { return false };
    let (a, b) = (token.as_bytes(), given.trim().as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_the_bearer_token_is_accepted() {
        let t = generate().unwrap();
        assert_eq!(t.len(), 64);
        assert!(accepts(&t, Some(&format!("Bearer {t}"))));
        assert!(!accepts(&t, Some(&t)));
        assert!(!accepts(&t, Some("Bearer ")));
        assert!(!accepts(&t, None));
    }
}
