//! Exporting a thread as a debug bundle.
//!
//! Everything goes through the redactor before it is put in the bundle: event bodies (the event's
//! kind, status, node and summary are then derived from the redacted body, so a summary never
//! quotes what its body no longer holds), snapshots, checkpoint metadata and labels. Exporting
//! does not need the thread's workflow, except for the state at seqs no checkpoint covers: with
//! the workflow registered, the bundle's `state` is the state at the last event and its `base`
//! the state just before the first exported event; without it, both come from checkpoints (the
//! exported range then starts just after a checkpoint).

use cairn_storage::{Checkpoint, CheckpointFilter, Seq, ThreadId, ThreadRecord};
use serde::Serialize;
use serde::de::DeserializeOwned;

use super::ExportOptions;
use super::bundle::{
    BUNDLE_VERSION, Bundle, BundleCheckpoint, BundleEvent, BundleMetadata, BundleRedaction,
    BundleThread, EventsExport,
};
use super::bundle_summary::{BundleTelemetry, ToolResultSummary, tool_results};
use super::import::BASE_TAG;
use super::redact::Redactor;
use super::validate::{payload_key, place_body};
use crate::Operator;
use cairn::admin;
use cairn::admin as fetch;
use cairn::error::Error;
use cairn::event::{Body, ForkOrigin};
use cairn::thread_ctx::Snapshot;
use cairn_core::limits;
use cairn_core::restore::decode_snapshot;

impl Operator {
    /// A debug bundle of `thread`, redacted as `options.redaction` says.
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; [`Error::Invalid`] for `last_events: Some(0)` or a redaction
    /// rule that cannot work (a secret shorter than 6 bytes, an empty key pattern);
    /// [`Error::UnknownWorkflow`] when the workflow is not registered and no checkpoint gives a
    /// state; storage errors.
    ///
    /// # Examples
    /// ```no_run
    /// use cairn_tools::debug::{ExportOptions, Redaction};
    /// # async fn run(engine: cairn::Engine) -> Result<(), Box<dyn std::error::Error>> {
    /// let options = ExportOptions {
    ///     include_checkpoints: true,
    ///     redaction: Redaction::default().secret("sk-live-0123456789"),
    ///     ..ExportOptions::default()
    /// };
    /// let bundle = cairn_tools::Operator::new(&engine).export_bundle("t1", &options).await?;
    /// std::fs::write("t1.bundle.json.gz", bundle.to_bytes(true)?)?;
    /// # Ok(()) }
    /// ```
    pub async fn export_bundle(
        &self,
        thread: &str,
        options: &ExportOptions,
    ) -> Result<Bundle, Error> {
        let red = Redactor::new(&options.redaction)?;
        let id = ThreadId::new(thread)?;
        let record = admin::thread_record(self.engine.store().as_ref(), &id).await?;
        let last =
            record.last.map(|b| b.seq.0).ok_or_else(|| Error::UnknownThread(id.to_string()))?;
        let mut start = record.first_seq.0;
        if let Some(n) = options.last_events {
            if n == 0 {
                return Err(Error::Invalid("last_events must keep at least one event".into()));
            }
            start = start.max(last.saturating_sub(n as u64 - 1).max(1));
        }
        let (start, base) = self.export_base(&id, &record, start).await?;
        let state = match admin::restore_at(&self.engine, &id, last).await {
            Ok(ctx) => ctx.snapshot()?,
            Err(e @ (Error::UnknownWorkflow { .. } | Error::FingerprintChanged { .. })) => {
                match self.engine.store().latest_checkpoint_at_or_before(&id, Seq(last)).await? {
                    Some(cp) => decode_snapshot(&id, cp.covers.seq.0, &cp.snapshot)?,
                    None => return Err(e),
                }
            }
            Err(e) => return Err(e),
        };
        let (events, tools) =
            self.export_events(&id, start, last, &red, options.max_payload_bytes).await?;
        let checkpoints = if options.include_checkpoints {
            Some(self.export_checkpoints(&id, start, last, &red).await?)
        } else {
            None
        };
        let mut labels = record.labels.clone();
        if !red.is_noop() {
            labels = redacted(&labels, &red)?;
        }
        let metadata = BundleMetadata {
            cairn_version: env!("CARGO_PKG_VERSION").to_owned(),
            workflow: record.workflow.clone(),
            platform: format!("{}-{}", std::env::consts::OS, std::env::consts::ARCH),
            thread: BundleThread {
                id: id.to_string(),
                status: record.status,
                created_at_ms: record.created_at_ms,
                updated_at_ms: record.updated_at_ms,
                labels,
                parent: record
                    .parent
                    .as_ref()
                    .map(|(t, s)| ForkOrigin { thread: t.to_string(), seq: s.0 }),
                first_seq: start,
                last_seq: last,
            },
            redaction: BundleRedaction {
                key_patterns: options.redaction.key_patterns.clone(),
                secrets: options.redaction.secrets.len() as u64,
            },
            custom: redacted(&options.metadata, &red)?,
            source_version: None,
        };
        let state = redacted(&state, &red)?;
        let timestamp = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
        Ok(Bundle {
            version: BUNDLE_VERSION.to_owned(),
            timestamp,
            telemetry: Some(BundleTelemetry::of(&state)),
            state,
            events,
            base: base.map(|b| redacted(&b, &red)).transpose()?,
            checkpoints,
            tool_results_summary: Some(tools),
            metadata,
        })
    }

    /// The first exported seq and the context just before it.
    async fn export_base(
        &self,
        id: &ThreadId,
        record: &ThreadRecord,
        start: u64,
    ) -> Result<(u64, Option<Snapshot>), Error> {
        if start <= 1 {
            return Ok((1, None));
        }
        match admin::restore_at(&self.engine, id, start - 1).await {
            Ok(ctx) => Ok((start, Some(ctx.snapshot()?))),
            Err(e @ (Error::UnknownWorkflow { .. } | Error::FingerprintChanged { .. })) => {
                // Without the reducer, start right after a checkpoint.
                match self.engine.store().latest_checkpoint_at_or_before(id, Seq(start - 1)).await?
                {
                    Some(cp) => {
                        let seq = cp.covers.seq.0;
                        Ok((seq + 1, Some(decode_snapshot(id, seq, &cp.snapshot)?)))
                    }
                    None if record.first_seq.0 == 1 => Ok((1, None)),
                    None => Err(e),
                }
            }
            Err(e) => Err(e),
        }
    }

    /// The events `start..=last`, and a summary of their tool results (taken before bodies over
    /// `max_payload_bytes` are dropped, so that it covers those too).
    async fn export_events(
        &self,
        id: &ThreadId,
        start: u64,
        last: u64,
        red: &Redactor,
        max_payload_bytes: Option<usize>,
    ) -> Result<(EventsExport, Vec<ToolResultSummary>), Error> {
        let mut out = EventsExport::default();
        let mut tools = Vec::new();
        let mut after = start - 1;
        while after < last {
            let chunk =
                self.engine.store().read_since(id, Seq(after), limits::READ_CHUNK_EVENTS).await?;
            if chunk.is_empty() {
                break;
            }
            for event in chunk {
                let seq = event.bookmark.seq.0;
                if seq > last {
                    break;
                }
                after = seq;
                let rec = fetch::decode(self.engine.store().as_ref(), event).await?;
                let mut value = serde_json::to_value(&rec.body)?;
                red.value(&mut value);
                let body: Body = serde_json::from_value(value.clone()).map_err(|e| {
                    Error::Codec(format!("seq {seq}: the redacted body does not decode: {e}"))
                })?;
                tools.extend(tool_results([(seq, &body)])?);
                let bytes = serde_json::to_vec(&value)?.len();
                let (payload_ref, metadata) = match max_payload_bytes {
                    Some(max) if bytes > max => {
                        let key = payload_key(&value)?;
                        out.dropped.insert(key.clone(), bytes as u64);
                        (Some(key), None)
                    }
                    _ => place_body(value, &mut out.payloads)?,
                };
                out.events.push(BundleEvent {
                    id: format!("evt-{seq}"),
                    seq,
                    timestamp: rec.bookmark.at_ms,
                    kind: body.kind(),
                    node_id: body.node().map(str::to_owned),
                    status: body.status(),
                    summary: red.text(&cairn_core::codec::summary_of(&body)).into_owned(),
                    payload_ref,
                    metadata,
                });
            }
        }
        Ok((out, tools))
    }

    /// The thread's checkpoints covering seqs `start - 1..=last` (a thread that moves on while
    /// it is exported, on a live store, makes newer ones: they are not part of this bundle).
    async fn export_checkpoints(
        &self,
        id: &ThreadId,
        start: u64,
        last: u64,
        red: &Redactor,
    ) -> Result<Vec<BundleCheckpoint>, Error> {
        let filter = CheckpointFilter { thread: Some(id.clone()), ..CheckpointFilter::default() };
        let mut infos = fetch::checkpoints_all(self.engine.store().as_ref(), &filter).await?;
        let lowest = start.saturating_sub(1).max(1);
        infos.retain(|c| {
            (lowest..=last).contains(&c.covers.seq.0) && !c.meta.tags.iter().any(|t| t == BASE_TAG)
        });
        // Listed newest first a page at a time: one made meanwhile can show twice.
        infos.sort_by_key(|c| (c.covers.seq.0, c.id.0));
        infos.dedup_by_key(|c| c.id);
        let mut out: Vec<BundleCheckpoint> = Vec::with_capacity(infos.len());
        for info in infos {
            let Some(cp): Option<Checkpoint> = self.engine.store().checkpoint(info.id).await?
            else {
                continue; // deleted meanwhile
            };
            let seq = cp.covers.seq.0;
            let same = out.iter().filter(|c| c.event_index == seq).count();
            let name = if same == 0 {
                format!("checkpoint-{seq}")
            } else {
                format!("checkpoint-{seq}-{}", same + 1)
            };
            let snapshot = decode_snapshot(id, seq, &cp.snapshot)?;
            out.push(BundleCheckpoint {
                id: name,
                state_id: id.to_string(),
                state: redacted(&snapshot, red)?,
                event_index: seq,
                timestamp: cp.created_at_ms,
                kind: cp.kind,
                workflow: cp.workflow,
                metadata: redacted(&cp.meta, red)?,
            });
        }
        Ok(out)
    }
}

/// `value` passed through the redactor, as the same type.
fn redacted<T: Serialize + DeserializeOwned>(value: &T, red: &Redactor) -> Result<T, Error> {
    let mut v = serde_json::to_value(value)?;
    red.value(&mut v);
    serde_json::from_value(v)
        .map_err(|e| Error::Codec(format!("a redacted value does not decode any more: {e}")))
}
