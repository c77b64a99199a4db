//! Cairn's durable record: a CRC-checked, bookmarked event log with checkpoints, on redb.
//!
//! This crate owns everything Cairn stores: events (the append-only log of each thread),
//! thread records, checkpoints (snapshots that bound restore cost), content-addressed payloads,
//! and named resource locks. The engine talks to it through the [`Store`] trait, whose
//! signatures contain no redb types; [`RedbStore`] is the embedded default.
//!
//! # Invariants
//!
//! - Per thread, `seq` starts at 1 and has no gaps; `lsn` is store-wide and strictly increasing.
//!   The writer asserts both (only a bug can break them).
//! - A [`Batch`] is applied all-or-nothing in one commit; a rejected batch changes nothing.
//! - Every stored record is framed ([`frame`]) with a CRC over header and body, and carries its
//!   own key (thread, seq, lsn, id). Every read checks the CRC, the kind, the length and that the
//!   key agrees with the record; a failure is [`Error::Corrupted`] naming the table, thread and
//!   seq. Corrupt records are never skipped and never returned as data.
//! - Under [`Durability::Immediate`] (the default) a write is acknowledged only after a durable
//!   commit. After a failed commit the store is [poisoned](Error::Poisoned), naming the failure,
//!   until its database is reopened, which a [`RedbStore`] under `Immediate` does by itself once
//!   the cause clears.
//! - Untrusted bytes (anything read from disk) become errors, never panics. That includes redb's
//!   own structures: redb 4.5 panics on some damaged pages, so every call into redb runs inside a
//!   guard that turns a panic into [`Error::Corrupted`] with table `"redb"`; a panic during a
//!   commit poisons the store like a failed commit. The guard installs a panic hook once per
//!   process that wraps the previous hook and only silences panics it turns into errors (they are
//!   logged through `tracing` instead).
//!
//! The byte layout, the durability contract and the recovery decision table are in
//! `docs/format.md`.
//!
//! # Examples
//!
//! ```
//! use cairn_storage::*;
//! # fn main() -> Result<(), Error> {
//! let dir = tempfile::tempdir().expect("temp dir");
//! let store = RedbStore::open(dir.path().join("cairn.db"), Options::default())?;
//! let thread = ThreadId::new("t1")?;
//! let workflow = WorkflowRef { id: "demo".into(), version: 1, fingerprint: "f".into() };
//! let batch = Batch {
//!     threads: vec![ThreadRecord::new(thread.clone(), workflow, 0)],
//!     events: vec![NewEvent {
//!         thread: thread.clone(),
//!         kind: EventKind::ThreadCreated,
//!         node: None,
//!         status: EventStatus::Info,
//!         summary: "created".into(),
//!         payload: None,
//!         data: Vec::new(),
//!         at_ms: 0,
//!         correlation: None,
//!     }],
//!     ..Batch::default()
//! };
//! let appended = store.append(batch)?.wait_blocking()?;
//! assert_eq!(appended.bookmarks[0].seq, Seq(1));
//! assert_eq!(store.read_since(&thread, Seq(0), 10).wait()?.len(), 1);
//! store.close()?;
//! # Ok(())
//! # }
//! ```

mod wire_enum;

mod batch;
mod bytes_serde;
mod checkpoint;
mod clock;
pub mod codec;
pub mod copy;
mod correlation;
mod delete;
mod error;
mod event;
mod event_batch;
pub mod frame;
mod ids;
mod intent;
pub mod limits;
mod lock;
pub mod lsns;
mod os_error;
mod pending;
#[cfg(feature = "postgres")]
mod pg;
mod plan;
mod plan_queue;
mod queue;
mod queue_fair;
mod queue_verify;
mod queue_wire;
mod reading;
mod redb;
mod request;
mod signal;
mod store;
mod subscription;
pub mod telemetry;
mod thread;

pub use batch::{Appended, Batch, Guard, LeaseOp, LockOp, Pruned, RunnerOps, Wake};
pub use checkpoint::{Checkpoint, CheckpointInfo, CheckpointKind, CheckpointMeta, NewCheckpoint};
pub use clock::{Clock, ManualClock, SystemClock};
pub use correlation::{CorrelationEntry, CorrelationQuery};
pub use delete::{DeleteOptions, Deleted};
pub use error::Error;
pub use event::{Event, EventKind, EventStatus, NewEvent};
pub use ids::{Bookmark, CheckpointId, Lsn, PayloadRef, Seq, ThreadId};
pub use intent::{WriteIntent, WriteIntents};
pub use lock::LockRecord;
pub use lsns::SeqChunk;
pub use pending::Pending;
#[cfg(feature = "postgres")]
pub use pg::{PG_FORMAT_VERSION, PgStore};
pub use queue::{
    Batching, Debounced, Enqueue, FairState, Fairness, KeyCounts, QueueLimits, QueueMember,
    QueueOp, QueueState, RateLimit, check_name as check_queue_name,
};
pub use reading::{OnBlock, Reading};
pub use redb::{FORMAT_VERSION, Options, READERS_WAIT_MS, RedbStore};
pub use signal::{NewSignal, Signal};
pub use store::{
    Append, Backend, Catalog, CheckpointFilter, Decorates, DriverMessage, DueThread, Durability,
    ForwardAppend, ForwardCatalog, ForwardLog, ForwardMaintenance, Maintenance, Page, Problem,
    Scope, SharedDatabase, Store, StoreExt, ThreadFilter, ThreadLog, VerifyReport,
};
pub use subscription::Subscription;
pub use thread::{Lease, ThreadRecord, ThreadStatus, WorkflowRef};
