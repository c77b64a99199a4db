//! Updates (`docs/updates.md`): a synchronous, validated call into a thread that changes its
//! state and answers the caller, and update-with-start.
//!
//! A thread a runner of this engine drives takes the update at its next step boundary (the
//! runner applies it, `exec/updates.rs`); a thread nobody drives (waiting in `ctx.recv`,
//! sleeping, paused) takes it at once, under a claim, and stays in its wait. Either way the
//! request, the reply and the new state are one `update_applied` event, and the reply is
//! returned once that event is durable. An update id (the caller's, or a fresh one) makes the
//! call idempotent: an id applied before answers its recorded reply and writes nothing, after a
//! crash too (the ids are part of the thread's context, folded from the log).

use std::time::{Duration, Instant};

use cairn_dsl::UpdateDef;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::oneshot;

use super::engine::Engine;
use super::handle::ThreadHandle;
use super::update_elsewhere::Elsewhere;
use crate::config::StartOptions;
use crate::coord::{Applied, UpdateAsk, UpdateRequest};
use crate::error::Error;
use crate::exec::updates::{apply_parked, recorded_reply};
use crate::limits::{
    UPDATE_ASKS_MAX, UPDATE_ID_MAX_BYTES, UPDATE_WAIT_DEFAULT_MS, UPDATE_WAIT_MAX_MS,
};

/// How often a caller looks again for a runner of a thread left Running (recovery is about to
/// drive it).
const UNDRIVEN_POLL: Duration = Duration::from_millis(10);

/// How an update is sent.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct UpdateOptions {
    /// The update's id: applied once per thread, whatever the number of calls (a caller that
    /// retries after a failure sends the same id). A fresh one when `None`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub id: Option<String>,
    /// How long to wait for a running thread's next step boundary, in ms (30,000 by default,
    /// at most 600,000).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wait_ms: Option<u64>,
}

impl UpdateOptions {
    /// Options with the update id `id`.
    ///
    /// # Examples
    /// ```
    /// let options = cairn::UpdateOptions::id("raise-7");
    /// assert_eq!(options.id.as_deref(), Some("raise-7"));
    /// ```
    pub fn id(id: impl Into<String>) -> Self {
        Self { id: Some(id.into()), wait_ms: None }
    }
}

/// What an update did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Updated {
    /// The thread updated.
    pub thread: String,
    /// The update's id.
    pub id: String,
    /// The handler's reply.
    pub reply: Value,
    /// The seq of the `update_applied` event that holds it.
    pub seq: u64,
    /// The id had been applied before: nothing was written, the reply is the recorded one.
    pub duplicate: bool,
}

/// What [`Engine::update_with_start`] did.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct UpdateWithStart {
    /// The call created the thread (`false`: it existed).
    pub created: bool,
    /// The update applied.
    #[serde(flatten)]
    pub updated: Updated,
}

impl Engine {
    /// Applies the update `name` (declared with `WorkflowBuilder::update`) with `args` to
    /// `thread` and returns its reply once the `update_applied` event holding it is durable. A
    /// thread a runner drives takes it at its next step boundary; a parked one (waiting for a
    /// signal, sleeping, paused) at once, and it stays in its wait. The validator runs before
    /// anything is written; a refusal writes nothing. An id applied before (`options.id`)
    /// answers its recorded reply, `duplicate: true`, and applies nothing.
    ///
    /// # Errors
    /// [`Error::UpdateRefused`] for an unknown name, arguments that do not convert, the
    /// validator's refusal or the handler's error; [`Error::UnknownThread`];
    /// [`Error::WrongStatus`] for a thread that has finished (an id it applied before still
    /// answers); [`Error::UpdatePending`] when the runner did not reach a step boundary within
    /// `options.wait_ms` (it may still apply it: send the same id again);
    /// [`Error::LimitExceeded`] when 64 updates wait for the thread's next step, or it took
    /// 10,000; [`Error::Invalid`] for an empty id or one over 256 bytes; storage errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// let options = cairn::UpdateOptions::id("raise-7");
    /// let done = engine.update("order-7", "set_limit", 500, options).await?;
    /// println!("the old limit was {}", done.reply);
    /// # Ok(()) }
    /// ```
    pub async fn update(
        &self,
        thread: &str,
        name: &str,
        args: impl Serialize,
        options: UpdateOptions,
    ) -> Result<Updated, Error> {
        let id = cairn_storage::ThreadId::new(thread)?;
        let update_id = options.id.unwrap_or_else(|| self.shell.ids.new_id());
        if update_id.is_empty() || update_id.len() > UPDATE_ID_MAX_BYTES {
            return Err(Error::Invalid(format!(
                "an update id is 1 to {UPDATE_ID_MAX_BYTES} bytes, not {}",
                update_id.len()
            )));
        }
        let request = UpdateRequest {
            id: update_id,
            name: name.to_owned(),
            args: serde_json::to_value(args)?,
        };
        let wait_ms = options.wait_ms.unwrap_or(UPDATE_WAIT_DEFAULT_MS).min(UPDATE_WAIT_MAX_MS);
        let applied = self.apply_update(&id, &request, wait_ms).await?;
        let (seq, reply, duplicate) = match applied {
            Applied::Now { seq, reply } => (seq, reply, false),
            Applied::Before(seq) => (seq, recorded_reply(&self.shell, &id, seq).await?, true),
        };
        Ok(Updated { thread: thread.to_owned(), id: request.id, reply, seq, duplicate })
    }

    /// Hands `request` to the thread's runner, or applies it to the parked thread, until one
    /// answers or `wait_ms` pass (a thread woken or parked between the two is looked at again).
    async fn apply_update(
        &self,
        id: &cairn_storage::ThreadId,
        request: &UpdateRequest,
        wait_ms: u64,
    ) -> Result<Applied, Error> {
        let deadline = Instant::now() + Duration::from_millis(wait_ms);
        let pending = || Error::UpdatePending {
            thread: id.to_string(),
            id: request.id.clone(),
            waited_ms: wait_ms,
        };
        loop {
            let (reply, answer) = oneshot::channel();
            let ask = UpdateAsk { request: request.clone(), reply };
            match self.shell.coord.ask_update(id, ask) {
                Ok(()) => match tokio::time::timeout_at(deadline.into(), answer).await {
                    Ok(Ok(result)) => return result,
                    // The runner stopped before its next step boundary: the thread is parked
                    // or ended now, or driven again.
                    Ok(Err(_)) => continue,
                    Err(_) => return Err(pending()),
                },
                Err(_) if self.shell.coord.is_driven(id) => {
                    return Err(Error::LimitExceeded {
                        limit: "updates waiting for one thread's next step",
                        value: UPDATE_ASKS_MAX as u64 + 1,
                        max: UPDATE_ASKS_MAX as u64,
                    });
                }
                Err(_) => {}
            }
            let record = crate::exec::fetch::record(self.store().as_ref(), id).await?;
            let last = record.last.map_or(0, |b| b.seq.0);
            if self.pinned_elsewhere(&record) && !record.status.is_terminal() {
                // Pinned to another worker build: its handler, not this build's, applies it.
                match self.update_pinned(&record, request, deadline).await? {
                    Elsewhere::Answered(result) => return result,
                    Elsewhere::NotRunning => continue,
                    Elsewhere::TimedOut => return Err(pending()),
                }
            }
            match apply_parked(&self.shell, record, request).await {
                // Another process drives it (or will, having left it Running): its runner
                // takes the request from the thread's inbox (`update_elsewhere.rs`).
                Err(Error::WrongStatus {
                    status: cairn_storage::ThreadStatus::Running, ..
                }) if self.store().shared().is_some() && !self.shell.coord.is_driven(id) => {
                    match self.update_elsewhere(id, request, last, deadline).await? {
                        Elsewhere::Answered(result) => return result,
                        Elsewhere::NotRunning => {}
                        Elsewhere::TimedOut => return Err(pending()),
                    }
                }
                Err(Error::WrongStatus { status, .. })
                    if !status.is_terminal() && Instant::now() < deadline =>
                {
                    // Driven meanwhile, or Running until recovery's runner claims it.
                    if !self.shell.coord.is_driven(id) {
                        tokio::time::sleep(UNDRIVEN_POLL).await;
                    }
                }
                other => return other,
            }
        }
    }

    /// Creates the thread `options.thread_id` of `workflow` on `input` unless it exists, then
    /// applies the update to it as [`Engine::update`] does: an update to a thread that may not
    /// be running yet, in one call. Both halves are idempotent (the start on the thread's id,
    /// the update on its id), so a caller that retries after a failure with the same ids gets
    /// one thread and one update.
    ///
    /// # Errors
    /// [`Error::Invalid`] without `options.thread_id`; as [`Engine::start`] and
    /// [`Engine::update`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// use cairn::{StartOptions, UpdateOptions};
    /// let done = engine
    ///     .update_with_start("cart", serde_json::json!({}), StartOptions::id("cart-9"), "add", "apple", UpdateOptions::id("add-1"))
    ///     .await?;
    /// assert_eq!(done.updated.thread, "cart-9");
    /// # Ok(()) }
    /// ```
    pub async fn update_with_start(
        &self,
        workflow: &str,
        input: impl Serialize,
        options: StartOptions,
        name: &str,
        args: impl Serialize,
        update: UpdateOptions,
    ) -> Result<UpdateWithStart, Error> {
        let Some(thread) = options.thread_id.clone() else {
            return Err(Error::Invalid("update-with-start needs the thread's id".into()));
        };
        let input = serde_json::to_value(input)?;
        let created = self.write_start(workflow, input, options, true).await?.created;
        let updated = self.update(&thread, name, args, update).await?;
        Ok(UpdateWithStart { created, updated })
    }
}

impl<S> ThreadHandle<S> {
    /// Applies the update `update` names with `args`, as [`Engine::update`] does, its
    /// arguments and reply of the update's types (declare it with the same [`UpdateDef`] in
    /// [`cairn_dsl::WorkflowBuilder::update`]). A fresh update id; use
    /// [`ThreadHandle::update_with`] to give one.
    ///
    /// # Errors
    /// As [`Engine::update`]; [`Error::Codec`] if the reply does not decode as an `R`.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(thread: cairn::ThreadHandle) -> Result<(), cairn::Error> {
    /// const ADD: cairn::dsl::UpdateDef<u32, u32> = cairn::dsl::UpdateDef::new("add");
    /// let total: u32 = thread.update(ADD, 5).await?;
    /// # Ok(()) }
    /// ```
    pub async fn update<A: Serialize, R: DeserializeOwned>(
        &self,
        update: UpdateDef<A, R>,
        args: A,
    ) -> Result<R, Error> {
        self.update_with(update, args, UpdateOptions::default()).await
    }

    /// [`ThreadHandle::update`] with options (the update's id, the wait).
    ///
    /// # Errors
    /// As [`ThreadHandle::update`].
    pub async fn update_with<A: Serialize, R: DeserializeOwned>(
        &self,
        update: UpdateDef<A, R>,
        args: A,
        options: UpdateOptions,
    ) -> Result<R, Error> {
        let done = self.engine.update(self.id().as_str(), update.name(), args, options).await?;
        Ok(serde_json::from_value(done.reply)?)
    }
}
