//! The controls: `POST /api/threads/{id}/{pause|resume|cancel|input|signal|fork|repin|reset}` (the
//! token is checked before, by the access layer, `super::access`). Bodies are JSON: `cancel`
//! `{"reason"?}`, `repin` `{"build"}` (a worker build id, or `null` to unpin: `Engine::repin`),
//! `reset` `{"to", "key"?}` (answers the new thread: `super::reset`), `input`
//! `{"value"}`, `signal` `{"name", "value", "dedup_key"?, "start"? {"workflow", "input", "version"?, "labels"?}}` (the answer adds `"signal"`: its number, `"duplicate"` with a key, `"created"` with `start`, which creates the thread first if it does not exist), `fork` `{"at"? | "checkpoint"?, "update"?, "id"?, "labels"?, "start"?}`; a body
//! field that does not parse is named in the 400, as a signal the thread's workflow refuses is
//! (`name` undeclared, `value` not of the declared type). `resume`, `input` and a started fork run the
//! thread in this engine; the answer comes once the control is applied, not when the thread ends.

use std::collections::BTreeMap;

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::extract::rejection::BytesRejection;
use cairn_storage::CheckpointId;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;
use utoipa::openapi::schema::OneOfBuilder;
use utoipa::openapi::{RefOr, Schema};
use utoipa::{PartialSchema, ToSchema};

use super::app::{App, Segment, reject};
use super::params::Reject;
use super::threads::record_of;
use super::wire::Controlled;
use crate::debug::{ForkFrom, ForkOptions};
use cairn::Error;

#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
struct CancelBody {
    reason: Option<String>,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct InputBody {
    value: Value,
}

#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct SignalBody {
    name: String,
    value: Value,
    /// Stores the signal at most once per key on the thread (a key sent before answers the
    /// first signal's number with `"duplicate": true`).
    dedup_key: Option<String>,
    /// Signal-with-start: creates the thread (of this id) first if it does not exist.
    #[schema(inline)]
    start: Option<SignalStart>,
}

/// The thread a signal-with-start creates when it does not exist.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct SignalStart {
    /// The workflow's id.
    workflow: String,
    /// The thread's initial state.
    input: Value,
    /// The workflow's version (the newest compiled in when none).
    version: Option<u32>,
    /// Labels.
    #[serde(default)]
    labels: BTreeMap<String, String>,
}

#[derive(Deserialize, Default, ToSchema)]
#[serde(deny_unknown_fields)]
struct ForkBody {
    at: Option<u64>,
    checkpoint: Option<u64>,
    update: Option<Value>,
    id: Option<String>,
    #[serde(default)]
    labels: BTreeMap<String, String>,
    start: Option<bool>,
}

/// `repin`'s body: the field is required, `null` unpins.
#[derive(Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
struct RepinBody {
    /// The worker build to pin the thread to; `null` unpins it (any engine takes it).
    #[serde(deserialize_with = "present")]
    #[schema(required = true)]
    build: Option<String>,
}

/// A field that must be given, `null` included (serde would read a missing `Option` as `None`).
fn present<'de, D: serde::Deserializer<'de>>(d: D) -> Result<Option<String>, D::Error> {
    Option::<String>::deserialize(d)
}

/// The body of a control: cancel's, input's, signal's, fork's, repin's or reset's (pause and
/// resume take none).
pub(super) fn body_schema() -> RefOr<Schema> {
    let bodies = [
        CancelBody::schema(),
        InputBody::schema(),
        SignalBody::schema(),
        ForkBody::schema(),
        RepinBody::schema(),
        super::reset::ResetBody::schema(),
    ];
    let one_of = bodies.into_iter().fold(OneOfBuilder::new(), |b, s| b.item(s));
    RefOr::T(Schema::OneOf(one_of.build()))
}

pub(super) async fn control(
    State(app): State<App>,
    Segment((id, control)): Segment<(String, String)>,
    body: Result<Bytes, BytesRejection>,
) -> Result<Json<Controlled>, Reject> {
    let known = ["pause", "resume", "cancel", "input", "signal", "fork", "repin", "reset"];
    if !known.contains(&control.as_str()) {
        return Err(Reject::not_found("control", format!("no control {control:?}")));
    }
    let body = super::app::body(body)?;
    let engine = app.engine.clone();
    if control == "signal" {
        return signal(&engine, id, &body).await.map(Json);
    }
    if control == "repin" {
        return repin(&engine, id, &body).await.map(Json);
    }
    if control == "reset" {
        return super::reset::reset(&engine, id, &body).await.map(Json);
    }
    record_of(&engine, &id).await?;
    let thread = match control.as_str() {
        "pause" | "resume" => {
            no_body(&body, "this control")?;
            let done =
                if control == "pause" { engine.pause(&id).await } else { engine.resume(&id).await };
            done.map_err(|e| reject(e, "thread"))?;
            id
        }
        "cancel" => {
            let b: CancelBody = parse_or_default(&body)?;
            let reason = b.reason.unwrap_or_else(|| "cancelled through the endpoint".into());
            engine.cancel(&id, &reason).await.map_err(|e| reject(e, "thread"))?;
            id
        }
        "input" => {
            let b: InputBody = parse(&body)?;
            engine.send_input(&id, b.value).await.map_err(|e| reject(e, "value"))?;
            id
        }
        _ => {
            let b: ForkBody = parse_or_default(&body)?;
            let from = match (b.at, b.checkpoint) {
                (Some(_), Some(_)) => {
                    return Err(Reject::bad("checkpoint", "give at or checkpoint, not both"));
                }
                (_, Some(cp)) => ForkFrom::Checkpoint(CheckpointId(cp)),
                (Some(seq), None) => ForkFrom::Seq(seq),
                (None, None) => return Err(Reject::bad("at", "give at (a seq) or checkpoint")),
            };
            let field = if b.checkpoint.is_some() { "checkpoint" } else { "at" };
            let options = ForkOptions {
                thread_id: b.id,
                update: b.update,
                labels: b.labels,
                start: b.start.unwrap_or(true),
            };
            let handle = crate::Operator::new(&engine)
                .fork(&id, from, options)
                .await
                .map_err(|e| reject(e, field))?;
            handle.id().as_str().to_owned()
        }
    };
    let status = super::threads::status_of(&engine, &thread).await?;
    let status = status.as_str().to_owned();
    Ok(Json(Controlled { thread, status, signal: None, duplicate: None, created: None }))
}

/// The `signal` control: a plain send, once per `dedup_key`, or with `start`, creating the
/// thread first.
async fn signal(engine: &cairn::Engine, id: String, body: &Bytes) -> Result<Controlled, Reject> {
    let b: SignalBody = parse(body)?;
    let refused = |e: Error| {
        let field = match &e {
            Error::SignalRefused { source, .. } => source.field(),
            Error::UnknownWorkflow { .. } => return Reject::not_found("start", e.to_string()),
            _ => "name",
        };
        reject(e, field)
    };
    let key = b.dedup_key.as_deref();
    let (sent, created) = match b.start {
        Some(start) => {
            let options = cairn::StartOptions {
                version: start.version,
                labels: start.labels,
                ..cairn::StartOptions::id(&id)
            };
            let done = engine
                .signal_with_start(&start.workflow, start.input, options, &b.name, b.value, key)
                .await
                .map_err(refused)?;
            (done.sent, Some(done.created))
        }
        None => {
            record_of(engine, &id).await?;
            let sent = match key {
                Some(key) => engine.signal_once(&id, &b.name, b.value, key).await,
                None => engine
                    .signal(&id, &b.name, b.value)
                    .await
                    .map(|n| cairn::Sent { signal: n, duplicate: false }),
            };
            (sent.map_err(refused)?, None)
        }
    };
    let status = super::threads::status_of(engine, &id).await?.as_str().to_owned();
    let duplicate = key.map(|_| sent.duplicate);
    Ok(Controlled { thread: id, status, signal: Some(sent.signal), duplicate, created })
}

/// Refuses a body other than nothing or `{}` (`what` takes none).
/// `repin`: moves the thread to the build the body names (or unpins it); the answer is its
/// status after (an engine of that build may be driving it already).
async fn repin(engine: &cairn::Engine, id: String, body: &Bytes) -> Result<Controlled, Reject> {
    let b: RepinBody = parse(body)?;
    record_of(engine, &id).await?;
    let done = engine.repin(&id, b.build.as_deref()).await;
    done.map_err(|e| {
        let field = if matches!(e, Error::Invalid(_)) { "build" } else { "thread" };
        reject(e, field)
    })?;
    let status = super::threads::status_of(engine, &id).await?.as_str().to_owned();
    Ok(Controlled { thread: id, status, signal: None, duplicate: None, created: None })
}

pub(super) fn no_body(body: &Bytes, what: &str) -> Result<(), Reject> {
    if body.iter().all(u8::is_ascii_whitespace) || body.as_ref() == b"{}" {
        return Ok(());
    }
    Err(Reject::bad("body", format!("{what} takes no body")))
}

fn parse_or_default<T: DeserializeOwned + Default>(body: &Bytes) -> Result<T, Reject> {
    if body.iter().all(u8::is_ascii_whitespace) {
        return Ok(T::default());
    }
    parse(body)
}

/// The body as `T`; a field that does not parse is named (`value`, `labels.team`), or `body`
/// when the JSON itself is malformed.
pub(super) fn parse<T: DeserializeOwned>(body: &Bytes) -> Result<T, Reject> {
    let mut de = serde_json::Deserializer::from_slice(body);
    serde_path_to_error::deserialize(&mut de).map_err(|e| {
        let path = e.path().to_string();
        let field = if matches!(path.as_str(), "." | "?" | "") { "body".to_owned() } else { path };
        let inner = e.into_inner();
        // A missing or unknown field is named in serde's message, not in the path.
        let field = missing_or_unknown(&inner.to_string()).unwrap_or(field);
        Reject::bad(&field, inner.to_string())
    })
}

fn missing_or_unknown(message: &str) -> Option<String> {
    let rest = message
        .strip_prefix("missing field `")
        .or_else(|| message.strip_prefix("unknown field `"))?;
    rest.split('`').next().map(str::to_owned)
}
