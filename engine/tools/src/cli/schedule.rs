//! `cairn schedule create|list|pause|resume|trigger|backfill|delete`: durable schedules of workflows
//! compiled into the binary (`Engine::create_schedule` and friends). A schedule's ticks run in
//! an engine that runs schedules on the database (`cairn serve`, `cairn worker`, an
//! application's engine); these commands write and read schedules and run no tick: a created
//! or resumed schedule waits, durably, for such an engine, and says so. `trigger` starts the
//! workflow once and runs that thread here until it ends or parks, so that nothing it starts is
//! left without a driver when the command exits.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::ThreadStatus;
use serde_json::Value;

use super::EXIT_FAILED;
use super::common::{
    Common, argument_error, fail, json_arg, open_writable, print_json, print_text, usage,
};
use super::control::parse_age_ms;
use super::table::{Table, time_in};
use cairn::{CatchUp, Every, Overlap, ScheduleInfo, ScheduleSpec};

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
    List(Common),
    /// Pauses a schedule: no tick starts until it is resumed.
    Pause(NameArgs),
    /// Resumes a paused schedule (its catch-up policy decides about the ticks missed).
    Resume(NameArgs),
    /// Starts the schedule's workflow now, outside its ticks, and runs that thread here until it
    /// ends or parks.
    Trigger(NameArgs),
    /// Starts one run per tick that fell in --from..--to (both included), each once: runs that
    /// exist (an earlier backfill's, the tick's own) are left as they are.
    Backfill(BackfillArgs),
    /// Deletes a schedule, whatever its status: it starts nothing more.
    Delete(NameArgs),
}

/// Arguments of `cairn schedule backfill`.
#[derive(Debug, clap::Args)]
struct BackfillArgs {
    #[command(flatten)]
    common: Common,
    /// The schedule's name.
    #[arg(value_parser = clap::builder::NonEmptyStringValueParser::new())]
    name: String,
    /// The range's first time (ms since the epoch).
    #[arg(long)]
    from: u64,
    /// The range's last time (ms since the epoch).
    #[arg(long)]
    to: u64,
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
    /// A fixed interval instead of cron: a number with a unit, 90s, 30m, 24h or 7d (not 0).
    #[arg(long, value_parser = parse_interval_ms)]
    every: Option<u64>,
    /// The input of each thread it starts, as JSON (a state of the workflow; default null);
    /// `@FILE` reads it from a file, `@-` from stdin.
    #[arg(long)]
    input: Option<String>,
    /// Which missed ticks start after a downtime: skip, one, or all:N.
    #[arg(long, default_value = "skip", value_parser = parse_catch_up)]
    catch_up: CatchUp,
    /// No tick before this time (ms since the epoch).
    #[arg(long)]
    start_ms: Option<u64>,
    /// No tick at or after this time (ms since the epoch).
    #[arg(long)]
    end_ms: Option<u64>,
    /// What a tick does while the run before is still running: allow_all (start it anyway),
    /// skip, buffer_one (start it when that run ends) or cancel_other.
    #[arg(long, default_value = "allow_all")]
    overlap: Overlap,
    /// Delays each tick by a random amount below this many ms (0: none).
    #[arg(long, default_value_t = 0)]
    jitter_ms: u64,
}

/// Arguments of the commands on one schedule.
#[derive(Debug, clap::Args)]
struct NameArgs {
    #[command(flatten)]
    common: Common,
    /// The schedule's name.
    #[arg(value_parser = clap::builder::NonEmptyStringValueParser::new())]
    name: String,
}

/// An interval of `--every`: an age, more than 0.
fn parse_interval_ms(text: &str) -> Result<u64, String> {
    match parse_age_ms(text)? {
        0 => Err(format!("{text:?}: a schedule's interval is more than 0")),
        ms => Ok(ms),
    }
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
        Action::List(common) => {
            let engine = open_writable(&common.db, wfs).await?;
            let list = engine.schedules().await;
            engine.shutdown().await;
            show(&list?, common.json)
        }
        Action::Pause(args) => on_one(args, wfs, "paused").await,
        Action::Resume(args) => on_one(args, wfs, "resumed").await,
        Action::Trigger(args) => trigger(args, wfs).await,
        Action::Backfill(args) => backfill(args, wfs).await,
        Action::Delete(args) => on_one(args, wfs, "deleted").await,
    }
}

async fn create(args: CreateArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let every = match (args.cron, args.every) {
        (Some(expr), _) => Every::Cron { expr, tz: args.tz },
        (None, Some(ms)) => Every::Interval { ms },
        (None, None) => return Err(usage("give --cron or --every")),
    };
    let input = schedule_input(&args.workflow, args.input.as_deref(), wfs)?;
    let spec = ScheduleSpec::new(args.workflow, every)
        .input(input)
        .catch_up(args.catch_up)
        .overlap(args.overlap)
        .jitter_ms(args.jitter_ms)
        .between(args.start_ms, args.end_ms);
    // Checked before the file is opened: a bad argument is a usage error, whatever the file.
    cairn::admin::check_schedule_name(&args.name, &spec).map_err(argument_error)?;
    let db = &args.common.db;
    let engine = open_writable(db, wfs).await?;
    let created = engine.create_schedule(&args.name, spec).await;
    engine.shutdown().await;
    let created = created?;
    let waits = matches!(created.status, ThreadStatus::Created | ThreadStatus::Running);
    show(&[created], args.common.json)?;
    if waits && !args.common.json {
        print_text(&format!(
            "no tick runs until an engine runs schedules on this database: `cairn serve --db {d}` \
             or `cairn worker --db {d}` (or an application's engine on it) runs them",
            d = db.display()
        ));
    }
    Ok(())
}

/// The input of a schedule of `workflow`: `--input` as JSON, checked as a state of the
/// workflow, so that a schedule whose every tick would fail is refused with what it needs.
fn schedule_input(
    workflow: &str,
    input: Option<&str>,
    wfs: &[Arc<DynWorkflow>],
) -> anyhow::Result<Value> {
    let value = input.map_or(Ok(Value::Null), |text| json_arg(text, "--input"))?;
    let Some(wf) = wfs.iter().filter(|wf| wf.id() == workflow).max_by_key(|wf| wf.version()) else {
        let known = wfs.iter().map(|w| (w.id(), w.version()));
        return Err(usage(cairn::Error::unknown_workflow(workflow, None, known).to_string()));
    };
    match wf.state_from_json(&value) {
        Ok(_) => Ok(value),
        Err(e) if input.is_none() => {
            // What an empty object lacks names a field the input needs.
            let empty = Value::Object(serde_json::Map::new());
            let why = match wf.state_from_json(&empty) {
                Err(lacks) => format!("an empty object is not one: {lacks}"),
                Ok(_) => format!("null is not one: {e}"),
            };
            Err(usage(format!(
                "{id} v{v} needs an input and none was given: pass --input with a JSON object, a \
                 state of {id} ({why})",
                id = wf.id(),
                v = wf.version()
            )))
        }
        Err(e) => Err(usage(format!(
            "--input is not a valid state of {} v{}: {e}",
            wf.id(),
            wf.version()
        ))),
    }
}

/// An engine error about schedule `name`, with "no schedule NAME" for an unknown one.
fn about(name: &str, e: cairn::Error) -> anyhow::Error {
    match e {
        cairn::Error::UnknownThread(_) => {
            fail(EXIT_FAILED, format!("no schedule {name} (`cairn schedule list` lists them)"))
        }
        other => other.into(),
    }
}

async fn on_one(args: NameArgs, wfs: &[Arc<DynWorkflow>], done: &str) -> anyhow::Result<()> {
    let db = &args.common.db;
    let engine = open_writable(db, wfs).await?;
    let name = args.name.as_str();
    let result = match done {
        "paused" => engine.pause_schedule(name).await,
        "resumed" => engine.resume_schedule(name).await,
        _ => engine.delete_schedule(name).await,
    };
    engine.shutdown().await;
    result.map_err(|e| about(name, e))?;
    if args.common.json {
        return print_json(&serde_json::json!({ "schedule": name, "done": done }));
    }
    print_text(&format!("schedule {name} {done}"));
    if done == "resumed" {
        print_text(&format!(
            "its ticks run in an engine that runs schedules on this database (`cairn serve --db \
             {}`, `cairn worker`, an application's engine)",
            db.display()
        ));
    }
    Ok(())
}

/// `schedule trigger`: starts the workflow once and runs that thread here until it ends or
/// parks (one waiting in a queue is left there, for the engine that admits it).
async fn trigger(args: NameArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let engine = open_writable(&args.common.db, wfs).await?;
    let name = args.name.as_str();
    let outcome = async {
        let handle = engine.trigger_schedule(name).await.map_err(|e| about(name, e))?;
        let outcome = match handle.status().await? {
            ThreadStatus::Queued => None,
            _ => Some(handle.wait().await?),
        };
        anyhow::Ok((handle.id().to_string(), outcome))
    }
    .await;
    engine.shutdown().await;
    let (thread, outcome) = outcome?;
    let status = outcome.as_ref().map_or(ThreadStatus::Queued, |o| o.status);
    if args.common.json {
        print_json(&serde_json::json!({
            "schedule": name,
            "done": "triggered",
            "thread": thread,
            "status": status.as_str(),
            "output": outcome.as_ref().and_then(|o| o.output.clone()),
            "error": outcome.as_ref().and_then(|o| o.error.clone()),
        }))?;
    } else {
        let mut line = format!("schedule {name} triggered: thread {thread}, now {status}");
        if let Some(e) = outcome.as_ref().and_then(|o| o.error.as_ref()) {
            line.push_str(&format!(" (last error: {e})"));
        }
        print_text(&line);
    }
    super::control::ended(&thread, status)
}

/// `schedule backfill`: writes the runs of the range (left `created` for an engine that runs
/// threads, as a created schedule's are): through the endpoint of the engine serving the file
/// when one is announced (`POST /api/schedules/{name}/backfill`), else on the file.
async fn backfill(args: BackfillArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let name = args.name.as_str();
    let path = format!("/api/schedules/{}/backfill", crate::serve::wire::path_segment(name));
    let body = serde_json::json!({ "from_ms": args.from, "to_ms": args.to });
    let done = match super::remote::through(&args.common.db, path, Some(body)).await? {
        Some(answer) => answer,
        None => {
            let engine = open_writable(&args.common.db, wfs).await?;
            let done = engine.backfill_schedule(name, args.from, args.to).await;
            engine.shutdown().await;
            let done = done.map_err(|e| match e {
                e @ cairn::Error::UnknownThread(_) => about(name, e),
                other => argument_error(other),
            })?;
            serde_json::json!({ "schedule": name, "ticks": done.ticks, "created": done.created })
        }
    };
    if args.common.json {
        return print_json(&done);
    }
    let ticks = done["ticks"].as_array().map_or(0, |t| t.len() as u64);
    let created = done["created"].as_u64().unwrap_or(0);
    let existed = ticks.saturating_sub(created);
    print_text(&format!(
        "schedule {name} backfilled: {ticks} tick(s) in the range, {created} run(s) created, \
         {existed} existed"
    ));
    Ok(())
}

fn show(list: &[ScheduleInfo], json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(&list);
    }
    let mut table =
        Table::new(&["NAME", "STATUS", "WORKFLOW", "EVERY", "NEXT TICK", "STARTED", "SKIPPED"]);
    for s in list {
        // A tick is shown in the zone its cron fields are read in (an interval's in UTC).
        let (every, zone) = match &s.state.spec.every {
            Every::Cron { expr, tz } => {
                (format!("{expr} ({tz})"), tz.parse().unwrap_or(chrono_tz::UTC))
            }
            Every::Interval { ms } => (format!("{ms} ms"), chrono_tz::UTC),
        };
        table.row(vec![
            s.name.clone(),
            s.status.to_string(),
            s.state.spec.workflow.clone(),
            every,
            s.state.next_tick_ms.map_or_else(|| "-".into(), |ms| time_in(ms, zone)),
            s.state.started.to_string(),
            s.state.skipped.to_string(),
        ]);
    }
    print_text(&table.render());
    Ok(())
}
