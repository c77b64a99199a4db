//! Duplicate keys in a bundle's JSON. serde_json keeps the last of two equal keys in an object
//! without a word, so a bundle could say two things at once and be read as one of them; this
//! walks the text once and names the first duplicate by its JSON path. The walk's depth is
//! bounded by serde_json's own recursion limit (128).

use std::cell::RefCell;
use std::collections::HashSet;
use std::fmt;

use serde::de::{DeserializeSeed, Deserializer, MapAccess, SeqAccess, Visitor};

use cairn::error::Error;

/// Refuses JSON text with a duplicate key in any object.
///
/// # Errors
/// [`Error::Bundle`] at the duplicate key's path; the text's own syntax errors at `$`.
pub(crate) fn check(json: &[u8]) -> Result<(), Error> {
    let found = RefCell::new(None);
    let mut de = serde_json::Deserializer::from_slice(json);
    let walked = Walk { path: "$".into(), found: &found }.deserialize(&mut de);
    if let Some(path) = found.into_inner() {
        return Err(super::reader::bad(path, "duplicate key (the same key twice in one object)"));
    }
    walked.map_err(|e| super::reader::bad("$", format!("not JSON: {e}")))
}

/// One value at `path`; records the first duplicate it meets in `found`.
/// Visitor methods that accept a scalar of each given type and walk no further.
macro_rules! scalars {
    ($($visit:ident: $t:ty),+) => {
        $(fn $visit<E>(self, _: $t) -> Result<(), E> {
            Ok(())
        })+
    };
}

struct Walk<'f> {
    path: String,
    found: &'f RefCell<Option<String>>,
}

impl<'de> DeserializeSeed<'de> for Walk<'_> {
    type Value = ();

    fn deserialize<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        de.deserialize_any(self)
    }
}

impl<'de> Visitor<'de> for Walk<'_> {
    type Value = ();

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("any JSON value")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<(), A::Error> {
        let mut seen = HashSet::new();
        while let Some(key) = map.next_key::<String>()? {
            let path = if is_plain(&key) {
                format!("{}.{key}", self.path)
            } else {
                format!("{}[{key:?}]", self.path)
            };
            if !seen.insert(key) {
                *self.found.borrow_mut() = Some(path);
                return Err(serde::de::Error::custom("duplicate key"));
            }
            map.next_value_seed(Walk { path, found: self.found })?;
        }
        Ok(())
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<(), A::Error> {
        let mut i = 0_usize;
        while seq
            .next_element_seed(Walk { path: format!("{}[{i}]", self.path), found: self.found })?
            .is_some()
        {
            i += 1;
        }
        Ok(())
    }

    scalars!(visit_bool: bool, visit_i64: i64, visit_u64: u64, visit_f64: f64, visit_str: &str);
    fn visit_unit<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_none<E>(self) -> Result<(), E> {
        Ok(())
    }
    fn visit_some<D: Deserializer<'de>>(self, de: D) -> Result<(), D::Error> {
        DeserializeSeed::deserialize(self, de)
    }
}

/// A key that reads well after a dot.
fn is_plain(key: &str) -> bool {
    !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    fn path_of(json: &str) -> Option<String> {
        match check(json.as_bytes()) {
            Err(Error::Bundle { path, .. }) => Some(path),
            Err(other) => panic!("{other}"),
            Ok(()) => None,
        }
    }

    #[test]
    fn a_duplicate_key_is_named_by_its_path_at_any_depth() {
        assert_eq!(path_of(r#"{"a": 1, "b": {"c": [1, {"d": 2}]}}"#), None);
        assert_eq!(path_of(r#"{"a": 1, "a": 2}"#).as_deref(), Some("$.a"));
        assert_eq!(
            path_of(r#"{"a": {"b": [0, {"c": 1, "c": 1}]}}"#).as_deref(),
            Some("$.a.b[1].c")
        );
        assert_eq!(path_of(r#"{"x y": {}, "x y": {}}"#).as_deref(), Some(r#"$["x y"]"#));
        assert!(matches!(check(b"{\"a\": "), Err(Error::Bundle { .. })), "truncated JSON");
    }
}
