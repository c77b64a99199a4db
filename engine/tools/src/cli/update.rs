//! `cairn update THREAD NAME --args JSON [--id ID]`: applies an update the thread's workflow
//! declares (`WorkflowBuilder::update`, `docs/updates.md`) and prints its reply once durable.
//! Through the endpoint of an engine serving the file (`POST /api/threads/{id}/updates/{name}`,
//! `remote.rs`) when one holds it; otherwise the file is opened for writing and the update
//! applied to the parked thread here (it stays in its wait). An unknown update, arguments that
//! do not convert and a validator's refusal exit 2 (the endpoint's 400 or 404 naming `name`, or
//! `Error::UpdateRefused` here); a finished thread exits 1. The same `--id` again prints the
//! recorded reply and applies nothing.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::{Value, json};

use super::common::{Common, json_arg, open_writable, print_json, print_text, record_of, usage};
use super::remote;
use crate::serve::wire::{self, UpdateAnswer};

/// Arguments of `cairn update`.
#[derive(Debug, clap::Args)]
pub struct UpdateArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id (running or parked; not finished).
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// The update's name (as the workflow declares it).
    name: String,
    /// The update's arguments, as JSON (a bare word is taken as a string; `null` without it).
    #[arg(long)]
    args: Option<String>,
    /// The update's id: applied once per thread (a retry with the same id prints the recorded
    /// reply). A fresh one without it.
    #[arg(long)]
    id: Option<String>,
    /// How long to wait for a running thread's next step boundary, in ms (default 30000).
    #[arg(long)]
    wait_ms: Option<u64>,
}

pub(super) async fn update(args: UpdateArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let value = match &args.args {
        Some(a) => json_arg(a, "the update's arguments")?,
        None => Value::Null,
    };
    let mut body = json!({ "args": value });
    if let Some(id) = &args.id {
        body["id"] = json!(id);
    }
    let wait = args.wait_ms.map(|ms| format!("?wait_ms={ms}")).unwrap_or_default();
    let path = format!("/api/threads/{}/updates/{}{wait}", args.thread, args.name);
    let answer = match remote::post_to(&args.common.db, &path, &body)? {
        Some(answer) => wire::read::<UpdateAnswer>(answer, "update's answer")?,
        None => local(&args, value, wfs).await?,
    };
    if args.common.json {
        return print_json(&answer);
    }
    let before = if answer.duplicate { " before (a duplicate: nothing applied)" } else { "" };
    print_text(&format!(
        "update {} ({}) applied to {}{before}: reply {}",
        answer.id, args.name, answer.thread, answer.reply
    ));
    Ok(())
}

/// Applies the update on the file, opened for writing here.
async fn local(
    args: &UpdateArgs,
    value: Value,
    wfs: &[Arc<DynWorkflow>],
) -> anyhow::Result<UpdateAnswer> {
    let engine = open_writable(&args.common.db, wfs).await?;
    record_of(&engine, &args.thread).await?;
    let options = cairn::UpdateOptions { id: args.id.clone(), wait_ms: args.wait_ms };
    let done = engine.update(&args.thread, &args.name, value, options).await;
    engine.shutdown().await;
    match done {
        Ok(u) => Ok(UpdateAnswer {
            thread: u.thread,
            id: u.id,
            reply: u.reply,
            seq: u.seq,
            duplicate: u.duplicate,
            created: None,
        }),
        // An update its workflow does not take is bad input, as bad JSON is: exit 2.
        Err(e @ (cairn::Error::UpdateRefused { .. } | cairn::Error::Invalid(_))) => {
            Err(usage(e.to_string()))
        }
        Err(e) => Err(e.into()),
    }
}
