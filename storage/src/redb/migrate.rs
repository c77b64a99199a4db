//! The migrations of an older file, in order: each takes the file one format version up in its
//! own transaction, so a crash between two leaves a file the next open takes on from there.
//! Run at a writable open (`mod.rs`) and in the private copy of a read-only open
//! (`snapshot.rs`).

use ::redb::Database;

use super::guard::guard;
use crate::Error;

/// Takes `db`, of format `version`, to the current format (`super::FORMAT_VERSION`).
///
/// # Errors
/// Storage errors, a panic in redb (as [`guard`] reports it); the migration under way is not
/// committed.
pub(crate) fn upgrade(db: &Database, version: u16, op: &'static str) -> Result<(), Error> {
    if version < 2 {
        guard(op, || super::correlations::migrate(db))?;
    }
    if version < 3 {
        guard(op, || super::signals::migrate(db))?;
    }
    if version < 4 {
        guard(op, || super::queues::migrate(db))?;
    }
    if version < 5 {
        guard(op, || super::thread_index::migrate(db))?;
    }
    Ok(())
}
