//! The small JSON summary a thread record keeps for listings (step, frontier, progress, last
//! error, deadline): written by the runner with every batch, read by listings, by the resume
//! check (which sets the last error of a thread it blocks) and by recovery (the deadline of a
//! parked thread).

use serde_json::Value;

use crate::core::thread_ctx::ThreadCtx;

/// A small JSON summary kept in the thread record for listings (step, frontier, progress).
/// Written on every batch, so serialised from borrowed fields without building a JSON tree.
pub(crate) fn summary_bytes(ctx: &ThreadCtx) -> Vec<u8> {
    #[derive(serde::Serialize)]
    struct Summary<'a> {
        step: u64,
        frontier: &'a [String],
        progress: &'a Option<cairn_dsl::Progress>,
        last_error: Option<String>,
        deadline_at_ms: Option<u64>,
    }
    let summary = Summary {
        step: ctx.meta.step,
        frontier: &ctx.meta.frontier,
        progress: &ctx.meta.progress,
        last_error: ctx.meta.errors.back().map(|e| e.error.to_string()),
        deadline_at_ms: ctx.meta.policy.deadline_at_ms,
    };
    serde_json::to_vec(&summary).unwrap_or_default()
}

/// The record's JSON summary with `last_error` set to `error` (the other fields kept as the
/// runner wrote them; a summary that is not a JSON object becomes one).
pub(crate) fn with_last_error(summary: &[u8], error: &str) -> Vec<u8> {
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
pub(crate) fn deadline_at_ms(summary: &[u8]) -> Option<u64> {
    let v: Value = serde_json::from_slice(summary).ok()?;
    v.get("deadline_at_ms").and_then(Value::as_u64)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn last_error_replaces_only_its_field() {
        let s = br#"{"step":3,"frontier":["a"],"last_error":null}"#;
        let v: serde_json::Value = serde_json::from_slice(&with_last_error(s, "why")).unwrap();
        assert_eq!(v, serde_json::json!({"step": 3, "frontier": ["a"], "last_error": "why"}));
        let v: serde_json::Value = serde_json::from_slice(&with_last_error(b"", "why")).unwrap();
        assert_eq!(v, serde_json::json!({"last_error": "why"}));
    }
}
