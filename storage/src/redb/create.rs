//! Creating a database file so that a crash during creation never leaves a file at the target
//! path that Cairn would refuse.
//!
//! Creating in place (redb creates the file, then Cairn writes its meta table) has a window in
//! which the file exists at the target path but is not yet a Cairn database: a crash there leaves
//! a file that every later open refuses (`NotCairn`, or not even redb), and the user has to find
//! and delete it. Instead:
//!
//! 1. create `.<name>.creating-<pid>-<n>` in the same directory (same filesystem, so step 4 is a
//!    link, not a copy);
//! 2. let redb initialise it, write the meta table and every table in one durable commit (redb
//!    fsyncs), and close it; then `sync_all` the file (its length and metadata too);
//! 3. only now give it the target name: `hard_link` (which never replaces an existing file: if
//!    another process created the target meanwhile, we drop ours and judge theirs), or `rename`
//!    over a zero-length file the caller asked to initialise explicitly, or `rename` when the
//!    filesystem has no hard links and nothing (not even a link) is at the target;
//! 4. remove the temporary name, and fsync the directory so the new name is durable before the
//!    store acknowledges anything written to it.
//!
//! A crash before step 3 leaves only a `.creating` file (ignored, safe to delete); a crash after
//! it leaves the complete database at the target path (and at most a second name for it).

use std::fs::{File, OpenOptions};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use ::redb::StorageBackend;
use ::redb::backends::FileBackend;

use super::guard::guard;
use super::{Options, initialise, open_error};
use crate::error::Error;

/// The marker in the names of files being created.
pub(crate) const CREATING_MARKER: &str = ".creating-";

/// What was at the target path when creation began.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Target {
    /// Nothing: the new file is linked in without replacing anything.
    Absent,
    /// A zero-length file (holds nothing) the caller asked to initialise explicitly
    /// ([`super::RedbStore::initialise`]): the new file replaces it.
    Empty,
}

/// Creates a complete, durable Cairn database at `path` (see the module doc). Returns once the
/// target name is durable; the caller then opens it like any existing file. If another process
/// put a file at `path` meanwhile, that file is left alone and `Ok` is returned: the caller's
/// open then judges it.
///
/// # Errors
///
/// I/O errors ([`Error::DiskFull`] among them) and redb's errors; no file is left at `path` and
/// the temporary file is removed.
pub(crate) fn create_file(path: &Path, options: &Options, target: Target) -> Result<(), Error> {
    create_file_with(path, options, target, |file| {
        FileBackend::new(file).map_err(|e| Error::storage("open new database file", e))
    })
}

/// [`create_file`] with the redb backend for the temporary file made by `backend` (tests wrap the
/// file to inject failures).
pub(crate) fn create_file_with<B: StorageBackend>(
    path: &Path,
    options: &Options,
    target: Target,
    backend: impl FnOnce(File) -> Result<B, Error>,
) -> Result<(), Error> {
    let (temp, file) = create_temp(path)?;
    let built = build(&temp, file, options, backend).and_then(|()| link(&temp, path, target));
    // The temporary name goes whether creation succeeded (the target name now holds the file) or
    // failed (nothing may be left behind).
    let removed = std::fs::remove_file(&temp);
    built?;
    if let Err(error) = removed {
        tracing::warn!(%error, temp = %temp.display(), "could not remove the temporary name");
    }
    sync_dir(path)
}

/// Creates the temporary file next to `path` (never an existing one).
fn create_temp(path: &Path) -> Result<(PathBuf, File), Error> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let name = path.file_name().ok_or_else(|| Error::Invalid {
        detail: format!("{} does not name a file", path.display()),
    })?;
    let name = name.to_string_lossy();
    let pid = std::process::id();
    loop {
        let n = COUNTER.fetch_add(1, Ordering::Relaxed);
        let temp = path.with_file_name(format!(".{name}{CREATING_MARKER}{pid}-{n}"));
        match OpenOptions::new().read(true).write(true).create_new(true).open(&temp) {
            Ok(file) => return Ok((temp, file)),
            // Left by an earlier process with the same pid: pick the next name.
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(Error::storage("create temporary database file", e)),
        }
    }
}

/// Initialises the database in `file` durably and closes it.
fn build<B: StorageBackend>(
    temp: &Path,
    file: File,
    options: &Options,
    backend: impl FnOnce(File) -> Result<B, Error>,
) -> Result<(), Error> {
    let backend = backend(file)?;
    guard("create", || {
        let db = options.builder().create_with_backend(backend).map_err(open_error)?;
        initialise(&db)?;
        db.close().map_err(|e| Error::storage("close new database", e))
    })?;
    // redb's durable commit synced the data; this also syncs the length and the metadata.
    File::open(temp)
        .and_then(|file| file.sync_all())
        .map_err(|e| Error::storage("sync new database file", e))
}

/// Gives the complete temporary file the target name.
fn link(temp: &Path, path: &Path, target: Target) -> Result<(), Error> {
    if target == Target::Empty {
        return std::fs::rename(temp, path).map_err(|e| Error::storage("rename into place", e));
    }
    match std::fs::hard_link(temp, path) {
        Ok(()) => Ok(()),
        // Another process created it meanwhile: keep theirs (the caller's open judges it).
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => Ok(()),
        // No hard links on this filesystem: rename, unless the target appeared meanwhile (the
        // check and the rename are not atomic together; such filesystems leave no better way).
        // (`symlink_metadata`: a link, even one to nothing, is something, and never replaced.)
        Err(_) if std::fs::symlink_metadata(path).is_err() => {
            std::fs::rename(temp, path).map_err(|e| Error::storage("rename into place", e))
        }
        Err(_) => Ok(()),
    }
}

/// Makes the new directory entry durable.
fn sync_dir(path: &Path) -> Result<(), Error> {
    #[cfg(unix)]
    {
        let dir = match path.parent() {
            Some(dir) if !dir.as_os_str().is_empty() => dir,
            _ => Path::new("."),
        };
        File::open(dir)
            .and_then(|dir| dir.sync_all())
            .map_err(|e| Error::storage("sync database directory", e))?;
    }
    // Elsewhere the rename or link is made durable by the filesystem's own journal; there is no
    // portable way to fsync a directory.
    #[cfg(not(unix))]
    let _ = path;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::redb::RedbStore;
    use crate::store::Maintenance;

    fn names(dir: &Path) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(dir)
            .expect("list")
            .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
            .collect();
        names.sort();
        names
    }

    #[test]
    fn a_new_database_appears_complete_under_its_name_with_no_temporary_left() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("cairn.db");
        create_file(&path, &Options::default(), Target::Absent).expect("create");
        assert_eq!(names(dir.path()), ["cairn.db"]);
        let store = RedbStore::open_existing(&path, Options::default()).expect("a Cairn database");
        assert!(store.verify().expect("verify").is_clean());
        store.close().expect("close");
    }

    #[test]
    fn an_empty_file_is_replaced_and_an_existing_database_is_never_replaced() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("cairn.db");
        std::fs::write(&path, b"").expect("empty file");
        create_file(&path, &Options::default(), Target::Empty).expect("create over empty");
        let first = std::fs::read(&path).expect("read");
        assert!(!first.is_empty());
        // Someone else created it between our check and our link: theirs stays.
        create_file(&path, &Options::default(), Target::Absent).expect("create raced");
        assert_eq!(std::fs::read(&path).expect("read"), first, "the existing file is untouched");
        assert_eq!(names(dir.path()), ["cairn.db"]);
    }

    /// A file backend that fails `sync_data`, as a full or failing disk does.
    #[derive(Debug)]
    struct FailingSync(FileBackend);

    impl StorageBackend for FailingSync {
        fn len(&self) -> io::Result<u64> {
            self.0.len()
        }
        fn read(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
            self.0.read(offset, out)
        }
        fn set_len(&self, len: u64) -> io::Result<()> {
            self.0.set_len(len)
        }
        fn sync_data(&self) -> io::Result<()> {
            Err(io::Error::from(io::ErrorKind::StorageFull))
        }
        fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
            self.0.write(offset, data)
        }
    }

    #[test]
    fn a_failed_creation_leaves_nothing_behind() {
        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("cairn.db");
        let result = create_file_with(&path, &Options::default(), Target::Absent, |file| {
            Ok(FailingSync(FileBackend::new(file).map_err(|e| Error::storage("backend", e))?))
        });
        assert!(matches!(result, Err(Error::DiskFull { .. })), "{result:?}");
        assert!(names(dir.path()).is_empty(), "no target, no temporary: {:?}", names(dir.path()));
        // A later open creates the database afresh.
        let store = RedbStore::open(&path, Options::default()).expect("open creates");
        store.close().expect("close");
    }

    /// Power loss at every op of creation, on the fault-injection disk: creation never reports
    /// success (so never links the file into place) unless the durable image is already a
    /// complete Cairn database.
    #[test]
    fn a_crash_at_any_op_of_creation_never_puts_a_partial_file_in_place() {
        use cairn_storage_testkit::fault::{CrashModel, Fault, FaultBackend};

        let dir = tempfile::tempdir().expect("dir");
        let path = dir.path().join("cairn.db");
        // A clean run: count the ops; its durable image at link time is a complete database.
        let clean = FaultBackend::new();
        let counter = clean.controller();
        create_file_with(&path, &Options::default(), Target::Absent, |_| Ok(clean))
            .expect("clean creation");
        let ops = counter.mutations();
        assert!(ops > 2, "creation writes and syncs");
        let image = FaultBackend::from_image(counter.durable_image());
        let store = RedbStore::with_backend(image, Options::default()).expect("complete");
        assert!(store.verify().expect("verify").is_clean());
        store.close().expect("close");
        std::fs::remove_file(&path).expect("remove");

        for op in 0..ops {
            for model in [CrashModel::LoseUnsynced, CrashModel::TornWrite, CrashModel::Kill] {
                let backend = FaultBackend::new();
                let controller = backend.controller();
                controller.arm(Fault::at(op, model).with_seed(op));
                let result =
                    create_file_with(&path, &Options::default(), Target::Absent, |_| Ok(backend));
                assert!(result.is_err(), "{model} at op {op}: creation reported success");
                assert!(names(dir.path()).is_empty(), "{model} at op {op}: a file was left");
            }
        }
    }
}
