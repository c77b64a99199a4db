//! The OS error inside redb's error types, which do not chain it through `source()`: the one
//! place that knows their shapes, so [`Error::storage`](crate::Error) can tell a full disk from
//! other I/O errors. Beneath [`crate::error`] (it names only redb's and the OS's types), so
//! that the error type does not reach up into the redb backend.

use std::any::Any;
use std::io;

use ::redb::{
    CommitError, DatabaseError, Error as RedbError, StorageError, TableError, TransactionError,
};

/// The `io::Error` an error from redb (or the OS directly) carries, if any.
pub(crate) fn io_cause<'e>(error: &'e (dyn Any + 'static)) -> Option<&'e io::Error> {
    fn storage(error: &StorageError) -> Option<&io::Error> {
        match error {
            StorageError::Io(io) => Some(io),
            _ => None,
        }
    }
    if let Some(io) = error.downcast_ref::<io::Error>() {
        return Some(io);
    }
    if let Some(error) = error.downcast_ref::<StorageError>() {
        return storage(error);
    }
    if let Some(DatabaseError::Storage(error)) = error.downcast_ref::<DatabaseError>() {
        return storage(error);
    }
    if let Some(CommitError::Storage(error)) = error.downcast_ref::<CommitError>() {
        return storage(error);
    }
    if let Some(TransactionError::Storage(error)) = error.downcast_ref::<TransactionError>() {
        return storage(error);
    }
    if let Some(TableError::Storage(error)) = error.downcast_ref::<TableError>() {
        return storage(error);
    }
    if let Some(RedbError::Io(io)) = error.downcast_ref::<RedbError>() {
        return Some(io);
    }
    None
}
