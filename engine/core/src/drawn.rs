//! Values a node draws through its context (clock readings, random numbers, ids), as the log
//! records them: tagged by kind, `{"clock": 1700000000000}`, `{"random": 42}`, `{"id": "…"}`, so
//! that code that now draws them in another order is caught even where two kinds share a type
//! (a clock reading and a random number are both numbers). Logs written before the tags hold
//! the bare value; it is read as a value of whatever kind the code asks for (the type is still
//! checked by the caller).

use serde_json::{Map, Value};

/// What a drawn value is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Drawn {
    /// `ctx.now_ms()`.
    Clock,
    /// `ctx.random_u64()`.
    Random,
    /// `ctx.new_id()`.
    Id,
    /// `ctx.recv(name)` / `ctx.try_recv(name)`: `{"name", "n", "value"}` for the signal
    /// received, `{"name"}` alone when `try_recv` found none (see `received`).
    Signal,
    /// `ctx.start_child(..)`: the child started (`core::child_start::start_record`).
    ChildStart,
    /// `ctx.join_child(..)`: how the child ended (`core::child_start::ChildEnd`).
    ChildJoin,
    /// Where `ctx.select` starts: the names and the deadline it waits for (`crate::select`).
    Wait,
    /// What `ctx.select` took: a signal as [`Drawn::Signal`] records it, or the deadline, and
    /// the fired timers it consumed (`crate::select`).
    Waited,
}

impl Drawn {
    /// The tag in the log.
    pub fn tag(self) -> &'static str {
        match self {
            Drawn::Clock => "clock",
            Drawn::Random => "random",
            Drawn::Id => "id",
            Drawn::Signal => "signal",
            Drawn::ChildStart => "child_start",
            Drawn::ChildJoin => "child_join",
            Drawn::Wait => "wait",
            Drawn::Waited => "waited",
        }
    }

    /// What people call it, in nondeterminism and divergence reports.
    pub fn name(self) -> &'static str {
        match self {
            Drawn::Clock => "clock reading",
            Drawn::Random => "random number",
            Drawn::Id => "id",
            Drawn::Signal => "signal",
            Drawn::ChildStart => "child start",
            Drawn::ChildJoin => "child join",
            Drawn::Wait => "wait",
            Drawn::Waited => "wait outcome",
        }
    }

    /// `value` as the log records it.
    pub fn record(self, value: Value) -> Value {
        let mut tagged = Map::new();
        tagged.insert(self.tag().to_owned(), value);
        Value::Object(tagged)
    }

    /// The value inside a recorded one, if it was drawn as this kind (or recorded before
    /// values were tagged); otherwise what it was drawn as.
    pub fn read(self, recorded: &Value) -> Result<Value, String> {
        let Value::Object(tagged) = recorded else { return Ok(recorded.clone()) };
        match tagged.iter().next() {
            Some((tag, value)) if tagged.len() == 1 && tag == self.tag() => Ok(value.clone()),
            Some((tag, _)) if tagged.len() == 1 => Err(tag.clone()),
            _ => Err(format!("an unknown record {recorded}")),
        }
    }
}

/// The signal a recorded [`Drawn::Signal`] value (the inner object) says was received: its
/// name, and its number and value when one was (`None`: `try_recv` found none).
pub fn received(inner: &Value) -> Option<(&str, Option<(u64, &Value)>)> {
    let name = inner.get("name")?.as_str()?;
    match (inner.get("n").and_then(Value::as_u64), inner.get("value")) {
        (Some(n), Some(value)) => Some((name, Some((n, value)))),
        _ => Some((name, None)),
    }
}

/// The signals a list of recorded values received (by a receive or a select): (name, n) of
/// each, in order.
pub fn signals_in(values: &[Value]) -> impl Iterator<Item = (&str, u64)> {
    values.iter().filter_map(|v| {
        let tagged = v.as_object().filter(|o| o.len() == 1)?;
        let inner = tagged.get(Drawn::Signal.tag()).or_else(|| tagged.get(Drawn::Waited.tag()))?;
        let (name, got) = received(inner)?;
        got.map(|(n, _)| (name, n))
    })
}

/// A random number for a task's `n`th fresh draw: a function of the thread's recorded seed and
/// the task's identity only, so whichever process drives the thread, and whatever the timing,
/// the thread draws the same values.
pub fn task_random(
    seed: u64,
    thread: &cairn_storage::ThreadId,
    step: u64,
    task: &str,
    attempt: u32,
    n: u64,
) -> u64 {
    let mut h = blake3::Hasher::new();
    h.update(&seed.to_le_bytes());
    h.update(thread.as_str().as_bytes());
    h.update(&[0]);
    h.update(&step.to_le_bytes());
    h.update(task.as_bytes());
    h.update(&[0]);
    h.update(&attempt.to_le_bytes());
    h.update(&n.to_le_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&h.finalize().as_bytes()[..8]);
    u64::from_le_bytes(first)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn a_value_reads_back_as_its_kind_and_only_as_it() {
        let recorded = Drawn::Clock.record(json!(1_700));
        assert_eq!(recorded, json!({"clock": 1_700}));
        assert_eq!(Drawn::Clock.read(&recorded), Ok(json!(1_700)));
        assert_eq!(Drawn::Random.read(&recorded), Err("clock".to_owned()));
        assert_eq!(Drawn::Id.read(&Drawn::Id.record(json!("ab"))), Ok(json!("ab")));
    }

    #[test]
    fn an_untagged_value_of_an_older_log_reads_as_any_kind() {
        assert_eq!(Drawn::Random.read(&json!(7)), Ok(json!(7)));
        assert_eq!(Drawn::Id.read(&json!("x")), Ok(json!("x")));
        assert!(Drawn::Clock.read(&json!({"a": 1, "b": 2})).is_err());
    }
}
