//! Redaction before export: values under sensitive keys, and registered secrets in any form.
//!
//! A registered secret is searched for in every string (and object key, and number) of what is
//! exported, in each form it may have been stored in: raw; JSON-escaped (as serde writes it, and
//! with non-ASCII as `\u` escapes, and with `\/`); URL-encoded (RFC 3986 with upper- or
//! lower-case hex, `encodeURIComponent`'s set, and form encoding with `+`); base64, standard and
//! URL-safe, at each of the three byte alignments the secret may have inside a longer encoded
//! value (the characters that depend only on the secret's bits). Every occurrence becomes
//! [`REDACTED`]; a string in which a form still shows up after that is replaced whole.

use std::borrow::Cow;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use serde_json::{Map, Value};

use cairn::error::Error;

/// What replaces a redacted value.
pub const REDACTED: &str = "[REDACTED]";

/// Shortest secret accepted: shorter ones match too much innocent text, and their base64 forms
/// are too short to be told from other data.
pub const SECRET_BYTES_MIN: usize = 6;

/// Redaction rules for an export.
///
/// Keys match a pattern when the key, lower-cased and without `-`, `_` and spaces, contains the
/// pattern normalised the same way (`"api key"` matches `OpenAI-API-Key`). Under a matching key,
/// strings, arrays and objects are replaced whole; numbers and booleans are kept, since they are
/// counts and flags (`tokens`, `max_tokens`) rather than credentials; a numeric secret is caught
/// as a registered secret.
///
/// # Examples
/// ```
/// use cairn_tools::debug::Redaction;
/// let r = Redaction::default().key("session").secret("sk-live-1234567");
/// assert!(r.key_patterns.contains(&"api key".to_owned()));
/// assert_eq!(r.secrets, ["sk-live-1234567"]);
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct Redaction {
    /// Key patterns (default: api key, token, secret, password, authorization).
    pub key_patterns: Vec<String>,
    /// Values that must not survive in any form.
    pub secrets: Vec<String>,
}

impl Default for Redaction {
    fn default() -> Self {
        let keys = ["api key", "token", "secret", "password", "authorization"];
        Self { key_patterns: keys.map(str::to_owned).to_vec(), secrets: Vec::new() }
    }
}

impl Redaction {
    /// No key patterns and no secrets: nothing is redacted.
    pub fn none() -> Self {
        Self { key_patterns: Vec::new(), secrets: Vec::new() }
    }

    /// Adds a key pattern.
    #[must_use]
    pub fn key(mut self, pattern: impl Into<String>) -> Self {
        self.key_patterns.push(pattern.into());
        self
    }

    /// Registers a secret value.
    #[must_use]
    pub fn secret(mut self, value: impl Into<String>) -> Self {
        self.secrets.push(value.into());
        self
    }

    /// Every form of `secret` that redaction searches for (raw, escaped, encoded), longest
    /// first. Tests scan exported bytes for these.
    pub fn forms(secret: &str) -> Vec<String> {
        let mut forms = vec![secret.to_owned()];
        forms.extend(json_forms(secret));
        forms.extend(url_forms(secret));
        forms.extend(base64_forms(secret.as_bytes()));
        forms.retain(|f| !f.is_empty());
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        forms.dedup();
        forms
    }
}

/// Compiled rules.
#[derive(Debug)]
pub(crate) struct Redactor {
    patterns: Vec<String>,
    forms: Vec<String>,
}

impl Redactor {
    /// Checks and compiles `rules`.
    pub fn new(rules: &Redaction) -> Result<Self, Error> {
        let mut patterns = Vec::new();
        for p in &rules.key_patterns {
            let n = normalize(p);
            if n.is_empty() {
                return Err(Error::Invalid(format!("key pattern {p:?} matches every key")));
            }
            patterns.push(n);
        }
        let mut forms = Vec::new();
        for s in &rules.secrets {
            if s.len() < SECRET_BYTES_MIN {
                return Err(Error::Invalid(format!(
                    "a secret of {} bytes is too short to redact reliably (at least {SECRET_BYTES_MIN})",
                    s.len()
                )));
            }
            if REDACTED.contains(s.as_str()) {
                return Err(Error::Invalid(
                    "a secret may not be part of the redaction marker".into(),
                ));
            }
            forms.extend(Redaction::forms(s));
        }
        forms.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        forms.dedup();
        Ok(Self { patterns, forms })
    }

    /// Whether nothing would ever be redacted.
    pub fn is_noop(&self) -> bool {
        self.patterns.is_empty() && self.forms.is_empty()
    }

    /// Redacts `v` in place.
    pub fn value(&self, v: &mut Value) {
        if self.is_noop() {
            return;
        }
        match v {
            Value::String(s) => {
                if let Cow::Owned(clean) = self.text(s) {
                    *s = clean;
                }
            }
            Value::Number(n) if !self.forms.is_empty() => {
                let text = n.to_string();
                if self.forms.iter().any(|f| text.contains(f.as_str())) {
                    *v = Value::String(REDACTED.to_owned());
                }
            }
            Value::Array(items) => items.iter_mut().for_each(|item| self.value(item)),
            Value::Object(map) => {
                let old = std::mem::take(map);
                let mut out = Map::new();
                for (key, mut item) in old {
                    if self.key_matches(&key)
                        && matches!(item, Value::String(_) | Value::Array(_) | Value::Object(_))
                    {
                        item = Value::String(REDACTED.to_owned());
                    } else {
                        self.value(&mut item);
                    }
                    let mut key = self.text(&key).into_owned();
                    while out.contains_key(&key) {
                        key.push('~');
                    }
                    out.insert(key, item);
                }
                *map = out;
            }
            _ => {}
        }
    }

    /// `s` with every form of every secret replaced.
    pub fn text<'a>(&self, s: &'a str) -> Cow<'a, str> {
        if !self.forms.iter().any(|f| s.contains(f.as_str())) {
            return Cow::Borrowed(s);
        }
        let mut out = s.to_owned();
        // A replacement can make a new occurrence at its edges only in contrived text; a few
        // rounds settle it, and a string that still holds a form is dropped whole.
        for _ in 0..4 {
            for f in &self.forms {
                if out.contains(f.as_str()) {
                    out = out.replace(f.as_str(), REDACTED);
                }
            }
            if !self.forms.iter().any(|f| out.contains(f.as_str())) {
                return Cow::Owned(out);
            }
        }
        Cow::Owned(REDACTED.to_owned())
    }

    fn key_matches(&self, key: &str) -> bool {
        if self.patterns.is_empty() {
            return false;
        }
        let k = normalize(key);
        self.patterns.iter().any(|p| k.contains(p.as_str()))
    }
}

fn normalize(s: &str) -> String {
    s.chars().filter(|c| !matches!(c, '-' | '_' | ' ')).flat_map(char::to_lowercase).collect()
}

fn json_forms(s: &str) -> Vec<String> {
    let serde = serde_json::to_string(s).unwrap_or_default();
    let serde = serde.get(1..serde.len().saturating_sub(1)).unwrap_or_default().to_owned();
    let mut ascii = String::new();
    for c in s.chars() {
        match c {
            '"' => ascii.push_str("\\\""),
            '\\' => ascii.push_str("\\\\"),
            '\n' => ascii.push_str("\\n"),
            '\r' => ascii.push_str("\\r"),
            '\t' => ascii.push_str("\\t"),
            c if c.is_ascii() && !c.is_ascii_control() => ascii.push(c),
            c => {
                let mut buf = [0u16; 2];
                for unit in c.encode_utf16(&mut buf) {
                    ascii.push_str(&format!("\\u{unit:04x}"));
                }
            }
        }
    }
    let slashes = serde.replace('/', "\\/");
    vec![serde, ascii, slashes]
}

fn url_forms(s: &str) -> Vec<String> {
    let strict = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~');
    let component = |b: u8| strict(b) || matches!(b, b'!' | b'\'' | b'(' | b')' | b'*');
    let encode = |keep: &dyn Fn(u8) -> bool, upper: bool, plus: bool| {
        let mut out = String::new();
        for &b in s.as_bytes() {
            if keep(b) {
                out.push(char::from(b));
            } else if plus && b == b' ' {
                out.push('+');
            } else if upper {
                out.push_str(&format!("%{b:02X}"));
            } else {
                out.push_str(&format!("%{b:02x}"));
            }
        }
        out
    };
    vec![
        encode(&strict, true, false),
        encode(&strict, false, false),
        encode(&component, true, false),
        encode(&strict, true, true),
    ]
}

/// The base64 characters determined by `secret` alone, for each alignment it may have inside a
/// longer encoded value, in the standard and URL-safe alphabets.
fn base64_forms(secret: &[u8]) -> Vec<String> {
    let mut out = Vec::new();
    for offset in 0..3usize {
        let mut data = vec![0u8; offset];
        data.extend_from_slice(secret);
        // Leading characters mix the (unknown) preceding bytes in; trailing ones the following.
        let skip = [0, 2, 3][offset];
        let len = data.len();
        let end = 4 * (len / 3) + [0, 1, 2][len % 3];
        for engine in [&STANDARD_NO_PAD, &URL_SAFE_NO_PAD] {
            let encoded = engine.encode(&data);
            if let Some(core) = encoded.get(skip..end) {
                out.push(core.to_owned());
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use base64::Engine as _;
    use base64::engine::general_purpose::STANDARD;
    use serde_json::json;

    use super::*;

    #[test]
    fn base64_cores_are_found_at_every_alignment() {
        let secret = b"hunter2-secret";
        let forms = base64_forms(secret);
        for prefix in 0..6 {
            let mut data = vec![b'x'; prefix];
            data.extend_from_slice(secret);
            data.extend_from_slice(b"tail");
            let encoded = STANDARD.encode(&data);
            assert!(forms.iter().any(|f| encoded.contains(f.as_str())), "prefix {prefix}");
        }
    }

    #[test]
    fn keys_and_secrets_are_redacted() {
        let rules = Redaction::default().secret("p@ss w/rd\"1");
        let r = Redactor::new(&rules).unwrap();
        let mut v = json!({
            "OpenAI-API-Key": "sk-1",
            "usage": {"tokens": 12},
            "auth": {"Authorization": ["Bearer x"]},
            "note": "the password is p@ss w/rd\"1, url p%40ss%20w%2Frd%221",
        });
        r.value(&mut v);
        assert_eq!(v["OpenAI-API-Key"], REDACTED);
        assert_eq!(v["usage"]["tokens"], 12);
        assert_eq!(v["auth"]["Authorization"], REDACTED);
        let note = v["note"].as_str().unwrap();
        assert_eq!(note, "the password is [REDACTED], url [REDACTED]");
        assert!(Redactor::new(&Redaction::none().secret("short")).is_err());
        assert!(Redactor::new(&Redaction::none().key(" _-")).is_err());
    }
}
