//! Importing a bundle into a database: the thread, its events, checkpoints and record.
//!
//! The bundle is validated whole before anything is written, so a write fails only on storage
//! errors. Events keep their seqs and timestamps, checkpoints the seqs they cover. A bundle that
//! starts after seq 1 (exported with `last_events`, or from a pruned thread) is written the way
//! storage keeps a pruned thread: placeholder events up to the seq before the first one, the
//! bundle's base as a checkpoint covering that seq, then a prune that drops the placeholders, so
//! the thread restores from the base exactly as the original did. The imported thread keeps its
//! status: one that was running is resumed by recovery the next time the file is opened writable
//! with its workflow registered (open with `RecoveryPolicy::Park` to keep it still).

use cairn_storage::{
    Batch, CheckpointKind, CheckpointMeta, EventKind, EventStatus, Guard, NewCheckpoint, NewEvent,
    Seq, ThreadId, ThreadRecord,
};

use super::bundle::{Bundle, BundleCheckpoint};
use crate::Operator;
use cairn::Engine;
use cairn::error::Error;
use cairn::thread_ctx::Snapshot;
use cairn_core::codec;

/// The tag of the checkpoint import writes for a bundle's base (not exported again).
pub const BASE_TAG: &str = "bundle-base";

/// Events per import batch, and bytes after which a batch is committed early.
pub(super) const IMPORT_BATCH_EVENTS: usize = 1_000;
const IMPORT_BATCH_BYTES: usize = 16 * 1024 * 1024;

impl Operator {
    /// Writes the bundle's thread into this database (which must not have a thread of that id),
    /// so that it can be inspected, time-travelled and replayed here.
    ///
    /// # Errors
    /// [`Error::Bundle`] if the bundle is invalid (see [`Bundle::from_bytes`]) or had bodies
    /// dropped on export ([`super::ExportOptions::max_payload_bytes`]); [`Error::Invalid`]
    /// if the thread exists here already; storage errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), Box<dyn std::error::Error>> {
    /// let bundle = cairn_tools::debug::Bundle::from_bytes(&std::fs::read("t1.bundle.json.gz")?)?;
    /// let id = cairn_tools::Operator::new(&engine).import_bundle(&bundle).await?;
    /// let state = cairn_tools::Operator::new(&engine).state_at(id.as_str(), None).await?;
    /// # Ok(()) }
    /// ```
    pub async fn import_bundle(&self, bundle: &Bundle) -> Result<ThreadId, Error> {
        let bodies = bundle.checked_bodies()?;
        if let Some(key) = bundle.events.dropped.keys().next() {
            return Err(super::reader::bad(
                super::validate::key_path("$.events.dropped", key),
                format!(
                    "{} event bodies were dropped on export (max_payload_bytes): a bundle \
                     without every body can be shown but not imported",
                    bodies.iter().filter(|b| b.is_none()).count()
                ),
            ));
        }
        let bodies: Vec<_> = bodies.into_iter().flatten().collect();
        let meta = &bundle.metadata.thread;
        let id = ThreadId::new(meta.id.clone())?;
        if self.engine.store().thread(&id).await?.is_some() {
            return Err(Error::Invalid(format!("thread {id} exists in this database already")));
        }
        let record = record_of(bundle, &id)?;
        let no_checkpoints: [BundleCheckpoint; 0] = [];
        let checkpoints = bundle.checkpoints.as_deref().unwrap_or(&no_checkpoints);
        let mut next_cp = 0;
        let mut w = Writer { engine: &self.engine, record, batch: Batch::default(), bytes: 0 };
        w.batch.guards.push(Guard::Absent { thread: id.clone() });
        // With no event (a pruned thread's bundle holds its base only), the log goes on after
        // the base.
        let first = bundle.events.events.first().map_or(meta.first_seq, |e| e.seq);
        if first > 1 {
            for seq in 1..first {
                w.batch.events.push(placeholder(&id, seq, meta.created_at_ms));
                if w.batch.events.len() >= IMPORT_BATCH_EVENTS && seq + 1 < first {
                    w.flush().await?;
                }
            }
            let mut attached = 0;
            while next_cp < checkpoints.len() && checkpoints[next_cp].event_index == first - 1 {
                w.checkpoint(&id, &checkpoints[next_cp])?;
                next_cp += 1;
                attached += 1;
            }
            if attached == 0 {
                let base = bundle.base.as_ref().ok_or_else(|| {
                    super::reader::bad(
                        "$.base",
                        format!("missing: the events start at seq {first}"),
                    )
                })?;
                w.base(&id, base)?;
            }
            let appended = w.flush().await?;
            let keep = *appended.checkpoints.first().ok_or_else(|| {
                Error::Invalid("storage stored no base checkpoint for the import".into())
            })?;
            self.engine.store().prune(&id, keep)?.wait().await?;
        }
        for (event, body) in bundle.events.events.iter().zip(&bodies) {
            codec::push_event(&mut w.batch, &id, body, event.timestamp)?;
            w.bytes += w.batch.events.last().map_or(0, |e| e.data.len());
            w.bytes += w.batch.payloads.last().map_or(0, Vec::len);
            let mut attached = false;
            while next_cp < checkpoints.len() && checkpoints[next_cp].event_index == event.seq {
                w.checkpoint(&id, &checkpoints[next_cp])?;
                next_cp += 1;
                attached = true;
            }
            if attached
                || w.batch.events.len() >= IMPORT_BATCH_EVENTS
                || w.bytes >= IMPORT_BATCH_BYTES
            {
                w.flush().await?;
            }
        }
        if !w.batch.events.is_empty() {
            w.flush().await?;
        }
        Ok(id)
    }
}

/// The record of thread `id` as `bundle` describes it.
fn record_of(bundle: &Bundle, id: &ThreadId) -> Result<ThreadRecord, Error> {
    let meta = &bundle.metadata.thread;
    let mut record = ThreadRecord::new(id.clone(), bundle.metadata.workflow.clone(), 0);
    record.status = meta.status;
    record.created_at_ms = meta.created_at_ms;
    record.updated_at_ms = meta.updated_at_ms;
    record.labels = meta.labels.clone();
    record.parent = match &meta.parent {
        Some(p) => Some((ThreadId::new(p.thread.clone())?, Seq(p.seq))),
        None => None,
    };
    record.summary = summary_bytes(&bundle.state);
    Ok(record)
}

/// Batches being written for one import.
struct Writer<'a> {
    engine: &'a Engine,
    record: ThreadRecord,
    batch: Batch,
    bytes: usize,
}

impl Writer<'_> {
    fn checkpoint(&mut self, id: &ThreadId, cp: &BundleCheckpoint) -> Result<(), Error> {
        let snapshot = serde_json::to_vec(&cp.state)?;
        self.bytes += snapshot.len();
        self.batch.checkpoints.push(NewCheckpoint {
            thread: id.clone(),
            workflow: cp.workflow.clone(),
            kind: cp.kind,
            snapshot,
            meta: cp.metadata.clone(),
            created_at_ms: cp.timestamp,
        });
        Ok(())
    }

    fn base(&mut self, id: &ThreadId, base: &Snapshot) -> Result<(), Error> {
        let snapshot = serde_json::to_vec(base)?;
        self.bytes += snapshot.len();
        self.batch.checkpoints.push(NewCheckpoint {
            thread: id.clone(),
            workflow: base.meta.workflow.clone(),
            kind: CheckpointKind::Manual,
            snapshot,
            meta: CheckpointMeta {
                creator: "bundle-import".into(),
                description: "the state before the bundle's first event".into(),
                tags: vec![BASE_TAG.to_owned()],
                custom: std::collections::BTreeMap::new(),
            },
            created_at_ms: base.meta.updated_at_ms,
        });
        Ok(())
    }

    async fn flush(&mut self) -> Result<cairn_storage::Appended, Error> {
        let mut batch = std::mem::take(&mut self.batch);
        batch.threads.push(self.record.clone());
        self.bytes = 0;
        Ok(self.engine.store().append_async(batch).await?.wait().await?)
    }
}

/// An event standing for one the bundle does not hold; pruned before the import ends.
fn placeholder(id: &ThreadId, seq: u64, at_ms: u64) -> NewEvent {
    NewEvent {
        thread: id.clone(),
        kind: EventKind::Custom,
        node: None,
        status: EventStatus::Info,
        summary: format!("placeholder for pruned seq {seq} (bundle import)"),
        payload: None,
        data: b"{}".to_vec(),
        at_ms,
        correlation: None,
    }
}

/// The listing summary the runner keeps in a thread record.
fn summary_bytes(s: &Snapshot) -> Vec<u8> {
    let summary = serde_json::json!({
        "step": s.meta.step,
        "frontier": s.meta.frontier,
        "progress": s.meta.progress,
        "last_error": s.meta.errors.back().map(|e| e.error.to_string()),
    });
    serde_json::to_vec(&summary).unwrap_or_default()
}
