//! The records of a select (`ctx.select`, `ctx.recv_timeout`): where it starts and what it took,
//! two drawn values of the task (`crate::drawn`), shared by the live run, its wakers and replay.
//!
//! - Start, `{"wait": {"names": [..], "until_ms": t | null}}`, with `"children": [ids]` when it
//!   also waits for children's ends (`Select::child`): drawn when the select first runs.
//!   A task that parks in the select holds it as the last value of its park (`TimerSet` with a
//!   deadline, `SignalAwaited` without), which is how a sender finds the names that wake it.
//! - Outcome, `{"waited": {"name", "n", "value", "timers"}}` for the signal taken (read by
//!   [`crate::drawn::signals_in`] as a receipt, so the fold moves the name's cursor past it), or
//!   `{"waited": {"child": <ChildEnd record>, "timers"}}` for a child's end (the lowest-listed
//!   ended child), `{"waited": {"timers"}}` for the deadline. `timers` counts the durable timers that fired for
//!   this select (its deadline's, each time the thread slept on it), consumed here so that a
//!   later `sleep` of the task does not take one of them for its own.
//!
//! The outcome goes to the log with the task's next record, as a receipt does: a crash before
//! that write loses the decision, never a signal (a signal not recorded as taken stays in the
//! inbox, and the task decides again when it runs again).

use cairn_dsl::NodeError;
use serde_json::{Map, Value};

use crate::child_start::ChildEnd;
use crate::drawn::Drawn;

/// The start record of a select over `names` until `until_ms` (recorded, tagged).
pub fn start(names: &[String], until_ms: Option<u64>) -> Value {
    start_with_children(names, &[], until_ms)
}

/// The start record of a select over `names` and the ends of `children` until `until_ms`
/// (no `children` key when there are none, so a signals-only select records as before).
pub fn start_with_children(names: &[String], children: &[String], until_ms: Option<u64>) -> Value {
    let mut inner = Map::new();
    inner.insert("names".into(), Value::from(names.to_vec()));
    inner.insert("until_ms".into(), until_ms.map_or(Value::Null, Value::from));
    if !children.is_empty() {
        inner.insert("children".into(), Value::from(children.to_vec()));
    }
    Drawn::Wait.record(Value::Object(inner))
}

/// The children a start record (the inner object) waits for (none for a record without them);
/// `None` when the key holds something else than a list of ids.
pub fn started_children(inner: &Value) -> Option<Vec<String>> {
    match inner.get("children") {
        None => Some(Vec::new()),
        Some(ids) => {
            ids.as_array()?.iter().map(|n| n.as_str().map(str::to_owned)).collect::<Option<_>>()
        }
    }
}

/// The names and deadline a start record (the inner object) holds.
pub fn started(inner: &Value) -> Option<(Vec<String>, Option<u64>)> {
    let names = inner.get("names")?.as_array()?;
    let names = names.iter().map(|n| n.as_str().map(str::to_owned)).collect::<Option<_>>()?;
    Some((names, inner.get("until_ms")?.as_u64()))
}

/// The names a task parked in a select waits for: those of its start record when it is the
/// last of `values` (the task's recorded values, its park's last).
pub fn pending_names(values: &[Value]) -> Option<Vec<String>> {
    let inner = Drawn::Wait.read(values.last()?).ok()?;
    started(&inner).map(|(names, _)| names)
}

/// The children a task parked in a select waits for the end of: those of its start record
/// when it is the last of `values` (none: not parked in a select, or one without children).
pub fn pending_children(values: &[Value]) -> Vec<String> {
    let inner = values.last().and_then(|v| Drawn::Wait.read(v).ok());
    inner.and_then(|inner| started_children(&inner)).unwrap_or_default()
}

/// The prefix of the name that a child's end wakes a select waiting for it by (the
/// `signal_arrived` that wakes the parent names [`child_end_name`]): the engine's own, never a
/// signal in an inbox.
pub const CHILD_END_PREFIX: &str = "cairn.child.";

/// The name a child's end wakes a select by (see [`CHILD_END_PREFIX`]).
pub fn child_end_name(child: &str) -> String {
    format!("{CHILD_END_PREFIX}{child}")
}

/// What a select took.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The signal taken (name, inbox number, value); `None` with no `child` either: the
    /// deadline passed.
    pub signal: Option<(String, u64, Value)>,
    /// The child whose end was taken (never with a signal).
    pub child: Option<ChildEnd>,
    /// Durable timers of the task that fired for this select.
    pub timers: u32,
}

impl Outcome {
    /// The outcome as the log records it (tagged).
    pub fn record(&self) -> Value {
        let mut inner = Map::new();
        if let Some((name, n, value)) = &self.signal {
            inner.insert("name".into(), Value::from(name.as_str()));
            inner.insert("n".into(), Value::from(*n));
            inner.insert("value".into(), value.clone());
        }
        if let Some(end) = &self.child {
            inner.insert("child".into(), end.record());
        }
        inner.insert("timers".into(), Value::from(self.timers));
        Drawn::Waited.record(Value::Object(inner))
    }

    /// The outcome a recorded value holds; `Err`: what the value is instead (for a
    /// nondeterminism report).
    ///
    /// # Errors
    /// A value of another kind, or an outcome that does not read.
    pub fn read(recorded: &Value) -> Result<Outcome, String> {
        let inner = Drawn::Waited.read(recorded).map_err(|was| format!("a {was} value"))?;
        let timers = inner.get("timers").and_then(Value::as_u64);
        let timers = timers.and_then(|t| u32::try_from(t).ok());
        let Some(timers) = timers else {
            return Err(format!("a wait outcome {inner} that does not read"));
        };
        let signal = match crate::drawn::received(&inner) {
            Some((name, Some((n, value)))) => Some((name.to_owned(), n, value.clone())),
            _ => None,
        };
        let child = match inner.get("child") {
            None => None,
            Some(end) => match ChildEnd::read(end) {
                Some(end) if signal.is_none() => Some(end),
                _ => return Err(format!("a wait outcome {inner} that does not read")),
            },
        };
        Ok(Outcome { signal, child, timers })
    }
}

/// The suspension of a select with nothing to take yet: asleep until its deadline (a signal of
/// its names or the end of one of its children wakes it before), or waiting for a signal (or a
/// child's end, named by [`child_end_name`] when it waits for no signal) without one.
pub fn parked(names: &[String], children: &[String], until_ms: Option<u64>) -> NodeError {
    match (until_ms, names.first(), children.first()) {
        (Some(until_ms), _, _) => NodeError::Sleeping { until_ms },
        (None, Some(name), _) => NodeError::WaitingSignal { name: name.clone() },
        (None, None, Some(child)) => NodeError::WaitingSignal { name: child_end_name(child) },
        (None, None, None) => NodeError::Codec { detail: "a select waits for nothing".into() },
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_start_names_its_signals_to_the_wakers_only_while_it_is_the_last_value() {
        let names = vec!["approve".to_owned(), "reject".to_owned()];
        let s = start(&names, Some(9));
        assert_eq!(s, json!({"wait": {"names": ["approve", "reject"], "until_ms": 9}}));
        assert_eq!(pending_names(&[json!({"clock": 1}), s.clone()]), Some(names.clone()));
        assert_eq!(pending_names(&[s.clone(), json!({"clock": 1})]), None);
        assert_eq!(started_children(&s["wait"]), Some(vec![]));
        let kids = vec!["p/n@1/child-1".to_owned()];
        let w = start_with_children(&names, &kids, None);
        assert_eq!(started_children(&w["wait"]), Some(kids.clone()));
        assert_eq!(pending_children(&[json!({"clock": 1}), w.clone()]), kids);
        assert_eq!(pending_children(&[w.clone(), json!({"clock": 1})]), Vec::<String>::new());
        assert_eq!(pending_children(std::slice::from_ref(&s)), Vec::<String>::new());
        let parked_on = parked(&[], &kids, None);
        assert!(
            matches!(&parked_on, NodeError::WaitingSignal { name } if *name == child_end_name(&kids[0])),
            "{parked_on:?}"
        );
        assert_eq!(started_children(&json!({"children": [1]})), None);
        assert_eq!(
            started(&json!({"names": ["a"], "until_ms": null})),
            Some((vec!["a".into()], None))
        );
    }

    #[test]
    fn an_outcome_reads_back_and_a_taken_signal_counts_as_a_receipt() {
        let took =
            Outcome { signal: Some(("approve".into(), 4, json!(true))), child: None, timers: 0 };
        let timeout = Outcome { signal: None, child: None, timers: 2 };
        let end = ChildEnd {
            child: "p/n@1/child-1".into(),
            status: "completed".into(),
            output: Some(json!(3)),
            error: None,
        };
        let ended = Outcome { signal: None, child: Some(end), timers: 1 };
        for o in [&took, &timeout, &ended] {
            assert_eq!(Outcome::read(&o.record()).as_ref(), Ok(o));
        }
        let values = [took.record(), timeout.record()];
        assert_eq!(crate::drawn::signals_in(&values).collect::<Vec<_>>(), vec![("approve", 4)]);
        assert!(Outcome::read(&json!({"clock": 1})).is_err());
        assert!(Outcome::read(&json!({"waited": {}})).is_err());
    }
}
