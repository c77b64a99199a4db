//! Scheduled reports: a weekday-morning report per tenant, run by durable schedules.
//!
//! Two schedules (`Engine::create_schedule`), one per tenant, start the `report` workflow at
//! 09:00 on weekdays in each tenant's time zone (`Every::Cron` with an IANA zone). Each tick is
//! a thread with a deterministic id, `<schedule>@<tick ms>`, labelled with its schedule. The
//! example runs a week on a [`ManualClock`], then the process stops for a long weekend and the
//! week after starts late: on reopening, each schedule's catch-up policy decides which missed
//! ticks still run (`acme`: every missed one, `globex`: only the latest). A schedule is itself a
//! thread of the built-in workflow `cairn.schedule` sleeping to its next tick, so none of this
//! needs anything running between ticks, and a crash at a tick neither loses nor doubles it.
//!
//! (Queues with a per-tenant concurrency limit, which would bound how many reports run at once,
//! are not in Cairn yet.)

use std::collections::BTreeMap;
use std::path::Path;
use std::sync::Arc;

use cairn::clock::{Clock, ManualClock};
use cairn::dsl::{Ctx, NodeOutput, Replace, Workflow};
use cairn::{CatchUp, END, Engine, Every, START, ScheduleSpec, ThreadStatus};

/// Monday 2026-03-02, 00:00 UTC.
pub const MONDAY_MS: u64 = 1_772_409_600_000;
/// A day.
pub const DAY_MS: u64 = 86_400_000;

/// What the example saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// Reports started in the first week, per schedule.
    pub first_week: BTreeMap<String, usize>,
    /// Reports started on waking up late the next week, per schedule (the catch-up policies).
    pub caught_up: BTreeMap<String, usize>,
    /// Ticks skipped by the catch-up policy, per schedule.
    pub skipped: BTreeMap<String, u64>,
    /// Every report thread's final status.
    pub statuses: Vec<ThreadStatus>,
    /// The local start time of acme's first report (`HH:MM` in Europe/Berlin).
    pub acme_first_local: String,
}

/// The report workflow: one node that writes the report of its tenant.
///
/// # Errors
/// A build error (none for this graph).
pub fn report() -> Result<Workflow<Replace<String>>, cairn::dsl::BuildError> {
    Workflow::<Replace<String>>::builder("report", 1)
        .node("write", |s: Arc<Replace<String>>, ctx: Ctx| async move {
            Ok(NodeOutput::update(format!("report for {} at {}", s.0, ctx.now_ms())))
        })
        .edge(START, "write")
        .edge("write", END)
        .build()
}

async fn open(db: &Path, clock: &ManualClock) -> anyhow::Result<Engine> {
    let clock: Arc<dyn Clock> = Arc::new(clock.clone());
    Ok(Engine::builder(db).workflow(&report()?).clock(clock).open().await?)
}

/// Moves the clock to `until_ms` one tick at a time, letting each schedule handle its ticks.
async fn run_until(engine: &Engine, clock: &ManualClock, until_ms: u64) -> anyhow::Result<()> {
    loop {
        let next = engine
            .schedules()?
            .iter()
            .filter_map(|s| s.state.next_tick_ms)
            .min()
            .filter(|t| *t <= until_ms);
        let Some(next) = next else {
            clock.set_ms(until_ms);
            return Ok(());
        };
        clock.set_ms(next);
        settle(engine, next).await?;
    }
}

/// Waits until every schedule has handled its ticks up to `at_ms` and gone back to sleep.
async fn settle(engine: &Engine, at_ms: u64) -> anyhow::Result<()> {
    let started = std::time::Instant::now();
    loop {
        let all = engine.schedules()?;
        if all.iter().all(|s| {
            s.status == ThreadStatus::Sleeping && s.state.next_tick_ms.is_some_and(|t| t > at_ms)
        }) {
            return Ok(());
        }
        anyhow::ensure!(started.elapsed().as_secs() < 20, "schedules did not settle: {all:?}");
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

fn started(engine: &Engine) -> anyhow::Result<BTreeMap<String, usize>> {
    Ok(engine.schedules()?.into_iter().map(|s| (s.name, s.state.started as usize)).collect())
}

/// Runs the example on `db`.
///
/// # Errors
/// Engine errors; an error when the schedules do not behave as described.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    let clock = ManualClock::new(MONDAY_MS);
    let engine = open(db, &clock).await?;
    for (tenant, tz, catch_up) in [
        ("acme", "Europe/Berlin", CatchUp::All { max: 10 }),
        ("globex", "America/New_York", CatchUp::One),
    ] {
        let every = Every::Cron { expr: "0 9 * * MON-FRI".into(), tz: tz.into() };
        let spec =
            ScheduleSpec::new("report", every).input(serde_json::json!(tenant)).catch_up(catch_up);
        engine.create_schedule(&format!("{tenant}-daily"), spec).await?;
    }
    settle(&engine, MONDAY_MS).await?;
    // The first week, Monday to Friday, and Saturday morning.
    run_until(&engine, &clock, MONDAY_MS + 5 * DAY_MS + 12 * 3_600_000).await?;
    let first_week = started(&engine)?;
    let first_acme_tick = engine
        .store()
        .list_threads(
            &cairn::storage::ThreadFilter {
                label: Some(("schedule".into(), "acme-daily".into())),
                workflow_id: Some("report".into()),
                ..Default::default()
            },
            cairn::storage::Page { limit: 100, offset: 0 },
        )?
        .iter()
        .filter_map(|r| r.id.as_str().rsplit('@').next()?.parse::<u64>().ok())
        .min()
        .unwrap_or(0);
    engine.shutdown().await;
    drop(engine);

    // Down over the weekend and until Wednesday 12:00 UTC of the next week: acme (Berlin)
    // missed Monday's, Tuesday's and Wednesday's 09:00, globex (New York, where it is 07:00)
    // Monday's and Tuesday's.
    clock.set_ms(MONDAY_MS + 9 * DAY_MS + 12 * 3_600_000);
    let engine = open(db, &clock).await?;
    settle(&engine, clock.now_ms()).await?;
    let after = started(&engine)?;
    let caught_up = after.iter().map(|(k, v)| (k.clone(), v - first_week[k])).collect();
    let skipped = engine.schedules()?.into_iter().map(|s| (s.name, s.state.skipped)).collect();
    let mut statuses = Vec::new();
    let filter =
        cairn::storage::ThreadFilter { workflow_id: Some("report".into()), ..Default::default() };
    for record in
        engine.store().list_threads(&filter, cairn::storage::Page { limit: 100, offset: 0 })?
    {
        statuses.push(engine.thread(record.id.as_str())?.finished().await?.status);
    }
    engine.shutdown().await;
    let tz: chrono_tz::Tz = "Europe/Berlin".parse()?;
    let local = chrono::TimeZone::timestamp_millis_opt(&tz, i64::try_from(first_acme_tick)?)
        .single()
        .ok_or_else(|| anyhow::anyhow!("no local time"))?;
    Ok(Summary {
        first_week,
        caught_up,
        skipped,
        statuses,
        acme_first_local: local.format("%H:%M").to_string(),
    })
}
