//! `cairn checkpoints`, `cairn checkpoint show|delete ID` (`create` is `checkpoint_create.rs`), and `cairn prune` (retention that
//! keeps every thread restorable).

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::{
    Checkpoint, CheckpointFilter, CheckpointId, CheckpointInfo, CheckpointKind, Page, Seq,
    ThreadFilter, ThreadId,
};
use serde_json::json;

use super::EXIT_FAILED;
use super::common::{
    Common, fail, open_read_only, open_writable, print_json, print_text, progress, record_of,
    thread_id,
};
use super::endpoint;
use super::table::{Table, cut, pretty, time};
use crate::debug::rows::{CheckpointDetails, CheckpointRow, CheckpointsPage};
use crate::debug::views::{checkpoint_details, checkpoint_row};
use crate::limits::SERVE_PAGE_MAX;
use crate::serve::wire;
use cairn::Engine;

/// Arguments of `cairn checkpoints`.
#[derive(Debug, clap::Args)]
pub struct CheckpointsArgs {
    #[command(flatten)]
    common: Common,
    /// Only this thread's checkpoints.
    #[arg(long, value_parser = super::common::parse_thread_id)]
    thread: Option<String>,
    /// Only checkpoints of this workflow id.
    #[arg(long)]
    workflow: Option<String>,
    /// Only checkpoints of this kind (manual, periodic, node, phase, failure, completion).
    #[arg(long)]
    kind: Option<CheckpointKind>,
    /// Only checkpoints carrying one of these tags (repeatable).
    #[arg(long)]
    tag: Vec<String>,
    /// Most checkpoints listed.
    #[arg(long, default_value_t = 100)]
    limit: usize,
    /// Checkpoints skipped first (newest first).
    #[arg(long, default_value_t = 0)]
    offset: usize,
}

/// `cairn checkpoint create|show|delete`.
#[derive(Debug, clap::Subcommand)]
pub enum CheckpointCommand {
    /// Writes a manual checkpoint of a thread (one this process does not drive: parked,
    /// waiting, paused, ended, or left by a crash) and prints its id.
    Create(super::checkpoint_create::CreateArgs),
    /// Asks for a periodic checkpoint of a thread every --ms ms (with the metadata given),
    /// recorded in its log; replaces an earlier one.
    Every(super::checkpoint_ask::EveryArgs),
    /// Cancels the periodic checkpoint `checkpoint every` asked for.
    Cancel(super::checkpoint_ask::CancelArgs),
    /// Asks for a checkpoint (with the metadata given) the next time the thread completes NODE.
    AtNode(super::checkpoint_ask::AtNodeArgs),
    /// One checkpoint: its metadata and the snapshot it holds.
    Show {
        #[command(flatten)]
        common: Common,
        /// The checkpoint id.
        id: u64,
    },
    /// Deletes a checkpoint. Refused for the checkpoint a pruned thread restores from, unless
    /// --force.
    Delete {
        #[command(flatten)]
        common: Common,
        /// The checkpoint id.
        id: u64,
        /// Delete even the checkpoint a pruned thread needs (the thread becomes unrestorable).
        #[arg(long)]
        force: bool,
    },
}

/// Arguments of `cairn prune`.
#[derive(Debug, clap::Args)]
pub struct PruneArgs {
    #[command(flatten)]
    common: Common,
    /// Only this thread (default: every thread).
    #[arg(long, value_parser = super::common::parse_thread_id)]
    thread: Option<String>,
    /// Show what would be removed without removing it.
    #[arg(long)]
    dry_run: bool,
    /// Do not ask for confirmation (asked only when stdin is a terminal).
    #[arg(long, short = 'y')]
    yes: bool,
}

/// On a terminal, asks whether to prune; `true` to go on. Off a terminal (a script) it does not
/// ask: scripts say what they want by running the command.
fn confirmed(args: &PruneArgs) -> anyhow::Result<bool> {
    use std::io::{BufRead as _, IsTerminal as _, Write as _};
    if args.yes || args.dry_run || !std::io::stdin().is_terminal() {
        return Ok(true);
    }
    let which =
        args.thread.as_deref().map_or_else(|| "every thread".to_owned(), |t| format!("thread {t}"));
    let mut err = std::io::stderr().lock();
    write!(
        err,
        "prune {which} of {}? Events and checkpoints older than each thread's latest \
         checkpoint are removed for good (`--dry-run` shows what). [y/N] ",
        args.common.db.display()
    )?;
    err.flush()?;
    let mut answer = String::new();
    std::io::stdin().lock().read_line(&mut answer)?;
    Ok(matches!(answer.trim(), "y" | "Y" | "yes" | "YES" | "Yes"))
}

pub(super) async fn list(args: CheckpointsArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let filter = CheckpointFilter {
        thread: args.thread.as_deref().map(thread_id).transpose()?,
        workflow_id: args.workflow,
        kind: args.kind,
        any_tags: args.tag,
    };
    let found = endpoint::through(&args.common.db, |ep| {
        list_through(ep, &filter, args.offset, args.limit)
    })?;
    let rows: Vec<CheckpointRow> = match found {
        Some(rows) => rows,
        None => {
            let engine = open_read_only(&args.common.db, wfs).await?;
            let page = Page { limit: args.limit, offset: args.offset };
            let infos = engine.store().list_checkpoints(&filter, page).await?;
            infos.iter().map(checkpoint_row).collect()
        }
    };
    if args.common.json {
        return print_json(&rows);
    }
    if rows.is_empty() {
        print_text("no checkpoints match");
        return Ok(());
    }
    let mut table =
        Table::new(&["ID", "THREAD", "KIND", "SEQ", "CREATED", "BYTES", "TAGS", "DESCRIPTION"]);
    for c in &rows {
        table.row(vec![
            c.id.to_string(),
            c.thread.clone(),
            c.kind.clone(),
            c.covers.seq.to_string(),
            time(c.created_at_ms),
            c.snapshot_len.to_string(),
            c.meta.tags.join(","),
            cut(&c.meta.description, 60),
        ]);
    }
    print_text(&table.render());
    Ok(())
}

/// The listing through a running engine's endpoint, in pages of at most [`SERVE_PAGE_MAX`].
fn list_through(
    ep: &endpoint::Endpoint,
    filter: &CheckpointFilter,
    offset: usize,
    limit: usize,
) -> anyhow::Result<Vec<CheckpointRow>> {
    let mut query: Vec<(&str, String)> = Vec::new();
    query.extend(filter.thread.iter().map(|t| ("thread", t.to_string())));
    query.extend(filter.workflow_id.iter().map(|w| ("workflow", w.clone())));
    query.extend(filter.kind.map(|k| ("kind", k.to_string())));
    query.extend((!filter.any_tags.is_empty()).then(|| ("tag", filter.any_tags.join(","))));
    let mut rows = Vec::new();
    while rows.len() < limit {
        let want = (limit - rows.len()).min(SERVE_PAGE_MAX);
        let mut q = query.clone();
        q.push(("limit", want.to_string()));
        q.push(("offset", (offset + rows.len()).to_string()));
        let page: CheckpointsPage = wire::read(ep.get("/api/checkpoints", &q)?, "checkpoints")?;
        let n = page.checkpoints.len();
        rows.extend(page.checkpoints);
        if n < want {
            break;
        }
    }
    Ok(rows)
}

pub(super) async fn command(
    cmd: CheckpointCommand,
    wfs: &[Arc<DynWorkflow>],
) -> anyhow::Result<()> {
    match cmd {
        CheckpointCommand::Create(args) => super::checkpoint_create::create(args, wfs).await,
        CheckpointCommand::Every(args) => super::checkpoint_ask::every(args, wfs).await,
        CheckpointCommand::Cancel(args) => super::checkpoint_ask::cancel(args, wfs).await,
        CheckpointCommand::AtNode(args) => super::checkpoint_ask::at_node(args, wfs).await,
        CheckpointCommand::Show { common, id } => show(&common, id, wfs).await,
        CheckpointCommand::Delete { common, id, force } => delete(&common, id, force, wfs).await,
    }
}

async fn show(common: &Common, id: u64, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let found = endpoint::through(&common.db, |ep| ep.get(&format!("/api/checkpoints/{id}"), &[]))?;
    let out: CheckpointDetails = match found {
        Some(out) => wire::read(out, "checkpoint")?,
        None => {
            let engine = open_read_only(&common.db, wfs).await?;
            let Some(cp) = engine.store().checkpoint(CheckpointId(id)).await? else {
                return Err(fail(EXIT_FAILED, format!("no checkpoint {id} in this database")));
            };
            checkpoint_details(&cp)?
        }
    };
    if common.json {
        return print_json(&out);
    }
    let (c, meta) = (&out.info, &out.info.meta);
    let mut t = Table::new(&["", ""]);
    t.pair("checkpoint", id.to_string());
    t.pair("thread", c.thread.clone());
    t.pair("workflow", format!("{} v{}", c.workflow.id, c.workflow.version));
    t.pair("kind", c.kind.clone());
    let covers = format!("seq {} (lsn {}, {})", c.covers.seq, c.covers.lsn, time(c.covers.at_ms));
    t.pair("covers", covers);
    t.pair("step", out.step.to_string());
    t.pair("status", out.status.clone());
    t.pair("frontier", out.frontier.join(", "));
    t.pair("created by", meta.creator.clone());
    t.pair("description", meta.description.clone());
    t.pair("tags", meta.tags.join(", "));
    t.pair("snapshot", format!("{} bytes", c.snapshot_len));
    print_text(&format!("{}state:\n{}", t.render(), pretty(&out.state)));
    Ok(())
}

/// Whether `info` is the checkpoint its pruned thread restores from: the thread's events before
/// it are gone and no older checkpoint remains.
async fn needed_by_pruned_thread(engine: &Engine, info: &CheckpointInfo) -> anyhow::Result<bool> {
    let store = engine.store();
    let Some(record) = store.thread(&info.thread).await? else { return Ok(false) };
    if record.first_seq.0 <= 1 {
        return Ok(false);
    }
    let older = store.latest_checkpoint_at_or_before(&info.thread, info.covers.seq).await?;
    Ok(match older {
        Some(cp) if cp.id != info.id => false,
        Some(_) => {
            // Another checkpoint at the same seq would do as well.
            let filter =
                CheckpointFilter { thread: Some(info.thread.clone()), ..Default::default() };
            let page = Page { limit: 1000, offset: 0 };
            let all = store.list_checkpoints(&filter, page).await?;
            !all.iter().any(|c| c.id != info.id && c.covers.seq <= info.covers.seq)
        }
        None => true,
    })
}

async fn delete(
    common: &Common,
    id: u64,
    force: bool,
    wfs: &[Arc<DynWorkflow>],
) -> anyhow::Result<()> {
    let engine = open_writable(&common.db, wfs).await?;
    let Some(cp) = engine.store().checkpoint(CheckpointId(id)).await? else {
        return Err(fail(EXIT_FAILED, format!("no checkpoint {id} in this database")));
    };
    let info = cp.info();
    if !force && needed_by_pruned_thread(&engine, &info).await? {
        return Err(fail(
            EXIT_FAILED,
            format!(
                "checkpoint {id} is where thread {} restores from (its earlier events were pruned); \
                 deleting it would make the thread unrestorable (--force to delete anyway)",
                cp.thread
            ),
        ));
    }
    let existed = engine.store().delete_checkpoint(CheckpointId(id))?.wait().await?;
    engine.shutdown().await;
    if common.json {
        return print_json(&json!({"deleted": existed, "id": id, "thread": cp.thread.as_str()}));
    }
    print_text(&format!("deleted checkpoint {id} of thread {}", cp.thread));
    Ok(())
}

/// What prune did (or would do) to one thread.
/// One thread's line of `cairn checkpoints prune` (`--json` prints these as they are).
#[derive(serde::Serialize)]
struct PruneRow {
    thread: String,
    keep_checkpoint: Option<u64>,
    keep_from_seq: Option<u64>,
    result: Option<Pruned>,
}

/// What a prune removed from one thread, or would remove (`dry_run`).
#[derive(serde::Serialize)]
struct Pruned {
    events: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    checkpoints: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    first_seq: Option<u64>,
    #[serde(skip_serializing_if = "std::ops::Not::not")]
    dry_run: bool,
}

pub(super) async fn prune(args: PruneArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    if !confirmed(&args)? {
        print_text("nothing was pruned");
        return Ok(());
    }
    // A dry run only reads: it never opens the file for writing (which alone rewrites redb's
    // header), so it changes no byte and works beside a running engine.
    let engine = if args.dry_run {
        super::common::open_read_only_or_copy(&args.common.db, wfs).await?
    } else {
        open_writable(&args.common.db, wfs).await?
    };
    let store = engine.store().clone();
    let threads = threads_to_prune(&engine, args.thread.as_deref()).await?;
    let bar = progress(threads.len() as u64, "prune");
    let (mut events, mut checkpoints, mut pruned_threads) = (0u64, 0u64, 0u64);
    let mut rows = Vec::new();
    for thread in &threads {
        bar.set_message(thread.to_string());
        // The latest checkpoint is the one every later restore starts from: keep it, and
        // everything after it; what it covers is no longer needed to restore the thread.
        let latest = store.latest_checkpoint_at_or_before(thread, Seq(u64::MAX)).await?;
        let keep = latest.as_ref().map(Checkpoint::info);
        let result = match (&keep, args.dry_run) {
            (None, _) => None,
            (Some(k), true) => {
                let record = store.thread(thread).await?;
                let first = record.map_or(1, |r| r.first_seq.0);
                let events = k.covers.seq.0.saturating_sub(first - 1);
                Some(Pruned { events, checkpoints: None, first_seq: None, dry_run: true })
            }
            (Some(k), false) => {
                let pruned = store.prune(thread, k.id)?.wait().await?;
                events += pruned.events;
                checkpoints += pruned.checkpoints;
                if pruned.events + pruned.checkpoints > 0 {
                    pruned_threads += 1;
                }
                Some(Pruned {
                    events: pruned.events,
                    checkpoints: Some(pruned.checkpoints),
                    first_seq: Some(pruned.first_seq.0),
                    dry_run: false,
                })
            }
        };
        rows.push(PruneRow {
            thread: thread.to_string(),
            keep_checkpoint: keep.as_ref().map(|k| k.id.0),
            keep_from_seq: keep.as_ref().map(|k| k.covers.seq.0),
            result,
        });
        bar.inc(1);
    }
    bar.finish_and_clear();
    engine.shutdown().await;
    if args.common.json {
        return print_json(&json!({
            "threads": rows,
            "events_removed": events,
            "checkpoints_removed": checkpoints,
            "dry_run": args.dry_run,
        }));
    }
    print_pruned(&rows);
    if args.dry_run {
        print_text("dry run: nothing was removed");
    } else {
        print_text(&format!(
            "pruned {pruned_threads} threads: {events} events and {checkpoints} checkpoints removed; every thread restores from its latest checkpoint"
        ));
    }
    Ok(())
}

/// The threads a prune goes through: `thread`, or every thread.
async fn threads_to_prune(engine: &Engine, thread: Option<&str>) -> anyhow::Result<Vec<ThreadId>> {
    Ok(match thread {
        Some(t) => vec![record_of(engine, t).await?.id],
        None => {
            let mut all = Vec::new();
            loop {
                let page = Page { limit: 500, offset: all.len() };
                let batch = engine.store().list_threads(&ThreadFilter::default(), page).await?;
                let done = batch.len() < 500;
                all.extend(batch.into_iter().map(|r| r.id));
                if done {
                    break all;
                }
            }
        }
    })
}

/// Prints the table of what a prune removed (or would remove) from each thread.
fn print_pruned(rows: &[PruneRow]) {
    let mut table = Table::new(&["THREAD", "KEEP CHECKPOINT", "FROM SEQ", "EVENTS", "CHECKPOINTS"]);
    let text = |n: Option<u64>| n.map(|n| n.to_string()).unwrap_or_default();
    for r in rows {
        table.row(vec![
            r.thread.clone(),
            r.keep_checkpoint.map_or("none: nothing pruned".into(), |i| i.to_string()),
            text(r.keep_from_seq),
            text(r.result.as_ref().map(|p| p.events)),
            text(r.result.as_ref().and_then(|p| p.checkpoints)),
        ]);
    }
    print_text(&table.render());
}
