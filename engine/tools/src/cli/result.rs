//! `cairn result THREAD [--wait SECS] [--follow]`: how a thread ended, waiting for it if asked
//! (with `--follow`, the last thread of its continue-as-new chain). Through a
//! running engine's endpoint when one serves the file (a long poll of
//! `GET /api/threads/{id}/result?wait_ms=`, re-asked until the wait is over, so the thread
//! runs on in that engine while this process waits); on PostgreSQL through the database (the
//! wait follows other processes' commits); otherwise from snapshots of the file, read again
//! while the wait lasts (an engine without an endpoint may hold it and finish the thread).
//!
//! Exit code 0 when the thread completed, 1 when it ended otherwise (failed, cancelled, timed
//! out) or does not exist, [`super::EXIT_PENDING`] when it has not finished by the end of the wait.

use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_dsl::DynWorkflow;

use super::common::{Common, fail, open_read_only, open_writable, print_json, print_text};
use super::endpoint::{self, Endpoint};
use super::{EXIT_FAILED, EXIT_PENDING};
use crate::limits::RESULT_WAIT_MS_MAX;
use crate::serve::wire::{self, Finish, ThreadResult};
use cairn::admin::is_postgres_url;

/// Arguments of `cairn result`.
#[derive(Debug, clap::Args)]
pub struct ResultArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id.
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// Wait up to this many seconds for the thread to finish (default: answer at once).
    #[arg(long, value_name = "SECS", default_value_t = 0)]
    wait: u64,
    /// Follow a thread that continued as new to its successor, and so on to the last thread of
    /// the chain (within the same wait); the answer is about that thread.
    #[arg(long)]
    follow: bool,
}

/// The first and the longest pause between two snapshots of a file no endpoint serves.
const SNAPSHOT_PAUSE_MS: (u64, u64) = (250, 5_000);

pub(super) async fn result(args: ResultArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let db = args.common.db.clone();
    let deadline = Instant::now() + Duration::from_secs(args.wait);
    let mut thread = args.thread.clone();
    let mut answer = one(&db, &thread, deadline, wfs).await?;
    // With --follow: on from a thread that continued as new, to its successor (bounded).
    for _ in 0..cairn::admin::CHAIN_FOLLOW_MAX {
        if !args.follow || answer.result.status != "completed" {
            break;
        }
        let engine = if is_postgres_url(&db) {
            open_writable(&db, wfs).await?
        } else {
            open_read_only(&db, wfs).await?
        };
        let next = engine.continued_as(&thread).await;
        engine.shutdown().await;
        let Some(next) = next? else { break };
        thread = next;
        answer = one(&db, &thread, deadline, wfs).await?;
    }
    if args.common.json {
        print_json(&answer)?;
    } else {
        print_text(&text_of(&answer));
    }
    verdict(&answer.result, &thread)
}

/// The answer about `thread`, waiting until `deadline` for it to finish.
async fn one(
    db: &std::path::Path,
    thread: &str,
    deadline: Instant,
    wfs: &[Arc<DynWorkflow>],
) -> anyhow::Result<ThreadResult> {
    let wait = deadline.saturating_duration_since(Instant::now());
    if is_postgres_url(db) {
        let engine = open_writable(db, wfs).await?;
        let outcome = engine.await_result(thread, wait).await;
        let answer = answer_of(&engine, thread, outcome).await;
        engine.shutdown().await;
        return answer;
    }
    // Each look first asks an endpoint: an engine that opens the file while this waits (its
    // `cairn serve` or `cairn worker` started just after this command) runs the thread and
    // holds the file, which is then read through it, not from a snapshot.
    let mut pause = SNAPSHOT_PAUSE_MS.0;
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let (owned, db2) = (thread.to_owned(), db.to_owned());
        let through = tokio::task::spawn_blocking(move || {
            endpoint::through(&db2, |ep| poll(ep, &owned, left))
        })
        .await??;
        if let Some(answer) = through {
            return Ok(answer);
        }
        let answer = from_snapshot(db, thread, wfs).await?;
        let left = deadline.saturating_duration_since(Instant::now());
        if answer.result.finished || left.is_zero() {
            return Ok(answer);
        }
        tokio::time::sleep(left.min(Duration::from_millis(pause))).await;
        pause = (pause * 2).min(SNAPSHOT_PAUSE_MS.1);
    }
}

/// The exit of a command that answers a thread's result: 0 completed, 1 ended otherwise,
/// [`EXIT_PENDING`] not finished.
///
/// # Errors
/// A [`super::common::Failure`] with that code when the thread did not complete.
pub(super) fn verdict(result: &Finish, thread: &str) -> anyhow::Result<()> {
    match (result.finished, result.status.as_str()) {
        (true, "completed") => Ok(()),
        (true, _) => Err(fail(EXIT_FAILED, format!("{thread} did not complete"))),
        _ => Err(fail(EXIT_PENDING, format!("{thread} has not finished"))),
    }
}

/// Long polls of the endpoint until the thread finished or `wait` is over.
pub(super) fn poll(ep: &Endpoint, thread: &str, wait: Duration) -> anyhow::Result<ThreadResult> {
    let deadline = Instant::now() + wait;
    let path = format!("/api/threads/{}/result", endpoint::segment(thread));
    loop {
        let left = deadline.saturating_duration_since(Instant::now());
        let ms = u64::try_from(left.as_millis()).unwrap_or(u64::MAX).min(RESULT_WAIT_MS_MAX);
        let answer = ep.get(&path, &[("wait_ms", ms.to_string())])?;
        let answer: ThreadResult = wire::read(answer, "result")?;
        if answer.result.finished || Instant::now() >= deadline {
            return Ok(answer);
        }
    }
}

/// The answer about `thread` from the file as it is now.
async fn from_snapshot(
    db: &std::path::Path,
    thread: &str,
    wfs: &[Arc<DynWorkflow>],
) -> anyhow::Result<ThreadResult> {
    let engine = open_read_only(db, wfs).await?;
    let answer = answer_of(&engine, thread, engine.result(thread).await).await;
    engine.shutdown().await;
    answer
}

pub(super) async fn answer_of(
    engine: &cairn::Engine,
    thread: &str,
    outcome: Result<Option<cairn::Outcome>, cairn::Error>,
) -> anyhow::Result<ThreadResult> {
    let outcome = match outcome {
        Err(cairn::Error::UnknownThread(_)) => {
            return Err(fail(EXIT_FAILED, format!("no thread {thread} in this database")));
        }
        Err(e) => {
            // Sealed with a key this reader lacks: the clear status, a placeholder output.
            let p = crate::debug::sealed::lacking(engine, e)?;
            let id = cairn_storage::ThreadId::new(thread)?;
            let record = cairn::admin::thread_record(engine.store().as_ref(), &id).await?;
            let result = Finish::sealed(&record, &p);
            return Ok(ThreadResult { thread: thread.to_owned(), result });
        }
        Ok(outcome) => outcome,
    };
    let status = match &outcome {
        Some(o) => o.status,
        None => engine.thread(thread).await?.status().await?,
    };
    let result = Finish::new(status.as_str(), outcome.as_ref());
    Ok(ThreadResult { thread: thread.to_owned(), result })
}

pub(super) fn text_of(answer: &ThreadResult) -> String {
    let (thread, result) = (&answer.thread, &answer.result);
    let status = &result.status;
    if !result.finished {
        return format!("{thread}: {status}, not finished");
    }
    let mut text = format!("{thread}: {status}");
    if let Some(error) = &result.error {
        text.push_str(&format!(" (last error: {error})"));
    }
    if let Some(output) = result.output.as_ref().filter(|o| !o.is_null()) {
        text.push_str(&format!("\noutput: {output}"));
    }
    text
}
