//! Controls through a running engine's endpoint: when `<db>.endpoint` announces one (a
//! `cairn serve` or an application serving the file), `pause`, `cancel`, `resume` and `input`
//! are posted to it with the token from `<db>.token`, since the file itself is held by that
//! engine. An announcement nobody answers (its engine died) is ignored: the command opens the
//! file as usual.

use std::path::Path;

use serde_json::Value;

use super::EXIT_FAILED;
use super::common::{fail, usage};
use crate::serve::discovery;
use crate::serve::wire::{self, Controlled, Refusal};

/// Seconds a control through the endpoint may take before the command gives up (it is applied
/// in well under this).
const CONTROL_TIMEOUT_S: u64 = 60;

/// The endpoint's answer to `POST /api/threads/{thread}/{control}` with `body`, or `None` when
/// no endpoint is announced for `db` or none answers there.
///
/// # Errors
/// A refusal of the endpoint (exit 2 for a 400 or an unknown workflow, else 1), naming its
/// field; an unreadable token file.
pub(super) fn post(
    db: &Path,
    thread: &str,
    control: &str,
    body: &Value,
) -> anyhow::Result<Option<Controlled>> {
    match post_to(db, &format!("/api/threads/{thread}/{control}"), body)? {
        Some(answer) => Ok(Some(wire::read(answer, "control's answer")?)),
        None => Ok(None),
    }
}

/// The endpoint's answer to `POST {path}` (with its query) with `body`, as [`post`]: `None` when
/// no endpoint is announced for `db` or none answers there; a 200 or 201 is an answer.
///
/// # Errors
/// As [`post`].
pub(super) fn post_to(db: &Path, path: &str, body: &Value) -> anyhow::Result<Option<Value>> {
    call(db, path, Some(body))
}

/// The endpoint's answer to `POST {path}` with `Some(body)` or to `DELETE {path}` with `None`
/// (no body), asked off the async runtime: `None` when no endpoint is announced for `db`, none
/// answers there, or `db` is a PostgreSQL URL (nothing is announced for one).
///
/// # Errors
/// As [`post`].
pub(super) async fn through(
    db: &Path,
    path: String,
    body: Option<Value>,
) -> anyhow::Result<Option<Value>> {
    if cairn::admin::is_postgres_url(db) {
        return Ok(None);
    }
    let db = db.to_owned();
    tokio::task::spawn_blocking(move || call(&db, &path, body.as_ref())).await?
}

/// `POST {path}` with `body`, or `DELETE {path}` without one: the answer, as [`post_to`].
fn call(db: &Path, path: &str, body: Option<&Value>) -> anyhow::Result<Option<Value>> {
    let Some((endpoint, token, agent)) = announced(db, CONTROL_TIMEOUT_S)? else { return Ok(None) };
    let url = format!("http://{}{path}", endpoint.address);
    let bearer = format!("Bearer {token}");
    let sent = match body {
        Some(body) => agent
            .post(&url)
            .header("authorization", &bearer)
            .header("content-type", "application/json")
            .send(body.to_string().as_str()),
        None => agent.delete(&url).header("authorization", &bearer).call(),
    };
    let mut response = match sent {
        Ok(r) => r,
        // Announced but not answering: a stale file of an engine that died.
        Err(ureq::Error::Io(_) | ureq::Error::ConnectionFailed | ureq::Error::HostNotFound) => {
            return Ok(None);
        }
        Err(e) => return Err(fail(EXIT_FAILED, format!("asking the endpoint at {url}: {e}"))),
    };
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    if status == 200 || status == 201 {
        return Ok(Some(serde_json::from_str(&text).unwrap_or(Value::String(text))));
    }
    let Refusal { error, field } = Refusal::of(&text);
    // A bad argument, or a workflow (or an update) the engine does not have (named in the
    // command, as a workflow this binary lacks is): usage errors.
    let named = matches!(field.as_deref(), Some("workflow" | "name"));
    let usage_error = status == 400 || (status == 404 && named);
    let message = match field {
        Some(field) => format!("the engine serving {} refused ({field}): {error}", db.display()),
        None => format!("the engine serving {} refused: {error}", db.display()),
    };
    Err(if usage_error { usage(message) } else { fail(EXIT_FAILED, message) })
}

/// The endpoint announced for `db` (`None`: none is), its token, and an agent whose calls to it
/// take at most `timeout_s` (a bound on a hung engine).
///
/// # Errors
/// An unreadable token file.
pub(super) fn announced(
    db: &Path,
    timeout_s: u64,
) -> anyhow::Result<Option<(discovery::Endpoint, String, ureq::Agent)>> {
    let Some(endpoint) = discovery::find(db).ok().flatten() else { return Ok(None) };
    let token = std::fs::read_to_string(&endpoint.token_file).map_err(|e| {
        fail(
            EXIT_FAILED,
            format!(
                "{} serves {}, but its token file {} cannot be read: {e}",
                endpoint.address,
                db.display(),
                endpoint.token_file.display()
            ),
        )
    })?;
    Ok(Some((endpoint, token.trim().to_owned(), agent(timeout_s))))
}

/// An agent whose calls take at most `timeout_s` and answer every status (a refusal is read,
/// not an error).
pub(super) fn agent(timeout_s: u64) -> ureq::Agent {
    let config = ureq::Agent::config_builder().http_status_as_error(false);
    config.timeout_global(Some(std::time::Duration::from_secs(timeout_s))).build().into()
}

/// Prints what the endpoint answered a control with (as the local command would).
///
/// # Errors
/// If the answer does not serialise (a bug).
pub(super) fn report(answer: &Controlled, json: bool) -> anyhow::Result<()> {
    if json {
        return super::common::print_json(answer);
    }
    super::common::print_text(&format!(
        "{}: now {} (through the engine serving the file)",
        answer.thread, answer.status
    ));
    Ok(())
}
