//! Updates to a thread another process drives, on a database several processes share
//! (`docs/updates.md`, "Across engines").
//!
//! Only the driving runner writes a thread's log, so an engine that does not drive the thread
//! cannot apply the update itself. It stores the request in the thread's inbox as a signal of
//! the engine's own name `cairn.update`, once per update id (the id is its dedup key, as
//! `Engine::signal_once` stores it: two senders of one id store one request), tells the driver
//! (a best-effort message through the database) and waits for the outcome in the thread's log:
//! the `update_applied` event of the id, or its `update_refused` (the validator's or the
//! handler's refusal, which the driver records so that the caller hears it). The driving runner
//! takes the requests at its next step boundary (`exec/update_inbox.rs`), as it takes an update
//! asked in its own process.
//!
//! Nothing here blocks: the wait is on the database's commit feed, with a poll as a floor, and
//! ends at the caller's deadline ([`crate::Error::UpdatePending`]; the request stays stored and
//! is applied when the driver reaches a step boundary: a retry with the same id answers it).
//! A driver message can be lost; the sender sends it again every
//! `UPDATE_ELSEWHERE_RETELL_MS`. A thread that stops Running meanwhile (parked, ended) is left
//! to the caller's loop, which applies a parked thread's update itself.
//!
//! A thread pinned to another worker build takes the same path whatever its status (only its
//! build's handler may run on it): an engine of that build applies the requests to the parked
//! thread (`exec/update_parked.rs`). On a redb file no such engine can be reached: refused.

use std::time::Instant;

use cairn_storage::{Seq, ThreadId, ThreadRecord, ThreadStatus};

use super::engine::Engine;
use crate::coord::{Applied, UPDATES_MESSAGE, UpdateRequest};
use crate::core::child_start::BUILD_LABEL;
use crate::core::event::Body;
use crate::error::Error;
use crate::exec::update_inbox::UPDATE_SIGNAL;
use crate::exec::updates::outcome_before;
use crate::limits::{READ_CHUNK_EVENTS, UPDATE_ELSEWHERE_POLL_MS, UPDATE_ELSEWHERE_RETELL_MS};

/// The dedup key an update request is stored under in a thread's inbox.
pub(crate) fn update_dedup_key(update_id: &str) -> String {
    format!("{UPDATE_SIGNAL}/{update_id}")
}

/// What the wait for another process's runner came to.
pub(crate) enum Elsewhere {
    /// The outcome, from the log.
    Answered(Result<Applied, Error>),
    /// The thread is not Running any more: the caller looks at it again (parked: applies the
    /// update itself; ended: answers from the log).
    NotRunning,
    /// The deadline passed first.
    TimedOut,
}

impl Engine {
    /// Stores `request` for the runner of another process that drives `thread`, tells it, and
    /// waits until its outcome is in the log, the thread stops Running, or `deadline`.
    ///
    /// # Errors
    /// Storage errors; [`Error::Invalid`] for a request that does not fit a signal.
    pub(crate) async fn update_elsewhere(
        &self,
        thread: &ThreadId,
        request: &UpdateRequest,
        after_seq: u64,
        deadline: Instant,
    ) -> Result<Elsewhere, Error> {
        let value = serde_json::json!({
            "id": request.id, "name": request.name, "args": request.args,
        });
        let key = update_dedup_key(&request.id);
        self.keyed_send(thread.as_str(), UPDATE_SIGNAL, value, &key, true).await?;
        let mut commits = self.store().shared().map(cairn_storage::SharedDatabase::commits);
        let mut after = after_seq;
        let mut told_at: Option<Instant> = None;
        let retell = std::time::Duration::from_millis(UPDATE_ELSEWHERE_RETELL_MS);
        let poll = std::time::Duration::from_millis(UPDATE_ELSEWHERE_POLL_MS);
        loop {
            if told_at.is_none_or(|t| t.elapsed() >= retell) {
                self.tell_updates(thread).await;
                told_at = Some(Instant::now());
            }
            if let Some(found) = self.update_outcome(thread, &request.id, &mut after).await? {
                return Ok(Elsewhere::Answered(found));
            }
            let record = crate::exec::fetch::record(self.store().as_ref(), thread).await?;
            // A parked thread pinned to another build waits for an engine of that build.
            let waits = record.status == ThreadStatus::Running
                || (!record.status.is_terminal() && self.pinned_elsewhere(&record));
            if !waits {
                // Its outcome may have landed just before it stopped: looked for once more.
                if let Some(found) = self.update_outcome(thread, &request.id, &mut after).await? {
                    return Ok(Elsewhere::Answered(found));
                }
                return Ok(Elsewhere::NotRunning);
            }
            let now = Instant::now();
            if now >= deadline {
                return Ok(Elsewhere::TimedOut);
            }
            let nap = poll.min(deadline - now);
            match commits.as_mut() {
                Some(c) => drop(tokio::time::timeout(nap, c.changed()).await),
                None => tokio::time::sleep(nap).await,
            }
        }
    }

    /// Hands `request` to the engines of the worker build `record`'s thread is pinned to
    /// (`exec/update_parked.rs` applies it to a parked one, a runner at its step boundary) and
    /// waits for its outcome as [`Engine::update_elsewhere`] does. On a database no other
    /// process shares (a redb file) no engine of that build can be reached: refused. An id the
    /// thread applied (or refused) before answers its recorded outcome, on either.
    ///
    /// # Errors
    /// [`Error::WrongStatus`] without a shared database; an unknown workflow version; storage
    /// errors.
    pub(crate) async fn update_pinned(
        &self,
        record: &ThreadRecord,
        request: &UpdateRequest,
        deadline: Instant,
    ) -> Result<Elsewhere, Error> {
        if let Some(before) = outcome_before(&self.shell, record, request).await? {
            return Ok(Elsewhere::Answered(before));
        }
        if self.store().shared().is_none() {
            let build = record.labels.get(BUILD_LABEL).map_or("", String::as_str);
            return Err(Error::WrongStatus {
                thread: record.id.to_string(),
                status: record.status,
                detail: format!(
                    "it is pinned to worker build {build:?}, not this engine's: only that build's handler applies updates to it (open the file with that build, or repin the thread)"
                ),
            });
        }
        let last = record.last.map_or(0, |b| b.seq.0);
        self.update_elsewhere(&record.id, request, last, deadline).await
    }

    /// Tells the process driving `thread` that its inbox holds update requests (best effort:
    /// a message lost is sent again by the waiting caller).
    async fn tell_updates(&self, thread: &ThreadId) {
        let Some(db) = self.store().shared() else { return };
        let told = db.tell_driver(thread, UPDATES_MESSAGE);
        let limit = std::time::Duration::from_millis(UPDATE_ELSEWHERE_RETELL_MS);
        match tokio::time::timeout(limit, told).await {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                tracing::warn!(%thread, error = %e, "cannot tell the driver of an update")
            }
            Err(_) => tracing::warn!(%thread, "telling the driver of an update timed out"),
        }
    }

    /// The outcome of update `id` among the events of `thread` after `*after` (moved on to the
    /// last one read): its `update_applied` (the reply) or `update_refused` (the refusal).
    async fn update_outcome(
        &self,
        thread: &ThreadId,
        id: &str,
        after: &mut u64,
    ) -> Result<Option<Result<Applied, Error>>, Error> {
        let store = self.store().as_ref();
        loop {
            let events = store.read_since(thread, Seq(*after), READ_CHUNK_EVENTS).await?;
            let n = events.len();
            for event in events {
                *after = event.bookmark.seq.0;
                let rec = crate::exec::fetch::decode(store, event).await?;
                match rec.body {
                    Body::UpdateApplied { id: applied, reply, .. } if applied == id => {
                        return Ok(Some(Ok(Applied::Now { seq: *after, reply })));
                    }
                    Body::UpdateRefused { id: refused, name, error } if refused == id => {
                        return Ok(Some(Err(refusal(thread, name, error))));
                    }
                    _ => {}
                }
            }
            if n < READ_CHUNK_EVENTS {
                return Ok(None);
            }
        }
    }
}

/// The caller's error for a refusal the driving runner recorded.
pub(crate) fn refusal(thread: &ThreadId, name: String, message: String) -> Error {
    Error::UpdateRefused {
        thread: thread.to_string(),
        source: cairn_dsl::UpdateError::Refused { name, message },
    }
}
