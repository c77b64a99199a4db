//! Update requests another process stored in the thread's inbox (`api/update_elsewhere.rs`):
//! the runner takes them at a step boundary, after the updates asked in its own process, when
//! it was told of them (a driver message through the shared database) or first drives a
//! thread it did not create (a request stored while the thread changed hands is not left
//! behind; `drive.rs`).
//!
//! Each request is decided as a local one is (`updates.rs`): an id the context holds already
//! (applied or refused) is skipped; otherwise the validator and the handler run, and the
//! outcome is one event committed durably on its own: `update_applied`, or `update_refused`
//! with the refusal's words, so that the caller in the other process, which waits on the log,
//! hears it. The inbox is read from where the last read ended (kept on the thread's `Control`),
//! one page of `UPDATE_INBOX_PAGE` signals at a time.

use cairn_dsl::DynWorkflow;
use cairn_storage::Batch;

use super::runner::Runner;
use super::updates::{Decision, decide};
use crate::coord::{Control, UpdateRequest};
use crate::core::event::Body;
use crate::core::thread_ctx::ThreadCtx;
use crate::error::Error;
use crate::limits::{UPDATE_INBOX_PAGE, UPDATE_REFUSAL_BYTES_MAX, UPDATES_PER_THREAD_MAX};

/// The name of the signal that carries an update request to the process driving a thread
/// (the engine's own: a caller may not send one by name, and no node receives it).
pub(crate) const UPDATE_SIGNAL: &str = "cairn.update";

impl Runner {
    /// Applies (or records the refusal of) every update request in the thread's inbox not
    /// taken yet, oldest first, each in its own durable commit, when the runner was told of
    /// some since its last step boundary.
    ///
    /// # Errors
    /// Storage errors reading the inbox; the commit's errors (the thread then stops as for any
    /// failed write; the caller, waiting on the log, times out and sends the id again).
    pub(super) async fn answer_update_requests(&mut self, control: &Control) -> Result<(), Error> {
        if !control.take_update_requests() {
            return Ok(());
        }
        let thread = self.env.thread.clone();
        let mut after = control.update_inbox_read();
        loop {
            let page = self.shell.store.signals(&thread, after, UPDATE_INBOX_PAGE).await?;
            for signal in &page {
                after = signal.n;
                if signal.name != UPDATE_SIGNAL {
                    continue;
                }
                let Some(request) = request_of(&thread, signal) else { continue };
                // Boxed: requests are rare, and the run loop awaits this at every step.
                Box::pin(self.answer_request(&request)).await?;
            }
            control.set_update_inbox_read(after);
            if page.len() < UPDATE_INBOX_PAGE {
                return Ok(());
            }
        }
    }

    /// Decides one request from the inbox and commits its outcome (nothing for an id the
    /// context holds already).
    async fn answer_request(&mut self, request: &UpdateRequest) -> Result<(), Error> {
        let Some(body) = outcome(&self.env.wf, &self.ctx, &self.env.thread, request)? else {
            return Ok(());
        };
        let now = self.now();
        self.emit(body, now)?;
        self.commit_durable(Batch::default(), None).await
    }
}

/// The event that records the outcome of a request from the inbox: `update_applied`, or
/// `update_refused` with the refusal's words; `None` for an id `ctx` holds already (applied or
/// refused), or a refusal past the bound of those recorded.
///
/// # Errors
/// Errors other than the update's refusal (storage, codec).
pub(crate) fn outcome(
    wf: &DynWorkflow,
    ctx: &ThreadCtx,
    thread: &cairn_storage::ThreadId,
    request: &UpdateRequest,
) -> Result<Option<Body>, Error> {
    if ctx.meta.updates_refused.contains_key(&request.id) {
        return Ok(None);
    }
    match decide(wf, ctx, request) {
        Ok(Decision::Before(_)) => Ok(None),
        Ok(Decision::Apply(body, _)) => Ok(Some(body)),
        Err(e @ (Error::UpdateRefused { .. } | Error::LimitExceeded { .. })) => {
            if ctx.meta.updates_refused.len() >= UPDATES_PER_THREAD_MAX {
                // The refused ids are kept in the context, as the applied ones are: past the
                // bound nothing more is recorded, and the caller's wait runs out.
                tracing::warn!(%thread, id = %request.id, "an update refused and not recorded: UPDATES_PER_THREAD_MAX refusals recorded already");
                return Ok(None);
            }
            let error = match e {
                Error::UpdateRefused {
                    source: cairn_dsl::UpdateError::Refused { message, .. },
                    ..
                } => message,
                other => other.to_string(),
            };
            let error = cut(error, UPDATE_REFUSAL_BYTES_MAX);
            Ok(Some(Body::UpdateRefused {
                id: request.id.clone(),
                name: request.name.clone(),
                error,
            }))
        }
        Err(e) => Err(e),
    }
}

/// The update request a stored inbox signal carries; `None` (logged) for one that does not
/// decode.
pub(crate) fn request_of(
    thread: &cairn_storage::ThreadId,
    signal: &cairn_storage::Signal,
) -> Option<UpdateRequest> {
    let Ok(request) = serde_json::from_slice::<Request>(&signal.data) else {
        tracing::warn!(%thread, n = signal.n, "an update request that does not decode");
        return None;
    };
    Some(UpdateRequest { id: request.id, name: request.name, args: request.args })
}

/// `text` cut to at most `max` bytes, at a character boundary.
fn cut(mut text: String, max: usize) -> String {
    if text.len() > max {
        let mut end = max;
        while !text.is_char_boundary(end) {
            end -= 1;
        }
        text.truncate(end);
    }
    text
}

/// An update request as the sender stores it (`api/update_elsewhere.rs`).
#[derive(serde::Deserialize)]
struct Request {
    id: String,
    name: String,
    args: serde_json::Value,
}
