//! Event triggers: [`Engine::emit`] starts a thread of every workflow subscribed to an event
//! name ([`cairn_dsl::WorkflowBuilder::on_event`]), on the event's payload, once per event id
//! (`docs/events.md`).
//!
//! Once per event id, without a record of its own: each thread's id is derived from the event
//! id and the workflow ([`event_thread_id`]), and a start is create-if-absent on its id (a
//! start of an id that exists answers that thread and writes nothing). So an emit repeated with
//! the same id (a retried webhook, a caller that timed out, after a restart too) creates
//! nothing more and answers the threads the first created; an emit that crashed halfway created
//! some of its threads, each whole (a creation is one atomic batch), and its retry creates the
//! rest. No write of an emit can double a start, and none it answered is lost: it answers only
//! after every creation is durable.

use serde::Serialize;
use serde_json::Value;
use tracing::Instrument;

use super::engine::Engine;
use crate::config::StartOptions;
use crate::error::Error;
use crate::limits::{EVENT_ID_BYTES_MAX, EVENT_PAYLOAD_BYTES_MAX, EVENT_SUBSCRIBERS_MAX};

/// One thread an emit answers with.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct EventStart {
    /// The subscribed workflow's id.
    pub workflow: String,
    /// The thread of this event on it.
    pub thread: String,
    /// This emit created the thread (`false`: an emit of the same id did before).
    pub created: bool,
}

/// What [`Engine::emit`] did: one thread per subscribed workflow, in workflow id order (none
/// when no workflow subscribes to the name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Emitted {
    /// The threads of the event, one per subscriber.
    pub threads: Vec<EventStart>,
}

impl Engine {
    /// Emits the event `name` with the id `id`: starts a thread of the newest registered
    /// version of every workflow subscribed to `name`, on `payload` as its input, and drives
    /// it here. Once per event id: an emit of an id emitted before (across restarts, on every
    /// engine sharing the store) starts nothing more and answers the threads it started. A
    /// name no workflow subscribes to answers no threads (not an error: an event may be
    /// emitted before anything listens to it).
    ///
    /// # Errors
    /// [`Error::Invalid`] for an empty id, or a payload that is not a valid input of a
    /// subscriber (then nothing is written); [`Error::LimitExceeded`] for an id over
    /// `EVENT_ID_BYTES_MAX` bytes, a payload over `EVENT_PAYLOAD_BYTES_MAX` bytes of JSON,
    /// or more than `EVENT_SUBSCRIBERS_MAX` subscribers; storage errors (the threads created
    /// before one are durable, and an emit again creates the rest).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// let payload = serde_json::json!({ "order": 7 });
    /// let first = engine.emit("order.created", "order-7", &payload).await?;
    /// let again = engine.emit("order.created", "order-7", &payload).await?;
    /// assert!(again.threads.iter().all(|t| !t.created));
    /// assert_eq!(
    ///     first.threads.iter().map(|t| &t.thread).collect::<Vec<_>>(),
    ///     again.threads.iter().map(|t| &t.thread).collect::<Vec<_>>()
    /// );
    /// # Ok(()) }
    /// ```
    pub async fn emit(
        &self,
        name: &str,
        id: &str,
        payload: impl Serialize,
    ) -> Result<Emitted, Error> {
        self.emit_with(name, id, serde_json::to_value(payload)?, true).await
    }

    /// [`Engine::emit`] that writes the threads `created` and does not run them, as
    /// [`Engine::create`] does for a start: for a process that only writes (the command line
    /// on a file no engine holds); the next engine that runs threads on the store runs them.
    ///
    /// # Errors
    /// As [`Engine::emit`].
    pub async fn emit_created(
        &self,
        name: &str,
        id: &str,
        payload: impl Serialize,
    ) -> Result<Emitted, Error> {
        self.emit_with(name, id, serde_json::to_value(payload)?, false).await
    }

    /// The workflow ids subscribed to `name`, in order: those whose newest registered version
    /// subscribes to it.
    pub fn subscribers(&self, name: &str) -> Vec<String> {
        let all = self.workflows();
        let newest = all.iter().enumerate().filter(|(at, wf)| {
            all.get(at + 1).is_none_or(|next| next.id() != wf.id()) && wf.subscribes_to(name)
        });
        newest.map(|(_, wf)| wf.id().to_owned()).collect()
    }

    async fn emit_with(
        &self,
        name: &str,
        id: &str,
        payload: Value,
        drive: bool,
    ) -> Result<Emitted, Error> {
        let span = tracing::info_span!("emit", event = name, id);
        self.emit_in_span(name, id, payload, drive).instrument(span).await
    }

    async fn emit_in_span(
        &self,
        name: &str,
        id: &str,
        payload: Value,
        drive: bool,
    ) -> Result<Emitted, Error> {
        check_event(id, &payload)?;
        let workflows = self.subscribers(name);
        check_limit("the subscribers of one event", workflows.len(), EVENT_SUBSCRIBERS_MAX)?;
        let mut prepared = Vec::with_capacity(workflows.len());
        for workflow in &workflows {
            let options = StartOptions::id(event_thread_id(id, workflow));
            prepared.push(self.prepare_start(workflow, payload.clone(), options).await?);
        }
        let written = self.write_prepared(prepared, drive).await?;
        let threads = workflows.into_iter().zip(written).map(|(workflow, (thread, created))| {
            EventStart { workflow, thread: thread.to_string(), created }
        });
        Ok(Emitted { threads: threads.collect() })
    }
}

/// The id of the thread the event `event_id` starts of `workflow`: `event:{event_id}/{workflow}`,
/// readable, when the event id holds no `/` (so the split is unique) and it fits a thread id;
/// otherwise `event-` and a hash of both.
///
/// ```
/// assert_eq!(cairn::event_thread_id("order-7", "ship"), "event:order-7/ship");
/// assert!(cairn::event_thread_id("a/b", "ship").starts_with("event-"));
/// ```
pub fn event_thread_id(event_id: &str, workflow: &str) -> String {
    let id = format!("event:{event_id}/{workflow}");
    if !event_id.contains('/') && id.len() <= cairn_storage::limits::THREAD_ID_BYTES_MAX {
        return id;
    }
    let mut hasher = blake3::Hasher::new();
    // Length-prefixed, so that no two pairs hash the same bytes.
    hasher.update(&(event_id.len() as u64).to_le_bytes());
    hasher.update(event_id.as_bytes());
    hasher.update(workflow.as_bytes());
    format!("event-{}", &hasher.finalize().to_hex()[..32])
}

/// Refuses an empty or oversized id and an oversized payload.
fn check_event(id: &str, payload: &Value) -> Result<(), Error> {
    if id.is_empty() {
        return Err(Error::Invalid("an event's id is empty".into()));
    }
    if id.chars().any(char::is_control) {
        return Err(Error::Invalid(format!("an event's id {id:?} has a control character")));
    }
    check_limit("the bytes of an event's id", id.len(), EVENT_ID_BYTES_MAX)?;
    let bytes = serde_json::to_vec(payload)?.len();
    check_limit("the bytes of an event's payload", bytes, EVENT_PAYLOAD_BYTES_MAX)
}

fn check_limit(limit: &'static str, value: usize, max: usize) -> Result<(), Error> {
    if value > max {
        return Err(Error::LimitExceeded { limit, value: value as u64, max: max as u64 });
    }
    Ok(())
}
