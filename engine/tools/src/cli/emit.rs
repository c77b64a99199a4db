//! `cairn emit NAME --id ID [--payload JSON]`: emits an event, starting each workflow subscribed
//! to `NAME` (`on_event`) once per event id, on the payload (`docs/events.md`).
//!
//! - Through a running engine's endpoint when one is announced for the file (`POST
//!   /api/events`, with the token of `<db>.token`, as `start` posts): that engine runs the
//!   threads.
//! - On a file no engine holds, and on PostgreSQL: the threads are written `created` and not run
//!   ([`cairn::Engine::emit_created`]), for the next engine that opens the file, as `cairn
//!   start` writes one.
//!
//! Prints one line per thread (`started`, or `exists` for an id emitted before), or that no
//! workflow subscribes to the name (exit 0: an event nobody listens to is not an error).
//! Exit codes: 0 emitted, 1 refused, 2 bad usage (the payload is not JSON or not an input of a
//! subscriber, an empty id, a payload over the limit).

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::{Value, json};

use super::common::{
    Common, argument_error, json_arg, open_writable, print_json, print_text, usage,
};
use super::remote;
use crate::serve::wire::{self, Emitted, EventThread};
use cairn::admin::is_postgres_url;

/// Arguments of `cairn emit`.
#[derive(Debug, clap::Args)]
pub struct EmitArgs {
    #[command(flatten)]
    common: Common,
    /// The event's name: every workflow subscribed to it starts a thread.
    name: String,
    /// The event's id: a second emit of an id starts nothing more.
    #[arg(long, value_parser = parse_event_id)]
    id: String,
    /// The payload, as JSON (each thread's input; `@FILE` reads it from a file, `@-` from
    /// stdin; `null` when absent).
    #[arg(long)]
    payload: Option<String>,
}

/// An event id, checked before anything is opened.
fn parse_event_id(s: &str) -> Result<String, String> {
    if s.is_empty() {
        return Err("an event's id is empty".to_owned());
    }
    Ok(s.to_owned())
}

pub(super) async fn emit(args: EmitArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let payload = match &args.payload {
        Some(p) => json_arg(p, "--payload")?,
        None => Value::Null,
    };
    let db = args.common.db.clone();
    if !is_postgres_url(&db) {
        let body = json!({"name": args.name, "id": args.id, "payload": payload});
        let posted =
            tokio::task::spawn_blocking(move || remote::post_to(&db, "/api/events", &body))
                .await??;
        if let Some(answer) = posted {
            let emitted: Emitted = wire::read(answer, "emit's answer")?;
            return report(&args, &emitted, "endpoint");
        }
    }
    let engine = open_writable(&args.common.db, wfs).await?;
    let emitted = engine.emit_created(&args.name, &args.id, payload).await;
    engine.shutdown().await;
    let emitted = emitted.map_err(|e| match e {
        // The id and the payload are what the command was given.
        e @ cairn::Error::LimitExceeded { .. } => usage(e.to_string()),
        other => argument_error(other),
    })?;
    let threads = emitted.threads.into_iter().map(|t| EventThread {
        link: format!("/api/threads/{}", crate::serve::wire::path_segment(&t.thread)),
        workflow: t.workflow,
        thread: t.thread,
        created: t.created,
    });
    report(&args, &Emitted { threads: threads.collect() }, "database")
}

/// Prints what the emit did (`through`: `endpoint` or `database`).
fn report(args: &EmitArgs, emitted: &Emitted, through: &str) -> anyhow::Result<()> {
    if args.common.json {
        let mut out = serde_json::to_value(emitted)?;
        out["through"] = json!(through);
        return print_json(&out);
    }
    if emitted.threads.is_empty() {
        print_text(&format!("no workflow subscribes to {}: nothing started", args.name));
    }
    let runs = match through {
        "endpoint" => "run by the engine serving the file",
        _ => "written, run by the next engine that opens the file",
    };
    for t in &emitted.threads {
        let what = if t.created { "started" } else { "exists" };
        print_text(&format!("{}: {what} ({}), {runs}", t.thread, t.workflow));
    }
    Ok(())
}
