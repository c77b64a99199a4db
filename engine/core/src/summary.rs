//! The small JSON summary a thread record keeps for listings (step, frontier, progress, last
//! error, deadline, the timer a sleeping thread waits for, whether it waits in a select for a
//! child's end): written by the runner with every
//! batch, read by listings, by the resume check (which sets the last error of a thread it
//! blocks), by recovery (the deadline of a parked thread) and by a timer as it fires (is it
//! the sleep's own?), and the cursor of each signal name its nodes took (read by the health
//! pass's signal backlog; only when there is one, so a thread without signals pays nothing).

use std::collections::BTreeMap;

use serde::Serialize;
use serde_json::Value;

use crate::limits::SUMMARY_SIGNAL_NAMES_MAX;

use crate::select::pending_children;
use crate::thread_ctx::{ThreadCtx, Waiting};

/// A small JSON summary kept in the thread record for listings (step, frontier, progress).
/// Written on every batch, so written field by field into one buffer: the bytes are those
/// `serde_json` writes for the same fields (the test `summary_bytes_are_serde_json_s` holds it
/// to that), without its per-field machinery.
pub fn summary_bytes(ctx: &ThreadCtx) -> Vec<u8> {
    let m = &ctx.meta;
    let mut out = Vec::with_capacity(96);
    out.extend_from_slice(b"{\"step\":");
    push_u64(&mut out, m.step);
    out.extend_from_slice(b",\"frontier\":[");
    for (i, node) in m.frontier.iter().enumerate() {
        if i > 0 {
            out.push(b',');
        }
        push_str(&mut out, node);
    }
    out.extend_from_slice(b"],\"progress\":");
    push_json(&mut out, &m.progress);
    out.extend_from_slice(b",\"last_error\":");
    match m.errors.back() {
        Some(e) => push_str(&mut out, &e.error.to_string()),
        None => out.extend_from_slice(b"null"),
    }
    out.extend_from_slice(b",\"deadline_at_ms\":");
    match m.policy.deadline_at_ms {
        Some(ms) => push_u64(&mut out, ms),
        None => out.extend_from_slice(b"null"),
    }
    if let Some(Waiting::Timer { until_ms, .. }) = &m.waiting {
        out.extend_from_slice(b",\"sleeping_until_ms\":");
        push_u64(&mut out, *until_ms);
    }
    if selecting_children_of(ctx) {
        out.extend_from_slice(b",\"selecting_children\":true");
    }
    if !m.signals.is_empty() {
        out.extend_from_slice(b",\"signals\":");
        push_json(&mut out, &Cursors(&m.signals));
    }
    if m.signals.len() > SUMMARY_SIGNAL_NAMES_MAX {
        out.extend_from_slice(b",\"signals_partial\":true");
    }
    out.push(b'}');
    out
}

/// Whether the thread waits in a select for a child's end.
fn selecting_children_of(ctx: &ThreadCtx) -> bool {
    match &ctx.meta.waiting {
        Some(Waiting::Timer { task, .. } | Waiting::Signal { task, .. }) => {
            ctx.meta.open.get(task).is_some_and(|j| !pending_children(&j.values).is_empty())
        }
        _ => false,
    }
}

/// Writes `n` in decimal.
fn push_u64(out: &mut Vec<u8>, mut n: u64) {
    let mut digits = [0u8; 20];
    let mut i = digits.len();
    loop {
        i -= 1;
        digits[i] = b'0' + (n % 10) as u8;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    out.extend_from_slice(&digits[i..]);
}

/// Writes `s` as a JSON string: as it is between quotes when nothing in it needs escaping (the
/// common case: node names), else as `serde_json` escapes it.
fn push_str(out: &mut Vec<u8>, s: &str) {
    if s.bytes().all(|b| b >= 0x20 && b != b'"' && b != b'\\') {
        out.push(b'"');
        out.extend_from_slice(s.as_bytes());
        out.push(b'"');
    } else {
        push_json(out, s);
    }
}

/// Writes `value` as `serde_json` does (a value that cannot fail to serialise: strings, maps
/// of strings to numbers, the progress).
fn push_json<T: Serialize + ?Sized>(out: &mut Vec<u8>, value: &T) {
    if serde_json::to_writer(&mut *out, value).is_err() {
        out.extend_from_slice(b"null");
    }
}

/// A thread's signal cursors, serialised as a map of at most [`SUMMARY_SIGNAL_NAMES_MAX`]
/// names (the first by name).
struct Cursors<'a>(&'a BTreeMap<String, u64>);

impl Serialize for Cursors<'_> {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_map(self.0.iter().take(SUMMARY_SIGNAL_NAMES_MAX))
    }
}

/// The signal cursors a summary keeps: per name, the number of the last signal of that name a
/// node of the thread took, and whether the map is partial (the thread took more names than
/// [`SUMMARY_SIGNAL_NAMES_MAX`]; a name absent from a partial map is unknown, not untaken).
/// A summary without cursors (no signal taken, or written before summaries kept them) gives
/// an empty map.
pub fn signal_cursors(summary: &[u8]) -> (BTreeMap<String, u64>, bool) {
    let Ok(v) = serde_json::from_slice::<Value>(summary) else { return (BTreeMap::new(), false) };
    let cursors = v
        .get("signals")
        .and_then(Value::as_object)
        .map(|m| m.iter().filter_map(|(k, n)| Some((k.clone(), n.as_u64()?))).collect())
        .unwrap_or_default();
    (cursors, v.get("signals_partial").and_then(Value::as_bool).unwrap_or(false))
}

/// The record's JSON summary with `last_error` set to `error` (the other fields kept as the
/// runner wrote them; a summary that is not a JSON object becomes one).
pub fn with_last_error(summary: &[u8], error: &str) -> Vec<u8> {
    let mut v: Value = serde_json::from_slice(summary).unwrap_or(Value::Null);
    if !v.is_object() {
        v = Value::Object(serde_json::Map::new());
    }
    if let Value::Object(m) = &mut v {
        m.insert("last_error".into(), Value::String(error.to_owned()));
    }
    serde_json::to_vec(&v).unwrap_or_default()
}

/// The deadline kept in a summary, if any (a summary that does not parse has none).
pub fn deadline_at_ms(summary: &[u8]) -> Option<u64> {
    field(summary, "deadline_at_ms")
}

/// The time the durable timer a sleeping thread waits for is due, kept in its summary (none in
/// a record written before the summary kept it).
pub fn sleeping_until_ms(summary: &[u8]) -> Option<u64> {
    field(summary, "sleeping_until_ms")
}

/// Whether the parked thread of this summary waits in a select for the end of a child (which
/// wakes it: `exec/signals.rs`), so that a look for what wakes it reads its log only then.
pub fn selecting_children(summary: &[u8]) -> bool {
    let v: Option<Value> = serde_json::from_slice(summary).ok();
    v.and_then(|v| v.get("selecting_children").and_then(Value::as_bool)).unwrap_or(false)
}

fn field(summary: &[u8], name: &str) -> Option<u64> {
    let v: Value = serde_json::from_slice(summary).ok()?;
    v.get(name).and_then(Value::as_u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_cursors(c: &Cursors<'_>) -> bool {
        c.0.is_empty()
    }

    /// The summary as `serde_json` writes it from a struct: what `summary_bytes` must equal.
    fn serde_summary(ctx: &ThreadCtx) -> Vec<u8> {
        #[derive(serde::Serialize)]
        struct Summary<'a> {
            step: u64,
            frontier: &'a [String],
            progress: &'a Option<cairn_dsl::Progress>,
            last_error: Option<String>,
            deadline_at_ms: Option<u64>,
            #[serde(skip_serializing_if = "Option::is_none")]
            sleeping_until_ms: Option<u64>,
            #[serde(skip_serializing_if = "std::ops::Not::not")]
            selecting_children: bool,
            #[serde(skip_serializing_if = "no_cursors")]
            signals: Cursors<'a>,
            #[serde(skip_serializing_if = "std::ops::Not::not")]
            signals_partial: bool,
        }
        let m = &ctx.meta;
        serde_json::to_vec(&Summary {
            step: m.step,
            frontier: &m.frontier,
            progress: &m.progress,
            last_error: m.errors.back().map(|e| e.error.to_string()),
            deadline_at_ms: m.policy.deadline_at_ms,
            sleeping_until_ms: match &m.waiting {
                Some(Waiting::Timer { until_ms, .. }) => Some(*until_ms),
                _ => None,
            },
            selecting_children: selecting_children_of(ctx),
            signals: Cursors(&m.signals),
            signals_partial: m.signals.len() > SUMMARY_SIGNAL_NAMES_MAX,
        })
        .unwrap()
    }

    #[test]
    fn summary_bytes_are_serde_json_s() {
        let mut ctx = crate::fold_samples::running_one_node("summary");
        let check = |ctx: &ThreadCtx| {
            let (ours, theirs) = (summary_bytes(ctx), serde_summary(ctx));
            assert_eq!(String::from_utf8_lossy(&ours), String::from_utf8_lossy(&theirs));
        };
        check(&ctx);
        for (step, frontier) in [
            (0, vec![]),
            (u64::MAX, vec!["a".to_owned(), "b-2".to_owned()]),
            (10, vec!["quote\"d".to_owned(), "back\\slash".to_owned(), "ctl\u{1}\n".to_owned()]),
            (7, vec!["ünï ☃".to_owned(), "del\u{7f}".to_owned()]),
        ] {
            ctx.meta.step = step;
            ctx.meta.frontier = frontier;
            check(&ctx);
        }
        ctx.meta.policy.deadline_at_ms = Some(1_700_000_000_000);
        ctx.meta.progress = Some(cairn_dsl::Progress {
            step: 2,
            total: 5,
            message: "hälf \"way\"".into(),
            percent: Some(42.5),
            detail: Some("ctl\u{2}".into()),
        });
        check(&ctx);
        let task = crate::event::TaskKey { node: "n".into(), item: None };
        let error = cairn_dsl::NodeError::fatal("it \"broke\"\n");
        ctx.meta.errors.push_back(crate::thread_ctx::ErrorEntry { seq: 3, task, error, at_ms: 9 });
        ctx.meta.waiting = Some(Waiting::Timer {
            task: crate::event::TaskKey { node: "n".into(), item: Some(2) },
            until_ms: 123,
        });
        check(&ctx);
        for i in 0..=SUMMARY_SIGNAL_NAMES_MAX {
            ctx.meta.signals.insert(format!("n\t{i}"), i as u64);
            if i % 16 == 0 || i == SUMMARY_SIGNAL_NAMES_MAX {
                check(&ctx);
            }
        }
    }

    #[test]
    fn last_error_replaces_only_its_field() {
        let s = br#"{"step":3,"frontier":["a"],"last_error":null}"#;
        let v: serde_json::Value = serde_json::from_slice(&with_last_error(s, "why")).unwrap();
        assert_eq!(v, serde_json::json!({"step": 3, "frontier": ["a"], "last_error": "why"}));
        let v: serde_json::Value = serde_json::from_slice(&with_last_error(b"", "why")).unwrap();
        assert_eq!(v, serde_json::json!({"last_error": "why"}));
    }

    #[test]
    fn signal_cursors_only_when_some_and_bounded() {
        let mut ctx = crate::fold_samples::running_one_node("cursors");
        let s = summary_bytes(&ctx);
        assert!(!String::from_utf8_lossy(&s).contains("signals"));
        assert_eq!(signal_cursors(&s), (BTreeMap::new(), false));
        ctx.meta.signals.insert("a".into(), 4);
        assert_eq!(signal_cursors(&summary_bytes(&ctx)), ([("a".to_owned(), 4)].into(), false));
        for i in 0..SUMMARY_SIGNAL_NAMES_MAX {
            ctx.meta.signals.insert(format!("n{i:03}"), 1);
        }
        let (cursors, partial) = signal_cursors(&summary_bytes(&ctx));
        assert_eq!(cursors.len(), SUMMARY_SIGNAL_NAMES_MAX);
        assert!(partial);
    }
}
