//! What is at a database path, decided before a byte of it is read or written.
//!
//! A database is a regular file. Cairn creates one only where nothing exists (the new file is
//! linked into place, never renamed over something), follows a symbolic link to its target and
//! judges the target by the same rules, and refuses everything else before opening it:
//! directories, FIFOs, sockets and device nodes (`/dev/null`, `/dev/zero`), a link to nothing,
//! and a zero-length file (not a Cairn database; it is left as it is unless the caller asks to
//! initialise it explicitly, [`super::RedbStore::initialise`]).

use std::io::ErrorKind;
use std::path::{Path, PathBuf};

use crate::error::Error;

/// Why a zero-length file is refused, and what to do about it.
pub(crate) const EMPTY_FILE: &str =
    "an empty file; `cairn init` (`RedbStore::initialise`) makes a database of it";

/// What a path holds.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Found {
    /// Nothing, in a directory that exists: a database may be created here.
    Nothing,
    /// A zero-length regular file.
    Empty,
    /// A regular file with content (whether it is a Cairn database is for the open to say).
    File,
}

/// Checks that `path` holds a file to read, as [`inspect`] judges it: [`Error::NotFound`] for
/// nothing there, [`Error::NotCairn`] for an empty file.
pub(crate) fn existing(path: &Path) -> Result<(), Error> {
    match inspect(path)? {
        Found::Nothing => Err(Error::NotFound(path.to_path_buf())),
        Found::Empty => Err(Error::NotCairn { detail: EMPTY_FILE.into() }),
        Found::File => Ok(()),
    }
}

/// Looks at `path` (following symbolic links) without opening it.
///
/// # Errors
/// [`Error::NotAFile`] for anything but a regular file or nothing (a link to nothing included);
/// [`Error::NotFound`] naming the directory when the path's directory does not exist; other
/// I/O errors as [`Error::Storage`].
pub(crate) fn inspect(path: &Path) -> Result<Found, Error> {
    let link = match std::fs::symlink_metadata(path) {
        Ok(meta) => meta,
        Err(e) if e.kind() == ErrorKind::NotFound => return nothing_at(path),
        Err(e) => return Err(Error::storage("look at the database path", e)),
    };
    let meta = if link.file_type().is_symlink() {
        match std::fs::metadata(path) {
            Ok(meta) => meta,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                let target = std::fs::read_link(path).unwrap_or_default();
                return Err(not_a_file(
                    path,
                    format!("a symbolic link to {}, which does not exist", target.display()),
                ));
            }
            Err(e) => return Err(Error::storage("follow the database path's link", e)),
        }
    } else {
        link
    };
    let kind = meta.file_type();
    if kind.is_file() {
        return Ok(if meta.len() == 0 { Found::Empty } else { Found::File });
    }
    Err(not_a_file(path, describe(&kind).to_owned()))
}

/// Nothing at `path`: fine if its directory exists.
fn nothing_at(path: &Path) -> Result<Found, Error> {
    let dir = match path.parent() {
        Some(dir) if !dir.as_os_str().is_empty() => dir,
        _ => Path::new("."),
    };
    match std::fs::metadata(dir) {
        Ok(meta) if meta.is_dir() => Ok(Found::Nothing),
        Ok(_) => Err(not_a_file(dir, "not a directory".into())),
        Err(e) if e.kind() == ErrorKind::NotFound => Err(Error::NotFound(dir.to_path_buf())),
        Err(e) => Err(Error::storage("look at the database directory", e)),
    }
}

fn not_a_file(path: &Path, kind: String) -> Error {
    Error::NotAFile { path: PathBuf::from(path), kind }
}

/// A file type in words.
fn describe(kind: &std::fs::FileType) -> &'static str {
    if kind.is_dir() {
        return "a directory";
    }
    #[cfg(unix)]
    {
        use std::os::unix::fs::FileTypeExt as _;
        if kind.is_fifo() {
            return "a FIFO";
        }
        if kind.is_socket() {
            return "a socket";
        }
        if kind.is_char_device() {
            return "a character device";
        }
        if kind.is_block_device() {
            return "a block device";
        }
    }
    "not a regular file"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_of_path_is_told_apart_without_opening_it() {
        let dir = tempfile::tempdir().expect("dir");
        let at = |name: &str| dir.path().join(name);
        assert_eq!(inspect(&at("none.db")).expect("nothing"), Found::Nothing);
        std::fs::write(at("empty.db"), b"").expect("empty");
        assert_eq!(inspect(&at("empty.db")).expect("empty"), Found::Empty);
        std::fs::write(at("full.db"), b"x").expect("full");
        assert_eq!(inspect(&at("full.db")).expect("file"), Found::File);
        let missing_dir = inspect(&at("no-such-dir/a.db"));
        assert!(matches!(missing_dir, Err(Error::NotFound(ref d)) if d.ends_with("no-such-dir")));
        let as_dir = inspect(dir.path());
        assert!(matches!(as_dir, Err(Error::NotAFile { ref kind, .. }) if kind == "a directory"));
        #[cfg(unix)]
        {
            std::os::unix::fs::symlink(at("full.db"), at("link.db")).expect("link");
            assert_eq!(inspect(&at("link.db")).expect("followed"), Found::File);
            std::os::unix::fs::symlink(at("gone.db"), at("dangling.db")).expect("link");
            let dangling = inspect(&at("dangling.db"));
            assert!(
                matches!(dangling, Err(Error::NotAFile { ref kind, .. }) if kind.contains("does not exist"))
            );
            let null = inspect(Path::new("/dev/null"));
            assert!(
                matches!(null, Err(Error::NotAFile { ref kind, .. }) if kind == "a character device")
            );
            std::os::unix::fs::symlink("/dev/zero", at("zero.db")).expect("link");
            let zero = inspect(&at("zero.db"));
            assert!(matches!(zero, Err(Error::NotAFile { .. })), "{zero:?}");
        }
    }
}
