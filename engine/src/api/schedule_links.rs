//! A schedule's chain of threads: `schedule:<name>`, then `schedule:<name>~1`, `~2`, ... (its
//! thread continues as new every [`ScheduleSpec::TICKS_PER_RUN`] rounds, `schedule_flow.rs`).
//! The name stays the schedule's address: every control resolves it to the **live link**, the one
//! with the highest number (created in the commit that ended the one before it, so it is the
//! only link that is not completed-and-continued).
//!
//! Found through the label index, not by following `continued_as` from the head (which the
//! retention policy may have deleted): every link carries the label `schedule=<name>`, and ids
//! are listed in id order within a label, so the links, which all start with
//! `schedule:<name>`, are one run of that listing right after the head's id. A resolution
//! reads every stored link (a handful with retention, one per [`ScheduleSpec::TICKS_PER_RUN`]
//! rounds without), at most [`ScheduleSpec::LINKS_MAX`].

use cairn_storage::{Store, ThreadFilter, ThreadId, ThreadRecord};

use super::schedule_flow::ScheduleSpec;
use crate::error::Error;

/// Records read per page of the walk over a schedule's links, after a first page of
/// [`LINK_FIRST_PAGE`].
const LINK_PAGE: usize = 256;

/// Records read by the first page of the walk: a few links (retention deletes completed ones)
/// and the first record past them (the label's listing goes on with the schedule's ticks when
/// they sort after its threads).
const LINK_FIRST_PAGE: usize = 8;

/// The prefix of every schedule thread's id.
const PREFIX: &str = "schedule:";

/// The id of schedule `name`'s first thread, the head of its chain.
pub(crate) fn head_of(name: &str) -> String {
    format!("{PREFIX}{name}")
}

impl ScheduleSpec {
    /// The most links of one schedule a resolution reads (a minutely schedule makes one link in
    /// about 17 hours: 100,000 are some 190 years of them, none deleted).
    pub const LINKS_MAX: usize = 100_000;

    /// How often a schedule control (pause, resume, delete) is tried again on the new live link
    /// when the link it acted on continued as new meanwhile.
    pub const CONTROL_TRIES: usize = 8;

    /// The schedule name and link number of a schedule thread's id: `schedule:<name>` is link
    /// 0, `schedule:<name>~<n>` link `n` (the continue-as-new successor ids). `None` for other
    /// ids.
    ///
    /// # Examples
    /// ```
    /// use cairn::ScheduleSpec;
    /// assert_eq!(ScheduleSpec::link_of("schedule:nightly"), Some(("nightly", 0)));
    /// assert_eq!(ScheduleSpec::link_of("schedule:nightly~3"), Some(("nightly", 3)));
    /// assert_eq!(ScheduleSpec::link_of("nightly@1000"), None);
    /// ```
    pub fn link_of(id: &str) -> Option<(&str, u64)> {
        let rest = id.strip_prefix(PREFIX)?;
        match rest.split_once('~') {
            None => Some((rest, 0)),
            Some((name, n)) => {
                let k: u64 = n.parse().ok()?;
                (k > 0 && k.to_string() == n).then_some((name, k))
            }
        }
    }
}

/// A walk over schedule `name`'s links: the head, then pages of the label's listing after it.
/// One loop body for the async callers ([`links`]) and the sync ones (the test kit's check).
pub(crate) struct LinkWalk<'n> {
    name: &'n str,
    /// The head's id.
    pub(crate) head: ThreadId,
    /// The cursor: the last id read.
    pub(crate) after: ThreadId,
    /// The listing the links are in: the schedule's label.
    pub(crate) filter: ThreadFilter,
    /// The size of the next page to read.
    pub(crate) limit: usize,
    found: Vec<(u64, ThreadRecord)>,
}

impl<'n> LinkWalk<'n> {
    /// The walk over schedule `name`'s links.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a name no thread id holds.
    pub(crate) fn new(name: &'n str) -> Result<LinkWalk<'n>, Error> {
        let head = ThreadId::new(head_of(name))?;
        let filter = ThreadFilter::default().label(ScheduleSpec::LABEL, name);
        let limit = LINK_FIRST_PAGE;
        Ok(LinkWalk { name, after: head.clone(), head, filter, limit, found: Vec::new() })
    }

    /// Takes the head's record, if stored.
    ///
    /// # Errors
    /// [`Error::Invalid`] when the head is a thread of another workflow.
    pub(crate) fn head(&mut self, record: Option<ThreadRecord>) -> Result<(), Error> {
        if let Some(record) = record {
            if &*record.workflow.id != ScheduleSpec::WORKFLOW {
                return Err(Error::Invalid(format!("thread {} is not a schedule", self.head)));
            }
            self.found.push((0, record));
        }
        Ok(())
    }

    /// Takes one page of the listing (at most `limit` after `after`); whether to read
    /// another.
    ///
    /// # Errors
    /// [`Error::Invalid`] past [`ScheduleSpec::LINKS_MAX`] links.
    pub(crate) fn page(&mut self, page: Vec<ThreadRecord>) -> Result<bool, Error> {
        let full = page.len() == self.limit;
        self.limit = LINK_PAGE;
        for record in page {
            // Ids after the head that start with it: the links, then others (ticks, ...).
            if !record.id.as_str().starts_with(self.head.as_str()) {
                return Ok(false);
            }
            if &*record.workflow.id == ScheduleSpec::WORKFLOW
                && let Some((name, n)) = ScheduleSpec::link_of(record.id.as_str())
                && name == self.name
            {
                self.found.push((n, record.clone()));
            }
            self.after = record.id;
        }
        if self.found.len() > ScheduleSpec::LINKS_MAX {
            return Err(Error::Invalid(format!(
                "schedule {:?} has more than {} links: delete old ones",
                self.name,
                ScheduleSpec::LINKS_MAX
            )));
        }
        Ok(full)
    }

    /// The links found, in chain order (the live one last).
    pub(crate) fn done(mut self) -> Vec<ThreadRecord> {
        self.found.sort_by_key(|(n, _)| *n);
        self.found.into_iter().map(|(_, r)| r).collect()
    }
}

/// Every stored link of schedule `name`, in chain order (the live one last); empty when there
/// is no such schedule.
///
/// # Errors
/// [`Error::Invalid`] when `schedule:<name>` is a thread of another workflow, or past
/// [`ScheduleSpec::LINKS_MAX`] links; storage errors.
pub(crate) async fn links(store: &dyn Store, name: &str) -> Result<Vec<ThreadRecord>, Error> {
    let mut walk = LinkWalk::new(name)?;
    walk.head(store.thread(&walk.head).await?)?;
    while walk.page(store.list_threads_after(&walk.filter, Some(&walk.after), walk.limit).await?)? {
    }
    Ok(walk.done())
}

/// Every stored link of schedule `name`, in chain order (the live one last; empty when there is
/// no such schedule), for a sync caller: each read is waited for on the caller's thread. A check
/// of a schedule's history reads its chain this way (`cairn_testkit::check_schedule`).
///
/// # Errors
/// [`Error::Invalid`] when `schedule:<name>` is a thread of another workflow, or past
/// [`ScheduleSpec::LINKS_MAX`] links; storage errors.
pub fn links_wait(store: &dyn Store, name: &str) -> Result<Vec<ThreadRecord>, Error> {
    let mut walk = LinkWalk::new(name)?;
    walk.head(store.thread(&walk.head).wait()?)?;
    while walk
        .page(store.list_threads_after(&walk.filter, Some(&walk.after), walk.limit).wait()?)?
    {}
    Ok(walk.done())
}

/// The live link of schedule `name`: its thread with the highest link number.
///
/// # Errors
/// As [`links`].
pub(crate) async fn live(store: &dyn Store, name: &str) -> Result<Option<ThreadRecord>, Error> {
    Ok(links(store, name).await?.pop())
}

#[cfg(test)]
mod tests {
    use super::ScheduleSpec;
    use cairn_core::continuation::successor_id;

    #[test]
    fn links_are_the_successor_ids() {
        let mut id = super::head_of("a.b-c");
        for n in 0..12 {
            assert_eq!(ScheduleSpec::link_of(&id), Some(("a.b-c", n)), "{id}");
            id = successor_id(&id);
        }
        assert_eq!(ScheduleSpec::link_of("schedule:a~01"), None);
        assert_eq!(ScheduleSpec::link_of("schedule:a~0"), None);
        assert_eq!(ScheduleSpec::link_of("a@5"), None);
    }
}
