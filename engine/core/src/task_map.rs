//! Serde for maps keyed by [`TaskKey`] (a struct, which JSON cannot use as an object key): a
//! sequence of `[key, value]` pairs. Reading also accepts an object, which is what an empty map
//! was written as before (`{}`).

use std::collections::BTreeMap;
use std::fmt;
use std::marker::PhantomData;

use serde::de::{self, DeserializeOwned, MapAccess, SeqAccess, Visitor};
use serde::ser::SerializeSeq;
use serde::{Deserializer, Serialize, Serializer};

use crate::event::TaskKey;

/// Writes the map as `[[key, value], ...]` in key order.
///
/// # Errors
/// The serializer's.
pub fn serialize<V: Serialize, S: Serializer>(
    map: &BTreeMap<TaskKey, V>,
    serializer: S,
) -> Result<S::Ok, S::Error> {
    let mut seq = serializer.serialize_seq(Some(map.len()))?;
    for pair in map {
        seq.serialize_element(&pair)?;
    }
    seq.end()
}

/// Reads `[[key, value], ...]` (or an object with string keys `node` / `node[i]`).
///
/// # Errors
/// The deserializer's, for anything else.
pub fn deserialize<'de, V: DeserializeOwned, D: Deserializer<'de>>(
    deserializer: D,
) -> Result<BTreeMap<TaskKey, V>, D::Error> {
    deserializer.deserialize_any(Pairs(PhantomData))
}

struct Pairs<V>(PhantomData<V>);

impl<'de, V: DeserializeOwned> Visitor<'de> for Pairs<V> {
    type Value = BTreeMap<TaskKey, V>;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a list of [task, value] pairs")
    }

    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some((key, value)) = seq.next_element::<(TaskKey, V)>()? {
            if out.insert(key, value).is_some() {
                return Err(de::Error::custom("a task appears twice"));
            }
        }
        Ok(out)
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Self::Value, A::Error> {
        let mut out = BTreeMap::new();
        while let Some((key, value)) = map.next_entry::<String, V>()? {
            out.insert(parse(&key), value);
        }
        Ok(out)
    }
}

/// `node[i]` as a map item's task, anything else as a node's task.
fn parse(key: &str) -> TaskKey {
    if let Some(open) = key.strip_suffix(']').and_then(|k| k.rfind('[').map(|i| (k, i))) {
        let (k, i) = open;
        if let Ok(item) = k[i + 1..].parse::<u32>() {
            return TaskKey { node: k[..i].into(), item: Some(item) };
        }
    }
    TaskKey::node(key)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use serde::{Deserialize, Serialize};

    use crate::event::TaskKey;

    #[derive(Debug, PartialEq, Serialize, Deserialize)]
    struct Holder {
        #[serde(with = "super")]
        open: BTreeMap<TaskKey, u32>,
    }

    #[test]
    fn round_trips_as_pairs_and_reads_old_objects() {
        let mut open = BTreeMap::new();
        open.insert(TaskKey::node("a"), 1);
        open.insert(TaskKey { node: "m".into(), item: Some(2) }, 3);
        let h = Holder { open };
        let json = serde_json::to_string(&h).unwrap();
        assert_eq!(json, r#"{"open":[[{"node":"a"},1],[{"node":"m","item":2},3]]}"#);
        assert_eq!(serde_json::from_str::<Holder>(&json).unwrap(), h);
        let old: Holder = serde_json::from_str(r#"{"open":{}}"#).unwrap();
        assert!(old.open.is_empty());
        let named: Holder = serde_json::from_str(r#"{"open":{"m[2]":3,"a":1}}"#).unwrap();
        assert_eq!(named, h);
    }
}
