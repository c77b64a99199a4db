//! Promises completed from outside (`docs/promises.md`): a node creates a promise
//! (`ctx.promise`), hands its id out, and awaits it; an outside system completes it by that id
//! with a value or an error ([`Engine::complete_promise`]).
//!
//! The id names the thread (`cairn_core::published::promise_id`), and the thread's state holds
//! the ids its nodes created, so an id it never handed out is refused. The completion is a
//! signal of the engine's own name in the thread's inbox, stored once under the promise's id as
//! its dedup key (`api/signal_once.rs`): the signal and the key are durable together, so a
//! caller that retries after a crash or a timeout stores nothing twice. The same completion
//! again is a success that changes nothing; another one is refused.

use cairn_storage::ThreadId;
use serde::Serialize;
use serde_json::{Value, json};

use super::engine::Engine;
use crate::core::published::{promise_signal, promise_thread};
use crate::error::Error;

/// What [`Engine::complete_promise`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Completed {
    /// The promise's id.
    pub promise: String,
    /// The thread it belongs to.
    pub thread: String,
    /// The completion's number in the thread's inbox (the first one's, for a duplicate).
    pub signal: u64,
    /// It was completed so before: nothing was stored.
    pub duplicate: bool,
}

impl Engine {
    /// Completes the promise `id` with `Ok(value)` or `Err(message)`: the node awaiting it
    /// (`ctx.await_promise`) gets that, now or when it awaits. Durable when this returns.
    /// Idempotent on the id: the same completion again answers `duplicate: true`.
    ///
    /// # Errors
    /// [`Error::UnknownPromise`] for an id that is not one or whose thread never created it
    /// (or does not exist); [`Error::PromiseCompleted`] when it was completed with something
    /// else; [`Error::WrongStatus`] when its thread has finished (and it was not completed so).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine, id: &str) -> Result<(), cairn::Error> {
    /// let done = engine.complete_promise(id, Ok(serde_json::json!({"approved": true}))).await?;
    /// let again = engine.complete_promise(id, Ok(serde_json::json!({"approved": true}))).await?;
    /// assert!(!done.duplicate && again.duplicate);
    /// # Ok(()) }
    /// ```
    pub async fn complete_promise(
        &self,
        id: &str,
        outcome: Result<Value, String>,
    ) -> Result<Completed, Error> {
        Ok(self.complete_promise_and_wake(id, outcome).await?.0)
    }

    /// [`Engine::complete_promise`], and whether the completion woke the thread here.
    pub(crate) async fn complete_promise_and_wake(
        &self,
        id: &str,
        outcome: Result<Value, String>,
    ) -> Result<(Completed, bool), Error> {
        let unknown = || Error::UnknownPromise(id.to_owned());
        let Some((thread, _)) = promise_thread(id) else { return Err(unknown()) };
        let tid = ThreadId::new(thread).map_err(|_| unknown())?;
        let ctx = match self.stored_ctx(&tid).await {
            Err(Error::UnknownThread(_)) => return Err(unknown()),
            other => other?,
        };
        if !ctx.meta.promises.contains(id) {
            return Err(unknown());
        }
        let sent = match outcome {
            Ok(value) => json!({ "value": value }),
            Err(message) => json!({ "error": message }),
        };
        let (first, woke) =
            self.keyed_send(thread, &promise_signal(id), sent.clone(), id, true).await?;
        if first.duplicate {
            let stored = self.store().signals(&tid, first.signal.saturating_sub(1), 1).await?;
            let before = stored.first().filter(|s| s.n == first.signal);
            let before: Option<Value> = before.and_then(|s| serde_json::from_slice(&s.data).ok());
            if before.as_ref() != Some(&sent) {
                let first = before
                    .map_or_else(|| "a completion that does not read".into(), |b| b.to_string());
                return Err(Error::PromiseCompleted {
                    promise: id.to_owned(),
                    first,
                    now: sent.to_string(),
                });
            }
        }
        let completed = Completed {
            promise: id.to_owned(),
            thread: thread.to_owned(),
            signal: first.signal,
            duplicate: first.duplicate,
        };
        Ok((completed, woke))
    }
}
