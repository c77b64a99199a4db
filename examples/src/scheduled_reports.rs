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
//! The ticks do not run at once: each schedule starts its threads on the queue `reports`
//! (`ScheduleSpec::on_queue`) with its tenant as the concurrency key, and the queue allows one
//! report per tenant at a time (and four in all). A catch-up that starts three of acme's
//! reports together puts them in line; the store admits the next when the one before ends.
//! The summary counts, from the log, how many of one tenant's reports ever ran at once.

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
    /// The most reports of one tenant running at once, per schedule, counted from the log
    /// (the queue's per-tenant limit is [`PER_TENANT_MAX`]).
    pub most_at_once: BTreeMap<String, usize>,
}

/// How long writing one report takes, in real ms.
const REPORT_MS: u64 = 200;

/// Reports of one tenant that run at once, at most (the queue's per-key limit).
pub const PER_TENANT_MAX: u32 = 1;

/// The queue the reports wait in.
fn queue() -> cairn::storage::QueueLimits {
    cairn::storage::QueueLimits {
        concurrency_max: Some(4),
        per_key_max: Some(PER_TENANT_MAX),
        ..cairn::storage::QueueLimits::default()
    }
}

/// The report workflow: one node that writes the report of its tenant.
///
/// # Errors
/// A build error (none for this graph).
pub fn report() -> Result<Workflow<Replace<String>>, cairn::dsl::BuildError> {
    Workflow::<Replace<String>>::builder("report", 1)
        .node("write", |s: Arc<Replace<String>>, ctx: Ctx| async move {
            // Writing a report takes a moment (real time, not the engine's clock): long enough
            // for reports started together to overlap, were it not for the queue.
            tokio::time::sleep(std::time::Duration::from_millis(REPORT_MS)).await;
            Ok(NodeOutput::update(format!("report for {} at {}", s.0, ctx.now_ms())))
        })
        .edge(START, "write")
        .edge("write", END)
        .build()
}

async fn open(db: &Path, clock: &ManualClock) -> anyhow::Result<Engine> {
    let clock: Arc<dyn Clock> = Arc::new(clock.clone());
    let engine = Engine::builder(db).workflow(&report()?).queue("reports", queue());
    Ok(engine.clock(clock).open().await?)
}

/// Moves the clock to `until_ms` one tick at a time, letting each schedule handle its ticks.
async fn run_until(engine: &Engine, clock: &ManualClock, until_ms: u64) -> anyhow::Result<()> {
    loop {
        let next = engine
            .schedules()
            .await?
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
        let all = engine.schedules().await?;
        if all.iter().all(|s| {
            s.status == ThreadStatus::Sleeping && s.state.next_tick_ms.is_some_and(|t| t > at_ms)
        }) {
            return Ok(());
        }
        anyhow::ensure!(started.elapsed().as_secs() < 20, "schedules did not settle: {all:?}");
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
}

async fn started(engine: &Engine) -> anyhow::Result<BTreeMap<String, usize>> {
    Ok(engine.schedules().await?.into_iter().map(|s| (s.name, s.state.started as usize)).collect())
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
        let spec = ScheduleSpec::new("report", every)
            .input(serde_json::json!(tenant))
            .catch_up(catch_up)
            .on_queue("reports", tenant);
        engine.create_schedule(&format!("{tenant}-daily"), spec).await?;
    }
    settle(&engine, MONDAY_MS).await?;
    // The first week, Monday to Friday, and Saturday morning.
    run_until(&engine, &clock, MONDAY_MS + 5 * DAY_MS + 12 * 3_600_000).await?;
    let first_week = started(&engine).await?;
    let first_acme_tick = engine
        .store()
        .list_threads(
            &cairn::storage::ThreadFilter {
                labels: vec![("schedule".into(), "acme-daily".into())],
                workflow_id: Some("report".into()),
                ..Default::default()
            },
            cairn::storage::Page { limit: 100, offset: 0 },
        )
        .wait()?
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
    let after = started(&engine).await?;
    let caught_up = after.iter().map(|(k, v)| (k.clone(), v - first_week[k])).collect();
    let skipped =
        engine.schedules().await?.into_iter().map(|s| (s.name, s.state.skipped)).collect();
    let mut statuses = Vec::new();
    let filter =
        cairn::storage::ThreadFilter { workflow_id: Some("report".into()), ..Default::default() };
    for record in engine
        .store()
        .list_threads(&filter, cairn::storage::Page { limit: 100, offset: 0 })
        .wait()?
    {
        statuses.push(engine.thread(record.id.as_str()).await?.finished().await?.status);
    }
    let most_at_once = most_at_once(engine.store().as_ref())?;
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
        most_at_once,
    })
}

/// The most report threads of each schedule running at once, from the log: a thread runs from
/// its first `Running` status event to its terminal one, in lsn order.
fn most_at_once(store: &dyn cairn::storage::Store) -> anyhow::Result<BTreeMap<String, usize>> {
    let mut running: BTreeMap<String, BTreeMap<String, bool>> = BTreeMap::new();
    let mut most = BTreeMap::new();
    let mut after = cairn::Lsn(0);
    loop {
        let page = store.read_all_since(after, 1_000).wait()?;
        let Some(last) = page.last() else { return Ok(most) };
        after = last.bookmark.lsn;
        for event in page {
            let thread = event.thread.to_string();
            let Some((schedule, _)) = thread.split_once('@') else { continue };
            let schedule = schedule.to_string();
            let body = cairn::blocking::decode(store, event)?.body;
            let cairn::event::Body::StatusChanged { to, .. } = body else { continue };
            let of = running.entry(schedule.clone()).or_default();
            if to == ThreadStatus::Running {
                of.insert(thread, true);
            } else if to.is_terminal() {
                of.insert(thread, false);
            }
            let now = of.values().filter(|r| **r).count();
            let m = most.entry(schedule).or_insert(0);
            *m = now.max(*m);
        }
    }
}
