//! `cairn batch OP --filter K=V,.. [--dry-run] [--reason R] [--name N --value JSON]
//! [--to-version V] [--build B | --unpin] [--to start|checkpoint|seq:N] [--thread T]..
//! [--id ID]` and
//! `cairn batch show ID` (`docs/batches.md`): applies an operation (`cancel`, `pause`, `resume`,
//! `signal`, `delete`, `migrate`, `repin`, `reset`) to every thread a filter matches, as a
//! durable job of the engine ([`cairn::Engine::batch`]). `repin --filter label.cairn.build=A
//! --build B` moves build A's unfinished threads to build B; `reset --to checkpoint` forks each
//! thread at its latest checkpoint into a new thread and cancels it.
//!
//! The filter is `K=V` pairs joined by commas: `workflow=`, `status=`, `label.KEY=`,
//! `version=`, `created_from_ms=`, `created_to_ms=`. `--dry-run` prints how many threads match
//! and applies nothing: run it first. `--thread T` (repeatable) narrows the batch to those
//! threads (an id of no thread is skipped and counted so).
//!
//! - Through a running engine's endpoint when one is announced for the file (`POST
//!   /api/batches`, `GET /api/batches/{id}`): that engine runs the batch; the command prints
//!   its id and progress and returns (`cairn batch show ID` follows it).
//! - On a file no engine holds: the batch runs here, to its end, and the command prints what it
//!   did. Threads it resumes are left running for the next engine that opens the file.
//!
//! Exit codes: 0 done (or made), 1 refused, 2 bad usage (an unknown operation, filter key or
//! status, a signal without `--name`).

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::{Value, json};

use super::common::{
    Common, argument_error, json_arg, open_writable, print_json, print_text, usage,
};
use super::{endpoint, remote};
use crate::serve::wire::{self, BatchAnswer};
use cairn::{BatchFilter, BatchOp};

/// Arguments of `cairn batch`.
#[derive(Debug, clap::Args)]
pub struct BatchArgs {
    #[command(flatten)]
    common: Common,
    /// The operation: cancel, pause, resume, signal, delete, migrate, repin, reset; or `show`
    /// (a batch's progress, by its id).
    #[arg(value_parser = ["cancel", "pause", "resume", "signal", "delete", "migrate", "repin", "reset", "show"])]
    op: String,
    /// `show`: the batch's id.
    #[arg(required_if_eq("op", "show"))]
    batch: Option<String>,
    /// Which threads: `workflow=W,status=S,label.K=V,version=N,created_from_ms=T,created_to_ms=T`
    /// (every part given must match).
    #[arg(long, default_value = "", value_parser = parse_filter)]
    filter: BatchFilter,
    /// Print how many threads match; apply nothing.
    #[arg(long)]
    dry_run: bool,
    /// `cancel`: the reason recorded on each thread.
    #[arg(long, default_value = "batch")]
    reason: String,
    /// `signal`: its name.
    #[arg(long, required_if_eq("op", "signal"))]
    name: Option<String>,
    /// `signal`: its value, as JSON (`null` when absent).
    #[arg(long)]
    value: Option<String>,
    /// `migrate`: the version to move each thread to.
    #[arg(long, required_if_eq("op", "migrate"))]
    to_version: Option<u32>,
    /// `repin`: the worker build to pin each thread to.
    #[arg(long, conflicts_with = "unpin")]
    build: Option<String>,
    /// `repin`: unpin each thread instead (any engine takes it).
    #[arg(long)]
    unpin: bool,
    /// `reset`: where each new thread starts: `start` (the thread's input), `checkpoint` (its
    /// latest checkpoint taken while it went on) or `seq:N`.
    #[arg(long, default_value = "start", value_parser = parse_point)]
    to: cairn::ResetPoint,
    /// The batch's id: a batch of that id answers as it stands (a retry makes one batch).
    #[arg(long, value_parser = super::common::parse_thread_id)]
    id: Option<String>,
    /// This thread only (repeatable: these threads), besides the filter: an id of no thread is
    /// skipped and counted so.
    #[arg(long = "thread", value_name = "THREAD", value_parser = super::common::parse_thread_id)]
    threads: Vec<String>,
}

/// `s` as a batch filter.
fn parse_filter(s: &str) -> Result<BatchFilter, String> {
    let mut f = BatchFilter::default();
    for part in s.split(',').filter(|p| !p.is_empty()) {
        let (key, value) = part.split_once('=').ok_or(format!("{part:?} is not KEY=VALUE"))?;
        let number =
            |what: &str| value.parse::<u64>().map_err(|e| format!("{what} {value:?}: {e}"));
        match key {
            "workflow" => f.workflow = Some(value.to_owned()),
            "status" => f.status = Some(value.parse().map_err(|_| format!("no status {value:?}"))?),
            "version" => {
                f.version = Some(value.parse().map_err(|e| format!("version {value:?}: {e}"))?);
            }
            "created_from_ms" => f.created_from_ms = Some(number(key)?),
            "created_to_ms" => f.created_to_ms = Some(number(key)?),
            _ => match key.strip_prefix("label.") {
                Some(label) => f.labels.push((label.to_owned(), value.to_owned())),
                None => {
                    return Err(format!(
                        "no filter key {key:?}: workflow, status, label.K, version, created_from_ms, created_to_ms"
                    ));
                }
            },
        }
    }
    Ok(f)
}

/// `s` as a reset point.
fn parse_point(s: &str) -> Result<cairn::ResetPoint, String> {
    s.parse().map_err(|e: cairn::Error| e.to_string())
}

impl BatchArgs {
    /// The engine's operation.
    fn op(&self) -> anyhow::Result<BatchOp> {
        Ok(match self.op.as_str() {
            "cancel" => BatchOp::Cancel { reason: self.reason.clone() },
            "pause" => BatchOp::Pause,
            "resume" => BatchOp::Resume,
            "delete" => BatchOp::Delete,
            "signal" => {
                let name = self.name.clone().ok_or_else(|| usage("signal needs --name"))?;
                let value = self.value.as_deref().map(|v| json_arg(v, "--value")).transpose()?;
                BatchOp::Signal { name, value: value.unwrap_or(Value::Null) }
            }
            "migrate" => {
                let to = self.to_version.ok_or_else(|| usage("migrate needs --to-version"))?;
                BatchOp::Migrate { to_version: to }
            }
            "repin" => match (&self.build, self.unpin) {
                (Some(build), _) => BatchOp::Repin { build: Some(build.clone()) },
                (None, true) => BatchOp::Repin { build: None },
                (None, false) => return Err(usage("repin needs --build B or --unpin")),
            },
            "reset" => BatchOp::Reset { point: self.to },
            other => return Err(usage(format!("no operation {other:?}"))),
        })
    }

    /// The body of `POST /api/batches`.
    fn body(&self, op: &BatchOp) -> Value {
        let f = &self.filter;
        let labels: serde_json::Map<String, Value> =
            f.labels.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
        let mut body = json!({
            "op": op.name(),
            "filter": {
                "workflow": f.workflow, "status": f.status.map(|s| s.as_str()), "labels": labels,
                "version": f.version, "created_from_ms": f.created_from_ms,
                "created_to_ms": f.created_to_ms, "ids": self.threads,
            },
            "dry_run": self.dry_run,
        });
        let extra = match op {
            BatchOp::Cancel { reason } => json!({ "reason": reason }),
            BatchOp::Signal { name, value } => json!({ "name": name, "value": value }),
            BatchOp::Migrate { to_version } => json!({ "to_version": to_version }),
            BatchOp::Repin { build: Some(build) } => json!({ "build": build }),
            BatchOp::Repin { build: None } => json!({ "unpin": true }),
            BatchOp::Reset { point } => json!({ "to": point.to_string() }),
            _ => json!({}),
        };
        if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
            body.extend(extra);
            if let Some(id) = &self.id {
                body.insert("id".into(), json!(id));
            }
        }
        body
    }
}

pub(super) async fn batch(args: BatchArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    if args.op == "show" {
        return show(&args, wfs).await;
    }
    let op = args.op()?;
    let (db, body) = (args.common.db.clone(), args.body(&op));
    let posted =
        tokio::task::spawn_blocking(move || remote::post_to(&db, "/api/batches", &body)).await??;
    if let Some(answer) = posted {
        let answer: BatchAnswer = wire::read(answer, "batch")?;
        return report(&args, &answer, "endpoint");
    }
    let engine = open_writable(&args.common.db, wfs).await?;
    let answer = run_here(&engine, &args, op).await;
    engine.shutdown().await;
    report(&args, &answer.map_err(argument_error)?, "database")
}

/// The batch (or its dry run) on an engine of this process, run to its end.
async fn run_here(
    engine: &cairn::Engine,
    args: &BatchArgs,
    op: BatchOp,
) -> Result<BatchAnswer, cairn::Error> {
    let filter = BatchFilter { ids: args.threads.clone(), ..args.filter.clone() };
    if args.dry_run {
        return Ok(BatchAnswer::dry_run(&op, engine.batch_count(&filter).await?));
    }
    let made = match &args.id {
        Some(id) => engine.batch_as(id, op, filter).await?,
        None => engine.batch(op, filter).await?,
    };
    // Written `created` by an engine that parks what it finds (or left running by a process
    // that stopped): run here, to its end.
    let unfinished =
        matches!(made.status, cairn::ThreadStatus::Created | cairn::ThreadStatus::Running);
    if unfinished && !engine.is_driven(&cairn::ThreadId::new(made.id.as_str())?) {
        engine.resume(&made.id).await?;
    }
    engine.thread(&made.id).await?.finished().await?;
    Ok(BatchAnswer::of(&engine.batch_info(&made.id).await?))
}

/// `cairn batch show ID`.
async fn show(args: &BatchArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let id = args.batch.clone().ok_or_else(|| usage("show needs the batch's id"))?;
    let (db, path) = (args.common.db.clone(), format!("/api/batches/{}", endpoint::segment(&id)));
    let through =
        tokio::task::spawn_blocking(move || endpoint::through(&db, |ep| ep.get(&path, &[])))
            .await??;
    if let Some(answer) = through {
        return report(args, &wire::read(answer, "batch")?, "endpoint");
    }
    let engine = super::common::open_read_only_or_copy(&args.common.db, wfs).await?;
    let info = engine.batch_info(&id).await;
    engine.shutdown().await;
    report(args, &BatchAnswer::of(&info?), "database")
}

/// Prints `answer` (`through`: `endpoint` or `database`).
fn report(args: &BatchArgs, answer: &BatchAnswer, through: &str) -> anyhow::Result<()> {
    if args.common.json {
        let mut out = serde_json::to_value(answer)?;
        out["through"] = json!(through);
        return print_json(&out);
    }
    if answer.dry_run {
        print_text(&format!(
            "{} threads match: {} would apply to them (dry run)",
            answer.total, answer.op
        ));
        return Ok(());
    }
    let id = answer.id.as_deref().unwrap_or_default();
    let state = if answer.finished { "finished" } else { "running" };
    print_text(&format!(
        "batch {id} ({}): {state}, {} of {} done: {} applied, {} skipped",
        answer.op, answer.done, answer.total, answer.applied, answer.skipped
    ));
    for (thread, why) in &answer.skips {
        print_text(&format!("  skipped {thread}: {why}"));
    }
    Ok(())
}
