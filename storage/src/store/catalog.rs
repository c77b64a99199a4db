//! [`Catalog`]: thread records and the indexes over them (listing by status, workflow and
//! label; signal inboxes, queues, locks).

use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::ids::{Bookmark, ThreadId};
use crate::lock::LockRecord;
use crate::reading::Reading;
use crate::thread::{ThreadRecord, ThreadStatus};

/// Pagination for list calls: skip `offset`, return at most `limit`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Page {
    /// Most items returned (at most [`crate::limits::READ_LIMIT_MAX`]).
    pub limit: usize,
    /// Items skipped first.
    pub offset: usize,
}

impl Default for Page {
    fn default() -> Page {
        Page { limit: 100, offset: 0 }
    }
}

impl Page {
    /// The items `keep` accepts, the first `offset` of them skipped, at most `limit`: a listing
    /// that filters as it reads. Stops at the first error and reads no item past the page.
    pub(crate) fn cut<T>(
        self,
        items: impl IntoIterator<Item = Result<T, Error>>,
        mut keep: impl FnMut(&T) -> bool,
    ) -> Result<Vec<T>, Error> {
        let (mut out, mut skip) = (Vec::new(), self.offset);
        for item in items {
            if out.len() >= self.limit {
                break;
            }
            let item = item?;
            if !keep(&item) {
                continue;
            }
            match skip.checked_sub(1) {
                Some(left) => skip = left,
                None => out.push(item),
            }
        }
        Ok(out)
    }
}

/// Filters for [`Catalog::list_threads`]; `None` matches everything.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ThreadFilter {
    /// Only threads with this status.
    pub status: Option<ThreadStatus>,
    /// Only threads of this workflow id.
    pub workflow_id: Option<String>,
    /// Only threads with every one of these labels (key set to value): several are ANDed.
    pub labels: Vec<(String, String)>,
}

impl ThreadFilter {
    /// Adds the label `key` = `value` to the labels a thread must have (ANDed).
    ///
    /// # Examples
    /// ```
    /// use cairn_storage::{ThreadFilter, ThreadStatus};
    /// let f = ThreadFilter { status: Some(ThreadStatus::Paused), ..ThreadFilter::default() }
    ///     .label("customer", "c-9")
    ///     .label("stage", "payment");
    /// assert_eq!(f.labels.len(), 2);
    /// ```
    #[must_use]
    pub fn label(mut self, key: impl Into<String>, value: impl Into<String>) -> Self {
        self.labels.push((key.into(), value.into()));
        self
    }

    /// Whether `record` has every label of the filter (its status and workflow are not
    /// looked at: the backends select those by column or key).
    pub fn labels_match(&self, record: &ThreadRecord) -> bool {
        self.labels.iter().all(|(k, v)| record.labels.get(k) == Some(v))
    }

    /// Whether `record` passes every part of the filter.
    pub fn matches(&self, record: &ThreadRecord) -> bool {
        self.status.is_none_or(|s| record.status == s)
            && self.workflow_id.as_ref().is_none_or(|w| *record.workflow.id == **w)
            && self.labels_match(record)
    }
}

/// Thread records and indexes. Every read sees committed data only and answers a
/// [`Reading`]: awaited by async callers, [`Reading::wait`]ed by sync ones.
pub trait Catalog: Send + Sync + 'static {
    /// The thread's record.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Corrupted`] if it fails its checks.
    ///
    /// # Examples
    /// ```
    /// use cairn_storage::*;
    /// # #[tokio::main(flavor = "current_thread")]
    /// # async fn main() -> Result<(), Error> {
    /// let dir = tempfile::tempdir().expect("temp dir");
    /// let store = RedbStore::open(dir.path().join("cairn.db"), Options::default())?;
    /// let id = ThreadId::new("t1")?;
    /// assert!(store.thread(&id).await?.is_none()); // async callers await
    /// assert!(store.thread(&id).wait()?.is_none()); // sync callers wait
    /// # Ok(())
    /// # }
    /// ```
    fn thread(&self, id: &ThreadId) -> Reading<Option<ThreadRecord>>;

    /// The bookmark of `thread`'s last event, or `None` if it has none or does not exist. The
    /// provided implementation reads it from the thread's record.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Corrupted`] if the thread record fails its checks.
    fn last_bookmark(&self, thread: &ThreadId) -> Reading<Option<Bookmark>> {
        self.thread(thread).map(|record| record.and_then(|r| r.last))
    }

    /// Thread records matching `filter`, in id order, paged.
    ///
    /// # Errors
    ///
    /// [`crate::Error::LimitExceeded`] past `READ_LIMIT_MAX`; [`crate::Error::Corrupted`].
    fn list_threads(&self, filter: &ThreadFilter, page: Page) -> Reading<Vec<ThreadRecord>>;

    /// Thread records matching `filter` whose ids come after `after` (from the first when
    /// `None`) in the order [`Catalog::list_threads`] lists, at most `limit`: one page of a
    /// cursor walk (pass the last id returned as the next `after`). Memory holds the page only,
    /// and the read starts at the cursor, so walking every thread costs one read of each
    /// whatever their number.
    ///
    /// # Errors
    ///
    /// [`crate::Error::LimitExceeded`] past `READ_LIMIT_MAX`; [`crate::Error::Corrupted`].
    fn list_threads_after(
        &self,
        filter: &ThreadFilter,
        after: Option<&ThreadId>,
        limit: usize,
    ) -> Reading<Vec<ThreadRecord>>;

    /// Up to `limit` signals of `thread`'s inbox with n > `after`, in n order (signals are
    /// numbered from 1 per thread; see [`crate::Batch::signals`]). An unknown thread has none.
    ///
    /// # Errors
    ///
    /// [`crate::Error::LimitExceeded`] past `READ_LIMIT_MAX`; [`crate::Error::Corrupted`]
    /// (table `signals`) for a damaged signal or one under another key.
    fn signals(
        &self,
        thread: &ThreadId,
        after: u64,
        limit: usize,
    ) -> Reading<Vec<crate::signal::Signal>>;

    /// Every queue with its limits and counts (running and waiting, per key), by name
    /// (`docs/queues.md`).
    ///
    /// # Errors
    ///
    /// [`crate::Error::Corrupted`] (table `queues`) for a damaged record.
    fn queues(&self) -> Reading<Vec<crate::queue::QueueState>>;

    /// `thread`'s place in a queue: waiting (`admitted_at_ms` is `None`) or holding a slot;
    /// `None` when it is in no queue (never was, or has ended).
    ///
    /// # Errors
    ///
    /// [`crate::Error::Corrupted`] (table `queue_members`) for a damaged record.
    fn queue_member(&self, thread: &ThreadId) -> Reading<Option<crate::queue::QueueMember>>;

    /// Every stored lock (live or lapsed), by name.
    ///
    /// # Errors
    ///
    /// [`crate::Error::Corrupted`].
    fn locks(&self) -> Reading<Vec<LockRecord>>;
}
