//! Schedules whose runs outlast their interval: an hourly import that waits for its data
//! provider (an answer the example gives later) is still running at the next tick. Two
//! schedules of it on a [`ManualClock`] show the overlap policies: `skip` starts nothing at an
//! overlapping tick and counts it skipped; `buffer_one` keeps the latest overlapping tick (an
//! older one it kept is replaced and counted skipped) and starts it once the running import
//! ends. A third schedule, nightly and not yet begun, is backfilled over the three nights
//! before: one run per night, with the id that night's tick would have had, and a repeated
//! backfill starts nothing more.

use std::path::Path;
use std::sync::Arc;

use cairn::clock::{Clock, ManualClock};
use cairn::dsl::{Ctx, NodeOutput, Replace, Workflow};
use cairn::{END, Engine, Every, Overlap, START, ScheduleSpec, ThreadStatus};

/// Thursday 2026-01-01, 00:00 UTC.
pub const START_MS: u64 = 1_767_225_600_000;
/// An hour.
pub const HOUR_MS: u64 = 3_600_000;

/// The import workflow: waits for its provider's answer.
///
/// # Errors
/// A build error (none for this graph).
pub fn import() -> Result<Workflow<Replace<u64>>, cairn::dsl::BuildError> {
    Workflow::<Replace<u64>>::builder("import", 1)
        .node("fetch", |_s, ctx: Ctx| async move {
            let rows: u64 = ctx.interrupt("provider answered?")?;
            Ok(NodeOutput::update(rows))
        })
        .edge(START, "fetch")
        .edge("fetch", END)
        .build()
}

/// One schedule's counts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Counts {
    /// Runs started.
    pub started: u64,
    /// Ticks skipped.
    pub skipped: u64,
    /// The tick kept waiting, if any.
    pub buffered: Option<u64>,
}

/// What the example saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Summary {
    /// `skip` and `buffer_one` after three ticks, the first run still running.
    pub overlapped: [Counts; 2],
    /// The same once the first runs were answered (and the next poll passed).
    pub after: [Counts; 2],
    /// The runs of `buffer_one` by id, sorted.
    pub buffer_runs: Vec<String>,
    /// The nights the backfill started a run for (tick ms), and how many a repeat started.
    pub backfilled: (Vec<u64>, usize),
}

fn hourly(overlap: Overlap) -> ScheduleSpec {
    ScheduleSpec::new("import", Every::Interval { ms: HOUR_MS })
        .input(serde_json::json!(0))
        .between(Some(START_MS + HOUR_MS), None)
        .overlap(overlap)
}

async fn counts(engine: &Engine, name: &str) -> anyhow::Result<Counts> {
    let info = engine.schedule(name).await?.ok_or_else(|| anyhow::anyhow!("no {name}"))?;
    let s = info.state;
    Ok(Counts { started: s.started, skipped: s.skipped, buffered: s.buffered })
}

/// Waits until `done` holds of both hourly schedules (their rounds committed, back asleep).
async fn settle(
    engine: &Engine,
    done: impl Fn(&cairn::ScheduleInfo) -> bool,
) -> anyhow::Result<()> {
    for _ in 0..5_000 {
        let mut ok = true;
        for name in ["skip", "buffer"] {
            let info = engine.schedule(name).await?.ok_or_else(|| anyhow::anyhow!("no {name}"))?;
            ok &= info.status == ThreadStatus::Sleeping && done(&info);
        }
        if ok {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    anyhow::bail!("the schedules did not settle")
}

/// Waits until thread `id` exists and waits for its answer.
async fn waits(engine: &Engine, id: &str) -> anyhow::Result<()> {
    for _ in 0..5_000 {
        if let Ok(t) = engine.thread(id).await
            && t.status().await? == ThreadStatus::WaitingInput
        {
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    anyhow::bail!("{id} never waited")
}

/// Runs the example on `db`.
///
/// # Errors
/// Engine errors; an error when the schedules do not behave as described.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    let clock = ManualClock::new(START_MS);
    let shared: Arc<dyn Clock> = Arc::new(clock.clone());
    let engine = Engine::builder(db).workflow(&import()?).clock(shared).open().await?;
    engine.create_schedule("skip", hourly(Overlap::Skip)).await?;
    engine.create_schedule("buffer", hourly(Overlap::BufferOne)).await?;
    for k in 1..=3 {
        let tick = START_MS + k * HOUR_MS;
        clock.set_ms(tick);
        settle(&engine, |i| i.state.last_tick_ms == Some(tick)).await?;
        if k == 1 {
            for name in ["skip", "buffer"] {
                waits(&engine, &ScheduleSpec::tick_thread_id(name, tick)).await?;
            }
        }
    }
    let overlapped = [counts(&engine, "skip").await?, counts(&engine, "buffer").await?];
    for name in ["skip", "buffer"] {
        let first = ScheduleSpec::tick_thread_id(name, START_MS + HOUR_MS);
        engine.send_input(&first, 10).await?;
        engine.thread(&first).await?.finished().await?;
    }
    clock.advance_ms(Overlap::BUFFER_POLL_MS);
    let kept = ScheduleSpec::tick_thread_id("buffer", START_MS + 3 * HOUR_MS);
    waits(&engine, &kept).await?;
    settle(&engine, |i| i.state.buffered.is_none()).await?;
    let after = [counts(&engine, "skip").await?, counts(&engine, "buffer").await?];
    let runs = cairn::storage::ThreadFilter {
        workflow_id: Some("import".into()),
        ..cairn::storage::ThreadFilter::default()
    };
    let runs = runs.label("schedule", "buffer");
    let page = cairn::storage::Page { limit: 100, offset: 0 };
    let mut buffer_runs: Vec<String> = engine
        .store()
        .list_threads(&runs, page)
        .await?
        .into_iter()
        .map(|r| r.id.to_string())
        .collect();
    buffer_runs.sort();
    let nightly =
        ScheduleSpec::new("import", Every::Cron { expr: "0 2 * * *".into(), tz: "UTC".into() })
            .input(serde_json::json!(0))
            .between(Some(START_MS + 100 * 24 * HOUR_MS), None);
    engine.create_schedule("nightly", nightly).await?;
    let (from, to) = (START_MS - 3 * 24 * HOUR_MS, START_MS);
    let done = engine.backfill_schedule("nightly", from, to).await?;
    let again = engine.backfill_schedule("nightly", from, to).await?;
    engine.shutdown().await;
    Ok(Summary { overlapped, after, buffer_runs, backfilled: (done.ticks, again.created) })
}
