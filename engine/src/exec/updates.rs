//! Updates (`Engine::update`, `docs/updates.md`): what the runner does with the updates asked
//! of its thread at a step boundary, and how an update is applied to a thread nobody drives.
//!
//! Either way the decision is [`decide`]: an id the thread's context holds already was applied
//! (its recorded reply answers, nothing is written); otherwise the workflow's validator and
//! handler run on the context's state, and their outcome becomes one `update_applied` event,
//! folded into the context (which takes the handler's state) and committed alone. Nothing is
//! written for a refusal. The caller is answered once the event is durable.

use cairn_dsl::DynWorkflow;
use cairn_storage::{Batch, ThreadId, ThreadRecord};

use super::runner::Runner;
use super::shell::Shell;
use crate::coord::{Applied, Control, UpdateRequest};
use crate::core::event::Body;
use crate::core::thread_ctx::ThreadCtx;
use crate::error::Error;
use crate::limits::UPDATES_PER_THREAD_MAX;

/// What an update does to the thread `ctx` is the context of.
#[derive(Debug)]
pub(crate) enum Decision {
    /// The id was applied by the event at this seq: nothing to write.
    Before(u64),
    /// The event to write, and the reply it holds.
    Apply(Body, serde_json::Value),
}

/// Decides `request` on the context `ctx` of a thread of `wf` (pure: runs the workflow's
/// validator and handler on a copy of the state).
///
/// # Errors
/// [`Error::UpdateRefused`] for an unknown name, arguments that do not convert, a refusal, a
/// handler's error; [`Error::LimitExceeded`] when the thread took [`UPDATES_PER_THREAD_MAX`].
pub(crate) fn decide(
    wf: &DynWorkflow,
    ctx: &ThreadCtx,
    request: &UpdateRequest,
) -> Result<Decision, Error> {
    if let Some(seq) = ctx.meta.updates.get(&request.id) {
        return Ok(Decision::Before(*seq));
    }
    if let Some(words) = ctx.meta.updates_refused.get(&request.id) {
        return Err(refused_before(ctx, request, words));
    }
    let refused = |source| Error::UpdateRefused { thread: ctx.meta.thread.clone(), source };
    let outcome =
        wf.apply_update(&request.name, ctx.state.as_ref(), &request.args).map_err(refused)?;
    if ctx.meta.updates.len() >= UPDATES_PER_THREAD_MAX {
        return Err(Error::LimitExceeded {
            limit: "updates applied to one thread",
            value: ctx.meta.updates.len() as u64 + 1,
            max: UPDATES_PER_THREAD_MAX as u64,
        });
    }
    let body = Body::UpdateApplied {
        id: request.id.clone(),
        name: request.name.clone(),
        args: request.args.clone(),
        reply: outcome.reply.clone(),
        state: outcome.state,
    };
    Ok(Decision::Apply(body, outcome.reply))
}

impl Runner {
    /// Applies and answers every update asked of this thread since the last step boundary,
    /// oldest first, each in its own durable commit.
    ///
    /// # Errors
    /// The commit's errors (the thread then stops as for any failed write; the asker hears
    /// the error in words).
    pub(super) async fn answer_update_asks(&mut self, control: &Control) -> Result<(), Error> {
        for ask in control.take_update_asks() {
            let decided = decide(&self.env.wf, &self.ctx, &ask.request);
            let (answer, result) = match decided {
                Ok(Decision::Before(seq)) => (Ok(Applied::Before(seq)), Ok(())),
                Ok(Decision::Apply(body, reply)) => {
                    let now = self.now();
                    self.emit(body, now)?;
                    let seq = self.ctx.meta.seq;
                    // Boxed: updates are rare, and the run loop awaits this at every step.
                    match Box::pin(self.commit_durable(Batch::default(), None)).await {
                        Ok(()) => (Ok(Applied::Now { seq, reply }), Ok(())),
                        Err(e) => {
                            let words = format!("the update was not written: {e}");
                            (Err(Error::Invalid(words)), Err(e))
                        }
                    }
                }
                Err(e) => (Err(e), Ok(())),
            };
            // The asker may have given up waiting; its retry with the same id finds the event.
            let _ = ask.reply.send(answer);
            result?;
        }
        Ok(())
    }
}

/// Applies `request` to `record`'s thread, which no runner drives (parked: waiting, sleeping,
/// paused, blocked, created and not yet run; or ended, which only answers an id applied
/// before). The thread stays in its status and wait: the event is written under a claim, with
/// guards on the status and the last seq its context was restored at.
///
/// # Errors
/// As [`decide`]; [`Error::WrongStatus`] for a thread that has ended (and never applied the
/// id), or one a runner drives or that moved on meanwhile; restore and storage errors.
pub(crate) async fn apply_parked(
    shell: &Shell,
    record: ThreadRecord,
    request: &UpdateRequest,
) -> Result<Applied, Error> {
    let id: ThreadId = record.id.clone();
    let wf = shell.registry.workflow_for(&record)?;
    let last = record.last.map_or(0, |b| b.seq.0);
    let ctx = super::fetch::restore(shell.store.as_ref(), &wf, &id, Some(last)).await?;
    if let Some(before) = decided_before(&ctx, request) {
        return before;
    }
    if record.status.is_terminal() {
        return Err(Error::WrongStatus {
            thread: id.to_string(),
            status: record.status,
            detail: "it has finished: it takes no more updates".into(),
        });
    }
    if record.status == cairn_storage::ThreadStatus::Running {
        // Left Running by a crash (recovery is about to drive it) or driven by another process:
        // only its runner writes its log.
        return Err(Error::WrongStatus {
            thread: id.to_string(),
            status: record.status,
            detail: "no runner of this engine drives it yet".into(),
        });
    }
    match decide(&wf, &ctx, request)? {
        Decision::Before(seq) => Ok(Applied::Before(seq)),
        Decision::Apply(body, reply) => {
            let status = record.status;
            super::parked::write_read(shell, record, status, vec![body], None, true).await?;
            Ok(Applied::Now { seq: last + 1, reply })
        }
    }
}

/// The outcome `ctx` holds for `request`'s id already (applied: its seq; refused: the words);
/// `None` for an id not seen.
fn decided_before(ctx: &ThreadCtx, request: &UpdateRequest) -> Option<Result<Applied, Error>> {
    if let Some(seq) = ctx.meta.updates.get(&request.id) {
        return Some(Ok(Applied::Before(*seq)));
    }
    let words = ctx.meta.updates_refused.get(&request.id)?;
    Some(Err(refused_before(ctx, request, words)))
}

/// [`decided_before`] on `record`'s thread as stored (restored at its last seq): for a
/// caller that hands the request on rather than applying it.
///
/// # Errors
/// An unknown workflow version; storage errors.
pub(crate) async fn outcome_before(
    shell: &Shell,
    record: &ThreadRecord,
    request: &UpdateRequest,
) -> Result<Option<Result<Applied, Error>>, Error> {
    let wf = shell.registry.workflow_for(record)?;
    let last = record.last.map_or(0, |b| b.seq.0);
    let ctx = super::fetch::restore(shell.store.as_ref(), &wf, &record.id, Some(last)).await?;
    Ok(decided_before(&ctx, request))
}

/// The refusal an `update_refused` event recorded for `request`'s id, answered again.
fn refused_before(ctx: &ThreadCtx, request: &UpdateRequest, words: &str) -> Error {
    Error::UpdateRefused {
        thread: ctx.meta.thread.clone(),
        source: cairn_dsl::UpdateError::Refused {
            name: request.name.clone(),
            message: words.to_owned(),
        },
    }
}

/// The reply recorded by the `update_applied` event at `seq` of `thread`.
///
/// # Errors
/// [`Error::Record`] when that event is not an update's; storage errors.
pub(crate) async fn recorded_reply(
    shell: &Shell,
    thread: &ThreadId,
    seq: u64,
) -> Result<serde_json::Value, Error> {
    let store = shell.store.as_ref();
    let at = cairn_storage::Seq(seq);
    let events = store.read_range(thread, at, at).await?;
    let not_update = || Error::Record {
        thread: thread.to_string(),
        seq,
        detail: "the event an update's id names is not update_applied".into(),
    };
    let event = events.into_iter().next().ok_or_else(not_update)?;
    match super::fetch::decode(store, event).await?.body {
        Body::UpdateApplied { reply, .. } => Ok(reply),
        _ => Err(not_update()),
    }
}
