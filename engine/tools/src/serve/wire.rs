//! The JSON the endpoint answers and the CLI reads, as one set of serde types: the handlers
//! serialize them, the CLI deserializes them with [`read`], which refuses a field its type does
//! not know (a renamed or added field fails loudly, naming it, instead of printing blanks), and
//! the OpenAPI document describes them (`ToSchema`).

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use utoipa::ToSchema;

use cairn::Outcome;
use cairn::error::Error;

/// A refusal: the body of every 4xx and 5xx answer.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Refusal {
    /// What is wrong, for a person.
    pub error: String,
    /// The query parameter, path segment or body field it is about, if one.
    pub field: Option<String>,
}

impl Refusal {
    /// The refusal a 4xx or 5xx answer's `body` holds; a body that is none (a proxy's page, a
    /// field this version does not know) is kept as the error, with why it does not read.
    pub fn of(body: &str) -> Self {
        let read = serde_json::from_str(body)
            .map_err(|e| Error::Invalid(format!("the endpoint's refusal is not JSON: {e}")))
            .and_then(|v| read::<Refusal>(v, "refusal"));
        read.unwrap_or_else(|e| Self { error: format!("{} ({e})", body.trim()), field: None })
    }
}

/// How a thread stands: finished or not, and how it ended.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Finish {
    /// It ended (completed, failed, cancelled, timed out).
    pub finished: bool,
    /// Its status (`completed`, `failed`, `running`, `paused`, ...).
    pub status: String,
    /// The final state, when completed.
    pub output: Option<Value>,
    /// The last error recorded, if any.
    pub error: Option<String>,
    /// The key ids of the sealed bodies this reader holds no key for (absent when none): the
    /// output is then a placeholder (`docs/encryption.md`, "Tools").
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub sealed: Vec<String>,
}

impl Finish {
    /// A thread of `status`, with its `outcome` once it finished (whose status then wins).
    pub fn new(status: &str, outcome: Option<&Outcome>) -> Self {
        Self {
            finished: outcome.is_some(),
            status: outcome.map_or(status, |o| o.status.as_str()).to_owned(),
            output: outcome.and_then(|o| o.output.clone()),
            error: outcome.and_then(|o| o.error.clone()),
            sealed: Vec::new(),
        }
    }

    /// How `record` stands when its outcome needs the key `p` names (a reader without it):
    /// the record's status, the last error's text from its summary, and the output a
    /// placeholder once it completed.
    pub(crate) fn sealed(
        record: &cairn_storage::ThreadRecord,
        p: &cairn::sealing::Placeholder,
    ) -> Self {
        let row = crate::debug::views::thread_row(record);
        let completed = record.status == cairn_storage::ThreadStatus::Completed;
        Self {
            finished: record.status.is_terminal(),
            status: row.status,
            output: completed.then(|| p.to_json()),
            error: row.last_error,
            sealed: vec![p.key.clone()],
        }
    }
}

/// `GET /api/threads/{id}/result`, and `cairn result --json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct ThreadResult {
    /// The thread.
    pub thread: String,
    /// How it stands.
    #[serde(flatten)]
    pub result: Finish,
}

/// `POST /api/workflows/{id}/threads`: the thread started (or found), with its result when the
/// start waited for it (`wait_ms`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct Started {
    /// The thread.
    pub thread: String,
    /// Made by this start (201), or an existing one (200).
    pub created: bool,
    /// The thread's path on the endpoint.
    pub link: String,
    /// How it stands, when the start waited.
    #[serde(flatten)]
    pub result: Option<Finish>,
}

/// `POST /api/threads/{id}/{control}`: the thread controlled (a fork's or a reset's new one)
/// and its status.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Controlled {
    /// The thread.
    pub thread: String,
    /// Its status after the control.
    pub status: String,
    /// A signal's number among the thread's signals (`signal` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub signal: Option<u64>,
    /// The signal's dedup key was sent before: nothing was stored, and `signal` is the first
    /// one's number (`signal` with `dedup_key` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duplicate: Option<bool>,
    /// The call created the thread (`signal` with `start` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
}

/// `POST /api/threads/{id}/updates/{name}`: the update applied (`cairn::Updated`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, ToSchema)]
pub struct UpdateAnswer {
    /// The thread.
    pub thread: String,
    /// The update's id.
    pub id: String,
    /// The handler's reply.
    pub reply: serde_json::Value,
    /// The seq of the `update_applied` event that holds it.
    pub seq: u64,
    /// The id had been applied before: nothing was written, `reply` is the recorded one.
    pub duplicate: bool,
    /// The call created the thread (with `start` only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created: Option<bool>,
}

/// `POST /api/events`, and `cairn emit --json`: the thread of the event on each subscribed
/// workflow (none when no workflow subscribes to its name).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct Emitted {
    /// One per subscribed workflow, in workflow id order.
    pub threads: Vec<EventThread>,
}

/// One thread an emit answers with (`cairn::EventStart`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct EventThread {
    /// The subscribed workflow.
    pub workflow: String,
    /// The thread of the event on it.
    pub thread: String,
    /// Made by this emit (`false`: an emit of the same id made it before).
    pub created: bool,
    /// The thread's path on the endpoint.
    pub link: String,
}

/// `POST /api/batches` and `GET /api/batches/{id}`, and `cairn batch --json`: a batch and its
/// progress (`cairn::BatchInfo`), or, for a dry run, how many threads the filter matches.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
pub struct BatchAnswer {
    /// The batch's id (its thread's); `None` for a dry run.
    pub id: Option<String>,
    /// Its thread's status (`completed` once finished); `None` for a dry run.
    pub status: Option<String>,
    /// The operation: `cancel`, `pause`, `resume`, `signal`, `delete`, `migrate` or `repin`.
    pub op: String,
    /// Threads the filter matched when the batch was made (a dry run: now).
    pub total: u64,
    /// Threads handled (applied or skipped).
    pub done: u64,
    /// Threads the operation was applied to.
    pub applied: u64,
    /// Threads skipped.
    pub skipped: u64,
    /// The last skipped threads and why, newest last.
    pub skips: Vec<(String, String)>,
    /// Every matching thread has been handled.
    pub finished: bool,
    /// Nothing was applied: `total` is a count.
    pub dry_run: bool,
}

impl BatchAnswer {
    /// The answer for `info`.
    pub fn of(info: &cairn::BatchInfo) -> Self {
        let s = &info.state;
        Self {
            id: Some(info.id.clone()),
            status: Some(info.status.as_str().to_owned()),
            op: s.op.name().to_owned(),
            total: s.total,
            done: s.done,
            applied: s.applied,
            skipped: s.skipped,
            skips: s.skips.clone(),
            finished: s.finished,
            dry_run: false,
        }
    }

    /// The answer of a dry run of `op` matching `count` threads.
    pub fn dry_run(op: &cairn::BatchOp, count: u64) -> Self {
        Self {
            id: None,
            status: None,
            op: op.name().to_owned(),
            total: count,
            done: 0,
            applied: 0,
            skipped: 0,
            skips: Vec::new(),
            finished: false,
            dry_run: true,
        }
    }
}

/// `answer` as a `T`, refusing a field `T` does not know (`what` names the answer in the error).
///
/// # Errors
/// [`Error::Invalid`] naming the field missing, malformed or unknown.
///
/// # Examples
/// ```
/// use cairn_tools::serve::wire::{Refusal, read};
/// let answer = serde_json::json!({"error": "no thread t", "field": "thread"});
/// assert_eq!(read::<Refusal>(answer, "a refusal").unwrap().field.as_deref(), Some("thread"));
/// let renamed = serde_json::json!({"error": "x", "field": null, "hint": "y"});
/// assert!(read::<Refusal>(renamed, "a refusal").unwrap_err().to_string().contains("hint"));
/// ```
pub fn read<T: DeserializeOwned + Serialize>(answer: Value, what: &str) -> Result<T, Error> {
    let unknown = |field: &str| {
        Error::Invalid(format!(
            "the endpoint's {what} has a field this cairn does not know: {field:?} (is the \
             engine serving the file another version?)"
        ))
    };
    let keys: Vec<String> = match &answer {
        Value::Object(map) => map.keys().cloned().collect(),
        _ => Vec::new(),
    };
    let typed: T = serde_path_to_error::deserialize(answer).map_err(|e| {
        Error::Invalid(format!(
            "the endpoint's {what} does not read at {}: {}",
            e.path(),
            e.inner()
        ))
    })?;
    let known = serde_json::to_value(&typed).map_err(|e| Error::Codec(e.to_string()))?;
    match keys.iter().find(|k| known.get(k.as_str()).is_none()) {
        Some(field) => Err(unknown(field)),
        None => Ok(typed),
    }
}

/// `text` as one URL path segment: every byte percent-encoded but the unreserved ones and `:`,
/// `@` (which a segment may carry as they are), so that a thread id with `/` links to itself.
pub(crate) fn path_segment(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for b in text.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b':' | b'@') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_path_segment_keeps_unreserved_bytes_colon_and_at_and_encodes_the_rest() {
        assert_eq!(super::path_segment("schedule:a@1"), "schedule:a@1");
        assert_eq!(super::path_segment("a/b c?d#é"), "a%2Fb%20c%3Fd%23%C3%A9");
    }
}
