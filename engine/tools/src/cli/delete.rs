//! `cairn delete THREAD [--force]`: deletes a finished thread whole (its log, checkpoints,
//! locks and the payloads no other thread references; `Engine::delete`). Through a running
//! engine's endpoint when one serves the file (`DELETE /api/threads/{id}` with the token from
//! `<db>.token`), else on the file opened for writing (exit 4 while another process holds it).
//! An unfinished thread is refused (exit 1) unless `--force`.

use crate::debug::rows::DeletedRow;
use std::path::Path;
use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::DeleteOptions;
use serde_json::Value;

use super::EXIT_FAILED;
use super::common::{Common, fail, open_writable, print_json, print_text};
use super::endpoint;
use crate::serve::wire::Refusal;

/// Seconds a delete through the endpoint may take (one transaction; a thread with offloaded
/// payloads costs a scan of the log) before the command gives up.
const DELETE_TIMEOUT_S: u64 = 120;

/// Arguments of `cairn delete`.
#[derive(Debug, clap::Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id.
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// Delete it even if it has not finished (a runner still driving it is fenced and stops).
    #[arg(long)]
    force: bool,
}

pub(super) async fn delete(args: DeleteArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let db = args.common.db.clone();
    let (thread, force) = (args.thread.clone(), args.force);
    let remote =
        tokio::task::spawn_blocking(move || through_endpoint(&db, &thread, force)).await??;
    let answer: DeletedRow = match remote {
        Some(answer) => crate::serve::wire::read(answer, "deletion")?,
        None => {
            let engine = open_writable(&args.common.db, wfs).await?;
            let deleted = engine.delete(&args.thread, DeleteOptions { force: args.force }).await;
            engine.shutdown().await;
            match deleted? {
                Some(d) => crate::debug::views::deleted_row(&args.thread, &d),
                None => {
                    return Err(fail(
                        EXIT_FAILED,
                        format!("no thread {} in this database", args.thread),
                    ));
                }
            }
        }
    };
    if args.common.json {
        return print_json(&answer);
    }
    print_text(&format!(
        "deleted {} ({}): {} events, {} checkpoints, {} locks, {} payloads",
        args.thread,
        answer.status,
        answer.events,
        answer.checkpoints,
        answer.locks,
        answer.payloads,
    ));
    Ok(())
}

/// The endpoint's answer to the delete, or `None` when no live endpoint serves `db`.
fn through_endpoint(db: &Path, thread: &str, force: bool) -> anyhow::Result<Option<Value>> {
    if endpoint::find(db).is_none() {
        return Ok(None);
    }
    let Some((announced, token, agent)) = super::remote::announced(db, DELETE_TIMEOUT_S)? else {
        return Ok(None);
    };
    let url = format!("http://{}/api/threads/{}", announced.address, endpoint::segment(thread));
    let mut response = agent
        .delete(&url)
        .query("force", if force { "true" } else { "false" })
        .header("authorization", &format!("Bearer {token}"))
        .call()
        .map_err(|e| fail(EXIT_FAILED, format!("asking the endpoint at {url}: {e}")))?;
    let status = response.status().as_u16();
    let text = response.body_mut().read_to_string().unwrap_or_default();
    if status == 200 {
        return Ok(Some(serde_json::from_str(&text).unwrap_or(Value::String(text))));
    }
    let error = Refusal::of(&text).error;
    Err(fail(
        EXIT_FAILED,
        if status == 404 {
            format!("{error} in this database")
        } else {
            format!("the engine serving {} refused: {error}", db.display())
        },
    ))
}
