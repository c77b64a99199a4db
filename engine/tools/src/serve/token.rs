//! The bearer token controls (and, on a public endpoint, reads) need: 32 random bytes as hex,
//! made when the endpoint starts and kept in a file only the owner can read (`<db>.token`, mode
//! 0600), so that a local user who can read the database can also control it, and nobody else on
//! the machine can. It is checked in one place, the endpoint's access layer (`serve::access`).

use std::io::Write as _;
use std::path::{Path, PathBuf};

use subtle::ConstantTimeEq as _;

use cairn::error::Error;

/// Where the token of the endpoint of the database at `db` is kept: `<db>.token`.
pub fn token_path(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".token");
    PathBuf::from(name)
}

/// Random bytes in a token: 256 bits, beyond guessing however many requests an attacker makes.
const TOKEN_BYTES: usize = 32;

/// A fresh token: `TOKEN_BYTES` (32) bytes from the operating system's random source
/// (`getrandom`), as 64 hex digits.
///
/// # Errors
/// [`Error::Invalid`] when the random source cannot be read.
///
/// # Examples
/// ```
/// let token = cairn_tools::serve::token::generate()?;
/// assert_eq!(token.len(), 64);
/// assert!(cairn_tools::serve::token::accepts(&token, Some(&format!("Bearer {token}"))));
/// # Ok::<(), cairn::Error>(())
/// ```
pub fn generate() -> Result<String, Error> {
    let mut bytes = [0u8; TOKEN_BYTES];
    getrandom::fill(&mut bytes)
        .map_err(|e| Error::Invalid(format!("the operating system's randomness: {e}")))?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Writes `token` to `path`, readable and writable by the owner only, replacing any older one.
///
/// # Errors
/// [`Error::Invalid`] naming the file when it cannot be written.
pub fn write(path: &Path, token: &str) -> Result<(), Error> {
    let fail = |e: std::io::Error| Error::Invalid(format!("writing {}: {e}", path.display()));
    // Removed first: an older file may have looser permissions, which `mode` would not change.
    if let Err(e) = std::fs::remove_file(path)
        && e.kind() != std::io::ErrorKind::NotFound
    {
        return Err(fail(e));
    }
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create_new(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path).map_err(fail)?;
    file.write_all(token.as_bytes()).and_then(|()| file.sync_all()).map_err(fail)
}

/// Whether the `Authorization` header value `given` carries `token` (`Bearer <token>`),
/// compared in constant time (`subtle`): how long a wrong token takes to refuse says nothing of
/// how much of it was right. (A token of another length is refused at once; every token made
/// here has the same length, so that says nothing either.)
///
/// # Examples
/// ```
/// use cairn_tools::serve::token::accepts;
/// assert!(accepts("abc123", Some("Bearer abc123")));
/// assert!(!accepts("abc123", Some("Bearer abc124")));
/// assert!(!accepts("abc123", Some("abc123")));
/// assert!(!accepts("abc123", None));
/// ```
pub fn accepts(token: &str, given: Option<&str>) -> bool {
    let Some(given) = given.and_then(|g| g.strip_prefix("Bearer ")) else { return false };
    !token.is_empty() && bool::from(token.as_bytes().ct_eq(given.trim().as_bytes()))
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
        assert!(!accepts(&t, Some(&format!("Bearer {}", &t[..63]))));
        assert!(!accepts(&t, None));
        assert!(!accepts("", Some("Bearer ")), "an empty token accepts nothing");
        assert_ne!(generate().unwrap(), t, "two tokens differ");
    }
}
