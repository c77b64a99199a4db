//! Search attributes in the fold: the label changes a step's tasks asked for
//! (`ctx.set_label`, `ctx.remove_label`: markers among their drawn values, `core::marks`),
//! decided into one `labels_changed` event when the step completes. `thread_ctx` folds it into
//! the thread's labels, which the runner copies into the thread record in the same batch.

use std::collections::BTreeMap;

use cairn_storage::limits::LABELS_PER_THREAD_MAX;

use crate::error::Error;
use crate::event::Body;
use crate::marks;
use crate::thread_ctx::EventAt;
use crate::thread_ctx::ThreadCtx;
use crate::thread_ctx::ThreadMeta;

/// The `labels_changed` event of the open step: the changes of its completed tasks in task
/// order (a later change of a key wins), less those that change nothing; `Ok(None)` when none
/// remains.
///
/// # Errors
/// A message when the labels would pass `LABELS_PER_THREAD_MAX`.
pub fn requested(meta: &ThreadMeta) -> Result<Option<Body>, String> {
    let completed = meta.open.values().filter(|j| j.outcome.is_some());
    let mut marked = completed.flat_map(|j| j.values.iter().filter_map(marks::label_in)).peekable();
    if marked.peek().is_none() {
        return Ok(None); // most steps set no label
    }
    let mut changes: BTreeMap<&str, Option<&str>> = BTreeMap::new();
    for (key, value) in marked {
        changes.insert(key, value);
    }
    let mut set = BTreeMap::new();
    let mut removed = Vec::new();
    for (key, value) in changes {
        match value {
            Some(v) if meta.labels.get(key).map(String::as_str) != Some(v) => {
                set.insert(key.to_owned(), v.to_owned());
            }
            None if meta.labels.contains_key(key) => removed.push(key.to_owned()),
            _ => {}
        }
    }
    if set.is_empty() && removed.is_empty() {
        return Ok(None);
    }
    let added = set.keys().filter(|k| !meta.labels.contains_key(*k)).count();
    let count = meta.labels.len() + added - removed.len();
    if count > LABELS_PER_THREAD_MAX {
        return Err(format!(
            "the step sets {count} labels on the thread, past LABELS_PER_THREAD_MAX \
             ({LABELS_PER_THREAD_MAX})"
        ));
    }
    Ok(Some(Body::LabelsChanged { set, removed }))
}

/// Folds the labels' part of `e` into `ctx`.
///
/// # Errors
/// None: every event folds.
pub(crate) fn fold(ctx: &mut ThreadCtx, e: EventAt<'_>) -> Result<(), Error> {
    if let Body::LabelsChanged { set, removed } = e.body {
        ctx.meta.labels.retain(|k, _| !removed.contains(k));
        ctx.meta.labels.extend(set.clone());
    }
    Ok(())
}
