//! The semantic checks of a bundle: everything import relies on, each failure naming its path.

use std::collections::{BTreeMap, BTreeSet};

use cairn_storage::limits::{
    CUSTOM_FIELDS_MAX, LABEL_BYTES_MAX, LABELS_PER_THREAD_MAX, NODE_NAME_BYTES_MAX,
    PAYLOAD_BYTES_MAX, SNAPSHOT_BYTES_MAX, SUMMARY_BYTES_MAX, TAG_BYTES_MAX,
    TAGS_PER_CHECKPOINT_MAX, TEXT_BYTES_MAX,
};
use cairn_storage::{CheckpointMeta, ThreadId, WorkflowRef};
use serde_json::Value;

use super::bundle::{BUNDLE_EVENTS_MAX, BUNDLE_FIRST_SEQ_MAX, Bundle, BundleEvent};
use super::reader::{bad, decode};
use cairn::error::Error;
use cairn::event::Body;
use cairn::thread_ctx::Snapshot;
use cairn_core::limits::INLINE_VALUE_BYTES_MAX;

/// Returns an [`Error::Bundle`] at `$path` when `$value` is over the limit `$max`, a constant
/// the message names.
macro_rules! at_most {
    ($path:expr, $value:expr, $max:ident) => {{
        let value = $value;
        if value > $max {
            return Err(limit(&$path, stringify!($max), value, $max));
        }
    }};
}

/// The key of a body stored by reference: `payload-` and the blake3 hex of its compact JSON.
pub(crate) fn payload_key(body: &Value) -> Result<String, Error> {
    let bytes = serde_json::to_vec(body)?;
    Ok(format!("payload-{}", blake3::hash(&bytes).to_hex()))
}

/// Where an event's body goes in a bundle: by reference into `payloads` when its JSON is over
/// [`INLINE_VALUE_BYTES_MAX`] (the rule of the log's JSON bodies before format v6, kept so that
/// bundles keep their layout), inline otherwise. Returns the event's
/// (`payloadRef`, `metadata`).
pub(crate) fn place_body(
    body: Value,
    payloads: &mut BTreeMap<String, Value>,
) -> Result<(Option<String>, Option<Value>), Error> {
    if serde_json::to_vec(&body)?.len() > INLINE_VALUE_BYTES_MAX {
        let key = payload_key(&body)?;
        payloads.insert(key.clone(), body);
        Ok((Some(key), None))
    } else {
        Ok((None, Some(body)))
    }
}

/// A JSON path to `key` under `base` (`.key`, or `["key"]` when it needs quoting).
pub(crate) fn key_path(base: &str, key: &str) -> String {
    let plain =
        !key.is_empty() && key.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if plain {
        format!("{base}.{key}")
    } else {
        format!("{base}[{}]", Value::String(key.to_owned()))
    }
}

impl Bundle {
    /// Checks everything [`Operator::import_bundle`](crate::Operator::import_bundle) relies on.
    ///
    /// # Errors
    /// [`Error::Bundle`] naming the JSON path of the first problem.
    pub fn validate(&self) -> Result<(), Error> {
        self.checked_bodies().map(|_| ())
    }

    /// Validates the bundle and returns its events' bodies, in seq order (`None` for a body
    /// dropped on export).
    pub(crate) fn checked_bodies(&self) -> Result<Vec<Option<Body>>, Error> {
        let id = self.checked_metadata()?;
        let first = self.first_seq()?;
        let events = &self.events.events;
        let last = (first + events.len() as u64).saturating_sub(1);
        let mut used = BTreeSet::new();
        let mut bodies = Vec::with_capacity(events.len());
        for (i, e) in events.iter().enumerate() {
            bodies.push(self.checked_body(i, e, first, &mut used)?);
        }
        self.check_payloads(&used)?;
        self.check_ends(&id, first, last)?;
        self.check_checkpoints(&id, first, last)?;
        Ok(bodies)
    }

    /// Checks the bundle's version and metadata; returns its thread's id.
    fn checked_metadata(&self) -> Result<ThreadId, Error> {
        check_version(&self.version)?;
        let thread = &self.metadata.thread;
        let id = ThreadId::new(thread.id.clone())
            .map_err(|e| bad("$.metadata.thread.id", e.to_string()))?;
        check_workflow(&self.metadata.workflow, "$.metadata.workflow")?;
        check_text(&self.metadata.cairn_version, "$.metadata.cairn_version")?;
        check_text(&self.metadata.platform, "$.metadata.platform")?;
        check_custom(&self.metadata.custom)?;
        at_most!("$.metadata.thread.labels", thread.labels.len(), LABELS_PER_THREAD_MAX);
        for (k, v) in &thread.labels {
            at_most!(
                key_path("$.metadata.thread.labels", k),
                k.len().max(v.len()),
                LABEL_BYTES_MAX
            );
        }
        if let Some(parent) = &thread.parent {
            ThreadId::new(parent.thread.clone())
                .map_err(|e| bad("$.metadata.thread.parent.thread", e.to_string()))?;
        }
        Ok(id)
    }

    /// The seq of the bundle's first event (or, without events, the one after its base).
    fn first_seq(&self) -> Result<u64, Error> {
        let thread = &self.metadata.thread;
        let events = &self.events.events;
        // A bundle of a pruned thread whose checkpoint covers its whole stored log holds no
        // event: it is its base, and the thread goes on (or ended) at the base's seq.
        let first = match (events.first(), &self.base) {
            (Some(e), _) => e.seq,
            (None, Some(_)) => thread.first_seq,
            (None, None) => {
                return Err(bad(
                    "$.events.events",
                    "empty, and no base: a bundle holds at least one event or starts from a base",
                ));
            }
        };
        if first == 0 || first > BUNDLE_FIRST_SEQ_MAX {
            return Err(bad(
                "$.events.events[0].seq",
                format!("the first seq must be in 1..={BUNDLE_FIRST_SEQ_MAX}, found {first}"),
            ));
        }
        Ok(first)
    }

    /// Checks event `e`, the `i`th (the first at seq `first`), and returns its body (`None`:
    /// dropped on export), noting the payload it references in `used`.
    fn checked_body<'a>(
        &'a self,
        i: usize,
        e: &'a BundleEvent,
        first: u64,
        used: &mut BTreeSet<&'a str>,
    ) -> Result<Option<Body>, Error> {
        let path = format!("$.events.events[{i}]");
        let expected = first + i as u64;
        if e.seq != expected {
            return Err(bad(
                format!("{path}.seq"),
                format!("expected seq {expected} (seqs have no gaps), found {}", e.seq),
            ));
        }
        check_text(&e.id, &format!("{path}.id"))?;
        at_most!(format!("{path}.summary"), e.summary.len(), SUMMARY_BYTES_MAX);
        let node_len = e.node_id.as_ref().map_or(0, String::len);
        at_most!(format!("{path}.nodeId"), node_len, NODE_NAME_BYTES_MAX);
        let (value, body_path) = match (&e.payload_ref, &e.metadata) {
            (Some(_), Some(_)) => {
                return Err(bad(path, "has both payloadRef and metadata (inline body)"));
            }
            (None, None) => {
                return Err(bad(path, "has neither payloadRef nor metadata (body)"));
            }
            (None, Some(v)) => (v, format!("{path}.metadata")),
            (Some(r), None) if self.events.dropped.contains_key(r) => {
                used.insert(r.as_str());
                return Ok(None);
            }
            (Some(r), None) => {
                let v = self.events.payloads.get(r).ok_or_else(|| {
                    bad(format!("{path}.payloadRef"), format!("dangling payload reference {r}"))
                })?;
                used.insert(r.as_str());
                (v, key_path("$.events.payloads", r))
            }
        };
        at_most!(body_path, serde_json::to_vec(value)?.len(), PAYLOAD_BYTES_MAX);
        let body: Body = decode(value, &body_path)?;
        check_body(&body, e.seq, &path, &body_path)?;
        if e.kind != body.kind() {
            let detail = format!("says {} but the body is a {} event", e.kind, body.kind());
            return Err(bad(format!("{path}.type"), detail));
        }
        if e.status != body.status() {
            let detail = format!("says {} but the body's status is {}", e.status, body.status());
            return Err(bad(format!("{path}.status"), detail));
        }
        if e.node_id.as_deref() != body.node() {
            return Err(bad(format!("{path}.nodeId"), "does not match the body's node"));
        }
        Ok(Some(body))
    }

    /// Checks that every payload and dropped body is referenced (`used`) and well formed.
    fn check_payloads(&self, used: &BTreeSet<&str>) -> Result<(), Error> {
        for (key, bytes) in &self.events.dropped {
            let path = key_path("$.events.dropped", key);
            if !used.contains(key.as_str()) {
                return Err(bad(path, "not referenced by any event"));
            }
            if self.events.payloads.contains_key(key) {
                return Err(bad(path, "is also in $.events.payloads"));
            }
            let hex = key.strip_prefix("payload-").unwrap_or_default();
            if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
                return Err(bad(path, "expected payload-<64 hex digits of blake3>"));
            }
            if *bytes == 0 {
                return Err(bad(path, "a dropped body has at least one byte"));
            }
        }
        for (key, value) in &self.events.payloads {
            let path = key_path("$.events.payloads", key);
            if !used.contains(key.as_str()) {
                return Err(bad(path, "not referenced by any event"));
            }
            if payload_key(value)? != *key {
                return Err(bad(path, "the body does not hash to its reference"));
            }
        }
        Ok(())
    }

    /// Checks the thread's first and last seq, its state and its base against the events
    /// (`first`..=`last`) of thread `id`.
    fn check_ends(&self, id: &ThreadId, first: u64, last: u64) -> Result<(), Error> {
        let thread = &self.metadata.thread;
        if thread.first_seq != first {
            let detail = format!("the events start at seq {first}, not {}", thread.first_seq);
            return Err(bad("$.metadata.thread.first_seq", detail));
        }
        if thread.last_seq != last {
            let detail = format!("the events end at seq {last}, not {}", thread.last_seq);
            return Err(bad("$.metadata.thread.last_seq", detail));
        }
        check_snapshot(&self.state, id, "$.state")?;
        let seq = self.state.meta.seq;
        if seq < first - 1 || seq > last {
            let detail = format!("must be in {}..={last}, found {seq}", first - 1);
            return Err(bad("$.state.meta.seq", detail));
        }
        if seq == last && self.state.meta.status != thread.status {
            let detail = format!(
                "is {} but the state at the last seq says {}",
                thread.status, self.state.meta.status
            );
            return Err(bad("$.metadata.thread.status", detail));
        }
        match (&self.base, first) {
            (None, 1) => {}
            (Some(_), 1) => return Err(bad("$.base", "a bundle starting at seq 1 has no base")),
            (None, _) => {
                return Err(bad("$.base", format!("missing: the events start at seq {first}")));
            }
            (Some(base), _) => {
                check_snapshot(base, id, "$.base")?;
                if base.meta.seq != first - 1 {
                    let detail = format!("must be {} (just before the first event)", first - 1);
                    return Err(bad("$.base.meta.seq", detail));
                }
            }
        }
        Ok(())
    }

    /// Checks the checkpoints of thread `id`: each covers an event of `first`..=`last`, in order.
    fn check_checkpoints(&self, id: &ThreadId, first: u64, last: u64) -> Result<(), Error> {
        let thread = &self.metadata.thread;
        if let Some(checkpoints) = &self.checkpoints {
            at_most!("$.checkpoints", checkpoints.len(), BUNDLE_EVENTS_MAX);
            let mut ids = BTreeSet::new();
            let mut prev = 0;
            for (i, cp) in checkpoints.iter().enumerate() {
                let path = format!("$.checkpoints[{i}]");
                check_text(&cp.id, &format!("{path}.id"))?;
                if !ids.insert(cp.id.as_str()) {
                    return Err(bad(format!("{path}.id"), format!("duplicate id {}", cp.id)));
                }
                if cp.state_id != thread.id {
                    return Err(bad(format!("{path}.stateId"), "is not the bundle's thread"));
                }
                let lowest = (first - 1).max(1);
                if cp.event_index < lowest || cp.event_index > last || cp.event_index < prev {
                    let detail = format!(
                        "must be in {lowest}..={last} and not below the previous checkpoint's, found {}",
                        cp.event_index
                    );
                    return Err(bad(format!("{path}.eventIndex"), detail));
                }
                prev = cp.event_index;
                check_snapshot(&cp.state, id, &format!("{path}.state"))?;
                if cp.state.meta.seq != cp.event_index {
                    return Err(bad(format!("{path}.state.meta.seq"), "is not its eventIndex"));
                }
                check_workflow(&cp.workflow, &format!("{path}.workflow"))?;
                check_checkpoint_meta(&cp.metadata, &format!("{path}.metadata"))?;
            }
        }
        Ok(())
    }
}

/// The version field of a bundle's JSON, checked before anything else is read.
///
/// # Errors
/// [`Error::Bundle`] at `$.version` when it is missing, not a string, or neither 1.x nor the
/// seed format's version.
pub(crate) fn check_version_of(bundle: &serde_json::Value) -> Result<(), Error> {
    match bundle.get("version") {
        Some(serde_json::Value::String(v)) if super::seed_names::is_seed_version(v) => Ok(()),
        Some(serde_json::Value::String(v)) => check_version(v),
        Some(other) => Err(bad("$.version", format!("expected a string, found {other}"))),
        None if bundle.is_object() => Err(bad("$.version", "missing field")),
        None => Err(bad("$", "expected a JSON object (a bundle)")),
    }
}

fn check_version(version: &str) -> Result<(), Error> {
    let mut parts = version.split('.');
    let major = parts.next().unwrap_or_default();
    let numeric = !version.is_empty()
        && version.split('.').all(|p| !p.is_empty() && p.bytes().all(|b| b.is_ascii_digit()));
    if !numeric || major != "1" {
        return Err(bad(
            "$.version",
            format!(
                "unsupported bundle version {version:?}: this Cairn reads 1.x and the seed \
                 format's {}",
                super::seed_names::SEED_VERSION
            ),
        ));
    }
    Ok(())
}

fn check_body(body: &Body, seq: u64, path: &str, body_path: &str) -> Result<(), Error> {
    match (seq, body) {
        (1, Body::ThreadCreated { .. }) => Ok(()),
        (1, _) => Err(bad(body_path, "the event at seq 1 must be thread_created")),
        (_, Body::ThreadCreated { .. }) => {
            Err(bad(format!("{path}.type"), "thread_created may only be the event at seq 1"))
        }
        _ => Ok(()),
    }
}

fn check_snapshot(s: &Snapshot, id: &ThreadId, path: &str) -> Result<(), Error> {
    if s.meta.thread != id.as_str() {
        return Err(bad(format!("{path}.meta.thread"), format!("is not the bundle's thread {id}")));
    }
    check_workflow(&s.meta.workflow, &format!("{path}.meta.workflow"))?;
    at_most!(path, serde_json::to_vec(s)?.len(), SNAPSHOT_BYTES_MAX);
    Ok(())
}

fn check_workflow(w: &WorkflowRef, path: &str) -> Result<(), Error> {
    check_text(&w.id, &format!("{path}.id"))?;
    check_text(&w.fingerprint, &format!("{path}.fingerprint"))
}

fn check_checkpoint_meta(m: &CheckpointMeta, path: &str) -> Result<(), Error> {
    check_text(&m.creator, &format!("{path}.creator"))?;
    check_text(&m.description, &format!("{path}.description"))?;
    at_most!(format!("{path}.tags"), m.tags.len(), TAGS_PER_CHECKPOINT_MAX);
    for (i, tag) in m.tags.iter().enumerate() {
        at_most!(format!("{path}.tags[{i}]"), tag.len(), TAG_BYTES_MAX);
    }
    at_most!(format!("{path}.custom"), m.custom.len(), CUSTOM_FIELDS_MAX);
    for (k, v) in &m.custom {
        at_most!(key_path(&format!("{path}.custom"), k), k.len().max(v.len()), LABEL_BYTES_MAX);
    }
    Ok(())
}

fn check_custom(custom: &BTreeMap<String, Value>) -> Result<(), Error> {
    at_most!("$.metadata.custom", custom.len(), CUSTOM_FIELDS_MAX);
    match custom.keys().find(|k| k.is_empty() || k.len() > LABEL_BYTES_MAX) {
        Some(k) => Err(bad(
            key_path("$.metadata.custom", k),
            format!("a field name has 1..={LABEL_BYTES_MAX} bytes"),
        )),
        None => Ok(()),
    }
}

fn check_text(text: &str, path: &str) -> Result<(), Error> {
    at_most!(path, text.len(), TEXT_BYTES_MAX);
    Ok(())
}

fn limit(path: &str, name: &str, value: usize, max: usize) -> Error {
    let what = match name {
        "BUNDLE_EVENTS_MAX" => "the events (or checkpoints) of one bundle",
        other => cairn_storage::limits::in_words(other),
    };
    bad(path, format!("{what} is {value}, over the limit of {max}"))
}
