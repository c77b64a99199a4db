//! The drain view (Temporal's worker versioning, for an embedded engine): per workflow version,
//! how many threads have not finished and where they stand, and whether this engine carries the
//! version. On a shared database an engine takes only threads whose workflow version it has
//! registered (`api/recover.rs`: a thread of another version is left for an engine that has
//! it), so a version can be retired once its row here is at zero.
//!
//! Worker builds (`EngineBuilder::build_id`) likewise: a thread started by an engine with a build
//! id is pinned to it (label `cairn.build`), and only engines of that build take it until
//! [`Engine::repin`] moves it; the drain view counts unfinished threads per build too.

use std::collections::BTreeMap;

use cairn_storage::{ThreadFilter, ThreadId, ThreadRecord, ThreadStatus};
use serde::Serialize;

use super::engine::Engine;
use crate::core::child_start::{BUILD_LABEL, pinned_elsewhere};
use crate::core::event::Body;
use crate::error::Error;

/// Thread records one drain view reads at most; past it the counts are marked partial.
pub const VERSIONS_THREADS_MAX: usize = 1_000_000;

/// Records read per page of a drain view.
const PAGE: usize = 1_000;

/// One workflow version's unfinished threads.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct VersionDrain {
    /// The workflow id.
    pub workflow: String,
    /// Its version.
    pub version: u32,
    /// Unfinished threads of it, by status (`running`, `waiting_input`, `sleeping`, ...).
    pub unfinished: BTreeMap<String, u64>,
    /// Their sum.
    pub total: u64,
    /// Whether this engine has the version registered (it can run them).
    pub registered_here: bool,
}

/// One worker build's unfinished threads (those pinned to it), or the unpinned ones.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct BuildDrain {
    /// The build id the threads are pinned to; `None` for unpinned threads (any engine with a
    /// build id takes them, and engines without one).
    pub build: Option<String>,
    /// Unfinished threads pinned to it, by status.
    pub unfinished: BTreeMap<String, u64>,
    /// Their sum.
    pub total: u64,
    /// Whether this engine takes them: its own build, or unpinned threads.
    pub taken_here: bool,
}

/// The drain view: every workflow version with unfinished threads, and every one registered
/// here (at zero when it has none); and the same per worker build.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Drain {
    /// By workflow id, then version.
    pub versions: Vec<VersionDrain>,
    /// Unpinned threads first, then by build id; this engine's own build is listed (at zero
    /// when it has none).
    pub builds: Vec<BuildDrain>,
    /// This engine's build id (`EngineBuilder::build_id`), if it has one.
    pub build_here: Option<String>,
    /// True when `VERSIONS_THREADS_MAX` records were read and the counts stop there.
    pub partial: bool,
}

impl Engine {
    /// Per workflow version, the threads that have not finished, by status; and whether this
    /// engine carries the version. A version whose `total` is 0 runs nowhere any more: its code
    /// can go. The same counts per worker build (`builds`: the `cairn.build` pin, `None` for
    /// unpinned threads), so a build at 0 can stop its workers.
    ///
    /// # Errors
    /// Storage errors reading the records.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// for v in engine.drain().await?.versions {
    ///     println!("{} v{}: {} unfinished (here: {})", v.workflow, v.version, v.total, v.registered_here);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn drain(&self) -> Result<Drain, Error> {
        let mut counts: BTreeMap<(String, u32), BTreeMap<String, u64>> = BTreeMap::new();
        for wf in self.shell.registry.all() {
            counts.entry((wf.id().to_owned(), wf.version())).or_default();
        }
        let mut builds: BTreeMap<Option<String>, BTreeMap<String, u64>> = BTreeMap::new();
        builds.entry(None).or_default();
        if let Some(build) = self.build_id() {
            builds.entry(Some(build.to_owned())).or_default();
        }
        let mut read = 0;
        let unfinished = ThreadStatus::ALL.iter().filter(|s| !s.is_terminal());
        for status in unfinished {
            let filter = ThreadFilter { status: Some(*status), ..ThreadFilter::default() };
            let mut pages = super::ThreadPages::new(filter, None, PAGE);
            while read < VERSIONS_THREADS_MAX
                && let Some(records) = pages.next(self.shell.store.as_ref()).await?
            {
                read += records.len();
                for r in &records {
                    let key = (r.workflow.id.to_string(), r.workflow.version);
                    let by_status = counts.entry(key).or_default();
                    *by_status.entry(status.as_str().to_owned()).or_default() += 1;
                    let build = r.labels.get(BUILD_LABEL).cloned();
                    let by_status = builds.entry(build).or_default();
                    *by_status.entry(status.as_str().to_owned()).or_default() += 1;
                }
            }
        }
        let here = |id: &str, version: u32| self.shell.registry.latest(id, Some(version)).is_ok();
        let versions = counts
            .into_iter()
            .map(|((workflow, version), unfinished)| VersionDrain {
                registered_here: here(&workflow, version),
                total: unfinished.values().sum(),
                workflow,
                version,
                unfinished,
            })
            .collect();
        let build_here = self.build_id().map(str::to_owned);
        let builds = builds
            .into_iter()
            .map(|(build, unfinished)| BuildDrain {
                taken_here: build.is_none() || build == build_here,
                total: unfinished.values().sum(),
                build,
                unfinished,
            })
            .collect();
        Ok(Drain { versions, builds, build_here, partial: read >= VERSIONS_THREADS_MAX })
    }

    /// This engine's worker build id (`EngineBuilder::build_id`), if it has one.
    pub fn build_id(&self) -> Option<&str> {
        self.shell.config.build_id.as_deref()
    }

    /// Whether `record` is pinned to a build other than this engine's: left to its build.
    pub(crate) fn pinned_elsewhere(&self, record: &ThreadRecord) -> bool {
        pinned_elsewhere(&record.labels, self.build_id())
    }

    /// Moves an unfinished thread to worker build `build` (`None`: unpins it, so that any engine
    /// takes it), recorded as a `labels_changed` event of label `cairn.build` with its record, in
    /// one write guarded by the thread's status and last seq: an operator's way to hand a
    /// thread whose build is gone to a newer one (its code must still replay the thread's
    /// history: the resume check blocks it otherwise). A runner of another engine that still
    /// drives it is fenced off by the write. If the thread is now this engine's to take, it is
    /// taken at once (as recovery would); if it is now another build's, this engine's timer of
    /// its sleep is disarmed (and a timer another engine armed before the repin is dropped when
    /// it comes due: no `timer_fired` is written by an engine of another build). Repinning to the build it has changes nothing.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a build id that is not one (see `EngineBuilder::build_id`);
    /// [`Error::UnknownThread`]; [`Error::WrongStatus`] for an ended thread, one a runner of
    /// this engine drives (pause it first), or one that moved on during the write; storage
    /// errors. Nothing is written on an error.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// engine.repin("order-7", Some("2026.12.2")).await?;
    /// # Ok(()) }
    /// ```
    pub async fn repin(&self, thread: &str, build: Option<&str>) -> Result<(), Error> {
        if let Some(build) = build {
            super::builder::check_build_id(build)?;
        }
        let id = ThreadId::new(thread)?;
        let mut record = crate::exec::parked::stored(&self.shell, &id).await?;
        let wrong = |record: &ThreadRecord, detail: &str| Error::WrongStatus {
            thread: id.to_string(),
            status: record.status,
            detail: detail.to_owned(),
        };
        if record.status.is_terminal() {
            return Err(wrong(&record, "an ended thread is not repinned"));
        }
        if self.shell.coord.is_driven(&id) {
            return Err(wrong(&record, "a runner of this engine drives it: pause it first"));
        }
        if record.labels.get(BUILD_LABEL).map(String::as_str) == build {
            return Ok(());
        }
        let body = match build {
            Some(b) => {
                record.labels.insert(BUILD_LABEL.to_owned(), b.to_owned());
                Body::LabelsChanged {
                    set: BTreeMap::from([(BUILD_LABEL.to_owned(), b.to_owned())]),
                    removed: Vec::new(),
                }
            }
            None => {
                record.labels.remove(BUILD_LABEL);
                Body::LabelsChanged { set: BTreeMap::new(), removed: vec![BUILD_LABEL.to_owned()] }
            }
        };
        let status = record.status;
        let taken = !self.pinned_elsewhere(&record);
        let after = record.clone();
        crate::exec::parked::write_read(&self.shell, record, status, vec![body], None, true)
            .await?;
        tracing::info!(thread = %id, build = ?build, "thread repinned");
        if !taken {
            // Another build's now: its timer here would fire for a thread this engine leaves
            // alone (its engines arm their own; a stale arming elsewhere is dropped as it fires).
            self.shell.coord.disarm_timer(&id);
        }
        if taken {
            let mut report = super::recover::RecoveryReport::default();
            self.recover_one(after, &mut report).await?;
        }
        Ok(())
    }
}
