//! The embedding API: the engine, its builder, thread handles, controls and event channels.

pub mod admin;
pub mod batch;
pub(crate) mod batch_flow;
pub mod builder;
pub(crate) mod channels;
mod checkpoint;
mod checkpoint_requests;
pub mod continued;
mod controls;
pub mod create;
pub mod emit;
pub mod engine;
pub mod handle;
mod health;
pub mod health_policy;
mod migrate;
pub mod outcome;
pub mod patches;
pub mod promise;
pub mod prune;
pub mod published;
mod query;
mod queue_flow;
mod queues;
pub mod recover;
mod replay;
pub mod reset;
mod result;
mod retention;
pub mod schedule;
pub mod schedule_backfill;
pub mod schedule_flow;
pub mod schedule_links;
pub mod schedule_overlap;
pub mod schedule_ticks;
mod signal;
pub(crate) mod signal_once;
pub mod stream;
pub mod typed;
pub mod update;
pub(crate) mod update_elsewhere;
mod versioned;
pub mod versions;
mod viewed;

use cairn_storage::{Store, ThreadFilter, ThreadId, ThreadRecord};

/// The thread records matching a filter, read a page at a time in id order by cursor (the last
/// id read), not by offset: a walk whose own work changes the records listed skips none.
pub struct ThreadPages {
    filter: ThreadFilter,
    after: Option<ThreadId>,
    page: usize,
    done: bool,
}

impl ThreadPages {
    /// The pages of `filter`'s records after the id `after` (from the first when `None`),
    /// `page` records each.
    pub fn new(filter: ThreadFilter, after: Option<ThreadId>, page: usize) -> Self {
        Self { filter, after, page, done: false }
    }

    /// The next page, `None` after the last one (a short one).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn next(
        &mut self,
        store: &dyn Store,
    ) -> Result<Option<Vec<ThreadRecord>>, crate::error::Error> {
        if self.done {
            return Ok(None);
        }
        let page = store.list_threads_after(&self.filter, self.after.as_ref(), self.page).await?;
        self.done = page.len() < self.page;
        if let Some(last) = page.last() {
            self.after = Some(last.id.clone());
        }
        Ok(Some(page))
    }
}
