//! Controls for threads of workflows compiled into the binary: `resumable`, `resume`,
//! `abandon`, `cancel`, `pause`, `input`. They open the file for writing, so they fail with exit
//! code 4 while an engine process holds it, unless that engine serves its endpoint: then
//! `resume`, `cancel`, `pause` and `input` go through it (`remote.rs`), and a resumed thread runs
//! in that engine; `resumable` asks it what it could resume and does not drive.

use crate::debug::rows::{ResumablePage, ResumableRow};
use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::ThreadStatus;
use serde_json::json;

use super::EXIT_FAILED;
use super::common::{Common, fail, json_arg, open_writable, print_json, print_text, record_of};
use super::remote;
use super::table::{Table, time};
use cairn::{Engine, ThreadHandle};

/// Arguments of commands that act on one thread.
#[derive(Debug, clap::Args)]
pub struct ThreadArgs {
    #[command(flatten)]
    pub(super) common: Common,
    /// The thread id.
    #[arg(value_parser = super::common::parse_thread_id)]
    pub(super) thread: String,
}

/// Arguments of `cairn cancel`.
#[derive(Debug, clap::Args)]
pub struct CancelArgs {
    #[command(flatten)]
    pub(super) target: ThreadArgs,
    /// Why (recorded with the cancellation).
    #[arg(long, default_value = "cancelled from the command line")]
    pub(super) reason: String,
}

/// Arguments of `cairn input`.
#[derive(Debug, clap::Args)]
pub struct InputArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id (waiting for input).
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// The input, as JSON (a bare word is taken as a string).
    value: String,
}

/// Arguments of `cairn resumable`.
#[derive(Debug, clap::Args)]
pub struct ResumableArgs {
    #[command(flatten)]
    common: Common,
    /// Only threads last updated within this long (engine clock): a number with a unit,
    /// `90s`, `30m`, `24h` or `7d`.
    #[arg(long, value_parser = parse_age_ms)]
    max_age: Option<u64>,
}

/// `90s`, `30m`, `24h`, `7d` (or a bare number of ms) in ms.
pub(super) fn parse_age_ms(text: &str) -> Result<u64, String> {
    let (digits, unit_ms) = match text.char_indices().last() {
        Some((i, 's')) => (&text[..i], 1_000),
        Some((i, 'm')) => (&text[..i], 60_000),
        Some((i, 'h')) => (&text[..i], 3_600_000),
        Some((i, 'd')) => (&text[..i], 86_400_000),
        _ => (text, 1),
    };
    let n: u64 = digits.parse().map_err(|_| format!("{text:?} is not an age such as 24h"))?;
    n.checked_mul(unit_ms).ok_or_else(|| format!("{text:?} is too long an age"))
}

pub(super) async fn resumable(args: ResumableArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    // A running engine lists what it could resume and does not drive, from its live store.
    let query: Vec<(&str, String)> =
        args.max_age.iter().map(|ms| ("max_age_ms", ms.to_string())).collect();
    let found = super::endpoint::through(&args.common.db, |ep| {
        let answer = ep.get("/api/resumable", &query)?;
        Ok(crate::serve::wire::read::<ResumablePage>(answer, "resumable threads")?.threads)
    })?;
    let rows: Vec<ResumableRow> = match found {
        Some(rows) => rows,
        None => {
            // A writable open: it proves that no engine process holds the file, so that
            // "running" threads really have no runner.
            let engine = open_writable(&args.common.db, wfs).await?;
            let records = match args.max_age {
                Some(ms) => engine.resumable_within(ms).await,
                None => engine.resumable().await,
            };
            let rows = records.map(|r| crate::debug::views::resumable_rows(&engine, r));
            engine.shutdown().await;
            rows?
        }
    };
    if args.common.json {
        return print_json(&rows);
    }
    if rows.is_empty() {
        print_text("no resumable threads");
        return Ok(());
    }
    let mut table =
        Table::new(&["THREAD", "WORKFLOW", "STATUS", "SEQ", "UPDATED", "RUNNABLE HERE"]);
    for row in &rows {
        table.row(vec![
            row.thread.clone(),
            format!("{} v{}", row.workflow.id, row.workflow.version),
            row.status.clone(),
            row.last_seq.map(|s| s.to_string()).unwrap_or_default(),
            time(row.updated_at_ms),
            row.why_not.as_ref().map_or_else(|| "yes".into(), |why| format!("no: {why}")),
        ]);
    }
    print_text(&table.render());
    Ok(())
}

/// Waits until `handle`'s thread stops running in this process, then reports it; exit code 1 if
/// it failed or timed out.
pub(super) async fn run_to_rest(
    engine: &Engine,
    handle: &ThreadHandle,
    json: bool,
    verb: &str,
) -> anyhow::Result<()> {
    let outcome = handle.wait().await;
    engine.shutdown().await;
    let outcome = outcome?;
    let id = handle.id().as_str();
    if json {
        print_json(&json!({
            "thread": id,
            "status": outcome.status.as_str(),
            "output": outcome.output,
            "error": outcome.error,
        }))?;
    } else {
        let mut line = format!("{verb} {id}: now {}", outcome.status);
        if let Some(e) = &outcome.error {
            line.push_str(&format!(" (last error: {e})"));
        }
        print_text(&line);
    }
    ended(id, outcome.status)
}

/// Exit 1 for a thread that ended failed or timed out, naming it.
///
/// # Errors
/// A [`super::common::Failure`] with exit code 1 for such a thread.
pub(super) fn ended(thread: &str, status: ThreadStatus) -> anyhow::Result<()> {
    match status {
        ThreadStatus::Failed | ThreadStatus::TimedOut => {
            Err(fail(EXIT_FAILED, format!("thread {thread} ended {status}")))
        }
        _ => Ok(()),
    }
}

pub(super) async fn resume(args: ThreadArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    if let Some(answer) = remote::post(&args.common.db, &args.thread, "resume", &json!({}))? {
        return remote::report(&answer, args.common.json);
    }
    let engine = open_writable(&args.common.db, wfs).await?;
    let record = record_of(&engine, &args.thread).await?;
    if let Some((name, _)) = cairn::ScheduleSpec::link_of(&args.thread)
        && &*record.workflow.id == cairn::ScheduleSpec::WORKFLOW
    {
        // Its ticks would start threads here that this process leaves half done at its exit.
        engine.shutdown().await;
        return Err(fail(
            EXIT_FAILED,
            format!(
                "{} is schedule {name}'s thread: it runs in `cairn serve` or `cairn worker` on \
                 this database (`cairn schedule resume {name}` resumes a paused one)",
                args.thread
            ),
        ));
    }
    // The thread runs here, in this process, until it ends or parks (Ctrl-C stops the process;
    // the thread stays resumable).
    engine.resume(&args.thread).await?;
    let handle = engine.thread(&args.thread).await?;
    run_to_rest(&engine, &handle, args.common.json, "resumed").await
}

pub(super) async fn input(args: InputArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let value = json_arg(&args.value, "the input")?;
    let body = json!({ "value": value });
    if let Some(answer) = remote::post(&args.common.db, &args.thread, "input", &body)? {
        return remote::report(&answer, args.common.json);
    }
    let engine = open_writable(&args.common.db, wfs).await?;
    record_of(&engine, &args.thread).await?;
    engine.send_input(&args.thread, value).await?;
    let handle = engine.thread(&args.thread).await?;
    run_to_rest(&engine, &handle, args.common.json, "input delivered to").await
}

/// Which control a command applies (a cancellation with its reason).
#[derive(Debug, Clone, Copy)]
pub(super) enum Control<'a> {
    Cancel(&'a str),
    Abandon,
    Pause,
}

pub(super) async fn control(
    what: Control<'_>,
    args: &ThreadArgs,
    wfs: &[Arc<DynWorkflow>],
) -> anyhow::Result<()> {
    let (common, thread) = (&args.common, args.thread.as_str());
    let remote = match what {
        Control::Cancel(reason) => Some(("cancel", json!({ "reason": reason }))),
        Control::Pause => Some(("pause", json!({}))),
        Control::Abandon => None,
    };
    if let Some((name, body)) = remote
        && let Some(answer) = remote::post(&common.db, thread, name, &body)?
    {
        return remote::report(&answer, common.json);
    }
    let engine = open_writable(&common.db, wfs).await?;
    record_of(&engine, thread).await?;
    let result = match what {
        Control::Cancel(reason) => engine.cancel(thread, reason).await,
        Control::Abandon => engine.abandon(thread).await,
        Control::Pause => engine.pause(thread).await,
    };
    let status = match engine.thread(thread).await {
        Ok(handle) => handle.status().await,
        Err(e) => Err(e),
    };
    engine.shutdown().await;
    result?;
    let status = status?;
    if common.json {
        return print_json(&json!({"thread": thread, "status": status.as_str()}));
    }
    print_text(&format!("{thread}: now {status}"));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::parse_age_ms;

    #[test]
    fn ages_read_with_their_unit() {
        assert_eq!(parse_age_ms("90s"), Ok(90_000));
        assert_eq!(parse_age_ms("30m"), Ok(1_800_000));
        assert_eq!(parse_age_ms("24h"), Ok(86_400_000));
        assert_eq!(parse_age_ms("7d"), Ok(604_800_000));
        assert_eq!(parse_age_ms("250"), Ok(250));
        assert!(parse_age_ms("h").is_err() && parse_age_ms("1y").is_err());
        assert!(parse_age_ms("99999999999999999d").is_err());
    }
}
