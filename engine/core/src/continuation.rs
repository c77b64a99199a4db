//! Continue-as-new in the fold: the successor a step asked for (`ctx.continue_as_new`, a marker
//! among its tasks' drawn values), and the id the successor gets.
//!
//! The step that asks ends the thread: its routing is empty (`decide::route_step`), the thread
//! completes with its state as output, and a `continued_as_new` event names the successor, in
//! the batch that also creates the successor (`exec/continue_as_new.rs`), whose log begins
//! `thread_created`, `continued_from`. One commit: a crash leaves both or neither.

use serde_json::Value;

use crate::error::Error;
use crate::event::Body;
use crate::marks;
use crate::thread_ctx::EventAt;
use crate::thread_ctx::ThreadCtx;
use crate::thread_ctx::ThreadMeta;

/// The reason of the status change that ends a thread continued as new.
pub const REASON: &str = "continued as new";

/// The input of the successor the open step asked for: the first request in task order (of
/// tasks that completed), or `None`.
pub fn requested(meta: &ThreadMeta) -> Option<&Value> {
    meta.open
        .values()
        .filter(|j| j.outcome.is_some())
        .find_map(|j| j.values.iter().find_map(marks::successor_in))
}

/// The id of the successor of `thread`: `{base}~{n + 1}` for a thread `{base}~{n}`, else
/// `{thread}~1`. A function of the id alone, so a step run again after a crash names the same
/// successor (and the creation's guard refuses a second).
///
/// # Examples
/// ```ignore
/// assert_eq!(successor_id("order-7"), "order-7~1");
/// assert_eq!(successor_id("order-7~1"), "order-7~2");
/// ```
pub fn successor_id(thread: &str) -> String {
    if let Some((base, n)) = thread.rsplit_once('~')
        && let Ok(n) = n.parse::<u64>()
        && !n.to_string().is_empty()
        && n.to_string() == thread[base.len() + 1..]
    {
        return format!("{base}~{}", n + 1);
    }
    format!("{thread}~1")
}

/// Folds continuation's part of `e` into `ctx`.
///
/// # Errors
/// None: every event folds.
pub(crate) fn fold(ctx: &mut ThreadCtx, e: EventAt<'_>) -> Result<(), Error> {
    match e.body {
        Body::ContinuedAsNew { thread, .. } => ctx.meta.continued_as = Some(thread.clone()),
        Body::ContinuedFrom { thread } => ctx.meta.continued_from = Some(thread.clone()),
        _ => {}
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::successor_id;

    #[test]
    fn successors_count_up() {
        assert_eq!(successor_id("order-7"), "order-7~1");
        assert_eq!(successor_id("order-7~1"), "order-7~2");
        assert_eq!(successor_id("a~9"), "a~10");
        assert_eq!(successor_id("a~x"), "a~x~1");
        assert_eq!(successor_id("a~01"), "a~01~1");
    }
}
