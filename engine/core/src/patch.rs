//! Patch markers: what `ctx.patched(id)` records, among a task's drawn values, the first time
//! a live attempt reaches that call with nothing recorded past it (`{"patch": "id"}`).
//!
//! The decision a patch call makes, live or in a replay, from the task's recorded values
//! (the queue the attempt consumes in order):
//!
//! | what the recorded history holds at the call | `patched(id)` | recorded |
//! |---|---|---|
//! | a marker of `id` in the run of markers at the front | true (the marker is consumed) | nothing |
//! | anything else not yet consumed (values, tool calls, inputs, fired timers) | false: the old code passed this point | nothing |
//! | nothing left (a live attempt at the head of its history) | true | the marker |
//!
//! A replay only re-runs tasks that completed, so its history always reaches past every call:
//! there, true iff the marker is there. Markers are invisible to every other read: a clock
//! reading, random number, id or signal receipt skips the markers before it. So a log keeps
//! replaying once a patch call is deleted from the code (after its old branch was removed), and
//! logs written before patches existed hold none and read as before.

use std::collections::VecDeque;

use serde_json::{Map, Value};

/// The tag of a patch marker among drawn values.
pub const TAG: &str = crate::marks::PATCH;

/// The marker `patched(id)` records.
pub fn marker(id: &str) -> Value {
    let mut tagged = Map::new();
    tagged.insert(TAG.to_owned(), Value::String(id.to_owned()));
    Value::Object(tagged)
}

/// The patch id a recorded value marks, if it is a marker.
pub fn marked(value: &Value) -> Option<&str> {
    let tagged = value.as_object().filter(|o| o.len() == 1)?;
    tagged.get(TAG)?.as_str()
}

/// Takes the marker of `id` out of the run of markers at the front of `values`, if it is there.
/// Only the front run: a marker recorded after a drawn value belongs to a later call site.
pub fn take(values: &mut VecDeque<Value>, id: &str) -> bool {
    let found = values
        .iter()
        .take_while(|v| crate::marks::is_marker(v))
        .position(|v| marked(v) == Some(id));
    match found {
        Some(i) => {
            values.remove(i);
            true
        }
        None => false,
    }
}

/// Drops the markers at the front of `values` (of patches, undos, continue-as-new:
/// `core::marks`), before a draw or a signal receipt reads the next recorded value: markers are
/// only read by the calls that record them.
pub fn skip(values: &mut VecDeque<Value>) {
    while values.front().is_some_and(crate::marks::is_marker) {
        values.pop_front();
    }
}

/// Whether `values` (one event's drawn values) hold the marker of `id`.
pub fn holds(values: &[Value], id: &str) -> bool {
    values.iter().any(|v| marked(v) == Some(id))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_marker_is_found_in_the_front_run_only() {
        let mut q: VecDeque<Value> =
            [marker("b"), marker("a"), json!({"clock": 1}), marker("c")].into_iter().collect();
        assert!(!take(&mut q, "c"), "after a drawn value: another call site");
        assert!(take(&mut q, "a"));
        assert!(!take(&mut q, "a"), "consumed once");
        assert_eq!(q.len(), 3);
    }

    #[test]
    fn draws_skip_markers() {
        let mut q: VecDeque<Value> = [marker("x"), json!({"random": 4}), marker("y")].into();
        skip(&mut q);
        assert_eq!(q.pop_front(), Some(json!({"random": 4})));
        skip(&mut q);
        assert!(q.is_empty());
        assert_eq!(marked(&json!({"clock": 1})), None);
        assert_eq!(marked(&json!({"patch": 1})), None);
        assert!(holds(&[json!(1), marker("x")], "x"));
    }
}
