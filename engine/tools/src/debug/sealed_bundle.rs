//! Sealed bundles: a thread exported without the key of its sealed bodies
//! (`docs/encryption.md`, "Tools"). Every body (event data, offloaded payloads, checkpoint
//! snapshots) goes into the bundle byte for byte as stored, base64, with its blake3 checksum;
//! what the store keeps in the clear (the thread record, each event's kind, node, status,
//! summary, time and correlation id, each checkpoint's metadata) goes in as it is. Imported
//! into a database, the thread reads with the key as the original did; without the key it
//! shows placeholders there too. Checking one (`cairn bundle show`) needs no key: the checksums
//! cover the sealed bytes.
//!
//! ```text
//! {
//!   "version": "1.0.0",
//!   "sealed": {"codecs": ["aes256gcm"], "keys": ["k1"]},  the marker: who sealed what
//!   "timestamp": 1702886400000,
//!   "thread": {"id", "workflow", "status", "created_at_ms", "updated_at_ms", "labels",
//!              "parent"?, "summary"},                      the thread record (clear)
//!   "events": [{"seq", "at_ms", "kind", "node", "status", "summary", "correlation",
//!               "data": base64, "payload": blake3 hex?, "blake3": hex of data}],
//!   "payloads": {"<blake3 hex>": base64},                 offloaded bodies, sealed
//!   "checkpoints": [{"covers_seq", "created_at_ms", "kind", "workflow", "meta",
//!                    "snapshot": base64, "blake3": hex}]
//! }
//! ```

use std::collections::{BTreeMap, BTreeSet};

use base64::Engine as _;
use base64::engine::general_purpose::STANDARD as B64;
use cairn_storage::{
    Batch, CheckpointFilter, CheckpointKind, CheckpointMeta, EventKind, EventStatus, Guard,
    NewCheckpoint, NewEvent, PayloadRef, Seq, ThreadId, ThreadRecord, ThreadStatus, WorkflowRef,
};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::bundle::BUNDLE_EVENTS_MAX;
use super::reader::bad;
use crate::Operator;
use cairn::admin;
use cairn::error::Error;
use cairn::event::ForkOrigin;
use cairn_core::limits::READ_CHUNK_EVENTS;

/// The format version of a sealed bundle.
pub const SEALED_BUNDLE_VERSION: &str = "1.0.0";

/// A thread exported with its bodies sealed (see the module doc).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SealedBundle {
    /// [`SEALED_BUNDLE_VERSION`].
    pub version: String,
    /// The marker: the codecs and key ids of its sealed bodies.
    pub sealed: SealedMarker,
    /// When it was exported (ms since the Unix epoch).
    pub timestamp: u64,
    /// The thread record, in the clear as stored.
    pub thread: SealedThread,
    /// The events, seq 1 on, without gaps.
    pub events: Vec<SealedEvent>,
    /// Offloaded bodies as stored: blake3 hex -> base64.
    pub payloads: BTreeMap<String, String>,
    /// The checkpoints, oldest first.
    pub checkpoints: Vec<SealedCheckpoint>,
}

/// Who sealed a sealed bundle's bodies.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SealedMarker {
    /// The codec ids.
    pub codecs: Vec<String>,
    /// The key ids: the keys that read it.
    pub keys: Vec<String>,
}

/// A sealed bundle's thread record.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SealedThread {
    /// Its id.
    pub id: String,
    /// Its workflow.
    pub workflow: WorkflowRef,
    /// Its status.
    pub status: ThreadStatus,
    /// Created at (engine clock, ms).
    pub created_at_ms: u64,
    /// Updated at (engine clock, ms).
    pub updated_at_ms: u64,
    /// Its labels.
    pub labels: BTreeMap<String, String>,
    /// The thread and seq it was forked from.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub parent: Option<ForkOrigin>,
    /// The record's listing summary (step, frontier, progress, last error), as stored.
    pub summary: Value,
}

/// One event of a sealed bundle: its clear header and its body as stored.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SealedEvent {
    /// Its seq.
    pub seq: u64,
    /// When (engine clock, ms).
    pub at_ms: u64,
    /// Its kind.
    pub kind: EventKind,
    /// The node it concerns.
    pub node: Option<String>,
    /// How it turned out.
    pub status: EventStatus,
    /// Its one-line summary, as stored.
    pub summary: String,
    /// Its correlation id.
    pub correlation: Option<String>,
    /// Its body as stored, base64 (empty when offloaded to `payload`).
    pub data: String,
    /// The blake3 hex of its offloaded body, a key of the bundle's `payloads`.
    pub payload: Option<String>,
    /// The blake3 hex of its `data` bytes.
    pub blake3: String,
}

/// One checkpoint of a sealed bundle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SealedCheckpoint {
    /// The seq it covers.
    pub covers_seq: u64,
    /// When it was taken (engine clock, ms).
    pub created_at_ms: u64,
    /// Why it was taken.
    pub kind: CheckpointKind,
    /// The workflow version of its snapshot.
    pub workflow: WorkflowRef,
    /// Creator, description, tags, custom fields.
    pub meta: CheckpointMeta,
    /// Its snapshot as stored, base64.
    pub snapshot: String,
    /// The blake3 hex of the snapshot bytes.
    pub blake3: String,
}

/// The blake3 hex of `bytes`.
fn hash(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex().to_string()
}

/// The bytes of base64 `text` whose blake3 must be `sum`, at JSON path `path`.
fn unpack(text: &str, sum: &str, path: &str) -> Result<Vec<u8>, Error> {
    let bytes = B64.decode(text).map_err(|e| bad(path, format!("not base64: {e}")))?;
    if hash(&bytes) != sum {
        return Err(bad(path, "its blake3 checksum does not match: damaged or altered"));
    }
    Ok(bytes)
}

impl SealedBundle {
    /// The bundle as JSON bytes (gzip-compressed when `gzip`, as [`super::Bundle::to_bytes`]).
    ///
    /// # Errors
    /// As [`super::Bundle::to_bytes`].
    pub fn to_bytes(&self, gzip: bool) -> Result<Vec<u8>, Error> {
        let json = serde_json::to_vec(self)?;
        if gzip { super::bundle_file::gzip_bytes(&json) } else { Ok(json) }
    }

    /// The sealed bundle `bytes` hold, if they hold one (a document with the `sealed` marker);
    /// `Ok(None)` for anything else (a decoded bundle, bytes that are no JSON). Checked whole: version, seqs from 1
    /// without gaps, every checksum, every payload reference, [`BUNDLE_EVENTS_MAX`].
    ///
    /// # Errors
    /// [`Error::Bundle`] naming the JSON path of the first problem.
    pub fn from_bytes(bytes: &[u8]) -> Result<Option<SealedBundle>, Error> {
        // Bytes that are no JSON document are no sealed bundle: the decoded bundle's reader
        // says what is wrong with them.
        let Ok(json) = super::bundle_file::decompress(bytes) else { return Ok(None) };
        let Ok(value) = serde_json::from_slice::<Value>(&json) else { return Ok(None) };
        if value.get("sealed").is_none() {
            return Ok(None);
        }
        let bundle: SealedBundle =
            serde_json::from_value(value).map_err(|e| bad("$", format!("sealed bundle: {e}")))?;
        bundle.check()?;
        Ok(Some(bundle))
    }

    /// Checks what [`SealedBundle::from_bytes`] says.
    fn check(&self) -> Result<(), Error> {
        if self.version.split('.').next() != Some("1") {
            return Err(bad("$.version", format!("{} is not a version 1 bundle", self.version)));
        }
        if self.events.len() > BUNDLE_EVENTS_MAX {
            let n = self.events.len();
            return Err(bad("$.events", format!("{n} events, over {BUNDLE_EVENTS_MAX}")));
        }
        ThreadId::new(self.thread.id.clone()).map_err(|e| bad("$.thread.id", e.to_string()))?;
        for (i, e) in self.events.iter().enumerate() {
            let path = format!("$.events[{i}]");
            if e.seq != i as u64 + 1 {
                return Err(bad(&path, format!("seq {} where {} follows", e.seq, i + 1)));
            }
            unpack(&e.data, &e.blake3, &format!("{path}.data"))?;
            if let Some(p) = e.payload.as_ref().filter(|p| !self.payloads.contains_key(*p)) {
                return Err(bad(format!("{path}.payload"), format!("{p} is not in $.payloads")));
            }
        }
        for (key, text) in &self.payloads {
            unpack(text, key, &format!("$.payloads.{key}"))?;
        }
        let last = self.events.len() as u64;
        for (i, c) in self.checkpoints.iter().enumerate() {
            let path = format!("$.checkpoints[{i}]");
            if !(1..=last).contains(&c.covers_seq) {
                return Err(bad(&path, format!("covers seq {} of 1..={last}", c.covers_seq)));
            }
            unpack(&c.snapshot, &c.blake3, &format!("{path}.snapshot"))?;
        }
        Ok(())
    }
}

/// The codecs and keys of the sealed bodies among `bodies`.
fn marker<'a>(bodies: impl Iterator<Item = &'a [u8]>) -> SealedMarker {
    let (mut codecs, mut keys) = (BTreeSet::new(), BTreeSet::new());
    for (codec, key) in bodies.filter_map(cairn::sealing::sealed_by) {
        codecs.insert(codec);
        keys.insert(key);
    }
    SealedMarker { codecs: codecs.into_iter().collect(), keys: keys.into_iter().collect() }
}

impl Operator {
    /// A sealed bundle of `thread`: its bodies byte for byte as stored (see the module doc),
    /// for a reader without the key. A thread whose log was pruned is refused (its first
    /// events are gone: a sealed bundle starts at seq 1).
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; [`Error::Invalid`] for a pruned thread; storage errors.
    pub async fn export_sealed_bundle(&self, thread: &str) -> Result<SealedBundle, Error> {
        let id = ThreadId::new(thread)?;
        let store = self.engine.store().as_ref();
        let record = admin::thread_record(store, &id).await?;
        if record.first_seq.0 > 1 {
            return Err(Error::Invalid(format!(
                "thread {id} was pruned (its log starts at seq {}): a sealed bundle holds the \
                 whole log; export it with the key",
                record.first_seq.0
            )));
        }
        let mut events = Vec::new();
        let mut payloads = BTreeMap::new();
        let mut bodies: Vec<Vec<u8>> = Vec::new();
        let mut after = Seq(0);
        loop {
            let chunk = admin::stored_events(&self.engine, &id, after, READ_CHUNK_EVENTS).await?;
            let Some(last) = chunk.last() else { break };
            after = last.bookmark.seq;
            for e in chunk {
                let payload = match &e.payload {
                    Some(r) => {
                        let bytes = admin::stored_payload(&self.engine, r).await?;
                        let key = hash(&bytes);
                        payloads.insert(key.clone(), B64.encode(&bytes));
                        bodies.push(bytes);
                        Some(key)
                    }
                    None => None,
                };
                bodies.push(e.data.clone());
                events.push(SealedEvent {
                    seq: e.bookmark.seq.0,
                    at_ms: e.bookmark.at_ms,
                    kind: e.kind,
                    node: e.node,
                    status: e.status,
                    summary: e.summary,
                    correlation: e.correlation,
                    blake3: hash(&e.data),
                    data: B64.encode(&e.data),
                    payload,
                });
            }
        }
        let checkpoints = self.sealed_checkpoints(&id, &mut bodies).await?;
        let summary = serde_json::from_slice(&record.summary).unwrap_or(Value::Null);
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Ok(SealedBundle {
            version: SEALED_BUNDLE_VERSION.to_owned(),
            sealed: marker(bodies.iter().map(Vec::as_slice)),
            timestamp,
            thread: SealedThread {
                id: id.to_string(),
                workflow: record.workflow,
                status: record.status,
                created_at_ms: record.created_at_ms,
                updated_at_ms: record.updated_at_ms,
                labels: record.labels,
                parent: record.parent.map(|(t, s)| ForkOrigin { thread: t.to_string(), seq: s.0 }),
                summary,
            },
            events,
            payloads,
            checkpoints,
        })
    }

    /// The checkpoints of `id` as stored, oldest first; their snapshots added to `bodies`.
    async fn sealed_checkpoints(
        &self,
        id: &ThreadId,
        bodies: &mut Vec<Vec<u8>>,
    ) -> Result<Vec<SealedCheckpoint>, Error> {
        let filter = CheckpointFilter { thread: Some(id.clone()), ..CheckpointFilter::default() };
        let mut infos = admin::checkpoints_all(self.engine.store().as_ref(), &filter).await?;
        infos.sort_by_key(|c| (c.covers.seq.0, c.id.0));
        infos.dedup_by_key(|c| c.id);
        let mut out = Vec::with_capacity(infos.len());
        for info in infos {
            let Some(cp) = admin::stored_checkpoint(&self.engine, info.id).await? else {
                continue; // deleted meanwhile
            };
            out.push(SealedCheckpoint {
                covers_seq: cp.covers.seq.0,
                created_at_ms: cp.created_at_ms,
                kind: cp.kind,
                workflow: cp.workflow,
                meta: cp.meta,
                blake3: hash(&cp.snapshot),
                snapshot: B64.encode(&cp.snapshot),
            });
            bodies.push(cp.snapshot);
        }
        Ok(out)
    }

    /// Writes a sealed bundle's thread into this database (which must not have a thread of
    /// that id) with its bodies as the bundle holds them: an engine with the key reads it as the
    /// original, one without it shows placeholders. Written in batches, as
    /// [`Operator::import_bundle`] writes, each checkpoint with the event it covers.
    ///
    /// # Errors
    /// [`Error::Invalid`] if the thread exists here already; storage errors (a body over a
    /// storage limit).
    pub async fn import_sealed_bundle(&self, bundle: &SealedBundle) -> Result<ThreadId, Error> {
        bundle.check()?;
        let t = &bundle.thread;
        let id = ThreadId::new(t.id.clone())?;
        if self.engine.store().thread(&id).await?.is_some() {
            return Err(Error::Invalid(format!("thread {id} exists in this database already")));
        }
        let mut record = ThreadRecord::new(id.clone(), t.workflow.clone(), t.created_at_ms);
        record.status = t.status;
        record.updated_at_ms = t.updated_at_ms;
        record.labels = t.labels.clone();
        record.parent = match &t.parent {
            Some(p) => Some((ThreadId::new(p.thread.clone())?, Seq(p.seq))),
            None => None,
        };
        record.summary = serde_json::to_vec(&t.summary)?;
        let mut batch =
            Batch { guards: vec![Guard::Absent { thread: id.clone() }], ..Batch::default() };
        let mut checkpoints = bundle.checkpoints.iter().peekable();
        let mut written = 0;
        for (i, e) in bundle.events.iter().enumerate() {
            let payload = match &e.payload {
                Some(key) => {
                    let path = format!("$.payloads.{key}");
                    let text = bundle.payloads.get(key).ok_or_else(|| bad(&path, "missing"))?;
                    let bytes = unpack(text, key, &path)?;
                    let r = PayloadRef::of(&bytes);
                    batch.payloads.push(bytes);
                    Some(r)
                }
                None => None,
            };
            batch.events.push(NewEvent {
                thread: id.clone(),
                kind: e.kind,
                node: e.node.clone(),
                status: e.status,
                summary: e.summary.clone(),
                payload,
                data: unpack(&e.data, &e.blake3, &format!("$.events[{i}].data"))?,
                at_ms: e.at_ms,
                correlation: e.correlation.clone(),
            });
            // A checkpoint covers the last event of the batch it is written with.
            while let Some(c) = checkpoints.next_if(|c| c.covers_seq == e.seq) {
                batch.checkpoints.push(NewCheckpoint {
                    thread: id.clone(),
                    workflow: c.workflow.clone(),
                    kind: c.kind,
                    snapshot: unpack(&c.snapshot, &c.blake3, "$.checkpoints")?,
                    meta: c.meta.clone(),
                    created_at_ms: c.created_at_ms,
                });
            }
            let full = batch.events.len() >= super::import::IMPORT_BATCH_EVENTS;
            if full || !batch.checkpoints.is_empty() || i + 1 == bundle.events.len() {
                written += batch.events.len();
                batch.threads.push(record.clone());
                let full = std::mem::take(&mut batch);
                self.engine.store().append_async(full).await?.wait().await?;
            }
        }
        debug_assert_eq!(written, bundle.events.len());
        Ok(id)
    }
}
