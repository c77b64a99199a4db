//! Published events (`docs/promises.md`): the key/value pairs a thread's nodes publish
//! (`ctx.set_event`), read by a caller that may wait for one ([`Engine::get_event`]).
//!
//! The answer comes from the thread's state as stored (the fold keeps the latest value of each
//! key, `cairn_core::published`); a wait subscribes to the thread's log after that state and
//! ends at the first `event_published` of the key (its value), the thread's end (never set),
//! or the wait's bound.

use std::collections::BTreeMap;
use std::time::Duration;

use cairn_storage::{Scope, ThreadId, ThreadStatus};
use serde::Serialize;
use serde_json::Value;

use super::engine::Engine;
use crate::core::event::Body;
use crate::core::thread_ctx::ThreadCtx;
use crate::error::Error;
use crate::limits::GET_EVENT_WAIT_MS_MAX;

/// What [`Engine::get_event`] found for a key.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "state", rename_all = "snake_case")]
pub enum EventValue {
    /// The key's latest value.
    Set {
        /// The value.
        value: Value,
    },
    /// Not published yet, and the thread runs on (the wait, if any, ran out).
    Pending {
        /// The thread's status.
        status: ThreadStatus,
    },
    /// Never published: the thread has ended without it.
    NeverSet {
        /// How the thread ended.
        status: ThreadStatus,
    },
}

impl Engine {
    /// The latest value thread `thread` published under `key` (`ctx.set_event`). When it has
    /// not been published and the thread runs on, waits up to `wait` (at most
    /// 60,000 ms, `GET_EVENT_WAIT_MS_MAX`) for it:
    /// [`EventValue::Pending`] if it did not come, [`EventValue::NeverSet`] once the thread
    /// ends without it.
    ///
    /// # Errors
    /// [`Error::UnknownThread`]; what restoring the thread may return (its workflow not
    /// registered, damage).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// use std::time::Duration;
    /// let stage = engine.get_event("order-7", "stage", Some(Duration::from_secs(5))).await?;
    /// if let cairn::EventValue::Set { value } = stage {
    ///     println!("order-7 is at {value}");
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn get_event(
        &self,
        thread: &str,
        key: &str,
        wait: Option<Duration>,
    ) -> Result<EventValue, Error> {
        let id = ThreadId::new(thread)?;
        let ctx = self.stored_ctx(&id).await?;
        let status = ctx.meta.status;
        if let Some(value) = ctx.meta.published.get(key) {
            return Ok(EventValue::Set { value: value.clone() });
        }
        if status.is_terminal() {
            return Ok(EventValue::NeverSet { status });
        }
        let wait_ms = wait.map_or(0, |w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX));
        let wait_ms = wait_ms.min(GET_EVENT_WAIT_MS_MAX);
        if wait_ms == 0 {
            return Ok(EventValue::Pending { status });
        }
        let mut events = self.subscribe(Scope::Thread(id), ctx.meta.seq)?;
        let deadline = tokio::time::Instant::now() + Duration::from_millis(wait_ms);
        let mut status = status;
        // Bounded by the deadline: each turn reads one event.
        loop {
            let Ok(next) = tokio::time::timeout_at(deadline, events.next()).await else {
                return Ok(EventValue::Pending { status });
            };
            match next?.body {
                Body::EventPublished { key: k, value, .. } if k == key => {
                    return Ok(EventValue::Set { value });
                }
                Body::StatusChanged { to, .. } if to.is_terminal() => {
                    return Ok(EventValue::NeverSet { status: to });
                }
                Body::StatusChanged { to, .. } => status = to,
                _ => {}
            }
        }
    }

    /// Every key thread `thread` published, with its latest value.
    ///
    /// # Errors
    /// As [`Engine::get_event`].
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// let all = engine.published("order-7").await?;
    /// assert!(all.keys().all(|k| !k.is_empty()));
    /// # Ok(()) }
    /// ```
    pub async fn published(&self, thread: &str) -> Result<BTreeMap<String, Value>, Error> {
        let id = ThreadId::new(thread)?;
        Ok(self.stored_ctx(&id).await?.meta.published)
    }

    /// The thread's context after its last stored event.
    pub(crate) async fn stored_ctx(&self, id: &ThreadId) -> Result<ThreadCtx, Error> {
        let store = self.shell.store.as_ref();
        let record = crate::exec::fetch::record(store, id).await?;
        let wf = self.shell.registry.workflow_for(&record)?;
        crate::exec::fetch::restore(store, &wf, id, None).await
    }
}
