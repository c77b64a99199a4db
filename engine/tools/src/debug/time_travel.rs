//! Time travel: the state of a thread at any seq, step by step, and the diff between two seqs.
//!
//! The state at a seq is the latest checkpoint at or before it plus the events after it, folded
//! by the same function the live run used. The workflow that folds them is the one the thread
//! ran at that point: the checkpoint's workflow version, or the `thread_created` one when no
//! checkpoint precedes the seq (a migrated thread has older seqs under its old version).

use cairn_storage::{Seq, ThreadId, ThreadRecord};

use super::{Change, STATES_MAX, StateView};
use crate::Operator;
use cairn::Engine;
use cairn::admin;
use cairn::error::Error;
use cairn::event::Body;
use cairn::thread_ctx::ThreadCtx;
use cairn_core::limits;

impl Operator {
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
    /// let at_5 = cairn_tools::Operator::new(&engine).state_at("t1", Some(5)).await?;
    /// let now = cairn_tools::Operator::new(&engine).state_at("t1", None).await?;
    /// println!("step {} -> step {}: {}", at_5.step, now.step, now.state);
    /// # Ok(()) }
    /// ```
    pub async fn state_at(&self, thread: &str, seq: Option<u64>) -> Result<StateView, Error> {
        let id = ThreadId::new(thread)?;
        let record = admin::thread_record(self.engine.store().as_ref(), &id).await?;
        let last = record.last.map_or(0, |b| b.seq.0);
        let seq = check_seq(&record, seq.unwrap_or(last))?;
        let ctx = admin::restore_at(&self.engine, &id, seq).await?;
        view(&ctx)
    }

    /// The highest seq of `thread` whose event was recorded at or before `at_ms` (engine clock,
    /// ms since the epoch): time travel to a point in time goes through it (`state_at`,
    /// [`Operator::state_at_time`](crate::Operator::state_at_time), a fork there). `None` when every retained event is later.
    /// Times along a log are nearly but not strictly ordered (parallel tasks stamp their tool
    /// calls before they commit), so the whole retained log is read, in chunks of
    /// [`limits::READ_CHUNK_EVENTS`]: its bookmarks only, as stored (no body is opened, so a
    /// log sealed with a key this engine lacks answers too).
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; storage errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// if let Some(seq) = cairn_tools::Operator::new(&engine).seq_at_time("t1", 1_764_000_000_000).await? {
    ///     let then = cairn_tools::Operator::new(&engine).state_at("t1", Some(seq)).await?;
    ///     println!("at seq {seq}: {}", then.state);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn seq_at_time(&self, thread: &str, at_ms: u64) -> Result<Option<u64>, Error> {
        let id = ThreadId::new(thread)?;
        let record = admin::thread_record(self.engine.store().as_ref(), &id).await?;
        let mut after = Seq(record.first_seq.0.saturating_sub(1));
        let mut found = None;
        loop {
            let events =
                admin::stored_events(&self.engine, &id, after, limits::READ_CHUNK_EVENTS).await?;
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
    /// As [`Operator::state_at`](crate::Operator::state_at); [`Error::Invalid`] when the thread had no event yet at `at_ms`.
    pub async fn state_at_time(&self, thread: &str, at_ms: u64) -> Result<StateView, Error> {
        match self.seq_at_time(thread, at_ms).await? {
            Some(seq) => self.state_at(thread, Some(seq)).await,
            None => Err(Error::Invalid(format!(
                "thread {thread} has no event recorded at or before {at_ms} ms"
            ))),
        }
    }

    /// The state after each step completed in `from_seq..=to_seq`: one view per
    /// `step_completed` event in the range, in order (use [`Operator::state_at`](crate::Operator::state_at) for any seq).
    ///
    /// # Errors
    /// As [`Operator::state_at`](crate::Operator::state_at); [`Error::Invalid`] if `from_seq > to_seq`;
    /// [`Error::LimitExceeded`] past [`STATES_MAX`] views.
    pub async fn states(
        &self,
        thread: &str,
        from_seq: u64,
        to_seq: u64,
    ) -> Result<Vec<StateView>, Error> {
        let id = ThreadId::new(thread)?;
        let record = admin::thread_record(self.engine.store().as_ref(), &id).await?;
        let from = check_seq(&record, from_seq)?;
        let to = check_seq(&record, to_seq)?;
        if from > to {
            return Err(Error::Invalid(format!("from seq {from} is after to seq {to}")));
        }
        let migrations = admin::migration_points(&self.engine, &id).await?;
        let mut out = Vec::new();
        let mut ctx = admin::restore_at(&self.engine, &id, from).await?;
        if ctx.meta.seq == from && ends_step(&self.engine, &id, from).await? {
            out.push(view(&ctx)?);
        }
        'read: loop {
            let events = self
                .engine
                .store()
                .read_since(&id, Seq(ctx.meta.seq), limits::READ_CHUNK_EVENTS)
                .await?;
            let n = events.len();
            for event in events {
                let seq = event.bookmark.seq.0;
                if seq > to {
                    break 'read;
                }
                let rec = admin::decode(self.engine.store().as_ref(), event).await?;
                ctx.apply(seq, rec.bookmark.at_ms, &rec.body)?;
                if migrations.contains(&seq) {
                    // The state changed type here: continue from the migration's checkpoint.
                    ctx = admin::restore_at(&self.engine, &id, seq).await?;
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
    /// As [`Operator::state_at`](crate::Operator::state_at).
    pub async fn diff(&self, thread: &str, a: u64, b: u64) -> Result<Vec<Change>, Error> {
        let before = self.state_at(thread, Some(a)).await?;
        let after = self.state_at(thread, Some(b)).await?;
        Ok(super::diff_values(&before.state, &after.state))
    }
}

async fn ends_step(engine: &Engine, id: &ThreadId, seq: u64) -> Result<bool, Error> {
    let events = engine.store().read_range(id, Seq(seq), Seq(seq)).await?;
    match events.into_iter().next() {
        Some(event) => Ok(matches!(
            admin::decode(engine.store().as_ref(), event).await?.body,
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
