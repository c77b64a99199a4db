//! Reading a bundle's JSON into a [`Bundle`], field by field, so that every problem names its
//! JSON path. Engine types inside it (snapshots, bodies, workflow references) are decoded with
//! serde at their own path, whose message names the field and the expected type.

use std::collections::BTreeMap;
use std::str::FromStr;

use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

use super::bundle::{
    Bundle, BundleCheckpoint, BundleEvent, BundleMetadata, BundleRedaction, BundleThread,
    EventsExport,
};
use cairn::error::Error;

/// An [`Error::Bundle`] at `path`.
pub(crate) fn bad(path: impl Into<String>, detail: impl Into<String>) -> Error {
    Error::Bundle { path: path.into(), detail: detail.into() }
}

/// The bundle in `v`, with types and required fields checked (semantics: `Bundle::validate`).
pub(crate) fn bundle(v: &Value) -> Result<Bundle, Error> {
    let o = Obj::new(v, "$")?;
    o.only(&[
        "version",
        "timestamp",
        "state",
        "events",
        "base",
        "checkpoints",
        "telemetry",
        "toolResultsSummary",
        "metadata",
    ])?;
    let version = o.string("version")?;
    let timestamp = o.u64("timestamp")?;
    let state = o.typed("state")?;
    let events = events(o.req("events")?, &o.at("events"))?;
    let base = o.opt_typed("base")?;
    let checkpoints = match o.opt("checkpoints") {
        None => None,
        Some(v) => {
            let path = o.at("checkpoints");
            let items = array(v, &path)?;
            let mut out = Vec::with_capacity(items.len());
            for (i, item) in items.iter().enumerate() {
                out.push(checkpoint(item, &format!("{path}[{i}]"))?);
            }
            Some(out)
        }
    };
    let telemetry = o.opt_typed("telemetry")?;
    let tool_results_summary = o.opt_typed("toolResultsSummary")?;
    let metadata = metadata(o.req("metadata")?, &o.at("metadata"))?;
    Ok(Bundle {
        version,
        timestamp,
        state,
        events,
        base,
        checkpoints,
        telemetry,
        tool_results_summary,
        metadata,
    })
}

fn events(v: &Value, path: &str) -> Result<EventsExport, Error> {
    let o = Obj::new(v, path)?;
    o.only(&["events", "payloads", "dropped"])?;
    let list_path = o.at("events");
    let items = array(o.req("events")?, &list_path)?;
    if items.len() > super::BUNDLE_EVENTS_MAX {
        return Err(bad(
            list_path,
            format!(
                "the bundle holds {} events, over the limit of {}",
                items.len(),
                super::BUNDLE_EVENTS_MAX
            ),
        ));
    }
    let mut events = Vec::with_capacity(items.len());
    for (i, item) in items.iter().enumerate() {
        events.push(event(item, &format!("{list_path}[{i}]"))?);
    }
    let payloads = match o.opt("payloads") {
        None => BTreeMap::new(),
        Some(v) => {
            let map = Obj::new(v, &o.at("payloads"))?;
            map.map.iter().map(|(k, v)| (k.clone(), v.clone())).collect()
        }
    };
    let dropped = o.opt_typed("dropped")?.unwrap_or_default();
    Ok(EventsExport { events, payloads, dropped })
}

/// The fields of a seed's event; a bundle's event has its `seq` too.
pub(super) const SEED_EVENT_FIELDS: &[&str] =
    &["id", "timestamp", "type", "nodeId", "status", "summary", "payloadRef", "metadata"];

fn event(v: &Value, path: &str) -> Result<BundleEvent, Error> {
    let o = Obj::new(v, path)?;
    o.only(&[SEED_EVENT_FIELDS, &["seq"]].concat())?;
    Ok(BundleEvent {
        id: o.string("id")?,
        seq: o.u64("seq")?,
        timestamp: o.u64("timestamp")?,
        kind: event_kind(&o)?,
        node_id: o.opt_string("nodeId")?,
        status: o.parsed("status")?,
        summary: o.string("summary")?,
        payload_ref: o.opt_string("payloadRef")?,
        metadata: o.opt("metadata").cloned(),
    })
}

fn checkpoint(v: &Value, path: &str) -> Result<BundleCheckpoint, Error> {
    let o = Obj::new(v, path)?;
    o.only(&["id", "stateId", "state", "eventIndex", "timestamp", "kind", "workflow", "metadata"])?;
    Ok(BundleCheckpoint {
        id: o.string("id")?,
        state_id: o.string("stateId")?,
        state: o.typed("state")?,
        event_index: o.u64("eventIndex")?,
        timestamp: o.u64("timestamp")?,
        kind: o.parsed("kind")?,
        workflow: o.typed("workflow")?,
        metadata: o.typed("metadata")?,
    })
}

fn metadata(v: &Value, path: &str) -> Result<BundleMetadata, Error> {
    let o = Obj::new(v, path)?;
    o.only(&[
        "cairn_version",
        "workflow",
        "platform",
        "thread",
        "redaction",
        "custom",
        "source_version",
    ])?;
    let t = Obj::new(o.req("thread")?, &o.at("thread"))?;
    t.only(&[
        "id",
        "status",
        "created_at_ms",
        "updated_at_ms",
        "labels",
        "parent",
        "first_seq",
        "last_seq",
    ])?;
    let thread = BundleThread {
        id: t.string("id")?,
        status: t.parsed("status")?,
        created_at_ms: t.u64("created_at_ms")?,
        updated_at_ms: t.u64("updated_at_ms")?,
        labels: t.opt_typed("labels")?.unwrap_or_default(),
        parent: t.opt_typed("parent")?,
        first_seq: t.u64("first_seq")?,
        last_seq: t.u64("last_seq")?,
    };
    let r = Obj::new(o.req("redaction")?, &o.at("redaction"))?;
    r.only(&["key_patterns", "secrets"])?;
    let redaction =
        BundleRedaction { key_patterns: r.typed("key_patterns")?, secrets: r.u64("secrets")? };
    Ok(BundleMetadata {
        cairn_version: o.string("cairn_version")?,
        workflow: o.typed("workflow")?,
        platform: o.string("platform")?,
        thread,
        redaction,
        custom: o.opt_typed("custom")?.unwrap_or_default(),
        source_version: o.opt_string("source_version")?,
    })
}

/// An event's `type`: Cairn's name, or the seed format's name for the same kind
/// ([`super::seed_names::seed_event_kind`]).
fn event_kind(o: &Obj<'_>) -> Result<cairn_storage::EventKind, Error> {
    let text = o.string("type")?;
    text.parse()
        .ok()
        .or_else(|| super::seed_names::seed_event_kind(&text))
        .ok_or_else(|| bad(o.at("type"), format!("unknown value {text:?}")))
}

pub(super) fn array<'a>(v: &'a Value, path: &str) -> Result<&'a Vec<Value>, Error> {
    v.as_array().ok_or_else(|| bad(path, format!("expected an array, found {}", kind(v))))
}

pub(super) fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// An object being read, with its path.
pub(super) struct Obj<'a> {
    pub(super) map: &'a Map<String, Value>,
    path: String,
}

impl<'a> Obj<'a> {
    pub(super) fn new(v: &'a Value, path: &str) -> Result<Self, Error> {
        match v {
            Value::Object(map) => Ok(Self { map, path: path.to_owned() }),
            other => Err(bad(path, format!("expected an object, found {}", kind(other)))),
        }
    }

    pub(super) fn at(&self, key: &str) -> String {
        format!("{}.{key}", self.path)
    }

    /// Refuses fields this format does not have (a typo or a newer writer must not be ignored).
    pub(super) fn only(&self, allowed: &[&str]) -> Result<(), Error> {
        match self.map.keys().find(|k| !allowed.contains(&k.as_str())) {
            Some(k) => Err(bad(self.at(k), "unknown field")),
            None => Ok(()),
        }
    }

    pub(super) fn req(&self, key: &str) -> Result<&'a Value, Error> {
        self.opt(key).ok_or_else(|| bad(self.at(key), "missing field"))
    }

    /// The field, `None` when absent or null.
    pub(super) fn opt(&self, key: &str) -> Option<&'a Value> {
        self.map.get(key).filter(|v| !v.is_null())
    }

    pub(super) fn u64(&self, key: &str) -> Result<u64, Error> {
        let v = self.req(key)?;
        v.as_u64().ok_or_else(|| {
            bad(self.at(key), format!("expected a non-negative integer, found {}", kind(v)))
        })
    }

    /// The field as a non-negative integer, `None` when absent or null.
    pub(super) fn opt_u64(&self, key: &str) -> Result<Option<u64>, Error> {
        match self.opt(key) {
            None => Ok(None),
            Some(_) => self.u64(key).map(Some),
        }
    }

    pub(super) fn string(&self, key: &str) -> Result<String, Error> {
        let v = self.req(key)?;
        v.as_str()
            .map(str::to_owned)
            .ok_or_else(|| bad(self.at(key), format!("expected a string, found {}", kind(v))))
    }

    pub(super) fn opt_string(&self, key: &str) -> Result<Option<String>, Error> {
        match self.opt(key) {
            None => Ok(None),
            Some(_) => self.string(key).map(Some),
        }
    }

    pub(super) fn parsed<T: FromStr>(&self, key: &str) -> Result<T, Error> {
        let text = self.string(key)?;
        text.parse().map_err(|_| bad(self.at(key), format!("unknown value {text:?}")))
    }

    pub(super) fn typed<T: DeserializeOwned>(&self, key: &str) -> Result<T, Error> {
        decode(self.req(key)?, &self.at(key))
    }

    pub(super) fn opt_typed<T: DeserializeOwned>(&self, key: &str) -> Result<Option<T>, Error> {
        self.opt(key).map(|v| decode(v, &self.at(key))).transpose()
    }
}

/// Decodes an engine type at `path`; an error names the deepest value that failed
/// (`$.state.meta.seq`, not `$.state`), a missing field included.
pub(crate) fn decode<T: DeserializeOwned>(v: &Value, path: &str) -> Result<T, Error> {
    serde_path_to_error::deserialize(v).map_err(|e| {
        let inner = e.path().to_string();
        let message = e.inner().to_string();
        let mut at = if inner.is_empty() || inner == "." {
            path.to_owned()
        } else if inner.starts_with('[') {
            format!("{path}{inner}")
        } else {
            format!("{path}.{inner}")
        };
        // serde names a missing field in its message, at the path of the object missing it.
        if let Some(field) =
            message.strip_prefix("missing field `").and_then(|r| r.split('`').next())
        {
            at = format!("{at}.{field}");
        }
        bad(at, message)
    })
}
