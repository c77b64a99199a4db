//! Reset ([`Engine::reset`], `docs/batches.md`): end a thread's run and go on in a new thread
//! from an earlier point of its history, the point a [`ResetPoint`] names.
//!
//! A reset is a fork (`admin::start_fork`: a new thread whose `thread_created` event names the
//! origin and seq, starting from the origin's context there) followed by a cancel of the
//! original with the reason `reset to <fork id>`. The two are separate writes, and a crash may
//! fall between them; the fork's id is derived from the original's id and the reset's key
//! ([`reset_thread_id`]), and a fork's creation refuses an id that exists, so a reset retried
//! under the same key finds its fork (its record names the original as its parent) and only
//! ends the original if that is still to do: never a second fork.

use std::fmt;
use std::str::FromStr;

use cairn_storage::{CheckpointKind, Seq, ThreadId, ThreadRecord};
use serde::{Deserialize, Serialize};

use super::admin::{self, Fork};
use super::engine::Engine;
use super::handle::ThreadHandle;
use crate::config::RecoveryPolicy;
use crate::core::event::ForkOrigin;
use crate::error::Error;

/// Where a reset's new thread starts in the original's history.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
#[non_exhaustive]
pub enum ResetPoint {
    /// The start: the new thread runs from the original's input (after its `thread_created`
    /// event, seq 1).
    Start,
    /// The latest checkpoint taken while the thread went on (a completion or failure
    /// checkpoint does not count: it holds the end, not a point to go on from).
    #[serde(rename = "checkpoint")]
    LatestCheckpoint,
    /// Just after the event at this seq (as a fork there: a seq inside a step starts at that
    /// step's beginning).
    Seq(u64),
}

impl fmt::Display for ResetPoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Start => f.write_str("start"),
            Self::LatestCheckpoint => f.write_str("checkpoint"),
            Self::Seq(seq) => write!(f, "seq:{seq}"),
        }
    }
}

impl FromStr for ResetPoint {
    type Err = Error;

    /// `start`, `checkpoint` or `seq:N` (what [`fmt::Display`] writes).
    fn from_str(s: &str) -> Result<Self, Error> {
        match s {
            "start" => Ok(Self::Start),
            "checkpoint" => Ok(Self::LatestCheckpoint),
            _ => s
                .strip_prefix("seq:")
                .and_then(|n| n.parse::<u64>().ok())
                .filter(|n| *n > 0)
                .map(Self::Seq)
                .ok_or_else(|| {
                    Error::Invalid(format!(
                        "a reset point is start, checkpoint or seq:N (N > 0), not {s:?}"
                    ))
                }),
        }
    }
}

/// The id of the thread a reset of `thread` under the key `key` starts: `<thread>.reset.<key>`,
/// or `reset-` and a hash of it when that is longer than a thread id may be.
pub fn reset_thread_id(thread: &str, key: &str) -> String {
    let id = format!("{thread}.reset.{key}");
    if id.len() <= cairn_storage::limits::THREAD_ID_BYTES_MAX {
        return id;
    }
    format!("reset-{}", &blake3::hash(id.as_bytes()).to_hex()[..48])
}

impl Engine {
    /// Resets `thread` to `point`: forks it there into a new thread (run at once by an engine
    /// that runs threads, else left Created for the next that does) and cancels the original
    /// with the reason `reset to <new id>` (an original that has ended already stays as it is:
    /// a failed thread is reset to run again). Returns the new thread's handle.
    ///
    /// A reset under a fresh key: retry with [`Engine::reset_as`] to make a retry safe.
    ///
    /// # Errors
    /// As [`Engine::reset_as`].
    pub async fn reset(&self, thread: &str, point: ResetPoint) -> Result<ThreadHandle, Error> {
        self.reset_as(thread, point, &self.shell.ids.new_id()).await
    }

    /// [`Engine::reset`] under the key `key`, idempotent on it: the new thread's id is
    /// [`reset_thread_id`]`(thread, key)`, and a retry that finds it (a crash came between the
    /// fork and the cancel, or the call's answer was lost) only ends the original if it has
    /// not ended, and answers that thread.
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; [`Error::Invalid`] for a sub-workflow thread (it is reset with
    /// its parent), a thread with no checkpoint to go back to, an id held by a thread that is no
    /// reset of this one; [`Error::SeqUnavailable`] for a seq outside the thread's log;
    /// [`Error::UnknownWorkflow`] or [`Error::FingerprintChanged`] when the workflow the thread
    /// ran at the point is not registered as it was; storage errors.
    pub async fn reset_as(
        &self,
        thread: &str,
        point: ResetPoint,
        key: &str,
    ) -> Result<ThreadHandle, Error> {
        let origin = ThreadId::new(thread)?;
        let fork = ThreadId::new(reset_thread_id(thread, key))?;
        let record = admin::thread_record(self.store().as_ref(), &origin).await?;
        match self.store().thread(&fork).await? {
            Some(made) if made.parent.as_ref().is_some_and(|(p, _)| *p == origin) => {}
            Some(_) => {
                return Err(Error::Invalid(format!(
                    "thread {fork} exists and is no reset of {thread}"
                )));
            }
            None => self.reset_fork(&record, point, &fork).await?,
        }
        self.end_reset(thread, &fork).await?;
        Ok(ThreadHandle::new(self.clone(), fork))
    }

    /// Creates `fork`, the new thread of a reset of the thread of `record` to `point`.
    async fn reset_fork(
        &self,
        record: &ThreadRecord,
        point: ResetPoint,
        fork: &ThreadId,
    ) -> Result<(), Error> {
        if record.labels.contains_key(admin::PARENT_LABEL) {
            return Err(Error::Invalid(format!(
                "thread {} is a sub-workflow: reset its parent",
                record.id
            )));
        }
        let seq = self.reset_seq(record, point).await?;
        let wf = admin::workflow_at(self, &record.id, seq).await?;
        let ctx = admin::restore_at(self, &record.id, seq).await?;
        let mut labels = ctx.meta.labels.clone();
        labels.remove(admin::PARENT_LABEL);
        let fork = Fork {
            id: fork.clone(),
            workflow: &wf,
            origin: ForkOrigin { thread: record.id.to_string(), seq },
            ctx: &ctx,
            labels,
            update: None,
            start: self.shell.config.recovery == RecoveryPolicy::Resume,
        };
        admin::start_fork(self, fork).await.map(drop)
    }

    /// The seq `point` names in the thread of `record`.
    async fn reset_seq(&self, record: &ThreadRecord, point: ResetPoint) -> Result<u64, Error> {
        let last = record.last.map_or(0, |b| b.seq.0);
        let seq = match point {
            ResetPoint::Start => 1,
            ResetPoint::Seq(seq) => seq,
            ResetPoint::LatestCheckpoint => self.latest_going_checkpoint(record, last).await?,
        };
        let first = record.first_seq.0.saturating_sub(1).max(1);
        if seq == 0 || !(first..=last).contains(&seq) {
            return Err(Error::SeqUnavailable {
                thread: record.id.to_string(),
                seq,
                last,
                first_stored: record.first_seq.0,
            });
        }
        Ok(seq)
    }

    /// The seq of the latest checkpoint at or before `last` of the thread of `record` that was
    /// not taken at its end (completion, failure).
    async fn latest_going_checkpoint(
        &self,
        record: &ThreadRecord,
        last: u64,
    ) -> Result<u64, Error> {
        let none = || Error::Invalid(format!("thread {} has no checkpoint to reset to", record.id));
        let mut before = last;
        loop {
            let cp = self.store().latest_checkpoint_at_or_before(&record.id, Seq(before)).await?;
            let cp = cp.ok_or_else(none)?;
            if !matches!(cp.kind, CheckpointKind::Completion | CheckpointKind::Failure) {
                return Ok(cp.covers.seq.0);
            }
            // Each turn goes back past one checkpoint: at most as many turns as it has.
            before = cp.covers.seq.0.checked_sub(1).filter(|s| *s > 0).ok_or_else(none)?;
        }
    }

    /// Cancels `thread`, reset into `fork`, unless it has ended (by itself, or by this reset
    /// before a crash).
    async fn end_reset(&self, thread: &str, fork: &ThreadId) -> Result<(), Error> {
        let id = ThreadId::new(thread)?;
        let ended = async || {
            let record = admin::thread_record(self.store().as_ref(), &id).await?;
            Ok::<_, Error>(record.status.is_terminal())
        };
        if ended().await? {
            return Ok(());
        }
        match self.cancel(thread, &format!("reset to {fork}")).await {
            Err(Error::Transition { .. }) if ended().await? => Ok(()),
            done => done,
        }
    }
}
