//! Compensation in the fold: the undos a thread's completed tasks registered (`ctx.on_undo`, a
//! marker among a task's drawn values, taking effect with its `node_completed`), and where the
//! unwinding of a failed thread stands.
//!
//! When a thread fails for good with undos registered, the runner (`exec/compensate.rs`)
//! records `compensation_began` instead of the failure, keeps the thread Running, and runs the
//! undos last registered first: `undo_started` (durable) before each runs, `undo_finished`
//! after. A restore knows from these which undo ran, which was in flight (it runs again with the
//! same idempotency key) and which are left; once all finished the thread moves to Failed.

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::event::TaskKey;
use crate::marks;

/// One registered undo.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Undo {
    /// The compensation's name.
    pub name: String,
    /// Its arguments.
    pub args: Value,
    /// The task that registered it.
    pub task: TaskKey,
    /// The step of that task.
    pub step: u64,
}

/// Where the unwinding of a failed thread stands.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Unwinding {
    /// Why the thread failed (the reason its final status change gets).
    pub reason: String,
    /// Undos finished (the last `done` registered).
    pub done: u32,
    /// The index of the undo started and not yet finished, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub running: Option<u32>,
}

/// The undos `values` (a completed task's drawn values) register, in order.
pub fn registered(task: &TaskKey, step: u64, values: &[Value]) -> Vec<Undo> {
    values
        .iter()
        .filter_map(marks::undo_in)
        .map(|(name, args)| Undo {
            name: name.to_owned(),
            args: args.clone(),
            task: task.clone(),
            step,
        })
        .collect()
}

/// The next undo to run of `undos` once `done` finished: the index (in registration order) of
/// the last one not yet run.
pub fn next(undos: &[Undo], done: u32) -> Option<u32> {
    let left = u32::try_from(undos.len()).unwrap_or(u32::MAX).checked_sub(done)?;
    left.checked_sub(1)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn undos_run_last_registered_first() {
        let t = TaskKey::node("book");
        let values = [json!({"clock": 1}), marks::undo("a", json!(1)), marks::undo("b", json!(2))];
        let undos = registered(&t, 3, &values);
        assert_eq!(undos.iter().map(|u| u.name.as_str()).collect::<Vec<_>>(), ["a", "b"]);
        assert_eq!(next(&undos, 0), Some(1));
        assert_eq!(next(&undos, 1), Some(0));
        assert_eq!(next(&undos, 2), None);
        assert_eq!(next(&[], 0), None);
    }
}
