//! The workflow every schedule runs as (`cairn.schedule`): one thread per schedule, a node that
//! sleeps durably until the next tick, then starts the ticks due (as the catch-up policy says)
//! through a recorded tool call, and loops. Built on the engine's own guarantees, as Temporal
//! builds its schedules on a workflow: the timer survives crashes, a recorded start never runs
//! again, and a start that ran but was not recorded (a crash between the two) runs again with
//! the same thread id, `<schedule>@<tick ms>`, which returns the thread the first one made. So a
//! crash at a tick neither loses nor doubles it. Pausing the schedule is pausing its thread;
//! deleting it is cancelling it.
//!
//! A schedule runs for ever as a chain of threads: every [`ScheduleSpec::TICKS_PER_RUN`] rounds its
//! thread continues as new (`schedule:<name>` -> `schedule:<name>~1` -> ...), carrying its
//! [`ScheduleState`] as the successor's input, in the commit of the round's last tick. No
//! link's log outgrows those rounds, and no link nears its loop bound (`schedule_links.rs`
//! finds the live link from the name).

use std::sync::{Arc, Weak};

use cairn_dsl::{Ctx, END, NodeError, NodeOutput, START, State, Workflow};
use serde::{Deserialize, Serialize};

use super::schedule_overlap::{Overlap, Runs};
use super::schedule_ticks::{CatchUp, Every, Rule, due};
use crate::config::StartOptions;
use crate::exec::shell::Shell;

impl crate::api::builder::EngineBuilder {
    /// Rounds a schedule's thread runs before it continues as new: `n` clamped to
    /// 1..=[`ScheduleSpec::TICKS_PER_RUN`] (the default, and the loop bound a link is built with).
    /// Smaller chains: for tests that cross links in a few ticks.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), cairn::Error> {
    /// let engine = cairn::Engine::builder("cairn.db").schedule_ticks_per_run(10).open().await?;
    /// # Ok(()) }
    /// ```
    pub fn schedule_ticks_per_run(mut self, n: u32) -> Self {
        self.config.schedule_ticks_per_run = n.clamp(1, ScheduleSpec::TICKS_PER_RUN);
        self
    }
}

/// What a schedule starts, and when.
///
/// # Examples
///
/// ```
/// use cairn::{CatchUp, Every, ScheduleSpec};
/// let spec = ScheduleSpec::new("reports", Every::Cron { expr: "0 9 * * MON-FRI".into(), tz: "Europe/Berlin".into() })
///     .input(serde_json::json!({ "tenant": "acme" }))
///     .catch_up(CatchUp::One);
/// assert_eq!(spec.workflow, "reports");
/// ```
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleSpec {
    /// The workflow each tick starts (registered on the engine).
    pub workflow: String,
    /// The input of each thread it starts.
    pub input: serde_json::Value,
    /// When it ticks.
    pub every: Every,
    /// No tick before this time (ms since the epoch; also the anchor of intervals).
    pub start_ms: Option<u64>,
    /// No tick at or after this time: the schedule then ends (its thread completes).
    pub end_ms: Option<u64>,
    /// Which missed ticks are started after a downtime or a pause.
    pub catch_up: CatchUp,
    /// The queue each tick's thread waits in, and its concurrency key there
    /// ([`ScheduleSpec::on_queue`]); `None`: ticks run at once.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub queue: Option<(String, String)>,
    /// What a tick does while the previous run is still running (`schedule_overlap.rs`).
    #[serde(default, skip_serializing_if = "Overlap::is_default")]
    pub overlap: Overlap,
    /// Each tick is delayed by a random amount in `[0, jitter_ms)`, drawn from the schedule
    /// thread's context (recorded: a replay or resume draws the same); 0: none. The run's id
    /// keeps the tick's own time.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub jitter_ms: u64,
}

fn is_zero(n: &u64) -> bool {
    *n == 0
}

impl ScheduleSpec {
    /// The workflow id of schedule threads: the engine's own workflow, registered beside an
    /// application's and listed apart from them (an unknown workflow's error names only the
    /// application's).
    pub const WORKFLOW: &'static str = "cairn.schedule";

    /// The version of [`ScheduleSpec::WORKFLOW`] new schedules run: one visit of `tick` per
    /// round, at most [`ScheduleSpec::TICKS_PER_RUN`]. Version 1 (a loop bound of
    /// `LOOP_BOUND_MAX`) stays registered for the schedules stored before; its threads continue
    /// as new too.
    pub const WORKFLOW_VERSION: u32 = 2;

    /// The label every thread a schedule starts carries, naming the schedule.
    pub const LABEL: &'static str = "schedule";

    /// Rounds (wake-ups at a tick: one tick, or the ticks a catch-up starts together) a
    /// schedule's thread runs before it continues as new: each link of the chain handles at
    /// most this many, a few thousand events, whether or not bounded history prunes it.
    pub const TICKS_PER_RUN: u32 = 1_000;

    /// The thread id the tick at `tick_ms` of schedule `schedule` starts: `<schedule>@<tick_ms>`.
    ///
    /// # Examples
    /// ```
    /// assert_eq!(cairn::ScheduleSpec::tick_thread_id("nightly", 1_000), "nightly@1000");
    /// ```
    pub fn tick_thread_id(schedule: &str, tick_ms: u64) -> String {
        format!("{schedule}@{tick_ms}")
    }

    /// How the id of every thread a trigger of `schedule` starts begins
    /// ([`Engine::trigger_schedule`](crate::Engine::trigger_schedule): then its time and 16 hex digits); no tick's id does.
    pub fn triggered_prefix(schedule: &str) -> String {
        format!("{schedule}@now-")
    }

    /// A spec starting `workflow` with a `null` input, from now on, no end, [`CatchUp::Skip`].
    pub fn new(workflow: impl Into<String>, every: Every) -> ScheduleSpec {
        ScheduleSpec {
            workflow: workflow.into(),
            input: serde_json::Value::Null,
            every,
            start_ms: None,
            end_ms: None,
            catch_up: CatchUp::Skip,
            queue: None,
            overlap: Overlap::AllowAll,
            jitter_ms: 0,
        }
    }

    /// With this overlap policy.
    #[must_use]
    pub fn overlap(mut self, overlap: Overlap) -> ScheduleSpec {
        self.overlap = overlap;
        self
    }

    /// Each tick delayed by a random amount below `jitter_ms`.
    #[must_use]
    pub fn jitter_ms(mut self, jitter_ms: u64) -> ScheduleSpec {
        self.jitter_ms = jitter_ms;
        self
    }

    /// Starts each tick's thread on `queue` with concurrency key `key` (`docs/queues.md`): a
    /// tick is then a thread in line, run when the queue's limits allow.
    #[must_use]
    pub fn on_queue(mut self, queue: impl Into<String>, key: impl Into<String>) -> ScheduleSpec {
        self.queue = Some((queue.into(), key.into()));
        self
    }

    /// The start options of the tick thread `id` of schedule `name`.
    pub(crate) fn start_options(&self, id: String, name: &str) -> StartOptions {
        let options = StartOptions::id(id).label(ScheduleSpec::LABEL, name);
        match &self.queue {
            Some((queue, key)) => options.on_queue(queue.clone()).key(key.clone()),
            None => options,
        }
    }

    /// With this input for every thread it starts.
    #[must_use]
    pub fn input(mut self, input: serde_json::Value) -> ScheduleSpec {
        self.input = input;
        self
    }

    /// With this catch-up policy.
    #[must_use]
    pub fn catch_up(mut self, catch_up: CatchUp) -> ScheduleSpec {
        self.catch_up = catch_up;
        self
    }

    /// Between these times (ms since the epoch; either may be `None`).
    #[must_use]
    pub fn between(mut self, start_ms: Option<u64>, end_ms: Option<u64>) -> ScheduleSpec {
        self.start_ms = start_ms;
        self.end_ms = end_ms;
        self
    }
}

/// The state of a schedule's thread (what `cairn schedule list` shows).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ScheduleState {
    /// The schedule's name.
    pub name: String,
    /// Its spec.
    pub spec: ScheduleSpec,
    /// Intervals count from here (the start, or the creation time).
    pub anchor_ms: u64,
    /// The latest tick handled (started or skipped).
    pub last_tick_ms: Option<u64>,
    /// The next tick; `None` once the schedule has ended.
    pub next_tick_ms: Option<u64>,
    /// Ticks started.
    pub started: u64,
    /// Ticks skipped by the catch-up policy, or by the overlap policy (`skip`, or a waiting
    /// tick replaced under `buffer_one`).
    pub skipped: u64,
    /// The latest run started, under an overlap policy other than `allow_all` (which keeps no
    /// trace of its runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_run: Option<String>,
    /// The tick waiting under `buffer_one` for the running one to end.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub buffered: Option<u64>,
}

impl ScheduleState {
    /// Whether the schedule has more to do: a tick to come, or one waiting to start.
    fn goes_on(&self) -> bool {
        self.next_tick_ms.is_some() || self.buffered.is_some()
    }
}

impl State for ScheduleState {
    type Update = ScheduleState;
    fn apply(&mut self, update: ScheduleState) {
        *self = update;
    }
}

/// Version `version` (1 or [`ScheduleSpec::WORKFLOW_VERSION`]) of the schedule workflow, starting
/// threads on the engine of `shell`. They differ in the loop bound only (the fingerprint).
pub(crate) fn workflow(shell: Weak<Shell>, version: u32) -> Workflow<ScheduleState> {
    // One visit per round; a link runs at most ScheduleSpec::TICKS_PER_RUN of them. Version 1 was
    // built when a schedule was one thread, bounded by LOOP_BOUND_MAX rounds.
    let bound = match version {
        1 => cairn_dsl::limits::LOOP_BOUND_MAX,
        _ => ScheduleSpec::TICKS_PER_RUN,
    };
    Workflow::<ScheduleState>::builder(ScheduleSpec::WORKFLOW, version)
        .node("tick", move |s: Arc<ScheduleState>, ctx: Ctx| {
            let shell = shell.clone();
            async move { tick(&s, &ctx, &shell).await }
        })
        .edge(START, "tick")
        .loop_bound("tick", bound)
        .route("tick", |s: &ScheduleState| if s.goes_on() { "tick" } else { END }, ["tick", END])
        .build()
        .expect("the schedule workflow is well formed")
}

async fn tick(
    s: &ScheduleState,
    ctx: &Ctx,
    shell: &Weak<Shell>,
) -> Result<NodeOutput<ScheduleState>, NodeError> {
    let rule = Rule::new(&s.spec.every).map_err(|e| NodeError::fatal(e.to_string()))?;
    let after = s.last_tick_ms.unwrap_or(s.anchor_ms.saturating_sub(1));
    let next =
        rule.next_after(after, s.anchor_ms).filter(|t| s.spec.end_ms.is_none_or(|end| *t < end));
    if next.is_none() && s.buffered.is_none() {
        return Ok(NodeOutput::update(ScheduleState { next_tick_ms: None, ..s.clone() }));
    }
    // Drawn each round a tick is to come, recorded: a replay sleeps as long.
    let jitter = match (next, s.spec.jitter_ms) {
        (Some(_), j) if j > 0 => ctx.random_u64() % j,
        _ => 0,
    };
    // A waiting tick is looked at again now and then; else the thread sleeps until its tick.
    let poll = s.buffered.map(|_| ctx.now_ms() + crate::limits::SCHEDULE_BUFFER_POLL_MS);
    let wake = [next.map(|n| n + jitter), poll].into_iter().flatten().min().unwrap_or(0);
    if wake > ctx.now_ms() {
        // Until the time itself: a duration from the reading above would be counted from the
        // sleep's own, later, reading and wake past it.
        ctx.sleep_until_ms(wake).await?;
    }
    let runs = Runs { ctx, shell };
    let mut updated = s.clone();
    runs.start_buffered(&mut updated).await?;
    let read = ctx.now_ms();
    match next {
        Some(next) if read >= next + jitter => {
            // The tick's time as the policies see it: the jitter is a delay, not lateness.
            let now = read.saturating_sub(jitter).max(next);
            let (ticks, next_tick_ms) = due(&rule, s.anchor_ms, after, now, s.spec.end_ms);
            let start = s.spec.catch_up.pick(&ticks, now);
            updated.last_tick_ms = ticks.last().copied().or(s.last_tick_ms);
            updated.next_tick_ms = next_tick_ms;
            updated.skipped += (ticks.len() - start.len()) as u64;
            runs.start_ticks(&mut updated, &start).await?;
        }
        Some(_) => {} // woken to look at the waiting tick
        None => updated.next_tick_ms = None,
    }
    // The link's last round: the successor goes on from this state, created in this commit.
    let per_run =
        shell.upgrade().map_or(ScheduleSpec::TICKS_PER_RUN, |s| s.config.schedule_ticks_per_run);
    if updated.goes_on() && ctx.step() >= u64::from(per_run) {
        ctx.continue_as_new(&updated)?;
    }
    Ok(NodeOutput::update(updated))
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Weak};

    use cairn_dsl::{END, NodeOutput, START, Workflow};

    use super::{ScheduleSpec, ScheduleState};

    /// The fingerprint version 1 had when it was the only version: schedules stored then
    /// recorded it, and restore refuses a thread whose workflow's fingerprint changed.
    const V1_FINGERPRINT: &str = "e14bacd22e2778d71c05813277da91667ff4154d539e45bb0359543f3e937401";

    #[test]
    fn version_1_keeps_the_fingerprint_stored_schedules_recorded() {
        // The graph as version 1 was declared before schedules continued as new.
        let before = Workflow::<ScheduleState>::builder(ScheduleSpec::WORKFLOW, 1)
            .node("tick", |s: Arc<ScheduleState>, _ctx| async move {
                Ok(NodeOutput::update((*s).clone()))
            })
            .edge(START, "tick")
            .loop_bound("tick", cairn_dsl::limits::LOOP_BOUND_MAX)
            .route(
                "tick",
                |s: &ScheduleState| if s.next_tick_ms.is_some() { "tick" } else { END },
                ["tick", END],
            )
            .build()
            .unwrap();
        assert_eq!(before.fingerprint().to_string(), V1_FINGERPRINT);
        let v1 = super::workflow(Weak::new(), 1);
        assert_eq!(v1.fingerprint().to_string(), V1_FINGERPRINT);
        let v2 = super::workflow(Weak::new(), ScheduleSpec::WORKFLOW_VERSION);
        assert_ne!(v2.fingerprint().to_string(), V1_FINGERPRINT);
    }
}
