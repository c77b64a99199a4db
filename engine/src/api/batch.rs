//! Batch operations by filter ([`Engine::batch`], `docs/batches.md`): one operation (cancel,
//! pause, resume, signal, delete, migrate, repin, reset) applied to every thread a filter matches, as a
//! durable job that survives a crash halfway and reports its progress.
//!
//! The job is a thread of the engine's own workflow `cairn.batch` (`batch_flow.rs`), as a
//! schedule is a thread of `cairn.schedule`: it pages through the matching threads in id order
//! and applies the operation to each through a recorded tool call. Its state (the cursor, the
//! counts) is committed with each page's step, so a restart continues from the last page, and a
//! thread whose operation was recorded is never given it again. A thread whose operation ran but
//! was not recorded (a crash between the two) gets it again, and each operation is idempotent
//! there: a second cancel or delete finds the thread ended or gone (skipped), a pause of a
//! paused thread changes nothing, a signal is sent under the dedup key `cairn.batch:<batch id>`
//! (`Engine::signal_once`), which stores it once, a repin to the build a thread has changes
//! nothing, a reset finds the fork it made under the batch's key (`api/reset.rs`) and only
//! ends the original if that is still to do.

use cairn_storage::{ThreadFilter, ThreadId, ThreadRecord, ThreadStatus};
use serde::{Deserialize, Serialize};

use super::ThreadPages;
use super::engine::Engine;
use crate::config::StartOptions;
use crate::error::Error;
use crate::limits::{BATCH_IDS_MAX, BATCH_PAGE_THREADS, BATCH_SKIPS_KEPT, BATCH_THREADS_MAX};

/// The operation a batch applies to each thread.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "op")]
#[non_exhaustive]
pub enum BatchOp {
    /// [`Engine::cancel`] with this reason.
    Cancel {
        /// Recorded on each thread.
        reason: String,
    },
    /// [`Engine::pause`].
    Pause,
    /// [`Engine::resume`].
    Resume,
    /// [`Engine::signal_once`] of this name and value, keyed by the batch.
    Signal {
        /// The signal's name.
        name: String,
        /// Its value.
        value: serde_json::Value,
    },
    /// [`Engine::delete`] of a finished thread (an unfinished one is skipped).
    Delete,
    /// [`Engine::migrate`] of a parked thread to this version of its workflow.
    Migrate {
        /// The version to move to.
        to_version: u32,
    },
    /// [`Engine::repin`] of an unfinished thread to this worker build (`None`: unpinned). With
    /// the filter label `cairn.build` = A, it moves build A's threads to another build.
    Repin {
        /// The build id; `None` unpins.
        build: Option<String>,
    },
    /// [`Engine::reset_as`] of each thread to this point, keyed by the batch: the thread is
    /// forked there into `<thread>.reset.<batch id>` and cancelled (a thread that has ended is
    /// forked only). The new threads are never reset by the batch that made them.
    Reset {
        /// Where the new threads start.
        point: super::reset::ResetPoint,
    },
}

impl BatchOp {
    /// The operation's name: `cancel`, `pause`, `resume`, `signal`, `delete`, `migrate`,
    /// `repin`, `reset`.
    pub fn name(&self) -> &'static str {
        match self {
            Self::Cancel { .. } => "cancel",
            Self::Pause => "pause",
            Self::Resume => "resume",
            Self::Signal { .. } => "signal",
            Self::Delete => "delete",
            Self::Migrate { .. } => "migrate",
            Self::Repin { .. } => "repin",
            Self::Reset { .. } => "reset",
        }
    }
}

/// Which threads a batch applies to: every part given must match (`None` and empty match all).
/// The engine's own threads (workflows named `cairn.*`: schedules, batches) match only a filter
/// that names their workflow, and a batch never applies to itself.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct BatchFilter {
    /// The workflow's id.
    pub workflow: Option<String>,
    /// The status.
    pub status: Option<ThreadStatus>,
    /// Labels, each key set to its value.
    pub labels: Vec<(String, String)>,
    /// The workflow version the thread runs.
    pub version: Option<u32>,
    /// Created at or after this time (engine clock, ms since the epoch).
    pub created_from_ms: Option<u64>,
    /// Created before this time.
    pub created_to_ms: Option<u64>,
    /// These threads only, matched exactly (empty: any; at most `BATCH_IDS_MAX`). A batch
    /// reads them by id, not by pages of the store; an id of no thread is skipped and counted
    /// so (`no such thread`), one that fails the other parts is left out.
    pub ids: Vec<String>,
}

impl BatchFilter {
    /// The part of the filter the store selects by.
    pub(crate) fn store_filter(&self) -> ThreadFilter {
        ThreadFilter {
            status: self.status,
            workflow_id: self.workflow.clone(),
            labels: self.labels.clone(),
        }
    }

    /// Whether `record` passes the whole filter.
    pub fn matches(&self, record: &ThreadRecord) -> bool {
        let internal = record.workflow.id.starts_with("cairn.");
        self.store_filter().matches(record)
            && (!internal || self.workflow.is_some())
            && self.version.is_none_or(|v| record.workflow.version == v)
            && self.created_from_ms.is_none_or(|t| record.created_at_ms >= t)
            && self.created_to_ms.is_none_or(|t| record.created_at_ms < t)
            && (self.ids.is_empty() || self.ids.iter().any(|id| id == record.id.as_str()))
    }

    /// The ids of [`BatchFilter::ids`] in the order a batch handles them: sorted, once each.
    pub(crate) fn sorted_ids(&self) -> Vec<String> {
        let mut ids = self.ids.clone();
        ids.sort();
        ids.dedup();
        ids
    }
}

/// A batch's progress, as its thread's state holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct BatchState {
    /// The operation.
    pub op: BatchOp,
    /// The filter.
    pub filter: BatchFilter,
    /// The threads the filter matched when the batch was created (threads created since that
    /// match are handled too, so `done` may pass it).
    pub total: u64,
    /// Threads handled: applied or skipped.
    pub done: u64,
    /// Threads the operation was applied to.
    pub applied: u64,
    /// Threads skipped (ended before a cancel, unfinished before a delete, ...).
    pub skipped: u64,
    /// The last few skipped threads and why, newest last (at most `BATCH_SKIPS_KEPT`).
    pub skips: Vec<(String, String)>,
    /// The cursor: the last thread id read.
    pub after: Option<String>,
    /// Every matching thread has been handled.
    pub finished: bool,
}

impl cairn_dsl::State for BatchState {
    type Update = BatchState;
    fn apply(&mut self, update: BatchState) {
        *self = update;
    }
}

impl BatchState {
    /// Counts `outcome` of the thread `thread`.
    pub(crate) fn count(&mut self, thread: &str, outcome: &Applied) {
        self.done += 1;
        match outcome {
            Applied::Applied => self.applied += 1,
            Applied::Skipped(why) => {
                self.skipped += 1;
                self.skips.push((thread.to_owned(), why.clone()));
                if self.skips.len() > BATCH_SKIPS_KEPT {
                    self.skips.remove(0);
                }
            }
        }
    }
}

/// What the operation did to one thread (recorded by the batch's tool call).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Applied {
    /// Applied (or found applied by this batch before).
    Applied,
    /// Not applied, and why.
    Skipped(String),
}

/// A batch: its id (its thread's), its thread's status and its progress.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BatchInfo {
    /// The batch's id, its thread's.
    pub id: String,
    /// Its thread's status (`completed` once finished).
    pub status: ThreadStatus,
    /// Its progress.
    pub state: BatchState,
}

impl BatchInfo {
    /// The workflow id of batch threads: the engine's own workflow, registered beside an
    /// application's and listed apart from them.
    pub const WORKFLOW: &'static str = super::batch_flow::WORKFLOW;
}

impl Engine {
    const BATCH: &'static str = super::batch_flow::WORKFLOW;

    /// Applies `op` to every thread `filter` matches, as a durable job: a thread of the
    /// built-in workflow `cairn.batch`, driven by this engine when it runs threads (else
    /// written for the next that does). Returns at once with the batch's id; follow it with
    /// [`Engine::batch_info`] (`done` of `total`) or its thread's handle. Each matching thread
    /// gets the operation once, across crashes and restarts (module docs).
    ///
    /// # Errors
    /// [`Error::Invalid`] for an empty signal name or reason, or a repin's build id that is not
    /// one; [`Error::UnknownWorkflow`] for a
    /// migration of a filter without a registered workflow version to move to;
    /// [`Error::LimitExceeded`] when the filter matches more than `BATCH_THREADS_MAX` threads
    /// (100,000) or names more than `BATCH_IDS_MAX` ids (1,000); [`Error::Invalid`] for an id
    /// of the filter that is no thread id; storage errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// use cairn::{BatchFilter, BatchOp, ThreadStatus};
    /// let filter = BatchFilter {
    ///     workflow: Some("orders".into()),
    ///     status: Some(ThreadStatus::Paused),
    ///     ..BatchFilter::default()
    /// };
    /// println!("{} threads to resume", engine.batch_count(&filter).await?);
    /// let batch = engine.batch(BatchOp::Resume, filter).await?;
    /// engine.thread(&batch.id).await?.finished().await?;
    /// let info = engine.batch_info(&batch.id).await?;
    /// assert!(info.state.finished);
    /// # Ok(()) }
    /// ```
    pub async fn batch(&self, op: BatchOp, filter: BatchFilter) -> Result<BatchInfo, Error> {
        let id = format!("batch:{}", self.shell.ids.new_id());
        self.batch_as(&id, op, filter).await
    }

    /// [`Engine::batch`] under the id `id`, idempotent on it: a batch of that id answers as it
    /// stands, whatever `op` and `filter` (so a caller that retries after a failure, not knowing
    /// whether the batch was created, creates one batch).
    ///
    /// # Errors
    /// As [`Engine::batch`]; [`Error::Invalid`] for an id held by a thread that is no batch.
    pub async fn batch_as(
        &self,
        id: &str,
        op: BatchOp,
        filter: BatchFilter,
    ) -> Result<BatchInfo, Error> {
        if self.store().thread(&ThreadId::new(id)?).await?.is_some() {
            return self.batch_info(id).await;
        }
        self.check_batch(&op, &filter)?;
        let total = self.batch_count(&filter).await?;
        if total > BATCH_THREADS_MAX as u64 {
            return Err(Error::LimitExceeded {
                limit: "the threads one batch applies to",
                value: total,
                max: BATCH_THREADS_MAX as u64,
            });
        }
        let state = BatchState {
            op,
            filter,
            total,
            done: 0,
            applied: 0,
            skipped: 0,
            skips: Vec::new(),
            after: None,
            finished: false,
        };
        let options = StartOptions::id(id);
        if self.shell.config.recovery == crate::config::RecoveryPolicy::Resume {
            self.start_json(Self::BATCH, &state, options).await?;
        } else {
            // An engine that parks what it finds (the command line) would leave the job half
            // done when it closes: written for the next engine that runs threads.
            self.create_json(Self::BATCH, &state, options).await?;
        }
        self.batch_info(id).await
    }

    /// How many threads `filter` matches now (what a batch would apply to: a dry run), at most
    /// `BATCH_THREADS_MAX` + 1. With ids, the named threads that exist and match the rest.
    ///
    /// # Errors
    /// As [`Engine::batch`] for the filter's ids; storage errors.
    pub async fn batch_count(&self, filter: &BatchFilter) -> Result<u64, Error> {
        if !filter.ids.is_empty() {
            check_ids(filter)?;
            let mut count = 0u64;
            for id in filter.sorted_ids() {
                let record = self.store().thread(&ThreadId::new(id)?).await?;
                count += u64::from(record.is_some_and(|r| filter.matches(&r)));
            }
            return Ok(count);
        }
        let mut pages = ThreadPages::new(filter.store_filter(), None, BATCH_PAGE_THREADS);
        let mut count = 0u64;
        while let Some(page) = pages.next(self.store().as_ref()).await? {
            count += page.iter().filter(|r| filter.matches(r)).count() as u64;
            if count > BATCH_THREADS_MAX as u64 {
                break;
            }
        }
        Ok(count)
    }

    /// The batch `id` and its progress.
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; [`Error::Invalid`] for a thread that is no batch; storage
    /// errors.
    pub async fn batch_info(&self, id: &str) -> Result<BatchInfo, Error> {
        let thread = ThreadId::new(id)?;
        let store = self.shell.store.as_ref();
        let record = super::admin::thread_record(store, &thread).await?;
        if &*record.workflow.id != Self::BATCH {
            return Err(Error::Invalid(format!("thread {id} is not a batch")));
        }
        let wf = self.shell.registry.workflow_for(&record)?;
        let ctx = crate::exec::fetch::restore(store, &wf, &thread, None).await?;
        let state: BatchState = serde_json::from_value(ctx.snapshot()?.state)?;
        Ok(BatchInfo { id: id.to_owned(), status: record.status, state })
    }

    /// Refuses an operation that cannot apply to any thread.
    fn check_batch(&self, op: &BatchOp, filter: &BatchFilter) -> Result<(), Error> {
        check_ids(filter)?;
        match op {
            BatchOp::Signal { name, .. } if name.is_empty() => {
                Err(Error::Invalid("a batch signal needs a name".into()))
            }
            BatchOp::Cancel { reason } if reason.is_empty() => {
                Err(Error::Invalid("a batch cancel needs a reason".into()))
            }
            BatchOp::Repin { build: Some(build) } => super::builder::check_build_id(build),
            BatchOp::Migrate { to_version } => match &filter.workflow {
                Some(wf) => self.shell.registry.latest(wf, Some(*to_version)).map(drop),
                None => Err(Error::Invalid("a batch migration needs the filter's workflow".into())),
            },
            _ => Ok(()),
        }
    }
}

/// Refuses a filter naming more than `BATCH_IDS_MAX` ids, or a string that is no thread id.
pub(crate) fn check_ids(filter: &BatchFilter) -> Result<(), Error> {
    if filter.ids.len() > BATCH_IDS_MAX {
        return Err(Error::LimitExceeded {
            limit: "the thread ids of a batch filter",
            value: filter.ids.len() as u64,
            max: BATCH_IDS_MAX as u64,
        });
    }
    filter.ids.iter().try_for_each(|id| ThreadId::new(id.as_str()).map(drop).map_err(Error::from))
}
