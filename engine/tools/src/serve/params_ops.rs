//! The request parameters of the endpoint's operations reads (`ops`): a thread's debug bundle
//! and the resumable threads. Pure functions of decoded query pairs, as in [`super::params`]
//! (the fuzz target `serve_params` drives them too); every refusal names its field.

use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;

use super::params::{KeyValue, Reject};
use super::query::Check;
use crate::debug::{ExportOptions, Redaction};

/// `GET /api/threads/{id}/bundle`: `cairn bundle export`'s flags.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct BundleParams {
    /// A key pattern whose values are redacted, besides the defaults (repeatable).
    #[serde(default)]
    pub redact_key: Vec<String>,
    /// A secret redacted wherever it appears (repeatable).
    #[serde(default)]
    pub secret: Vec<String>,
    /// Metadata kept in the bundle, `KEY=VALUE` (repeatable; the last of a key wins).
    #[serde(default)]
    pub meta: Vec<String>,
    /// Include the thread's checkpoints (default `1`).
    #[serde(default = "yes")]
    pub checkpoints: bool,
    /// Keep only the last this many events (at least 1).
    pub last_events: Option<usize>,
    /// Cut payloads longer than this many bytes.
    pub max_payload_bytes: Option<usize>,
}

/// `GET /api/resumable`.
#[derive(Debug, Clone, Deserialize, IntoParams)]
#[serde(deny_unknown_fields)]
#[into_params(parameter_in = Query)]
pub struct ResumableParams {
    /// Only threads whose last step is at most this old (ms; every resumable thread without it).
    pub max_age_ms: Option<u64>,
}

fn yes() -> bool {
    true
}

impl BundleParams {
    /// Whether these ask for nothing that changes the thread's bodies (redaction, a cut, left
    /// out checkpoints, metadata): what a sealed export, without the key, can honour.
    pub(super) fn changes_nothing(&self) -> bool {
        self.redact_key.is_empty()
            && self.secret.is_empty()
            && self.meta.is_empty()
            && self.checkpoints
            && self.last_events.is_none()
            && self.max_payload_bytes.is_none()
    }
}

/// `last_events` keeps at least one event; every `meta` is `KEY=VALUE`.
impl Check for BundleParams {
    fn check(&self) -> Result<(), Reject> {
        if self.last_events == Some(0) {
            return Err(Reject::bad("last_events", "must keep at least one event"));
        }
        match self.meta.iter().find(|m| m.parse::<KeyValue>().is_err()) {
            Some(bad) => Err(Reject::bad("meta", format!("expected KEY=VALUE, got {bad:?}"))),
            None => Ok(()),
        }
    }
}

impl Check for ResumableParams {}

impl BundleParams {
    /// The export options these parameters ask for, as `cairn bundle export`'s flags: the
    /// default redaction rules and these, never compressed here (the caller compresses what it
    /// writes); whether the redaction rules work is the export's to judge.
    ///
    /// # Examples
    /// ```
    /// use cairn_tools::serve::params_ops::BundleParams;
    /// use cairn_tools::serve::query::parse;
    /// let pairs = vec![("last_events".to_owned(), "0".to_owned())];
    /// assert_eq!(parse::<BundleParams>(&pairs).unwrap_err().field.as_deref(), Some("last_events"));
    /// ```
    pub fn options(self) -> ExportOptions {
        let mut redaction = Redaction::default();
        redaction.key_patterns.extend(self.redact_key);
        redaction.secrets.extend(self.secret);
        let meta = self.meta.iter().filter_map(|m| m.parse::<KeyValue>().ok());
        ExportOptions {
            include_checkpoints: self.checkpoints,
            redaction,
            last_events: self.last_events,
            max_payload_bytes: self.max_payload_bytes,
            metadata: meta.map(|kv| (kv.key, Value::String(kv.value))).collect(),
            ..ExportOptions::default()
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::serve::query::{parse, q};

    #[test]
    fn a_bundle_query_is_read_as_the_cli_flags_and_refusals_name_their_field() {
        let p = parse::<BundleParams>(&q(&[
            ("secret", "sk-live-1"),
            ("secret", "sk-live-2"),
            ("redact_key", "session"),
            ("meta", "ticket=T-1"),
            ("meta", "ticket=T-2"),
            ("checkpoints", "0"),
            ("last_events", "5"),
        ]))
        .unwrap()
        .options();
        assert_eq!(p.redaction.secrets, ["sk-live-1", "sk-live-2"]);
        assert!(p.redaction.key_patterns.contains(&"session".to_owned()));
        assert!(p.redaction.key_patterns.contains(&"token".to_owned()), "defaults kept");
        assert_eq!(p.metadata["ticket"], "T-2", "the last of a repeated key wins, as the CLI's");
        assert_eq!((p.include_checkpoints, p.last_events, p.gzip), (false, Some(5), false));
        let field = |pairs: &[(&str, &str)]| parse::<BundleParams>(&q(pairs)).unwrap_err().field;
        assert_eq!(field(&[("last_events", "0")]).as_deref(), Some("last_events"));
        assert_eq!(
            field(&[("last_events", "1"), ("last_events", "2")]).as_deref(),
            Some("last_events")
        );
        assert_eq!(field(&[("meta", "=x")]).as_deref(), Some("meta"));
        assert_eq!(field(&[("checkpoints", "maybe")]).as_deref(), Some("checkpoints"));
        assert_eq!(field(&[("max_payload_bytes", "-1")]).as_deref(), Some("max_payload_bytes"));
        assert_eq!(field(&[("gzip", "1")]).as_deref(), Some("gzip"));
        let resumable = |pairs: &[(&str, &str)]| parse::<ResumableParams>(&q(pairs));
        assert_eq!(
            resumable(&[("max_age_ms", "x")]).unwrap_err().field.as_deref(),
            Some("max_age_ms")
        );
        assert_eq!(resumable(&[]).unwrap().max_age_ms, None);
    }
}
