//! Read-only snapshots of a database another process may be writing, and the "nothing written"
//! check before a writable open.
//!
//! redb's default (exclusive-writer) mode locks the file against every other handle, so a second
//! process cannot open it through redb while the engine runs. Instead we copy the file into
//! memory and open the copy:
//!
//! 1. read the header page, then the whole file, then the header page again;
//! 2. if the header changed during the copy (a durable commit landed), retry;
//! 3. open the copy with redb on a private in-memory backend. The live writer's file is marked
//!    "recovery required", so redb repairs the copy in memory, verifying the checksums of every
//!    page reachable from the newest commit slot (falling back to the previous slot);
//! 4. check the Cairn meta table. Any failure of 3 or 4 other than "not Cairn" / "newer format"
//!    is retried, up to [`SNAPSHOT_ATTEMPTS_MAX`] times. If some copy was torn by a commit (step
//!    2), the end is [`Error::SnapshotUnstable`] (try again); if none was, every attempt read
//!    the same durable commit and it does not open: [`Error::Corrupted`] (damage, which trying
//!    again cannot mend).
//!
//! Guarantee: the snapshot is the database as of its last durable commit before the copy ended
//! (redb writes a commit's pages before its header, and never reuses a page of the latest durable
//! commit until a newer durable commit's header is written, which step 2 detects). Commits that
//! are not yet durable (`Durability::Periodic` / `None`) are not visible. Every record read from
//! the snapshot is still CRC-checked, as in the live store. The snapshot does not follow later
//! commits, holds no lock on the file, and costs memory equal to the file's size.

use std::fs::File;
use std::io::{Read, Seek, SeekFrom};
use std::path::Path;
use std::sync::RwLock;

use ::redb::{Builder, Database, DatabaseError};

use super::Options;
use super::guard::guard;
use super::tables::{MetaState, REDB_MAGIC, check_meta};
use crate::error::Error;
use crate::limits::SNAPSHOT_ATTEMPTS_MAX;

/// Bytes re-read to detect a commit during the copy: redb's header, with room to spare.
const HEADER_PROBE_BYTES: usize = 4096;

/// Opens an in-memory snapshot of the database file at `path`; see the module doc.
pub(crate) fn open(path: &Path) -> Result<Database, Error> {
    super::path::existing(path)?;
    let mut last_failure = String::new();
    // Whether any copy was torn by a commit landing during it. If none was, every attempt read
    // the same last durable commit and redb could not open it: the file is damaged, and trying
    // again cannot help.
    let mut torn = false;
    for attempt in 1..=SNAPSHOT_ATTEMPTS_MAX {
        let Some(image) = copy_stable(path)? else {
            last_failure = "the file header changed during the copy".into();
            torn = true;
            continue;
        };
        if !image.starts_with(&REDB_MAGIC) {
            return Err(Error::NotCairn { detail: "no redb header".into() });
        }
        // A torn copy can hold pages redb panics on: guarded, and retried like any torn copy.
        let opened = guard("open snapshot", || {
            Ok(Builder::new().create_with_backend(ImageBackend(RwLock::new(image))))
        });
        let db = match opened {
            Ok(Ok(db)) => db,
            Ok(Err(DatabaseError::UpgradeRequired(version))) => {
                return Err(Error::NotCairn {
                    detail: format!("a redb file of format {version}, older than Cairn's"),
                });
            }
            Ok(Err(error)) => {
                last_failure = format!("attempt {attempt}: {error}");
                continue;
            }
            Err(error) => {
                last_failure = format!("attempt {attempt}: {error}");
                continue;
            }
        };
        match guard("open snapshot", || check_meta(&db)) {
            Ok(MetaState::Cairn(_, version)) => {
                // An older file is migrated in this private copy (the file is untouched).
                super::migrate::upgrade(&db, version, "migrate snapshot")?;
                return Ok(db);
            }
            Ok(MetaState::Empty) => {
                return Err(Error::NotCairn { detail: "an empty redb database".into() });
            }
            Err(error @ (Error::NotCairn { .. } | Error::NewerFormat { .. })) => return Err(error),
            Err(error) => last_failure = format!("attempt {attempt}: {error}"),
        }
    }
    if torn {
        return Err(Error::SnapshotUnstable {
            attempts: SNAPSHOT_ATTEMPTS_MAX,
            detail: last_failure,
        });
    }
    Err(Error::corrupted(
        crate::codec::table::REDB,
        format!("the file does not open as a database ({last_failure})"),
    ))
}

/// Refuses a non-empty file that is not a Cairn database this build can open, without writing to
/// it (redb's writable open writes the header even when the data is then refused).
pub(crate) fn precheck(path: &Path, options: &Options) -> Result<(), Error> {
    let mut head = [0u8; REDB_MAGIC.len()];
    let mut file = File::open(path).map_err(|e| open_file_error(path, e))?;
    if file.read_exact(&mut head).is_err() || head != REDB_MAGIC {
        return Err(Error::NotCairn { detail: "no redb header".into() });
    }
    drop(file);
    match options.builder().open_read_only(path) {
        Ok(db) => match check_meta(&db)? {
            MetaState::Cairn(..) => Ok(()),
            MetaState::Empty => Err(Error::NotCairn { detail: "an empty redb database".into() }),
        },
        Err(DatabaseError::DatabaseAlreadyOpen | DatabaseError::LockProtocolMismatch) => {
            Err(Error::Locked)
        }
        Err(DatabaseError::UpgradeRequired(version)) => Err(Error::NotCairn {
            detail: format!("a redb file of format {version}, older than Cairn's"),
        }),
        // Not shut down cleanly: a read-only open would need the repair it may not run. Check a
        // private copy instead (the writable open then repairs the file itself).
        Err(DatabaseError::RepairAborted) => open(path).map(drop),
        Err(error) => Err(Error::storage("open database read-only", error)),
    }
}

/// Copies the file if its header did not change during the copy; `None` if it did.
///
/// Reads the header first and refuses a file without redb's magic before reading the rest; then
/// reads at most the length the file has now (a file that grows meanwhile changed its header,
/// which the second look catches).
fn copy_stable(path: &Path) -> Result<Option<Vec<u8>>, Error> {
    let read_err = |e| Error::storage("copy database file", e);
    let mut file = File::open(path).map_err(|e| open_file_error(path, e))?;
    let before = read_head(&mut file).map_err(read_err)?;
    if !before.starts_with(&REDB_MAGIC) {
        return Err(Error::NotCairn { detail: "no redb header".into() });
    }
    let len = file.metadata().map_err(read_err)?.len();
    file.seek(SeekFrom::Start(0)).map_err(read_err)?;
    let mut image = Vec::with_capacity(usize::try_from(len).unwrap_or(0));
    (&mut file).take(len).read_to_end(&mut image).map_err(read_err)?;
    let after = read_head(&mut file).map_err(read_err)?;
    let stable = before == after && image.get(..before.len()) == Some(before.as_slice());
    Ok(stable.then_some(image))
}

fn read_head(file: &mut File) -> std::io::Result<Vec<u8>> {
    file.seek(SeekFrom::Start(0))?;
    let mut head = Vec::with_capacity(HEADER_PROBE_BYTES);
    file.take(HEADER_PROBE_BYTES as u64).read_to_end(&mut head)?;
    Ok(head)
}

fn open_file_error(path: &Path, error: std::io::Error) -> Error {
    if error.kind() == std::io::ErrorKind::NotFound {
        Error::NotFound(path.to_path_buf())
    } else {
        Error::storage("open database file", error)
    }
}

/// A private in-memory copy of a database file; redb's repair writes go here, never to disk.
#[derive(Debug)]
struct ImageBackend(RwLock<Vec<u8>>);

fn poisoned() -> std::io::Error {
    std::io::Error::other("snapshot image lock poisoned")
}

fn out_of_range() -> std::io::Error {
    std::io::Error::new(std::io::ErrorKind::InvalidInput, "read or write past the image end")
}

impl ::redb::StorageBackend for ImageBackend {
    fn len(&self) -> std::io::Result<u64> {
        Ok(self.0.read().map_err(|_| poisoned())?.len() as u64)
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> std::io::Result<()> {
        let image = self.0.read().map_err(|_| poisoned())?;
        let start = usize::try_from(offset).map_err(|_| out_of_range())?;
        let end = start.checked_add(out.len()).ok_or_else(out_of_range)?;
        out.copy_from_slice(image.get(start..end).ok_or_else(out_of_range)?);
        Ok(())
    }

    fn set_len(&self, len: u64) -> std::io::Result<()> {
        let len = usize::try_from(len).map_err(|_| out_of_range())?;
        self.0.write().map_err(|_| poisoned())?.resize(len, 0);
        Ok(())
    }

    fn sync_data(&self) -> std::io::Result<()> {
        Ok(())
    }

    fn write(&self, offset: u64, data: &[u8]) -> std::io::Result<()> {
        let mut image = self.0.write().map_err(|_| poisoned())?;
        let start = usize::try_from(offset).map_err(|_| out_of_range())?;
        let end = start.checked_add(data.len()).ok_or_else(out_of_range)?;
        image.get_mut(start..end).ok_or_else(out_of_range)?.copy_from_slice(data);
        Ok(())
    }
}
