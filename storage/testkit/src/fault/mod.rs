//! Fault injection beneath redb: a simulated disk that can crash, tear, scramble and fail.
//!
//! Used by `cairn-storage`'s crash and bit-flip tests and by `cairn-testkit`. Nothing here is
//! used in production.
//!
//! [`FaultBackend`] implements `redb::StorageBackend` over two in-memory images, *live* (the OS
//! page cache: what reads see) and *durable* (what survives a power loss: the live image as of the
//! last successful `sync_data`). A test opens a store on it with `RedbStore::with_backend`,
//! counts the ops of a clean run, then re-runs and arms a [`Fault`] at op *n* with a
//! [`CrashModel`] through the [`FaultController`]. When the fault fires, the store above sees an
//! I/O error (it must not acknowledge anything the durable image lacks), and
//! [`FaultController::crash_image`] gives the bytes the disk would hold. The test reopens with
//! [`FaultBackend::from_image`] and checks what survived; arming the new backend's controller
//! before the reopen simulates a second crash during recovery.
//!
//! # Examples
//!
//! Power loss at the first op of an append's commit: the append is not acknowledged, and the
//! reopened store has everything that was.
//!
//! ```
//! use cairn_storage_testkit::fault::{CrashModel, Fault, FaultBackend};
//! use cairn_storage::{Append, Batch, Catalog, Maintenance, Options, RedbStore, ThreadId};
//! use cairn_storage::{ThreadRecord, WorkflowRef};
//!
//! let backend = FaultBackend::new();
//! let controller = backend.controller();
//! let store = RedbStore::with_backend(backend, Options::default())?;
//! let workflow = WorkflowRef { id: "w".into(), version: 1, fingerprint: "f".into() };
//! let thread = ThreadRecord::new(ThreadId::new("t1")?, workflow, 0);
//! store.append(Batch { threads: vec![thread.clone()], ..Batch::default() })?.wait_blocking()?;
//!
//! controller.arm(Fault::at(controller.mutations(), CrashModel::LoseUnsynced));
//! let mut renamed = thread.clone();
//! renamed.labels.insert("k".into(), "v".into());
//! let lost = store.append(Batch { threads: vec![renamed], ..Batch::default() });
//! assert!(lost.and_then(|pending| pending.wait_blocking()).is_err());
//! drop(store);
//!
//! let reopened = RedbStore::with_backend(
//!     FaultBackend::from_image(controller.crash_image()),
//!     Options::default(),
//! )?;
//! let found = reopened.thread(&thread.id).wait()?.expect("acknowledged, so it survived");
//! assert!(found.labels.is_empty(), "the unacknowledged upsert is wholly absent");
//! assert!(reopened.verify()?.is_clean());
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```
//!
//! Invariants:
//! - Deterministic: the same op sequence, fault and seed give the same image, byte for byte.
//! - Bytes never written since the last sync keep their durable value under every model
//!   (powersafe overwrite); each model's exact effect is documented on [`CrashModel`].
//! - A fault fires at most once; a killing model leaves the backend dead (every later op fails),
//!   so nothing issued after a crash can leak into the crash image.

mod backend;
mod disk;
mod model;

pub use backend::{FaultBackend, FaultController};
pub use model::{CrashModel, Fault, Fired, OpKind, SECTOR_SIZE, Trigger};

#[cfg(test)]
mod tests;
