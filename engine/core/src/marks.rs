//! Markers: calls a node makes that record a decision, not a drawn value, among a task's drawn
//! values, each a one-key object: `{"patch": id}` (`core::patch`), `{"undo": {"name", "args"}}`
//! (`ctx.on_undo`: a compensation registered when the task completes, `core::compensation`) and
//! `{"continue_as_new": input}` (`ctx.continue_as_new`: the thread ends with the step and its
//! successor starts, `core::continuation`) and `{"label": {"key", "value"}}` (`ctx.set_label`, a null
//! value for `ctx.remove_label`: applied when the step completes, `core::labels`). Every draw skips the markers before it, so a marker
//! never shifts the other values; a task that runs again consumes its recorded markers rather
//! than recording them twice.

use std::collections::VecDeque;

use serde_json::{Map, Value};

/// The tag of a patch marker (`core::patch`).
pub const PATCH: &str = "patch";
/// The tag of an undo marker.
pub const UNDO: &str = "undo";
/// The tag of a continue-as-new marker.
pub const CONTINUE: &str = "continue_as_new";

/// The tag of a label marker.
pub const LABEL: &str = "label";

/// Whether `value` is a marker (of a patch, an undo, a continue-as-new or a label change).
pub fn is_marker(value: &Value) -> bool {
    value.as_object().filter(|o| o.len() == 1).is_some_and(|o| {
        o.get(PATCH).is_some_and(Value::is_string)
            || o.get(UNDO).is_some_and(Value::is_object)
            || o.get(LABEL).is_some_and(Value::is_object)
            || o.contains_key(CONTINUE)
    })
}

/// The marker `ctx.set_label(key, value)` (`Some`) or `ctx.remove_label(key)` (`None`) records.
pub fn label(key: &str, value: Option<&str>) -> Value {
    let mut inner = Map::new();
    inner.insert("key".to_owned(), Value::String(key.to_owned()));
    inner.insert("value".to_owned(), value.map_or(Value::Null, |v| Value::String(v.to_owned())));
    tagged(LABEL, Value::Object(inner))
}

/// The label change a recorded value asks for: its key and new value (`None`: removed).
pub fn label_in(value: &Value) -> Option<(&str, Option<&str>)> {
    let inner = value.as_object().filter(|o| o.len() == 1)?.get(LABEL)?;
    let key = inner.get("key")?.as_str()?;
    match inner.get("value")? {
        Value::Null => Some((key, None)),
        Value::String(v) => Some((key, Some(v))),
        _ => None,
    }
}

fn tagged(tag: &str, value: Value) -> Value {
    let mut m = Map::new();
    m.insert(tag.to_owned(), value);
    Value::Object(m)
}

/// The marker `ctx.on_undo(name, args)` records.
pub fn undo(name: &str, args: Value) -> Value {
    let mut inner = Map::new();
    inner.insert("name".to_owned(), Value::String(name.to_owned()));
    inner.insert("args".to_owned(), args);
    tagged(UNDO, Value::Object(inner))
}

/// The marker `ctx.continue_as_new(input)` records.
pub fn successor(input: Value) -> Value {
    tagged(CONTINUE, input)
}

/// The undo a recorded value registers: its compensation's name and arguments.
pub fn undo_in(value: &Value) -> Option<(&str, &Value)> {
    let inner = value.as_object().filter(|o| o.len() == 1)?.get(UNDO)?;
    Some((inner.get("name")?.as_str()?, inner.get("args")?))
}

/// The successor's input a recorded value asks for.
pub fn successor_in(value: &Value) -> Option<&Value> {
    value.as_object().filter(|o| o.len() == 1)?.get(CONTINUE)
}

/// Takes `marker` out of the run of markers at the front of `values`, if it is there: a task
/// run again meets the marker its earlier run recorded (and records nothing new).
pub fn take(values: &mut VecDeque<Value>, marker: &Value) -> bool {
    match values.iter().take_while(|v| is_marker(v)).position(|v| v == marker) {
        Some(i) => {
            values.remove(i);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn markers_are_told_from_drawn_values() {
        let u = undo("cancel", json!({"id": 1}));
        assert!(is_marker(&u));
        assert_eq!(undo_in(&u), Some(("cancel", &json!({"id": 1}))));
        let c = successor(json!(3));
        assert!(is_marker(&c));
        assert_eq!(successor_in(&c), Some(&json!(3)));
        assert!(is_marker(&json!({"patch": "x"})));
        let l = label("stage", Some("paid"));
        assert!(is_marker(&l));
        assert_eq!(label_in(&l), Some(("stage", Some("paid"))));
        assert_eq!(label_in(&label("stage", None)), Some(("stage", None)));
        assert!(!is_marker(&json!({"label": "x"})));
        assert!(!is_marker(&json!({"clock": 1})));
        assert!(!is_marker(&json!({"undo": 1})));
        let mut q: VecDeque<Value> =
            [json!({"patch": "p"}), u.clone(), json!({"random": 1}), c.clone()].into();
        assert!(!take(&mut q, &c), "after a drawn value: a later call");
        assert!(take(&mut q, &u));
        assert!(!take(&mut q, &u), "consumed once");
    }
}
