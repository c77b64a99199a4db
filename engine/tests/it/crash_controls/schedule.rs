//! Schedule cases of the controls proptest: a case may create up to two schedules (an interval
//! or a cron expression in a zone, a catch-up policy of skip, one or all up to N, maybe a start
//! and an end), then its schedule driver pauses and resumes them, triggers runs now, deletes
//! them, and moves the shared manual clock (by some seconds, or to a schedule's next tick),
//! while the thread drivers run theirs. Between the crash and the reopen the clock jumps by the
//! case's downtime (up to five minutes, past the skip policy's grace), so the reopened
//! schedules catch up.
//!
//! Judged from the store by [`cairn_testkit::check_schedule`] after each run (the
//! uninterrupted one, at the crash, after the resumed one): every round started exactly the
//! ticks its policy picks of those due, each once, as thread `<name>@<tick ms>`, none while
//! paused, outside the start and end, or after the delete. Besides: each acknowledged trigger
//! made one thread of its own (a trigger in flight at the crash is found in the store, not
//! asked again), a trigger of a deleted schedule is refused, and an acknowledged delete or pause
//! is in the log. A delete that comes as the schedule passes its end deletes it whole (it had
//! ended): it is then gone, which only a schedule with an end may be.
//!
//! The threads ticks start wait for input forever: no retention pass prunes one the check
//! looks for. In a case with retention passes, schedules have no end and are not deleted (a
//! pass would prune their finished threads before the check).
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::sync::atomic::Ordering;

use cairn::clock::{Clock as _, ManualClock};
use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::storage::Store;
use cairn::{CatchUp, END, Engine, Every, START, ScheduleSpec, ThreadStatus};
use cairn_testkit::{ScheduleCheck, check_schedule};
use proptest::prelude::*;

use super::driver::{Acked, Tally, bump};
use super::{Acc, CLOCK_START_MS};

/// The workflow schedule ticks start.
pub(super) const TICK_WORKFLOW: &str = "tick";

/// The workflow of tick threads: one node that waits for input nobody sends.
pub(super) fn tick_workflow() -> Workflow<Acc> {
    Workflow::<Acc>::builder(TICK_WORKFLOW, 1)
        .node("wait", |_s, ctx: Ctx| async move {
            let v: u64 = ctx.interrupt(serde_json::json!({ "tick": ctx.thread_id() }))?;
            Ok(NodeOutput::update(vec![v]))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .build()
        .expect("the tick workflow")
}

/// What a schedule driver does after creating its schedule.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Action {
    /// Moves the clock on by this many ms.
    Move(u64),
    /// Moves the clock to the schedule's next tick and waits (a little) for the round.
    ToNextTick,
    Pause,
    Unpause,
    Trigger,
    Delete,
}

/// One schedule of a case.
#[derive(Debug, Clone)]
pub(super) struct SchedulePlan {
    pub(super) every: Every,
    pub(super) catch_up: CatchUp,
    /// Start and end, in ms after the clock's start.
    pub(super) start: Option<u64>,
    pub(super) end: Option<u64>,
    pub(super) actions: Vec<Action>,
}

impl SchedulePlan {
    pub(super) fn spec(&self) -> ScheduleSpec {
        ScheduleSpec::new(TICK_WORKFLOW, self.every.clone())
            .input(serde_json::json!({ "items": [] }))
            .catch_up(self.catch_up)
            .between(self.start.map(|s| CLOCK_START_MS + s), self.end.map(|e| CLOCK_START_MS + e))
    }

    /// Whether its driver moves the shared clock.
    pub(super) fn moves_the_clock(&self) -> bool {
        self.actions.iter().any(|a| matches!(a, Action::Move(_) | Action::ToNextTick))
    }

    /// Without what a retention pass would prune before the check (an end, a delete).
    pub(super) fn kept(mut self) -> SchedulePlan {
        self.end = None;
        self.actions.retain(|a| *a != Action::Delete);
        self
    }
}

/// Rounds a schedule's thread runs before it continues as new here (the engine's
/// `schedule_ticks_per_run`): small, so that cases cross continuations.
pub(super) const TICKS_PER_RUN: u32 = 2;

pub(super) fn name(k: usize) -> String {
    format!("s{k}")
}

/// The key of schedule `k`'s driver in the acknowledgements.
pub(super) fn ack_key(k: usize) -> String {
    format!("schedule:{}", name(k))
}

pub(super) fn plans() -> impl Strategy<Value = Vec<SchedulePlan>> {
    let every = prop_oneof![
        2 => prop::sample::select(vec![2_000u64, 3_000, 5_000, 7_000])
            .prop_map(|ms| Every::Interval { ms }),
        1 => (
            prop::sample::select(vec!["*/5 * * * * *", "*/10 * * * * *", "0 * * * * *"]),
            prop::sample::select(vec!["UTC", "Europe/Berlin", "Asia/Kolkata"]),
        )
            .prop_map(|(expr, tz)| Every::Cron { expr: expr.into(), tz: tz.into() }),
    ];
    let catch_up = prop_oneof![
        Just(CatchUp::Skip),
        Just(CatchUp::One),
        (1u32..5).prop_map(|max| CatchUp::All { max })
    ];
    let action = prop_oneof![
        3 => (1_000u64..30_000).prop_map(Action::Move),
        3 => Just(Action::ToNextTick),
        1 => Just(Action::Pause),
        1 => Just(Action::Unpause),
        1 => Just(Action::Trigger),
        1 => Just(Action::Delete),
    ];
    let one = (
        every,
        catch_up,
        prop::option::weighted(0.3, 0u64..20_000),
        prop::option::weighted(0.3, 20_000u64..120_000),
        prop::collection::vec(action, 1..7),
    )
        .prop_map(|(every, catch_up, start, end, actions)| SchedulePlan {
            every,
            catch_up,
            start,
            end: end.map(|e| e + start.unwrap_or(0)),
            actions,
        });
    prop::collection::vec(one, 0..3)
}

/// Where a run's drivers account for what they did: what was acknowledged, the tallies, and
/// the run's store (to count the crashes that land during a control call).
#[derive(Clone, Copy)]
pub(super) struct Books<'a> {
    pub(super) acks: &'a super::driver::AckMap,
    pub(super) tally: &'a Tally,
    pub(super) dying: &'a crate::crash::Dying,
}

/// What schedule `k`'s driver does in one engine run, from where the run before it (a crashed
/// one) left off: `prior`.
pub(super) async fn drive(
    engine: &Engine,
    clock: &ManualClock,
    plan: &SchedulePlan,
    k: usize,
    prior: &Acked,
    books: Books<'_>,
) -> Result<(), cairn::Error> {
    let Books { acks, tally, dying } = books;
    let name = name(k);
    let key = ack_key(k);
    // Step 0 is the create; step i > 0 is action i - 1.
    let mut triggered = prior.triggered;
    // Deleted whole: it had ended (past its end) when the delete came.
    let mut gone = prior.gone;
    // The status of the schedule's live thread (it continues as new every TICKS_PER_RUN
    // rounds).
    let status =
        || async { Ok::<_, cairn::Error>(engine.schedule(&name).await?.map(|i| i.status)) };
    for i in prior.done..=plan.actions.len() {
        let dead_before = dying.dead();
        let in_flight = i == prior.done && prior.done > 0;
        let step = async {
            if i == 0 {
                engine.create_schedule(&name, plan.spec()).await?;
                bump(&tally.schedules);
                return Ok(());
            }
            match plan.actions[i - 1] {
                Action::Move(ms) => {
                    clock.set_ms(clock.now_ms() + ms);
                    bump(&tally.clock_moves);
                }
                Action::ToNextTick => to_next_tick(engine, clock, &name, tally).await?,
                Action::Pause => {
                    let moving = matches!(
                        status().await?,
                        Some(ThreadStatus::Sleeping | ThreadStatus::Running)
                    );
                    // It may pass its end between the look and the pause.
                    if moving && ended_or(engine.pause_schedule(&name).await, status().await?)? {
                        super::driver::ack(acks, &key, |a| a.pauses += 1);
                        bump(&tally.schedule_pauses);
                    }
                }
                Action::Unpause => {
                    if status().await? == Some(ThreadStatus::Paused) {
                        engine.resume_schedule(&name).await?;
                        super::driver::ack(acks, &key, |a| a.resumes += 1);
                        bump(&tally.schedule_resumes);
                    }
                }
                Action::Trigger => {
                    let found = others(engine.store().as_ref(), &name)?;
                    if in_flight && found > triggered {
                        // The trigger in flight at the crash made its thread: not asked again.
                        triggered = found;
                        bump(&tally.triggers_found_after_crash);
                    } else if gone || status().await? == Some(ThreadStatus::Cancelled) {
                        // Deleted, it starts nothing more; deleted whole, it is no more.
                        match engine.trigger_schedule(&name).await {
                            Err(cairn::Error::Invalid(_)) if !gone => bump(&tally.triggers_refused),
                            Err(cairn::Error::UnknownThread(_)) if gone => {
                                bump(&tally.triggers_refused);
                            }
                            other => {
                                let got = other.map(|h| h.id().to_string());
                                return Err(cairn::Error::Invalid(format!(
                                    "a trigger of deleted schedule {name} (whole: {gone}) \
                                     answered {got:?}"
                                )));
                            }
                        }
                    } else {
                        engine.trigger_schedule(&name).await?;
                        triggered += 1;
                        bump(&tally.triggered);
                    }
                }
                Action::Delete => match status().await? {
                    // The delete in flight at the crash found it ended and deleted it whole.
                    None if gone || (in_flight && plan.end.is_some()) => gone = true,
                    Some(s) if s.is_terminal() => {}
                    _ => {
                        if ended_or(engine.delete_schedule(&name).await, status().await?)? {
                            // It may end (past its end) between the look and the delete:
                            // then the delete takes it whole, and its name is free.
                            gone = status().await?.is_none();
                            if gone && plan.end.is_none() {
                                return Err(cairn::Error::Invalid(format!(
                                    "the delete of {name}, which has no end, deleted it whole"
                                )));
                            }
                            super::driver::ack(acks, &key, |a| a.deleted = true);
                            bump(&tally.schedule_deletes);
                        }
                    }
                },
            }
            Ok(())
        };
        // Which step failed: a CI log may hold nothing else of the case.
        step.await.map_err(|e| {
            let what =
                if i == 0 { "create".to_owned() } else { format!("{:?}", plan.actions[i - 1]) };
            cairn::Error::Invalid(format!("{name} driver, step {i} ({what}): {e}"))
        })?;
        super::driver::ack(acks, &key, |a| {
            a.done = i + 1;
            a.triggered = triggered;
            a.gone = gone;
        });
        if !dead_before && dying.dead() {
            bump(&tally.crashes_in_schedule);
        }
    }
    Ok(())
}

/// Whether a control call answered `result` took effect: false when it failed because the
/// schedule has ended since the driver looked (`now`: its status after the call).
fn ended_or(
    result: Result<(), cairn::Error>,
    now: Option<ThreadStatus>,
) -> Result<bool, cairn::Error> {
    match result {
        Ok(()) => Ok(true),
        Err(_) if now == Some(ThreadStatus::Completed) => Ok(false),
        Err(e) => Err(e),
    }
}

/// Every thread labelled with schedule `name` (its links, ticks and triggered threads), with its
/// status: what a failed trigger count prints.
fn schedule_threads(store: &dyn Store, name: &str) -> Vec<(String, ThreadStatus)> {
    let filter = cairn::storage::ThreadFilter::default().label(cairn::ScheduleSpec::LABEL, name);
    let page = cairn::storage::Page { limit: 1_000, offset: 0 };
    let listed = store.list_threads(&filter, page).wait().unwrap_or_default();
    listed.into_iter().map(|r| (r.id.to_string(), r.status)).collect()
}

/// Threads labelled with schedule `name` that no round started: the triggered ones.
fn others(store: &dyn Store, name: &str) -> Result<u64, cairn::Error> {
    Ok(check_schedule(store, name)?.map_or(0, |c| c.others.len() as u64))
}

/// Moves the clock to schedule `name`'s next tick; waits up to 250 ms for the round
/// that handles it (a paused or ended schedule has none).
async fn to_next_tick(
    engine: &Engine,
    clock: &ManualClock,
    name: &str,
    tally: &Tally,
) -> Result<(), cairn::Error> {
    let Some(info) = engine.schedule(name).await? else { return Ok(()) };
    let Some(next) = info.state.next_tick_ms else { return Ok(()) };
    clock.set_ms(next);
    bump(&tally.clock_moves);
    let waited = std::time::Instant::now();
    while waited.elapsed() < std::time::Duration::from_millis(250) {
        let Some(info) = engine.schedule(name).await? else { return Ok(()) };
        let moving = matches!(info.status, ThreadStatus::Sleeping | ThreadStatus::Running);
        if !moving || info.state.last_tick_ms.is_some_and(|t| t >= next) {
            bump(&tally.ticks_awaited);
            return Ok(());
        }
        tokio::time::sleep(std::time::Duration::from_millis(2)).await;
    }
    Ok(())
}

/// What is wrong with the schedules of `plan` in `store` after a run whose drivers
/// acknowledged `acks`; `at_crash`: the store died in the run (a trigger may have made its
/// thread unacknowledged, a round be in flight). Adds the checks' counters to `tally` when
/// `count`.
pub(super) fn problems(
    plans: &[SchedulePlan],
    store: &dyn Store,
    acks: &std::collections::BTreeMap<String, Acked>,
    at_crash: bool,
    tally: Option<&Tally>,
) -> Vec<String> {
    let mut out = Vec::new();
    for (k, plan) in plans.iter().enumerate() {
        let name = name(k);
        let acked = acks.get(&ack_key(k)).cloned().unwrap_or_default();
        let check: ScheduleCheck = match check_schedule(store, &name) {
            Ok(Some(c)) => c,
            Ok(None) if acked.done == 0 || acked.gone => continue,
            // Deleted whole by a delete in flight at the crash (it had ended).
            Ok(None)
                if at_crash
                    && plan.end.is_some()
                    && plan.actions.get(acked.done - 1) == Some(&Action::Delete) =>
            {
                continue;
            }
            Ok(None) => {
                out.push(format!("{name}: created (acknowledged), and gone"));
                continue;
            }
            Err(e) => {
                out.push(format!("{name}: {e}"));
                continue;
            }
        };
        out.extend(check.problems.iter().map(|p| format!("{name}: {p}")));
        if !check.problems.is_empty() {
            // The schedule's own logs: a CI log may hold nothing else of the case.
            let threads = schedule_threads(store, &name).into_iter().map(|(id, _)| id);
            let links = threads.filter(|id| cairn::ScheduleSpec::link_of(id).is_some());
            out.push(format!("{name}'s logs:\n{}", super::driver::logs(store, links)));
        }
        let found = check.others.len() as u64;
        let triggers_ok = if at_crash {
            (acked.triggered..=acked.triggered + 1).contains(&found)
        } else {
            found == acked.triggered
        };
        if !triggers_ok {
            out.push(format!(
                "{name}: {} triggers acknowledged, {found} triggered threads: {:?} (at the \
                 crash: {at_crash}; threads of the schedule: {:?})",
                acked.triggered,
                check.others,
                schedule_threads(store, &name)
            ));
        }
        if acked.deleted && !check.deleted {
            out.push(format!("{name}: its delete was acknowledged, and it runs on"));
        }
        // A link retention deleted took its pauses' events with it.
        let whole = check.links == check.continuations + 1;
        if whole && check.pauses < acked.pauses {
            out.push(format!(
                "{name}: {} pauses acknowledged, {} logged",
                acked.pauses, check.pauses
            ));
        }
        if let Some(t) = tally {
            t.schedule_continuations.fetch_add(check.continuations, Ordering::SeqCst);
            t.schedule_rounds.fetch_add(check.rounds, Ordering::SeqCst);
            t.ticks_started.fetch_add(check.ticks_started, Ordering::SeqCst);
            t.catch_up_ticks.fetch_add(check.catch_up_ticks, Ordering::SeqCst);
            t.ticks_skipped.fetch_add(check.skipped, Ordering::SeqCst);
            t.paused_skips.fetch_add(check.paused_skips, Ordering::SeqCst);
            t.triggered_checked.fetch_add(found, Ordering::SeqCst);
            if check.ended {
                bump(&t.schedules_ended);
            }
        }
    }
    out
}

/// What the schedule drivers of a crashed run (`before`) and of the resumed one (`after`)
/// acknowledged together.
pub(super) fn merge(
    before: &std::collections::BTreeMap<String, Acked>,
    after: &std::collections::BTreeMap<String, Acked>,
    schedules: usize,
) -> std::collections::BTreeMap<String, Acked> {
    (0..schedules)
        .map(|k| {
            let key = ack_key(k);
            let b = before.get(&key).cloned().unwrap_or_default();
            let a = after.get(&key).cloned().unwrap_or_default();
            // The resumed driver counts its triggers on from the crashed one's.
            let merged = Acked {
                done: b.done.max(a.done),
                triggered: if a.done > 0 { a.triggered } else { b.triggered },
                deleted: b.deleted || a.deleted,
                gone: b.gone || a.gone,
                pauses: b.pauses + a.pauses,
                resumes: b.resumes + a.resumes,
                ..Acked::default()
            };
            (key, merged)
        })
        .collect()
}
