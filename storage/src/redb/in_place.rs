//! Opening a database file read-only where it is, without copying it: redb's
//! [`ReadOnlyDatabase`], which reads pages from the file as they are needed (memory does not grow
//! with the file) and holds a shared lock on it while open.
//!
//! redb refuses such an open while a process holds the file for writing (its exclusive lock):
//! that is [`Error::Locked`], said before a byte of the data is read. Two cases redb cannot read
//! in place, and which are read as a snapshot copy instead (`snapshot.rs`, memory = the file's
//! size): a file not shut down cleanly (a crashed engine: redb would have to repair it, which a
//! read-only open may not do), and a file of an older Cairn format (its correlation index is
//! built in the private copy, as `RedbStore::open_read_only` does). A file that is not redb's,
//! empty or of a newer format is refused as by every other open.

use std::fs::File;
use std::io::Read as _;
use std::path::Path;

use ::redb::{Builder, Database, DatabaseError, ReadOnlyDatabase};

use super::guard::guard;
use super::tables::{MetaState, REDB_MAGIC, check_meta};
use crate::error::Error;

/// A read-only database: the file opened in place, or a snapshot copy of it.
pub(crate) enum Opened {
    /// The file itself, read-only.
    InPlace(ReadOnlyDatabase),
    /// A private copy in memory (the file needs repair or migration).
    Copy(Database),
}

/// Opens `path` read-only in place; see the module doc.
pub(crate) fn open(path: &Path, cache_bytes: usize) -> Result<Opened, Error> {
    super::path::existing(path)?;
    let mut head = [0u8; REDB_MAGIC.len()];
    let mut file = File::open(path).map_err(|e| open_file_error(path, e))?;
    if file.read_exact(&mut head).is_err() || head != REDB_MAGIC {
        return Err(Error::NotCairn { detail: "no redb header".into() });
    }
    drop(file);
    let mut builder = Builder::new();
    builder.set_cache_size(cache_bytes);
    // A damaged page can make redb panic: guarded, and judged by the snapshot path below.
    let opened = guard("open read-only", || Ok(builder.open_read_only(path)));
    let db = match opened {
        Ok(Ok(db)) => db,
        Ok(Err(DatabaseError::DatabaseAlreadyOpen | DatabaseError::LockProtocolMismatch)) => {
            return Err(Error::Locked);
        }
        Ok(Err(DatabaseError::UpgradeRequired(version))) => {
            return Err(Error::NotCairn {
                detail: format!("a redb file of format {version}, older than Cairn's"),
            });
        }
        // Needs repair (not shut down cleanly), or does not open: the snapshot path copies it,
        // lets redb repair the copy, and says what is wrong if that fails too.
        Ok(Err(e)) => return copy(path, &e.to_string()),
        Err(e) => return copy(path, &e.to_string()),
    };
    match guard("open read-only", || check_meta(&db)) {
        Ok(MetaState::Cairn(_, version)) if version >= super::FORMAT_VERSION => {
            Ok(Opened::InPlace(db))
        }
        Ok(MetaState::Empty) => Err(Error::NotCairn { detail: "an empty redb database".into() }),
        Err(error @ (Error::NotCairn { .. } | Error::NewerFormat { .. })) => Err(error),
        // An older format (migrated in a private copy), or a meta table that does not read
        // (judged by the snapshot path): the lock is released first.
        Ok(MetaState::Cairn(_, version)) => {
            drop(db);
            copy(path, &format!("format version {version}, migrated in the copy"))
        }
        Err(e) => {
            drop(db);
            copy(path, &e.to_string())
        }
    }
}

/// Whether a process (or another handle in this one) holds `path` for writing, when an open for
/// writing was refused as locked: a read-only open shares the file's lock with readers in place
/// and is refused only by a writer's. Any other outcome of that open (it succeeds, or fails for
/// another reason than the lock) means no writer holds the file: what refused the open was
/// readers' shared lock, which they let go when their read is done.
pub(crate) fn held_for_writing(path: &Path) -> bool {
    let opened = guard("open read-only", || Ok(Builder::new().open_read_only(path)));
    matches!(
        opened,
        Ok(Err(DatabaseError::DatabaseAlreadyOpen | DatabaseError::LockProtocolMismatch))
    )
}

/// The snapshot path, said in the log (memory then grows with the file: a reader wondering why
/// finds out with `CAIRN_LOG=cairn_storage=info`).
fn copy(path: &Path, why: &str) -> Result<Opened, Error> {
    let bytes = std::fs::metadata(path).map_or(0, |m| m.len());
    tracing::info!(path = %path.display(), bytes, why, "reading a snapshot copy of the file in memory");
    super::snapshot::open(path).map(Opened::Copy)
}

fn open_file_error(path: &Path, error: std::io::Error) -> Error {
    match error.kind() {
        std::io::ErrorKind::NotFound => Error::NotFound(path.to_path_buf()),
        std::io::ErrorKind::PermissionDenied => {
            Error::PermissionDenied { op: "open the database file read-only" }
        }
        _ => Error::storage("open database file", error),
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use crate::error::Error;
    use crate::redb::{Options, READERS_WAIT_MS, RedbStore};

    /// A reader in place holds the file's shared lock: an open for writing waits for it to let
    /// go and opens; a file held for writing is refused at once, without that wait.
    #[test]
    fn a_writer_waits_for_readers_and_not_for_a_writer() {
        let dir = tempfile::tempdir().expect("temp dir");
        let path = dir.path().join("cairn.db");
        RedbStore::open(&path, Options::default()).expect("create").close().expect("close");
        let reader = RedbStore::open_read_only_in_place(&path).expect("in place");
        assert!(!RedbStore::held_for_writing(&path), "readers only");
        let released = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            drop(reader);
        });
        let started = Instant::now();
        let writer = RedbStore::open(&path, Options::default()).expect("opened once read");
        assert!(started.elapsed() >= Duration::from_millis(250), "{:?}", started.elapsed());
        released.join().expect("reader thread");
        assert!(RedbStore::held_for_writing(&path));

        let started = Instant::now();
        let refused = RedbStore::open(&path, Options::default());
        assert!(matches!(refused, Err(Error::Locked)), "{:?}", refused.err());
        assert!(
            started.elapsed() < Duration::from_millis(READERS_WAIT_MS / 2),
            "a writer's lock is not waited for: {:?}",
            started.elapsed()
        );
        writer.close().expect("close");
    }
}
