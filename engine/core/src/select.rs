//! The records of a select (`ctx.select`, `ctx.recv_timeout`): where it starts and what it took,
//! two drawn values of the task (`crate::drawn`), shared by the live run, its wakers and replay.
//!
//! - Start, `{"wait": {"names": [..], "until_ms": t | null}}`: drawn when the select first runs.
//!   A task that parks in the select holds it as the last value of its park (`TimerSet` with a
//!   deadline, `SignalAwaited` without), which is how a sender finds the names that wake it.
//! - Outcome, `{"waited": {"name", "n", "value", "timers"}}` for the signal taken (read by
//!   [`crate::drawn::signals_in`] as a receipt, so the fold moves the name's cursor past it), or
//!   `{"waited": {"timers"}}` for the deadline. `timers` counts the durable timers that fired for
//!   this select (its deadline's, each time the thread slept on it), consumed here so that a
//!   later `sleep` of the task does not take one of them for its own.
//!
//! The outcome goes to the log with the task's next record, as a receipt does: a crash before
//! that write loses the decision, never a signal (a signal not recorded as taken stays in the
//! inbox, and the task decides again when it runs again).

use cairn_dsl::NodeError;
use serde_json::{Map, Value};

use crate::drawn::Drawn;

/// The start record of a select over `names` until `until_ms` (recorded, tagged).
pub fn start(names: &[String], until_ms: Option<u64>) -> Value {
    let mut inner = Map::new();
    inner.insert("names".into(), Value::from(names.to_vec()));
    inner.insert("until_ms".into(), until_ms.map_or(Value::Null, Value::from));
    Drawn::Wait.record(Value::Object(inner))
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

/// What a select took.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// The signal taken (name, inbox number, value); `None`: the deadline passed.
    pub signal: Option<(String, u64, Value)>,
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
        Ok(Outcome { signal, timers })
    }
}

/// The suspension of a select with nothing to take yet: asleep until its deadline (a signal of
/// its names wakes it before), or waiting for a signal without one.
pub fn parked(names: &[String], until_ms: Option<u64>) -> NodeError {
    match (until_ms, names.first()) {
        (Some(until_ms), _) => NodeError::Sleeping { until_ms },
        (None, Some(name)) => NodeError::WaitingSignal { name: name.clone() },
        (None, None) => NodeError::Codec { detail: "a select waits for nothing".into() },
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
        assert_eq!(pending_names(&[json!({"clock": 1}), s.clone()]), Some(names));
        assert_eq!(pending_names(&[s, json!({"clock": 1})]), None);
        assert_eq!(
            started(&json!({"names": ["a"], "until_ms": null})),
            Some((vec!["a".into()], None))
        );
    }

    #[test]
    fn an_outcome_reads_back_and_a_taken_signal_counts_as_a_receipt() {
        let took = Outcome { signal: Some(("approve".into(), 4, json!(true))), timers: 0 };
        let timeout = Outcome { signal: None, timers: 2 };
        for o in [&took, &timeout] {
            assert_eq!(Outcome::read(&o.record()).as_ref(), Ok(o));
        }
        let values = [took.record(), timeout.record()];
        assert_eq!(crate::drawn::signals_in(&values).collect::<Vec<_>>(), vec![("approve", 4)]);
        assert!(Outcome::read(&json!({"clock": 1})).is_err());
        assert!(Outcome::read(&json!({"waited": {}})).is_err());
    }
}
