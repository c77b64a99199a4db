//! Checks a schedule's history from the store alone (any backend): every round of its thread
//! (one step of `cairn.schedule`: wake at the next tick, start the ticks the catch-up policy
//! picks) is recomputed from the state before it and the clock reading it recorded, and the
//! threads it started are looked up. A schedule that continued as new is checked along its
//! chain of threads (`schedule:<name>`, `~1`, ...), each link's first state the last one's. A
//! link deleted since (the retention policy deletes completed links) leaves a gap: the ticks up
//! to the next stored link's first state are counted in [`ScheduleCheck::ticks_of_deleted_links`],
//! unchecked.
//!
//! Found wrong ([`ScheduleCheck::problems`]): a round that started other ticks than the policy
//! picks of the ticks due (the catch-up after a downtime or a pause included), or that woke
//! before its tick; a state that does not follow; a tick started in two rounds, or whose thread
//! is missing (so run the check before a retention pass could prune finished tick threads); a
//! tick outside the schedule's start and end; a tick thread created, or a start called, while
//! the schedule was paused or after it was deleted (log order, `lsn`, across the logs).
//!
//! The check may run beside an engine that runs the schedule. Its threads are listed before the
//! logs are read and again after: [`ScheduleCheck::others`] holds only threads of the first
//! list, so a tick started while the logs were read (its start recorded after the read) is not
//! taken for a triggered thread.

use std::collections::{BTreeMap, BTreeSet};

use cairn_storage::limits::READ_LIMIT_MAX;
use cairn_storage::{Page, Seq, Store, ThreadFilter, ThreadId, ThreadRecord, ThreadStatus};

use cairn::Error;
use cairn::event::Body;
use cairn::{CatchUp, ScheduleSpec, ScheduleState};
use cairn_core::drawn::Drawn;

/// What [`check_schedule`] found in a schedule's log and the threads it started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ScheduleCheck {
    /// Rounds completed (wake-ups that handled due ticks, or found the schedule ended).
    pub rounds: u64,
    /// Ticks started by completed rounds.
    pub ticks_started: u64,
    /// Ticks started by a round that had more than one due: missed ticks caught up.
    pub catch_up_ticks: u64,
    /// Due ticks the catch-up policy skipped.
    pub skipped: u64,
    /// Of those, skipped in a round during which the schedule had been paused.
    pub paused_skips: u64,
    /// Pauses recorded.
    pub pauses: u64,
    /// The schedule was deleted (its thread is Cancelled).
    pub deleted: bool,
    /// The schedule ended (past its end: its live thread completed).
    pub ended: bool,
    /// Threads of its chain stored (1 until it first continues as new; fewer than
    /// `continuations + 1` once retention deleted completed ones).
    pub links: u64,
    /// Times it continued as new: the live link's number (`schedule:<name>~<n>`).
    pub continuations: u64,
    /// Tick threads started by links deleted since (their rounds cannot be checked).
    pub ticks_of_deleted_links: u64,
    /// Thread ids started by a round not completed yet (a crash, or a delete, came in it).
    pub in_flight: Vec<String>,
    /// Threads labelled with the schedule that no round started: triggered by hand. Only
    /// those present before the logs were read (the check may run beside the engine).
    pub others: Vec<String>,
    /// What is wrong; empty when the history is right.
    pub problems: Vec<String>,
}

/// One step of the schedule thread as its log holds it.
#[derive(Default)]
struct Round {
    attempt: u32,
    clocks: Vec<u64>,
    /// Ids the start tool was called with, by call index (a call that ran but was not
    /// recorded as returned before a crash is recorded again when it runs again).
    starts: BTreeMap<u32, String>,
    update: Option<ScheduleState>,
}

/// Checks schedule `name`'s history in `store`; `None` when there is no such schedule. It
/// recomputes the rounds of the default overlap policy (`allow_all`) without jitter: a schedule
/// under another policy, or with jitter, starts or delays ticks this check does not model.
///
/// # Errors
/// Storage errors; [`Error::Codec`] when the schedule's log does not decode as one.
///
/// # Examples
/// ```
/// # async fn run() -> Result<(), Box<dyn std::error::Error>> {
/// use std::sync::Arc;
/// use cairn_testkit::{ManualClock, check_schedule};
/// use cairn::{END, Engine, Every, NodeOutput, Replace, START, ScheduleSpec, Workflow};
///
/// let wf = Workflow::<Replace<u64>>::builder("job", 1)
///     .node("n", |_s: Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(1)) })
///     .edge(START, "n")
///     .edge("n", END)
///     .build()?;
/// let dir = tempfile::tempdir()?;
/// let clock = ManualClock::new(1_000_000);
/// let engine = Engine::builder(dir.path().join("s.db"))
///     .clock(Arc::new(clock.clone()))
///     .workflow(&wf)
///     .open()
///     .await?;
/// let spec = ScheduleSpec::new("job", Every::Interval { ms: 1_000 }).input(serde_json::json!(0));
/// engine.create_schedule("each-second", spec).await?;
/// clock.advance_ms(3_000);
/// let check = check_schedule(engine.store().as_ref(), "each-second")?.expect("created");
/// assert!(check.problems.is_empty(), "{:?}", check.problems);
/// engine.shutdown().await;
/// # Ok(()) }
/// ```
pub fn check_schedule(store: &dyn Store, name: &str) -> Result<Option<ScheduleCheck>, Error> {
    // Listed before the logs are read: a thread in this list that no round read below
    // started is one no round started (its start call is recorded before it runs).
    let before: BTreeSet<String> =
        labelled(store, name)?.into_iter().map(|t| t.id.as_str().to_owned()).collect();
    let links = cairn::admin::links_wait(store, name)?;
    let Some(live) = links.last() else { return Ok(None) };
    let out = ScheduleCheck {
        deleted: live.status == ThreadStatus::Cancelled,
        ended: live.status == ThreadStatus::Completed,
        links: links.len() as u64,
        continuations: ScheduleSpec::link_of(live.id.as_str()).map_or(0, |l| l.1),
        ..ScheduleCheck::default()
    };
    let mut walk = Walk { out, ..Walk::default() };
    for (id, is_live, e) in link_events(store, &links, &live.id)? {
        let lsn = e.bookmark.lsn.0;
        let body = cairn::blocking::decode(store, e)?.body;
        walk.event(&id, is_live, lsn, body)?;
    }
    let Some(state) = walk.state.take() else {
        walk.out.problems.push(format!("{}: no thread_created event", live.id));
        return Ok(Some(walk.out));
    };
    walk.in_flight(&state, name);
    for (tick, lsn) in &walk.calls {
        if let Some(when) = walk.during(*lsn) {
            walk.out.problems.push(format!("start of {tick} called at lsn {lsn} {when}"));
        }
    }
    let present = walk.tick_threads(store, name, &state, &before)?;
    for tick in walk.started.keys() {
        if !present.contains(tick) {
            walk.out.problems.push(format!("tick {tick} was started and its thread is missing"));
        }
        if tick_ms(&state, tick).is_none() {
            let problem = format!("{tick} is not a tick of {name} between its start and end");
            walk.out.problems.push(problem);
        }
    }
    Ok(Some(walk.out))
}

/// The events of every link of a schedule, in link order: (link, whether it is the live link
/// `live`, event).
fn link_events(
    store: &dyn Store,
    links: &[ThreadRecord],
    live: &ThreadId,
) -> Result<Vec<(ThreadId, bool, cairn_storage::Event)>, Error> {
    let mut events = Vec::new();
    for link in links {
        let id = &link.id;
        let mut after = Seq(0);
        loop {
            let page = store.read_since(id, after, READ_LIMIT_MAX).wait()?;
            let full = page.len() == READ_LIMIT_MAX;
            after = page.last().map_or(after, |e| e.bookmark.seq);
            // Only the live link's end is the schedule's: the others ended continued as new.
            events.extend(page.into_iter().map(|e| (id.clone(), id == live, e)));
            if !full {
                break;
            }
        }
    }
    Ok(events)
}

/// What the walk over a schedule's links has seen so far.
#[derive(Default)]
struct Walk {
    out: ScheduleCheck,
    state: Option<ScheduleState>,
    rounds: BTreeMap<u64, Round>,
    /// Paused intervals [from, to) in lsn order, and the start of one still open.
    paused: Vec<(u64, u64)>,
    paused_since: Option<u64>,
    /// The deletion's lsn.
    ended_at: Option<u64>,
    /// Tick id -> (link, round step) of completed rounds.
    started: BTreeMap<String, (String, u64)>,
    /// (tick, lsn) of each start call.
    calls: Vec<(String, u64)>,
    /// A pause began or ended since the last completed round.
    paused_in_round: bool,
    /// Tick times (after, up to] the deleted links handled.
    gaps: Vec<(Option<u64>, Option<u64>)>,
    /// The number of the last link read.
    link_before: Option<u64>,
}

impl Walk {
    /// Folds `body`, at `lsn` of link `id` (`is_live`: the live link).
    fn event(&mut self, id: &ThreadId, is_live: bool, lsn: u64, body: Body) -> Result<(), Error> {
        let clocks = |values: &[serde_json::Value]| -> Vec<u64> {
            values.iter().filter_map(|v| Drawn::Clock.read(v).ok()?.as_u64()).collect()
        };
        let rounds = &mut self.rounds;
        match body {
            Body::ThreadCreated { input, .. } => self.created(id, input)?,
            Body::StatusChanged { from, to, .. } => self.status(from, to, is_live, lsn),
            Body::NodeStarted { step, attempt, .. }
            | Body::RetryScheduled { step, attempt, .. } => {
                open(rounds, step, attempt);
            }
            Body::TimerSet { step, values, .. } => {
                open(rounds, step, 0).clocks.extend(clocks(&values));
            }
            Body::ToolCalled { step, attempt, call, values, input, name, .. } => {
                let r = open(rounds, step, attempt);
                r.clocks.extend(clocks(&values));
                if name == "start" {
                    let id = input.as_str().unwrap_or_default().to_owned();
                    r.starts.insert(call, id.clone());
                    self.calls.push((id, lsn));
                }
            }
            Body::NodeCompleted { step, attempt, values, update, .. } => {
                let r = open(rounds, step, attempt);
                r.clocks.extend(clocks(&values));
                r.update = update.map(serde_json::from_value).transpose()?;
            }
            Body::StepCompleted { step, .. } => self.step_completed(id, step),
            _ => {}
        }
        Ok(())
    }

    /// The creation of link `id` from `input`: it follows the link before, from its state, or
    /// the links between were deleted (a gap).
    fn created(&mut self, id: &ThreadId, input: serde_json::Value) -> Result<(), Error> {
        let first: ScheduleState = serde_json::from_value(input)?;
        let n = ScheduleSpec::link_of(id.as_str()).map_or(0, |l| l.1);
        let follows = self.link_before.map_or(n == 0, |before| n == before + 1);
        self.link_before = Some(n);
        let state = &self.state;
        if !follows {
            self.gaps.push((state.as_ref().and_then(|s| s.last_tick_ms), first.last_tick_ms));
        } else if let Some(before) = state.as_ref().filter(|s| **s != first) {
            self.out.problems.push(format!("{id} starts from {first:?}, not {before:?}"));
        }
        // The rounds of the link before, all completed, are done with.
        self.rounds.clear();
        self.state = Some(first);
        Ok(())
    }

    /// A status change at `lsn`: a pause begins or ends, or the live link ends.
    fn status(&mut self, from: ThreadStatus, to: ThreadStatus, is_live: bool, lsn: u64) {
        if to == ThreadStatus::Paused {
            self.out.pauses += 1;
            self.paused_since.get_or_insert(lsn);
        } else if from == ThreadStatus::Paused
            && let Some(since) = self.paused_since.take()
        {
            self.paused.push((since, lsn));
        }
        if to == ThreadStatus::Paused || from == ThreadStatus::Paused {
            self.paused_in_round = true;
        }
        if to.is_terminal() && is_live {
            self.ended_at = Some(lsn);
        }
    }

    /// The end of round `step` of link `id`: checked, and its state the next.
    fn step_completed(&mut self, id: &ThreadId, step: u64) {
        let r = self.rounds.remove(&step).unwrap_or_default();
        let Some(s) = self.state.as_ref() else {
            self.out.problems.push(format!("{id}: step {step} before the thread's creation"));
            return;
        };
        let paused = std::mem::take(&mut self.paused_in_round);
        let next = round(s, &r, step, paused, &mut self.out);
        for tick in r.starts.values() {
            if let Some((link, first)) = self.started.insert(tick.clone(), (id.to_string(), step)) {
                self.out.problems.push(format!(
                    "tick {tick} started in step {first} of {link} and again in step {step} of {id}"
                ));
            }
        }
        self.state = Some(next);
    }

    /// The starts of rounds not completed: in flight, and ticks of schedule `name`.
    fn in_flight(&mut self, state: &ScheduleState, name: &str) {
        for r in self.rounds.values() {
            for tick in r.starts.values() {
                if !self.started.contains_key(tick) {
                    self.out.in_flight.push(tick.clone());
                }
                if tick_ms(state, tick).is_none() {
                    self.out
                        .problems
                        .push(format!("in-flight start {tick} is not a tick of {name}"));
                }
            }
        }
    }

    /// Why something at `lsn` should not have happened: the schedule was paused or had ended.
    fn during(&self, lsn: u64) -> Option<String> {
        if let Some((from, to)) = self.paused.iter().find(|(from, to)| *from < lsn && lsn < *to) {
            return Some(format!("while the schedule was paused (lsn {from}..{to})"));
        }
        if let Some(since) = self.paused_since.filter(|since| *since < lsn) {
            return Some(format!("while the schedule was paused (since lsn {since})"));
        }
        self.ended_at.filter(|end| *end < lsn).map(|end| format!("after its end at lsn {end}"))
    }

    /// Checks the threads labelled with schedule `name` (`before`: those listed before the
    /// logs were read); returns their ids.
    fn tick_threads(
        &mut self,
        store: &dyn Store,
        name: &str,
        state: &ScheduleState,
        before: &BTreeSet<String>,
    ) -> Result<BTreeSet<String>, Error> {
        let mut present = BTreeSet::new();
        for t in labelled(store, name)? {
            let tid = t.id.as_str().to_owned();
            if *t.workflow.id != *state.spec.workflow {
                self.out.problems.push(format!(
                    "{tid} runs {}, the schedule {}",
                    t.workflow.id, state.spec.workflow
                ));
            }
            if self.started.contains_key(&tid) || self.out.in_flight.contains(&tid) {
                let first = store.read_since(&t.id, Seq(0), 1).wait()?;
                if let Some(when) = first.first().and_then(|e| self.during(e.bookmark.lsn.0)) {
                    self.out.problems.push(format!("tick thread {tid} created {when}"));
                }
            } else if let Some(ms) = tick_ms(state, &tid)
                && self
                    .gaps
                    .iter()
                    .any(|(after, upto)| after.is_none_or(|a| ms > a) && Some(ms) <= *upto)
            {
                self.out.ticks_of_deleted_links += 1;
            } else if before.contains(&tid) {
                self.out.others.push(tid.clone());
            }
            present.insert(tid);
        }
        Ok(present)
    }
}

/// The threads labelled with schedule `name` but its links: its ticks and triggered threads.
fn labelled(store: &dyn Store, name: &str) -> Result<Vec<ThreadRecord>, Error> {
    let filter = ThreadFilter {
        labels: vec![(ScheduleSpec::LABEL.into(), name.into())],
        ..ThreadFilter::default()
    };
    let page = Page { limit: READ_LIMIT_MAX, offset: 0 };
    let mut listed = store.list_threads(&filter, page).wait()?;
    listed.retain(|t| &*t.workflow.id != ScheduleSpec::WORKFLOW);
    Ok(listed)
}

/// The round of `step`, opened at `attempt` (0: the current one); a new attempt starts afresh.
fn open(rounds: &mut BTreeMap<u64, Round>, step: u64, attempt: u32) -> &mut Round {
    let r = rounds.entry(step).or_default();
    if attempt > r.attempt {
        *r = Round { attempt, ..Round::default() };
    }
    r
}

/// The tick time of thread id `tick` if it is `<name>@<ms>` for a tick of the schedule's rule
/// between its start and end.
fn tick_ms(s: &ScheduleState, tick: &str) -> Option<u64> {
    let ms = tick.strip_prefix(&format!("{}@", s.name))?.parse::<u64>().ok()?;
    let from = s.spec.start_ms.unwrap_or(s.anchor_ms);
    let ticks = ms >= from
        && s.spec.end_ms.is_none_or(|end| ms < end)
        && s.spec.every.next_after(ms.saturating_sub(1), s.anchor_ms).ok()? == Some(ms);
    ticks.then_some(ms)
}

/// Checks round `r` (step `step`, during which the schedule was `paused` for a while) against
/// the state `s` before it; returns the state after it.
fn round(
    s: &ScheduleState,
    r: &Round,
    step: u64,
    paused: bool,
    out: &mut ScheduleCheck,
) -> ScheduleState {
    out.rounds += 1;
    let Some(update) = r.update.clone() else {
        out.problems.push(format!("step {step}: no state update recorded"));
        return s.clone();
    };
    if s.spec.every.next_after(0, s.anchor_ms).is_err() {
        out.problems.push(format!("step {step}: the spec's rule does not parse"));
        return update;
    }
    let next_after = |after_ms| s.spec.every.next_after(after_ms, s.anchor_ms).ok().flatten();
    let end = s.spec.end_ms;
    let before_end = |t: &u64| end.is_none_or(|end| *t < end);
    let after = s.last_tick_ms.unwrap_or(s.anchor_ms.saturating_sub(1));
    let starts: Vec<&str> = r.starts.values().map(String::as_str).collect();
    let Some(next) = next_after(after).filter(before_end) else {
        let want = ScheduleState { next_tick_ms: None, ..s.clone() };
        if !starts.is_empty() || update != want {
            out.problems.push(format!(
                "step {step}: the schedule had ended, and started {starts:?}, state {update:?}"
            ));
        }
        return update;
    };
    let Some(&read) = r.clocks.last() else {
        out.problems.push(format!("step {step}: no clock reading recorded"));
        return update;
    };
    if read < next {
        out.problems.push(format!("step {step}: handled the tick at {next} at {read}, before it"));
    }
    let now = read.max(next);
    // The ticks due in (after, now] before the end, the latest CatchUp::TICKS_PER_WAKE_MAX.
    let mut due = Vec::new();
    let mut cursor = after;
    let upcoming = loop {
        match next_after(cursor).filter(before_end) {
            Some(t) if t <= now => {
                due.push(t);
                cursor = t;
            }
            other => break other,
        }
    };
    let due = &due[due.len().saturating_sub(CatchUp::TICKS_PER_WAKE_MAX)..];
    let keep = match s.spec.catch_up {
        CatchUp::Skip => usize::from(due.last().is_some_and(|t| now - t <= CatchUp::GRACE_MS)),
        CatchUp::One => due.len().min(1),
        CatchUp::All { max } => due.len().min(max as usize),
    };
    let picks = &due[due.len() - keep..];
    let want: Vec<String> =
        picks.iter().map(|t| ScheduleSpec::tick_thread_id(&s.name, *t)).collect();
    if starts != want {
        out.problems.push(format!(
            "step {step}: woke at {now} with {due:?} due under {:?}; started {starts:?}, the \
             policy picks {want:?}",
            s.spec.catch_up
        ));
    }
    let want_state = ScheduleState {
        last_tick_ms: due.last().copied().or(s.last_tick_ms),
        next_tick_ms: upcoming,
        started: s.started + picks.len() as u64,
        skipped: s.skipped + (due.len() - picks.len()) as u64,
        ..s.clone()
    };
    if update != want_state {
        out.problems.push(format!("step {step}: state {update:?}, want {want_state:?}"));
    }
    out.ticks_started += starts.len() as u64;
    if due.len() > 1 {
        out.catch_up_ticks += starts.len() as u64;
    }
    let skipped = (due.len() - picks.len()) as u64;
    out.skipped += skipped;
    if paused {
        out.paused_skips += skipped;
    }
    update
}
