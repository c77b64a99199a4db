//! Checkpoints: a thread's snapshot at a bookmark, so that restore never needs the whole log.
//!
//! Invariant: a checkpoint covers its thread's last bookmark as of the batch that saved it, so
//! `covers.seq` never exceeds the thread's last seq; restore = snapshot + events after `covers`.
//! The metadata ([`CheckpointInfo`]) and the snapshot bytes are stored as two records so listings
//! never read snapshots.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::{Bookmark, CheckpointId, ThreadId};
use crate::limits::{
    self, CUSTOM_FIELDS_MAX, LABEL_BYTES_MAX, SNAPSHOT_BYTES_MAX, TAG_BYTES_MAX,
    TAGS_PER_CHECKPOINT_MAX, TEXT_BYTES_MAX,
};
use crate::thread::WorkflowRef;
use crate::wire_enum::wire_enum;

wire_enum! {
    /// Why a checkpoint was taken. Discriminants are stored on disk: never reuse one.
    pub enum CheckpointKind: u8, from_u8 {
        /// On demand.
        Manual = 1 => "manual",
        /// Every N steps or T ms.
        Periodic = 2 => "periodic",
        /// After a chosen node.
        Node = 3 => "node",
        /// At a phase boundary.
        Phase = 4 => "phase",
        /// On failure.
        Failure = 5 => "failure",
        /// On completion.
        Completion = 6 => "completion",
    }
}

/// Who made a checkpoint and why, plus free-form fields.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointMeta {
    /// Who created it (a runner, a user).
    pub creator: String,
    /// A human description.
    pub description: String,
    /// Tags, indexed for listing.
    pub tags: Vec<String>,
    /// Free-form fields.
    pub custom: BTreeMap<String, String>,
}

impl CheckpointMeta {
    pub(crate) fn check_limits(&self) -> Result<(), Error> {
        limits::check("TEXT_BYTES_MAX", self.creator.len(), TEXT_BYTES_MAX)?;
        limits::check("TEXT_BYTES_MAX", self.description.len(), TEXT_BYTES_MAX)?;
        limits::check("TAGS_PER_CHECKPOINT_MAX", self.tags.len(), TAGS_PER_CHECKPOINT_MAX)?;
        for tag in &self.tags {
            limits::check("TAG_BYTES_MAX", tag.len(), TAG_BYTES_MAX)?;
        }
        limits::check("CUSTOM_FIELDS_MAX", self.custom.len(), CUSTOM_FIELDS_MAX)?;
        for (key, value) in &self.custom {
            limits::check("LABEL_BYTES_MAX", key.len(), LABEL_BYTES_MAX)?;
            limits::check("LABEL_BYTES_MAX", value.len(), LABEL_BYTES_MAX)?;
        }
        Ok(())
    }
}

/// A checkpoint to save; the store assigns its id and the bookmark it covers.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct NewCheckpoint {
    /// The thread it snapshots (must have at least one event).
    pub thread: ThreadId,
    /// The workflow version the snapshot belongs to.
    pub workflow: WorkflowRef,
    /// Why it was taken.
    pub kind: CheckpointKind,
    /// The engine's snapshot of the thread, opaque to storage.
    #[serde(with = "crate::bytes_serde")]
    pub snapshot: Vec<u8>,
    /// Who and why.
    pub meta: CheckpointMeta,
    /// Engine clock time, in ms.
    pub created_at_ms: u64,
}

impl NewCheckpoint {
    /// Checks this checkpoint against [`crate::limits`].
    ///
    /// # Errors
    ///
    /// [`Error::LimitExceeded`] naming the first bound exceeded.
    pub fn check_limits(&self) -> Result<(), Error> {
        self.workflow.check_limits()?;
        self.meta.check_limits()?;
        limits::check("SNAPSHOT_BYTES_MAX", self.snapshot.len(), SNAPSHOT_BYTES_MAX)
    }
}

/// A stored checkpoint with its snapshot.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Checkpoint {
    /// Its id.
    pub id: CheckpointId,
    /// The thread it snapshots.
    pub thread: ThreadId,
    /// The workflow version.
    pub workflow: WorkflowRef,
    /// The last event the snapshot includes.
    pub covers: Bookmark,
    /// Engine clock time, in ms.
    pub created_at_ms: u64,
    /// Why it was taken.
    pub kind: CheckpointKind,
    /// The snapshot bytes.
    #[serde(with = "crate::bytes_serde")]
    pub snapshot: Vec<u8>,
    /// Who and why.
    pub meta: CheckpointMeta,
}

impl Checkpoint {
    /// Its metadata without the snapshot (what a listing shows of it).
    pub fn info(&self) -> CheckpointInfo {
        CheckpointInfo {
            id: self.id,
            thread: self.thread.clone(),
            workflow: self.workflow.clone(),
            covers: self.covers,
            created_at_ms: self.created_at_ms,
            kind: self.kind,
            snapshot_len: self.snapshot.len() as u64,
            meta: self.meta.clone(),
        }
    }
}

/// A stored checkpoint without its snapshot (what listings return).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointInfo {
    /// Its id.
    pub id: CheckpointId,
    /// The thread it snapshots.
    pub thread: ThreadId,
    /// The workflow version.
    pub workflow: WorkflowRef,
    /// The last event the snapshot includes.
    pub covers: Bookmark,
    /// Engine clock time, in ms.
    pub created_at_ms: u64,
    /// Why it was taken.
    pub kind: CheckpointKind,
    /// Length of the snapshot in bytes.
    pub snapshot_len: u64,
    /// Who and why.
    pub meta: CheckpointMeta,
}

impl CheckpointInfo {
    /// Joins this metadata with its snapshot bytes.
    pub fn with_snapshot(self, snapshot: Vec<u8>) -> Checkpoint {
        Checkpoint {
            id: self.id,
            thread: self.thread,
            workflow: self.workflow,
            covers: self.covers,
            created_at_ms: self.created_at_ms,
            kind: self.kind,
            snapshot,
            meta: self.meta,
        }
    }
}
