//! `cairn schedule create|list|pause|resume|trigger|delete`: durable schedules of workflows
//! compiled into the binary (`Engine::create_schedule` and friends). A schedule's ticks run in
//! whichever engine resumes work on the database (`cairn worker`, an embedded engine); these
//! commands only write and read schedules.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::Value;

use super::common::{Common, open_writable, print_json, print_text, usage};
use super::control::parse_age_ms;
use super::table::{Table, time};
use crate::{CatchUp, Every, ScheduleInfo, ScheduleSpec};

/// `cairn schedule ...`.
#[derive(Debug, clap::Args)]
pub struct ScheduleCommand {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Creates a schedule (the same spec again is a no-op; another spec is an error).
    Create(CreateArgs),
    /// Lists schedules: status, what they start, the next tick, ticks started and skipped.
    List(ListArgs),
    /// Pauses a schedule: no tick starts until it is resumed.
    Pause(NameArgs),
    /// Resumes a paused schedule (its catch-up policy decides about the ticks missed).
    Resume(NameArgs),
    /// Starts the schedule's workflow now, outside its ticks.
    Trigger(NameArgs),
    /// Deletes a schedule: it starts nothing more.
    Delete(NameArgs),
}

/// Arguments of `cairn schedule create`.
#[derive(Debug, clap::Args)]
struct CreateArgs {
    #[command(flatten)]
    common: Common,
    /// The schedule's name (letters, digits, '-', '_', '.').
    name: String,
    /// The workflow each tick starts.
    #[arg(long)]
    workflow: String,
    /// A cron expression (5 fields, or 6 with seconds first), e.g. "0 9 * * MON-FRI".
    #[arg(long, conflicts_with = "every", required_unless_present = "every")]
    cron: Option<String>,
    /// The IANA time zone the cron fields are read in.
    #[arg(long, default_value = "UTC", requires = "cron")]
    tz: String,
    /// A fixed interval instead of cron: a number with a unit, 90s, 30m, 24h or 7d.
    #[arg(long, value_parser = parse_age_ms)]
    every: Option<u64>,
    /// The input of each thread it starts, as JSON.
    #[arg(long, default_value = "null")]
    input: String,
    /// Which missed ticks start after a downtime: skip, one, or all:N.
    #[arg(long, default_value = "skip", value_parser = parse_catch_up)]
    catch_up: CatchUp,
    /// No tick before this time (ms since the epoch).
    #[arg(long)]
    start_ms: Option<u64>,
    /// No tick at or after this time (ms since the epoch).
    #[arg(long)]
    end_ms: Option<u64>,
}

/// Arguments of `cairn schedule list`.
#[derive(Debug, clap::Args)]
struct ListArgs {
    #[command(flatten)]
    common: Common,
}

/// Arguments of the commands on one schedule.
#[derive(Debug, clap::Args)]
struct NameArgs {
    #[command(flatten)]
    common: Common,
    /// The schedule's name.
    name: String,
}

fn parse_catch_up(text: &str) -> Result<CatchUp, String> {
    match text {
        "skip" => Ok(CatchUp::Skip),
        "one" => Ok(CatchUp::One),
        _ => {
            let max = text
                .strip_prefix("all:")
                .and_then(|n| n.parse().ok())
                .ok_or_else(|| format!("{text:?}: use skip, one or all:N"))?;
            Ok(CatchUp::All { max })
        }
    }
}

pub(super) async fn command(cmd: ScheduleCommand, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    match cmd.action {
        Action::Create(args) => create(args, wfs).await,
        Action::List(args) => {
            let engine = open_writable(&args.common.db, wfs).await?;
            let list = engine.schedules().await;
            engine.shutdown().await;
            show(&list?, args.common.json)
        }
        Action::Pause(args) => on_one(args, wfs, "paused").await,
        Action::Resume(args) => on_one(args, wfs, "resumed").await,
        Action::Trigger(args) => on_one(args, wfs, "triggered").await,
        Action::Delete(args) => on_one(args, wfs, "deleted").await,
    }
}

async fn create(args: CreateArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let input: Value = serde_json::from_str(&args.input)
        .map_err(|e| usage(format!("--input is not JSON: {e}")))?;
    let every = match (args.cron, args.every) {
        (Some(expr), _) => Every::Cron { expr, tz: args.tz },
        (None, Some(ms)) => Every::Interval { ms },
        (None, None) => return Err(usage("give --cron or --every")),
    };
    let spec = ScheduleSpec::new(args.workflow, every)
        .input(input)
        .catch_up(args.catch_up)
        .between(args.start_ms, args.end_ms);
    let engine = open_writable(&args.common.db, wfs).await?;
    let created = engine.create_schedule(&args.name, spec).await;
    engine.shutdown().await;
    show(&[created?], args.common.json)
}

async fn on_one(args: NameArgs, wfs: &[Arc<DynWorkflow>], done: &str) -> anyhow::Result<()> {
    let engine = open_writable(&args.common.db, wfs).await?;
    let name = args.name.as_str();
    let result = match done {
        "paused" => engine.pause_schedule(name).await.map(|()| None),
        "resumed" => engine.resume_schedule(name).await.map(|()| None),
        "triggered" => engine.trigger_schedule(name).await.map(|h| Some(h.id().to_string())),
        _ => engine.delete_schedule(name).await.map(|()| None),
    };
    engine.shutdown().await;
    let started = result?;
    if args.common.json {
        print_json(&serde_json::json!({ "schedule": name, "done": done, "thread": started }))
    } else {
        let thread = started.map(|t| format!(": thread {t}")).unwrap_or_default();
        print_text(&format!("schedule {name} {done}{thread}"));
        Ok(())
    }
}

fn show(list: &[ScheduleInfo], json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(&list);
    }
    let mut table =
        Table::new(&["NAME", "STATUS", "WORKFLOW", "EVERY", "NEXT TICK", "STARTED", "SKIPPED"]);
    for s in list {
        let every = match &s.state.spec.every {
            Every::Cron { expr, tz } => format!("{expr} ({tz})"),
            Every::Interval { ms } => format!("{ms} ms"),
        };
        table.row(vec![
            s.name.clone(),
            s.status.to_string(),
            s.state.spec.workflow.clone(),
            every,
            s.state.next_tick_ms.map_or_else(|| "-".into(), time),
            s.state.started.to_string(),
            s.state.skipped.to_string(),
        ]);
    }
    print_text(&table.render());
    Ok(())
}
