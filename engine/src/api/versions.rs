//! The drain view (Temporal's worker versioning, for an embedded engine): per workflow version,
//! how many threads have not finished and where they stand, and whether this engine carries the
//! version. On a shared database an engine takes only threads whose workflow version it has
//! registered (`api/recover.rs`: a thread of another version is left for an engine that has
//! it), so a version can be retired once its row here is at zero.

use std::collections::BTreeMap;

use cairn_storage::{ThreadFilter, ThreadStatus};
use serde::Serialize;

use super::engine::Engine;
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

/// The drain view: every workflow version with unfinished threads, and every one registered
/// here (at zero when it has none).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Drain {
    /// By workflow id, then version.
    pub versions: Vec<VersionDrain>,
    /// True when `VERSIONS_THREADS_MAX` records were read and the counts stop there.
    pub partial: bool,
}

impl Engine {
    /// Per workflow version, the threads that have not finished, by status; and whether this
    /// engine carries the version. A version whose `total` is 0 runs nowhere any more: its code
    /// can go.
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
                    let key = (r.workflow.id.clone(), r.workflow.version);
                    let by_status = counts.entry(key).or_default();
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
        Ok(Drain { versions, partial: read >= VERSIONS_THREADS_MAX })
    }
}
