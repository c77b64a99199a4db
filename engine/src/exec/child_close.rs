//! A parent's end closes the children it started with `ParentClose::Cancel`
//! (`ctx.start_child_with`): they are cancelled once the parent's end is durable. Apart from
//! the start and join of children (`child_start.rs`) so that the runner, which calls this at a
//! thread's end, does not depend on how children are driven.

use std::sync::Arc;

use cairn_storage::ThreadId;

use super::shell::Shell;
use crate::core::child_start::PARENT_CLOSE_LABEL;
use crate::limits::CHILDREN_PER_THREAD_MAX;

/// The parent `parent` ended (durably): cancels its unfinished children started with
/// `ParentClose::Cancel`, in the background. Runs only for a parent that carries
/// `CLOSES_CHILDREN_LABEL` (it started such a child), so other threads' ends read nothing.
pub(crate) fn close_children(shell: &Arc<Shell>, parent: &ThreadId) {
    let (shell, parent) = (shell.clone(), parent.clone());
    let s = shell.clone();
    s.tasks.spawn(async move {
        let started = super::fetch::started_children_of(shell.store.as_ref(), &parent, CHILDREN_PER_THREAD_MAX).await;
        let started = match started {
            Ok(started) => started,
            Err(e) => {
                tracing::warn!(thread = %parent, error = %e, "children of an ended parent not listed");
                return;
            }
        };
        let why = format!("parent {parent} ended");
        for child in started {
            let cancel = child.labels.get(PARENT_CLOSE_LABEL).is_some_and(|p| p == "cancel");
            if !cancel || child.status.is_terminal() {
                continue;
            }
            let t = crate::core::status::Transition::Cancel;
            if let Err(e) = super::parked::end_from_outside(&shell, child.id.as_str(), t, &why).await {
                tracing::warn!(thread = %child.id, error = %e, "child thread not cancelled");
            }
        }
    });
}
