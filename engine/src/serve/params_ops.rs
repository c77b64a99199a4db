//! The request parameters of the endpoint's operations reads (`ops`): a thread's debug bundle
//! and the resumable threads. Pure functions of decoded query pairs, as in [`super::params`]
//! (the fuzz target `serve_params` drives them too); every refusal names its field.

use std::collections::BTreeMap;

use serde_json::Value;

use super::params::{Reject, flag, number};
use crate::debug::{ExportOptions, Redaction};

/// The parameters `GET /api/threads/{id}/bundle` knows.
const BUNDLE_KNOWN: [&str; 6] =
    ["redact_key", "secret", "meta", "checkpoints", "last_events", "max_payload_bytes"];

/// Parses the query of `GET /api/threads/{id}/bundle` into export options, as `cairn bundle
/// export`'s flags: `redact_key`, `secret` and `meta` (`KEY=VALUE`, kept as a string) may be
/// repeated; `checkpoints` (default 1), `last_events` (at least 1) and `max_payload_bytes` are
/// given at most once. The bundle is never compressed here (the caller compresses what it
/// writes); whether the redaction rules work is the export's to judge.
///
/// # Errors
/// A 400 naming the parameter: unknown, repeated when it may not be, or malformed.
///
/// # Examples
/// ```
/// use cairn::serve::params_ops::bundle_params;
/// let pairs = vec![("last_events".to_owned(), "0".to_owned())];
/// assert_eq!(bundle_params(&pairs).unwrap_err().field.as_deref(), Some("last_events"));
/// ```
pub fn bundle_params(pairs: &[(String, String)]) -> Result<ExportOptions, Reject> {
    let mut options = ExportOptions {
        include_checkpoints: true,
        redaction: Redaction::default(),
        ..ExportOptions::default()
    };
    let mut metadata = BTreeMap::new();
    let mut seen: Vec<&str> = Vec::new();
    for (key, value) in pairs {
        let Some(name) = BUNDLE_KNOWN.iter().copied().find(|k| *k == key.as_str()) else {
            let field = key.chars().take(64).collect::<String>();
            let known = BUNDLE_KNOWN.join(", ");
            return Err(Reject::bad(&field, format!("unknown parameter (known: {known})")));
        };
        let once = !matches!(name, "redact_key" | "secret" | "meta");
        if once && seen.contains(&name) {
            return Err(Reject::bad(name, "given more than once"));
        }
        seen.push(name);
        match name {
            "redact_key" => options.redaction.key_patterns.push(value.clone()),
            "secret" => options.redaction.secrets.push(value.clone()),
            "meta" => match value.split_once('=') {
                Some((k, v)) if !k.is_empty() => {
                    metadata.insert(k.to_owned(), Value::String(v.to_owned()));
                }
                _ => return Err(Reject::bad("meta", format!("expected KEY=VALUE, got {value:?}"))),
            },
            "checkpoints" => options.include_checkpoints = flag("checkpoints", value)?,
            "last_events" => {
                let n: usize = number("last_events", value)?;
                if n == 0 {
                    return Err(Reject::bad("last_events", "must keep at least one event"));
                }
                options.last_events = Some(n);
            }
            _ => options.max_payload_bytes = Some(number("max_payload_bytes", value)?),
        }
    }
    options.metadata = metadata;
    Ok(options)
}

/// Parses the query of `GET /api/resumable`: `max_age_ms`, at most once (every resumable thread
/// without it).
///
/// # Errors
/// A 400 naming the parameter.
///
/// # Examples
/// ```
/// use cairn::serve::params_ops::resumable_params;
/// let pairs = vec![("max_age_ms".to_owned(), "60000".to_owned())];
/// assert_eq!(resumable_params(&pairs).unwrap(), Some(60_000));
/// ```
pub fn resumable_params(pairs: &[(String, String)]) -> Result<Option<u64>, Reject> {
    let mut max_age = None;
    for (_, value) in super::params::unique(pairs, &["max_age_ms"])? {
        max_age = Some(number("max_age_ms", value)?);
    }
    Ok(max_age)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn q(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs.iter().map(|(k, v)| ((*k).to_owned(), (*v).to_owned())).collect()
    }

    #[test]
    fn a_bundle_query_is_read_as_the_cli_flags_and_refusals_name_their_field() {
        let p = bundle_params(&q(&[
            ("secret", "sk-live-1"),
            ("secret", "sk-live-2"),
            ("redact_key", "session"),
            ("meta", "ticket=T-1"),
            ("meta", "ticket=T-2"),
            ("checkpoints", "0"),
            ("last_events", "5"),
        ]))
        .unwrap();
        assert_eq!(p.redaction.secrets, ["sk-live-1", "sk-live-2"]);
        assert!(p.redaction.key_patterns.contains(&"session".to_owned()));
        assert!(p.redaction.key_patterns.contains(&"token".to_owned()), "defaults kept");
        assert_eq!(p.metadata["ticket"], "T-2", "the last of a repeated key wins, as the CLI's");
        assert_eq!((p.include_checkpoints, p.last_events, p.gzip), (false, Some(5), false));
        let field = |pairs: &[(&str, &str)]| bundle_params(&q(pairs)).unwrap_err().field;
        assert_eq!(field(&[("last_events", "0")]).as_deref(), Some("last_events"));
        assert_eq!(
            field(&[("last_events", "1"), ("last_events", "2")]).as_deref(),
            Some("last_events")
        );
        assert_eq!(field(&[("meta", "=x")]).as_deref(), Some("meta"));
        assert_eq!(field(&[("checkpoints", "maybe")]).as_deref(), Some("checkpoints"));
        assert_eq!(field(&[("max_payload_bytes", "-1")]).as_deref(), Some("max_payload_bytes"));
        assert_eq!(field(&[("gzip", "1")]).as_deref(), Some("gzip"));
        assert_eq!(
            resumable_params(&q(&[("max_age_ms", "x")])).unwrap_err().field.as_deref(),
            Some("max_age_ms")
        );
        assert_eq!(resumable_params(&q(&[])).unwrap(), None);
    }
}
