//! Time travel: the state of a thread at any seq, step by step, and the diff between two seqs.
//!
//! The state at a seq is the latest checkpoint at or before it plus the events after it, folded
//! by the same function the live run used. The workflow that folds them is the one the thread
//! ran at that point: the checkpoint's workflow version, or the `thread_created` one when no
//! checkpoint precedes the seq (a migrated thread has older seqs under its old version).

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::{CheckpointFilter, Seq, ThreadId, ThreadRecord, WorkflowRef};

use super::migrate::MIGRATION_TAG;
use super::{Change, STATES_MAX, StateView};
use crate::api::engine::Engine;
use crate::core::event::Body;
use crate::core::thread_ctx::ThreadCtx;
use crate::error::Error;
use crate::exec::fetch;
use crate::limits;

impl Engine {
    /// The state of `thread` after the event at `seq` (after its last event when `None`).
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; [`Error::SeqUnavailable`] for seq 0, a seq past the last
    /// event, or one before what a prune kept;
    /// [`Error::UnknownWorkflow`] / [`Error::FingerprintChanged`] when the workflow the thread
    /// ran at that point is not registered; storage errors ([`cairn_storage::Error::Pruned`]
    /// when a checkpoint a prune kept was deleted since).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// let at_5 = engine.state_at("t1", Some(5)).await?;
    /// let now = engine.state_at("t1", None).await?;
    /// println!("step {} -> step {}: {}", at_5.step, now.step, now.state);
    /// # Ok(()) }
    /// ```
    pub async fn state_at(&self, thread: &str, seq: Option<u64>) -> Result<StateView, Error> {
        let id = ThreadId::new(thread)?;
        let record = self.thread_record(&id).await?;
        let last = record.last.map_or(0, |b| b.seq.0);
        let seq = check_seq(&record, seq.unwrap_or(last))?;
        let ctx = self.restore_at(&id, seq).await?;
        view(&ctx)
    }

    /// The highest seq of `thread` whose event was recorded at or before `at_ms` (engine clock,
    /// ms since the epoch): time travel to a point in time goes through it (`state_at`,
    /// [`Engine::state_at_time`], a fork there). `None` when every retained event is later.
    /// Times along a log are nearly but not strictly ordered (parallel tasks stamp their tool
    /// calls before they commit), so the whole retained log is read, in chunks of
    /// [`limits::READ_CHUNK_EVENTS`].
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; storage errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// if let Some(seq) = engine.seq_at_time("t1", 1_764_000_000_000).await? {
    ///     let then = engine.state_at("t1", Some(seq)).await?;
    ///     println!("at seq {seq}: {}", then.state);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn seq_at_time(&self, thread: &str, at_ms: u64) -> Result<Option<u64>, Error> {
        let id = ThreadId::new(thread)?;
        let record = self.thread_record(&id).await?;
        let mut after = Seq(record.first_seq.0.saturating_sub(1));
        let mut found = None;
        loop {
            let events = self.store().read_since(&id, after, limits::READ_CHUNK_EVENTS).await?;
            let Some(last) = events.last() else { return Ok(found) };
            after = last.bookmark.seq;
            for e in &events {
                if e.bookmark.at_ms <= at_ms {
                    found = Some(e.bookmark.seq.0);
                }
            }
        }
    }

    /// The state of `thread` as it stood at `at_ms` (engine clock, ms since the epoch): after
    /// the last event recorded at or before then.
    ///
    /// # Errors
    /// As [`Engine::state_at`]; [`Error::Invalid`] when the thread had no event yet at `at_ms`.
    pub async fn state_at_time(&self, thread: &str, at_ms: u64) -> Result<StateView, Error> {
        match self.seq_at_time(thread, at_ms).await? {
            Some(seq) => self.state_at(thread, Some(seq)).await,
            None => Err(Error::Invalid(format!(
                "thread {thread} has no event recorded at or before {at_ms} ms"
            ))),
        }
    }

    /// The state after each step completed in `from_seq..=to_seq`: one view per
    /// `step_completed` event in the range, in order (use [`Engine::state_at`] for any seq).
    ///
    /// # Errors
    /// As [`Engine::state_at`]; [`Error::Invalid`] if `from_seq > to_seq`;
    /// [`Error::LimitExceeded`] past [`STATES_MAX`] views.
    pub async fn states(
        &self,
        thread: &str,
        from_seq: u64,
        to_seq: u64,
    ) -> Result<Vec<StateView>, Error> {
        let id = ThreadId::new(thread)?;
        let record = self.thread_record(&id).await?;
        let from = check_seq(&record, from_seq)?;
        let to = check_seq(&record, to_seq)?;
        if from > to {
            return Err(Error::Invalid(format!("from seq {from} is after to seq {to}")));
        }
        let migrations = self.migration_points(&id).await?;
        let mut out = Vec::new();
        let mut ctx = self.restore_at(&id, from).await?;
        if ctx.meta.seq == from && ends_step(self, &id, from).await? {
            out.push(view(&ctx)?);
        }
        'read: loop {
            let events =
                self.store().read_since(&id, Seq(ctx.meta.seq), limits::READ_CHUNK_EVENTS).await?;
            let n = events.len();
            for event in events {
                let seq = event.bookmark.seq.0;
                if seq > to {
                    break 'read;
                }
                let rec = fetch::decode(self.store().as_ref(), event).await?;
                ctx.apply(seq, rec.bookmark.at_ms, &rec.body)?;
                if migrations.contains(&seq) {
                    // The state changed type here: continue from the migration's checkpoint.
                    ctx = self.restore_at(&id, seq).await?;
                }
                if matches!(rec.body, Body::StepCompleted { .. }) {
                    if out.len() == STATES_MAX {
                        return Err(Error::LimitExceeded {
                            limit: "the states one call may return",
                            value: out.len() as u64 + 1,
                            max: STATES_MAX as u64,
                        });
                    }
                    out.push(view(&ctx)?);
                }
            }
            if n < limits::READ_CHUNK_EVENTS {
                break;
            }
        }
        Ok(out)
    }

    /// What changed in the user state between seq `a` and seq `b`, as JSON pointers.
    ///
    /// # Errors
    /// As [`Engine::state_at`].
    pub async fn diff(&self, thread: &str, a: u64, b: u64) -> Result<Vec<Change>, Error> {
        let before = self.state_at(thread, Some(a)).await?;
        let after = self.state_at(thread, Some(b)).await?;
        Ok(super::diff_values(&before.state, &after.state))
    }

    /// The thread's record, or [`Error::UnknownThread`].
    pub(crate) async fn thread_record(&self, id: &ThreadId) -> Result<ThreadRecord, Error> {
        fetch::record(self.store().as_ref(), id).await
    }

    /// The thread context after `seq`, folded by the workflow version the thread ran there.
    pub(crate) async fn restore_at(&self, id: &ThreadId, seq: u64) -> Result<ThreadCtx, Error> {
        let wf = self.workflow_at(id, seq).await?;
        fetch::restore(self.store().as_ref(), &wf, id, Some(seq)).await
    }

    /// The registered workflow that folds `id`'s events up to `seq`.
    pub(crate) async fn workflow_at(
        &self,
        id: &ThreadId,
        seq: u64,
    ) -> Result<Arc<DynWorkflow>, Error> {
        let wref = match self.store().latest_checkpoint_at_or_before(id, Seq(seq)).await? {
            // A migration checkpoint is filed under the version its snapshot belongs to.
            Some(cp) => cp.workflow,
            None => created_workflow(self, id).await?,
        };
        self.registered(&wref)
    }

    /// The registered workflow with this id, version and fingerprint.
    pub(crate) fn registered(&self, wref: &WorkflowRef) -> Result<Arc<DynWorkflow>, Error> {
        let wf = self.shell.registry.latest(&wref.id, Some(wref.version))?;
        let current = wf.fingerprint().to_string();
        if current != wref.fingerprint {
            return Err(Error::FingerprintChanged {
                thread: String::new(),
                workflow: format!("{} v{}", wref.id, wref.version),
                recorded: wref.fingerprint.clone(),
                current,
            });
        }
        Ok(wf)
    }

    /// Seqs at which the thread was migrated (each covered by a migration checkpoint).
    pub(crate) async fn migration_points(&self, id: &ThreadId) -> Result<Vec<u64>, Error> {
        let filter = CheckpointFilter {
            thread: Some(id.clone()),
            any_tags: vec![MIGRATION_TAG.to_owned()],
            ..CheckpointFilter::default()
        };
        let listed = fetch::checkpoints_all(self.store().as_ref(), &filter).await?;
        let mut out: Vec<u64> = listed.into_iter().map(|c| c.covers.seq.0).collect();
        out.sort_unstable();
        out.dedup();
        Ok(out)
    }
}

/// The workflow of the thread's `thread_created` event.
async fn created_workflow(engine: &Engine, id: &ThreadId) -> Result<WorkflowRef, Error> {
    let first = engine.store().read_range(id, Seq(1), Seq(1)).await?;
    let event = first.into_iter().next().ok_or_else(|| Error::UnknownThread(id.to_string()))?;
    match fetch::decode(engine.store().as_ref(), event).await?.body {
        Body::ThreadCreated { workflow, .. } => Ok(workflow),
        _ => Err(Error::Record {
            thread: id.to_string(),
            seq: 1,
            detail: "the first event of a thread is not thread_created".into(),
        }),
    }
}

async fn ends_step(engine: &Engine, id: &ThreadId, seq: u64) -> Result<bool, Error> {
    let events = engine.store().read_range(id, Seq(seq), Seq(seq)).await?;
    match events.into_iter().next() {
        Some(event) => Ok(matches!(
            fetch::decode(engine.store().as_ref(), event).await?.body,
            Body::StepCompleted { .. }
        )),
        None => Ok(false),
    }
}

/// `seq` if the thread's state after it can be restored: a seq of its log, not before what a
/// prune kept (the thread's newest checkpoint, covering the seq before its first stored event).
/// Otherwise [`Error::SeqUnavailable`].
pub(crate) fn check_seq(record: &ThreadRecord, seq: u64) -> Result<u64, Error> {
    let (last, first_stored) = (record.last.map_or(0, |b| b.seq.0), record.first_seq.0);
    if seq != 0 && (first_stored.saturating_sub(1).max(1)..=last).contains(&seq) {
        return Ok(seq);
    }
    Err(Error::SeqUnavailable { thread: record.id.to_string(), seq, last, first_stored })
}

/// The view of a context.
pub(crate) fn view(ctx: &ThreadCtx) -> Result<StateView, Error> {
    let snapshot = ctx.snapshot()?;
    Ok(StateView {
        thread: snapshot.meta.thread.clone(),
        seq: snapshot.meta.seq,
        step: snapshot.meta.step,
        status: snapshot.meta.status,
        state: snapshot.state,
        meta: snapshot.meta,
    })
}
