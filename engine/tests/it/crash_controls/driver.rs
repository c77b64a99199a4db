//! The driver of one engine run of a case: starts the threads and answers what each waits for
//! (input, a timer, a budget stop, the planned cancel or pause), removes it once it has ended
//! if its plan says so (deleted, or by a retention pass), recording what the engine
//! acknowledged.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::Poll;

use cairn::clock::{Clock, ManualClock};
use cairn::dsl::{Budgets, Workflow};
use cairn::event::Body;
use cairn::storage::limits::READ_LIMIT_MAX;
use cairn::storage::{DeleteOptions, Store, ThreadId};
use cairn::thread_ctx::Waiting;
use cairn::{Durability, Engine, Seq, StartOptions, ThreadStatus};
use proptest::test_runner::TestCaseError;
use tokio::sync::Notify;

use super::gates::Gates;
use super::schedule::Books;
use super::{Acc, Db, Limit, NEVER_MS, Plan, Remove, STUCK_SECS, Signals, answer, strict, tid};
use crate::crash::Dying;

/// Controls the drivers carried out, over every case (the summary line).
#[derive(Default)]
pub(super) struct Tally {
    pub(super) cancels: AtomicU64,
    pub(super) inputs: AtomicU64,
    pub(super) sleeps: AtomicU64,
    pub(super) budgets: AtomicU64,
    /// Explicit pauses acknowledged at their boundary.
    pub(super) pauses: AtomicU64,
    /// Pauses answered by a budget stop inside the gate node (before its step boundary).
    pub(super) pauses_by_budget: AtomicU64,
    /// Threads paused while they waited for input or slept (then resumed into the wait).
    pub(super) parked_pauses: AtomicU64,
    /// Inputs answered and timers fired for fan-out branches.
    pub(super) branch_controls: AtomicU64,
    /// Signals sent (acknowledged).
    pub(super) signals: AtomicU64,
    /// Signals received, counted in the logs after the resumed runs.
    pub(super) signals_received: AtomicU64,
    /// Starts on the queue acknowledged.
    pub(super) queued: AtomicU64,
    /// Queued threads that ran (a `Running` event in their logs after the resumed runs).
    pub(super) admitted: AtomicU64,
    /// Threads cancelled, and deleted, while they waited in line (acknowledged).
    pub(super) in_line_cancels: AtomicU64,
    pub(super) in_line_deletes: AtomicU64,
    /// Threads with a control in line that one run admitted first and the other did not.
    pub(super) in_line_raced: AtomicU64,
    /// Starts under another id with a held dedup key that returned the holder.
    pub(super) dedup_hits: AtomicU64,
    /// Resumed runs whose queue limits were checked from the log, the most queued threads seen
    /// running at once (in all, and of one key), and how many reached their limit.
    pub(super) queue_checks: AtomicU64,
    pub(super) max_running: AtomicU64,
    pub(super) max_running_per_key: AtomicU64,
    pub(super) reached_global: AtomicU64,
    pub(super) reached_per_key: AtomicU64,
    /// Threads deleted by hand (acknowledged).
    pub(super) deletes: AtomicU64,
    /// Retention passes run, and the threads they deleted.
    pub(super) retention_passes: AtomicU64,
    pub(super) retention_deleted: AtomicU64,
    /// Passes run while a thread was parked (waiting for input or paused), which it survived.
    pub(super) retention_kept_parked: AtomicU64,
    /// Threads found deleted after a crash (not started again).
    pub(super) removed_at_crash: AtomicU64,
    /// Crashes that came while a deletion or a retention pass was in flight.
    pub(super) crashes_in_removal: AtomicU64,
    /// `cancel` returned Ok while the thread still ran (it ends Cancelled later).
    pub(super) cancel_early: AtomicU64,
    /// `cancel` returned Ok and the thread stayed parked (asked again).
    pub(super) cancel_lost: AtomicU64,
    /// `set_budgets` refused a thread reported Paused (asked again).
    pub(super) budget_races: AtomicU64,
    /// Crashes that came while a control call (send_input, set_budgets and resume, cancel)
    /// was in flight.
    pub(super) crashes_in_control: AtomicU64,
    /// Cases run, and what their checks found (the summary line).
    pub(super) cases: AtomicU64,
    pub(super) locks: AtomicU64,
    /// Threads Paused (by a budget or a pause) when the store died: checked to stay Paused
    /// over the reopen until resumed.
    pub(super) paused_at_crash: AtomicU64,
    pub(super) diverged: AtomicU64,
    pub(super) repeated: AtomicU64,
    pub(super) lost: AtomicU64,
    pub(super) budget_drift: AtomicU64,
    /// Schedules created, and what their drivers did (acknowledged): clock moves (by some
    /// seconds, or to a next tick, of which `ticks_awaited` saw the round), pauses, resumes,
    /// triggers (made, found made by one in flight at the crash, refused once deleted),
    /// deletes, crashes during a schedule's control call, and downtime jumps of the clock.
    pub(super) schedules: AtomicU64,
    pub(super) clock_moves: AtomicU64,
    pub(super) ticks_awaited: AtomicU64,
    pub(super) schedule_pauses: AtomicU64,
    pub(super) schedule_resumes: AtomicU64,
    pub(super) triggered: AtomicU64,
    pub(super) triggers_found_after_crash: AtomicU64,
    pub(super) triggers_refused: AtomicU64,
    pub(super) schedule_deletes: AtomicU64,
    pub(super) crashes_in_schedule: AtomicU64,
    /// Schedule threads that continued as new (links past each schedule's first), checked.
    pub(super) schedule_continuations: AtomicU64,
    pub(super) downtime_jumps: AtomicU64,
    /// What `check_schedule` counted after the resumed runs: rounds, ticks started (of them,
    /// caught up), ticks skipped by the policy (of them, in a round with a pause), triggered
    /// threads, schedules ended.
    pub(super) schedule_rounds: AtomicU64,
    pub(super) ticks_started: AtomicU64,
    pub(super) catch_up_ticks: AtomicU64,
    pub(super) ticks_skipped: AtomicU64,
    pub(super) paused_skips: AtomicU64,
    pub(super) triggered_checked: AtomicU64,
    pub(super) schedules_ended: AtomicU64,
}

pub(super) fn bump(c: &AtomicU64) {
    c.fetch_add(1, Ordering::SeqCst);
}

/// What the crashing run saw acknowledged for a thread: after the crash none of it may be
/// missing from the log.
#[derive(Debug, Default, Clone)]
pub(super) struct Acked {
    pub(super) started: bool,
    /// The highest step the step hook reported.
    pub(super) step: u64,
    pub(super) inputs: u64,
    pub(super) budgets_set: u64,
    pub(super) resumes: u64,
    pub(super) pauses: u64,
    /// The thread's last seq each time the driver resumed it from Paused.
    pub(super) resumed_at: Vec<u64>,
    pub(super) cancelled: bool,
    /// Signals whose send was acknowledged.
    pub(super) signals: u64,
    /// Its deletion by hand was acknowledged.
    pub(super) deleted: bool,
    /// Of a schedule's driver: the steps done (the create, then its actions), and the triggers
    /// that made a thread.
    pub(super) done: usize,
    pub(super) triggered: u64,
    /// Of a schedule's driver: its delete found it ended (past its end) and deleted it whole.
    pub(super) gone: bool,
}

pub(super) type AckMap = Arc<Mutex<BTreeMap<String, Acked>>>;

pub(super) fn ack(acks: &AckMap, thread: &str, f: impl FnOnce(&mut Acked)) {
    f(acks.lock().unwrap().entry(thread.to_owned()).or_default());
}

/// One engine run of a case.
pub(super) struct Run<'a> {
    engine: Engine,
    clock: ManualClock,
    plan: &'a Plan,
    signals: Vec<Arc<Notify>>,
    /// A node at its thread's pause point waits here for the driver.
    pause_signals: Vec<Arc<Notify>>,
    gates: &'a Gates,
    acks: AckMap,
    tally: &'a Tally,
    /// The run's store, to count the crashes that land during a control call.
    dying: Arc<Dying>,
    /// Per thread, what its driver waits for now (printed when a run is stuck).
    phases: Mutex<Vec<String>>,
    /// Per thread, whether this run paused it in a wait already (`pause_parked`).
    paused_parked: Mutex<Vec<bool>>,
    /// Per thread, whether this run probed its dedup key already.
    probed: Mutex<Vec<bool>>,
    /// Threads this run leaves alone (deleted before a crash).
    skip: &'a BTreeSet<usize>,
    /// What the run before this one (a crashed one) acknowledged: where the schedule drivers
    /// go on from.
    prior: &'a BTreeMap<String, Acked>,
}

/// A control call in flight: if the store dies before it is dropped, the crash landed during
/// the control.
struct Busy<'a> {
    dying: &'a Dying,
    dead_before: bool,
    /// What a crash during it counts as.
    counter: &'a AtomicU64,
}

impl Drop for Busy<'_> {
    fn drop(&mut self) {
        if !self.dead_before && self.dying.dead() {
            bump(self.counter);
        }
    }
}

impl Run<'_> {
    /// Records what thread `t`'s driver waits for now.
    fn at(&self, t: usize, what: impl Into<String>) {
        self.phases.lock().unwrap()[t] = what.into();
    }

    /// What every driver waits for now, for a stuck run's failure message.
    fn phases(&self) -> String {
        let phases = self.phases.lock().unwrap();
        phases.iter().enumerate().map(|(t, p)| format!("{}: {p}\n", tid(t))).collect()
    }

    fn busy(&self) -> Busy<'_> {
        let counter = &self.tally.crashes_in_control;
        Busy { dying: &self.dying, dead_before: self.dying.dead(), counter }
    }

    /// A deletion or a retention pass in flight.
    fn busy_removing(&self) -> Busy<'_> {
        let counter = &self.tally.crashes_in_removal;
        Busy { dying: &self.dying, dead_before: self.dying.dead(), counter }
    }

    /// Whether `e` says thread `t` is gone where a retention pass of the case may have
    /// deleted it once it ended.
    fn gone(&self, e: &cairn::Error) -> bool {
        let cairn::Error::UnknownThread(id) = e else { return false };
        let absent = ThreadId::new(id.clone())
            .is_ok_and(|id| matches!(self.engine.store().thread(&id).wait(), Ok(None)));
        self.plan.retention() && absent
    }

    /// One retention pass (period 0: every finished thread is due), for thread `t`'s driver.
    async fn retention_pass(&self, t: usize) -> Result<(), cairn::Error> {
        let _busy = self.busy_removing();
        self.at(t, "retention pass in flight");
        let report = self.engine.retention_pass().await?;
        bump(&self.tally.retention_passes);
        self.tally.retention_deleted.fetch_add(report.deleted, Ordering::SeqCst);
        Ok(())
    }

    /// A retention pass while thread `t` is `parked` in a wait only its driver ends (input, a
    /// pause): the pass must leave it there, as it was.
    async fn pass_beside_parked(&self, t: usize, parked: ThreadStatus) -> Result<(), cairn::Error> {
        self.retention_pass(t).await?;
        let id = ThreadId::new(tid(t)).unwrap();
        let now = self.engine.store().thread(&id).wait()?.map(|r| r.status);
        if now != Some(parked) {
            self.gates.violation(format!(
                "{}: parked {parked:?}, and {now:?} after a retention pass",
                tid(t)
            ));
        }
        bump(&self.tally.retention_kept_parked);
        Ok(())
    }

    /// Removes thread `t`, which has ended, as its plan says.
    async fn remove(&self, t: usize) -> Result<(), cairn::Error> {
        match self.plan.threads[t].remove {
            None => Ok(()),
            Some(Remove::Delete) => {
                let _busy = self.busy_removing();
                self.at(t, "delete in flight");
                // None: a retention pass of the case deleted it already.
                if self.engine.delete(&tid(t), DeleteOptions::default()).await?.is_some() {
                    ack(&self.acks, &tid(t), |a| a.deleted = true);
                    bump(&self.tally.deletes);
                }
                Ok(())
            }
            Some(Remove::Retention) => {
                self.retention_pass(t).await?;
                let id = ThreadId::new(tid(t)).unwrap();
                if let Some(r) = self.engine.store().thread(&id).wait()? {
                    self.gates.violation(format!(
                        "{}: ended {:?}, and kept by a retention pass with period 0",
                        tid(t),
                        r.status
                    ));
                }
                Ok(())
            }
        }
    }

    /// Asks for the planned cancel of thread `t`; true once the thread is Cancelled. `cancel`
    /// may return Ok before that, in two ways (both engine defects, see the report):
    /// - early: the status watch it waits on still holds Created (a runner's start records
    ///   Running without notifying watchers), so it returns at once while the thread runs on
    ///   to Cancelled; the driver waits for the status (`cancel_early`);
    /// - lost: the thread's runner has committed a park but not yet let go, so the cancel goes
    ///   to a runner on its way out and is dropped; the thread stays parked and the driver asks
    ///   again (`cancel_lost`).
    async fn cancel(&self, t: usize) -> Result<bool, cairn::Error> {
        let _busy = self.busy();
        self.at(t, "cancel in flight");
        self.engine.cancel(&tid(t), "planned cancel").await?;
        let id = ThreadId::new(tid(t)).unwrap();
        let status = match self.engine.store().thread(&id).wait()? {
            Some(r) => r.status,
            // Cancelled, then deleted by another driver's retention pass (a case with
            // retention): only a finished thread is deleted.
            None if self.plan.retention() => ThreadStatus::Cancelled,
            None => return Err(cairn::Error::UnknownThread(tid(t))),
        };
        if status != ThreadStatus::Cancelled {
            assert!(
                !strict(),
                "{}: cancel acknowledged, status still {status:?}; logs:\n{}",
                tid(t),
                dump(self.engine.store().as_ref(), self.plan)
            );
            if matches!(status, ThreadStatus::Running | ThreadStatus::Created) {
                bump(&self.tally.cancel_early);
            } else {
                bump(&self.tally.cancel_lost);
            }
            tokio::task::yield_now().await;
            return Ok(false);
        }
        ack(&self.acks, &tid(t), |a| a.cancelled = true);
        bump(&self.tally.cancels);
        Ok(true)
    }

    /// The planned pause of thread `t`, whose node waits at its gate: asks for the pause (the
    /// request is registered on the first poll), opens the gate, and waits until the thread is
    /// Paused, which must be at the gate node's step boundary.
    async fn pause(&self, t: usize) -> Result<(), cairn::Error> {
        let _busy = self.busy();
        self.at(t, "pause in flight");
        let (engine, name) = (self.engine.clone(), tid(t));
        let mut asked = Box::pin(async move { engine.pause(&name).await });
        let first = futures::poll!(asked.as_mut());
        self.gates.open(&tid(t));
        match first {
            Poll::Ready(r) => r?,
            Poll::Pending => asked.await?,
        }
        let id = ThreadId::new(tid(t)).unwrap();
        let Some(status) = self.engine.store().thread(&id).wait()?.map(|r| r.status) else {
            // Paused threads are never deleted: the pause did not hold.
            self.gates.violation(format!("{}: pause acknowledged, the thread is gone", tid(t)));
            return Ok(());
        };
        let mut next = None;
        for e in self.engine.store().read_since(&id, Seq(0), READ_LIMIT_MAX).wait()? {
            if let Body::StepCompleted { next: n, .. } =
                cairn::blocking::decode(self.engine.store().as_ref(), e)?.body
            {
                next = Some(n);
            }
        }
        if status == ThreadStatus::Paused && !self.paused_by_request(t)? {
            // A tool-call budget ran out inside the gate node first: the thread stopped there,
            // which answers the pause (no explicit pause is recorded, none is acknowledged).
            bump(&self.tally.pauses_by_budget);
            return Ok(());
        }
        let i = self.plan.threads[t].pause_at.expect("a planned pause");
        let want = self.plan.after(i);
        if status != ThreadStatus::Paused || next.as_ref() != Some(&want) {
            self.gates.violation(format!(
                "{}: pause at c{i} acknowledged with status {status:?}, next step {next:?} \
                 (want Paused before {want:?}); logs:\n{}",
                tid(t),
                dump(self.engine.store().as_ref(), self.plan)
            ));
        }
        ack(&self.acks, &tid(t), |a| a.pauses += 1);
        bump(&self.tally.pauses);
        Ok(())
    }

    /// True the first time in this run that thread `t` is found waiting or sleeping.
    fn first_parked(&self, t: usize) -> bool {
        !std::mem::replace(&mut self.paused_parked.lock().unwrap()[t], true)
    }

    /// Pauses thread `t`, which waits in status `parked`: it must be Paused at once, with
    /// nothing else recorded (no input taken, no timer fired).
    async fn pause_parked(&self, t: usize, parked: ThreadStatus) -> Result<(), cairn::Error> {
        let _busy = self.busy();
        self.at(t, "pause of a parked thread in flight");
        self.engine.pause(&tid(t)).await?;
        let id = ThreadId::new(tid(t)).unwrap();
        let Some(status) = self.engine.store().thread(&id).wait()?.map(|r| r.status) else {
            self.gates.violation(format!("{}: pause acknowledged, the thread is gone", tid(t)));
            return Ok(());
        };
        let last = self.engine.store().read_since(&id, Seq(0), READ_LIMIT_MAX).wait()?.pop();
        let last =
            last.map(|e| cairn::blocking::decode(self.engine.store().as_ref(), e)).transpose()?;
        let paused_from_wait = matches!(
            last.map(|r| r.body),
            Some(Body::StatusChanged { from, to: ThreadStatus::Paused, .. }) if from == parked
        );
        if status != ThreadStatus::Paused || !paused_from_wait {
            self.gates.violation(format!(
                "{}: pause while {parked:?} acknowledged with status {status:?}; logs:\n{}",
                tid(t),
                dump(self.engine.store().as_ref(), self.plan)
            ));
        }
        ack(&self.acks, &tid(t), |a| a.pauses += 1);
        bump(&self.tally.parked_pauses);
        Ok(())
    }

    /// Whether the thread's latest stop was an explicit pause (else a budget stop).
    fn paused_by_request(&self, t: usize) -> Result<bool, cairn::Error> {
        let id = ThreadId::new(tid(t)).unwrap();
        let mut explicit = false;
        for e in self.engine.store().read_since(&id, Seq(0), READ_LIMIT_MAX).wait()? {
            if let Body::StatusChanged { to: ThreadStatus::Paused, reason, .. } =
                cairn::blocking::decode(self.engine.store().as_ref(), e)?.body
            {
                explicit = reason.starts_with("paused");
            }
        }
        Ok(explicit)
    }

    /// Raises the budgets of a thread stopped by one. The handle may report Paused before the
    /// runner that paused it has let go (a fresh watch reads the stored status), and
    /// `set_budgets` refuses a thread with a runner: retried, counted as `budget_races`.
    async fn raise_budgets(&self, t: usize) -> Result<(), cairn::Error> {
        self.at(t, "raising budgets");
        loop {
            match self.engine.set_budgets(&tid(t), Budgets::default()).await {
                Ok(()) => return Ok(()),
                Err(e @ cairn::Error::WrongStatus { status: ThreadStatus::Paused, .. }) => {
                    assert!(!strict(), "{}: {e}", tid(t));
                    bump(&self.tally.budget_races);
                    tokio::task::yield_now().await;
                }
                Err(e) => return Err(e),
            }
        }
    }

    /// Waits until the log of thread `t` grows past `last` (or its hang signal asks for the
    /// planned cancel).
    async fn progress(&self, t: usize, last: u64) -> Result<(), cairn::Error> {
        self.at(t, format!("waiting for an event after seq {last}"));
        let handle = match self.engine.thread(&tid(t)).await {
            Ok(h) => h,
            Err(e) if self.gone(&e) => return Ok(()),
            Err(e) => return Err(e),
        };
        let mut events = handle.events(last)?;
        let id = ThreadId::new(tid(t)).unwrap();
        // A thread a retention pass deleted once it ended has no more events to wait for: the
        // driver looks again now and then (only in cases with retention).
        let deleted = async {
            loop {
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
                // Awaited, not waited on: a blocking wait here stalls the select (and the
                // case's timeout) for as long as the read takes.
                if matches!(self.engine.store().thread(&id).await, Ok(None)) {
                    return;
                }
            }
        };
        tokio::select! {
            r = events.next() => r.map(|_| ()),
            () = self.signals[t].notified() => self.cancel(t).await.map(|_| ()),
            () = self.pause_signals[t].notified() => self.pause(t).await,
            () = deleted, if self.plan.retention() => Ok(()),
        }
    }

    /// [`Run::drive_to_end`]; in a case with retention, a thread another driver's pass
    /// deleted once it ended is done with, wherever this driver meets its absence.
    async fn drive(&self, t: usize) -> Result<ThreadStatus, cairn::Error> {
        match self.drive_to_end(t).await {
            Err(e) if self.gone(&e) => Ok(ThreadStatus::Completed),
            other => other,
        }
    }

    /// Drives thread `t` to its end, answering whatever it waits for: input, a timer (the
    /// clock moves to it), a budget stop (raised and resumed), or the planned cancel.
    async fn drive_to_end(&self, t: usize) -> Result<ThreadStatus, cairn::Error> {
        let id = ThreadId::new(tid(t)).unwrap();
        // A retention pass of another thread's driver may delete this one once it has ended:
        // then it is done (reported Completed; only errors are looked at).
        let h = match self.engine.thread(&tid(t)).await {
            Ok(h) => h,
            Err(e) if self.gone(&e) => return Ok(ThreadStatus::Completed),
            Err(e) => return Err(e),
        };
        if let Some(ended) = self.in_line(t).await? {
            return Ok(ended);
        }
        loop {
            // The handle's status watch moves once a runner has let go of the thread, so a
            // parked status seen here is safe to act on, except when the watch was made from
            // the stored status meanwhile (see `cancel` and `raise_budgets`).
            self.at(t, "waiting for a status other than Running");
            let watched = tokio::select! {
                o = h.wait() => match o {
                    Ok(o) => o.status,
                    Err(e) if self.gone(&e) => return Ok(ThreadStatus::Completed),
                    Err(e) => return Err(e),
                },
                () = self.signals[t].notified() => {
                    self.cancel(t).await?;
                    continue;
                }
                () = self.pause_signals[t].notified() => {
                    self.pause(t).await?;
                    continue;
                }
            };
            // `wait` reports the stored status: Running means the watch it waited on was stale
            // (a timer or an input woke the thread meanwhile): wait for the log to move.
            let Some(record) = self.engine.store().thread(&id).wait()? else {
                if self.plan.retention() {
                    return Ok(ThreadStatus::Completed);
                }
                return Err(cairn::Error::UnknownThread(tid(t)));
            };
            let last = record.last.map_or(0, |b| b.seq.0);
            if matches!(record.status, ThreadStatus::Running | ThreadStatus::Created) {
                self.progress(t, last).await?;
                continue;
            }
            if record.status != watched {
                // Parked again since `wait` read the store (its log may not move any more):
                // wait for the watch, which moves once the runner has let go.
                tokio::task::yield_now().await;
                continue;
            }
            match watched {
                ThreadStatus::Completed | ThreadStatus::Cancelled => {
                    self.at(t, format!("ended {watched:?}"));
                    return Ok(watched);
                }
                ThreadStatus::WaitingInput | ThreadStatus::Sleeping => {
                    let wf = self.engine.workflow_of(&id).await?;
                    let ctx =
                        cairn::blocking::restore(self.engine.store().as_ref(), &wf, &id, None)?;
                    let signal = matches!(ctx.meta.waiting, Some(Waiting::Signal { .. }));
                    let (node, until) = match ctx.meta.waiting {
                        Some(Waiting::Input { task, .. } | Waiting::Signal { task, .. }) => {
                            (task.node, None)
                        }
                        Some(Waiting::Timer { task, until_ms }) => (task.node, Some(until_ms)),
                        None => {
                            // Woken between the record read and the restore.
                            self.progress(t, last).await?;
                            continue;
                        }
                    };
                    if self.plan.retention()
                        && watched == ThreadStatus::WaitingInput
                        && !signal
                        && until.is_none()
                    {
                        self.pass_beside_parked(t, watched).await?;
                    }
                    let i: usize = node[1..].parse().unwrap();
                    let branch = node.starts_with('w');
                    if branch {
                        bump(&self.tally.branch_controls);
                    }
                    let cancel_here = !branch && self.plan.threads[t].cancel_at == Some(i);
                    // A sleeper is paused only when it is alone and its time has not come:
                    // another thread's driver, or a schedule's, moves the shared clock, and a
                    // timer already due (the clock moved before a crash) fires at once, either
                    // waking it under the pause.
                    let alone = self.plan.threads.len() == 1
                        && self.plan.schedules.iter().all(|s| !s.moves_the_clock());
                    let due = until.is_some_and(|u| u <= self.clock.now_ms());
                    // A thread sent its signals at the start may be parked in `recv` with its
                    // signal there: its runner's look after the park wakes it at once, racing
                    // a pause (which would then land at a step boundary, not in the wait).
                    let waking = signal && self.plan.threads[t].early_signals;
                    let pausable = match watched {
                        ThreadStatus::WaitingInput => !waking,
                        _ => alone && !due,
                    };
                    if !cancel_here
                        && pausable
                        && self.plan.threads[t].pause_parked
                        && self.first_parked(t)
                    {
                        self.pause_parked(t, watched).await?;
                        continue; // Paused: the next round resumes it into its wait
                    }
                    if !signal && until.is_none() && watched == ThreadStatus::WaitingInput {
                        self.probe_dedup(t).await?;
                    }
                    if cancel_here {
                        if !self.cancel(t).await? {
                            continue; // nothing was written: ask again
                        }
                    } else if let Some(until) = until {
                        self.clock.set_ms(until);
                        bump(&self.tally.sleeps);
                    } else if signal {
                        let j = self.plan.signal_nodes().iter().position(|&k| k == i);
                        self.send_signals(t, j.expect("a signal node") + 1).await?;
                    } else {
                        let _busy = self.busy();
                        self.at(t, format!("send_input to {node} in flight"));
                        self.engine.send_input(&tid(t), answer(&node, t)).await?;
                        ack(&self.acks, &tid(t), |a| a.inputs += 1);
                        bump(&self.tally.inputs);
                    }
                }
                ThreadStatus::Paused => {
                    if self.plan.retention() {
                        self.pass_beside_parked(t, watched).await?;
                    }
                    self.probe_dedup(t).await?;
                    let _busy = self.busy();
                    let explicit = self.paused_by_request(t)?;
                    if !explicit {
                        self.raise_budgets(t).await?;
                        ack(&self.acks, &tid(t), |a| a.budgets_set += 1);
                    }
                    self.at(t, "resume in flight");
                    self.engine.resume(&tid(t)).await?;
                    ack(&self.acks, &tid(t), |a| {
                        a.resumes += 1;
                        a.resumed_at.push(last);
                    });
                    if !explicit {
                        bump(&self.tally.budgets);
                    }
                }
                other => {
                    self.at(t, format!("ended {other:?}"));
                    return Ok(other);
                }
            }
            self.progress(t, last).await?;
        }
    }

    /// The planned control of queued thread `t` in line, if its driver finds it waiting there:
    /// cancelled (deleted, forced, when its plan deletes it). Returns how it ended, or `None`
    /// (no such control, or the thread was admitted first: driven as any other).
    async fn in_line(&self, t: usize) -> Result<Option<ThreadStatus>, cairn::Error> {
        if !self.plan.threads[t].queued.is_some_and(|q| q.in_line) {
            return Ok(None);
        }
        let id = ThreadId::new(tid(t)).unwrap();
        if self.engine.store().thread(&id).wait()?.map(|r| r.status) != Some(ThreadStatus::Queued) {
            return Ok(None);
        }
        if self.plan.threads[t].remove == Some(Remove::Delete) {
            let _busy = self.busy_removing();
            self.at(t, "delete in line in flight");
            let force = DeleteOptions { force: true };
            if self.engine.delete(&tid(t), force).await?.is_some() {
                ack(&self.acks, &tid(t), |a| a.deleted = true);
                bump(&self.tally.in_line_deletes);
            }
            // Admitted between the look and the delete, a runner may wait in the node at the
            // pause point for a pause nobody asks for now: let it reach its step boundary,
            // where its next batch is fenced (or a graceful shutdown waits for it forever).
            self.gates.open(&tid(t));
            return Ok(Some(ThreadStatus::Cancelled));
        }
        let _busy = self.busy();
        self.at(t, "cancel in line in flight");
        if let Err(e) = self.engine.cancel(&tid(t), "cancelled in line").await {
            // Admitted since the look, and ended before the cancel came: nothing to cancel.
            let now = self.engine.store().thread(&id).wait()?.map(|r| r.status);
            return if now.is_some_and(|s| s.is_terminal()) { Ok(None) } else { Err(e) };
        }
        let status = match self.engine.store().thread(&id).wait()?.map(|r| r.status) {
            // Cancelled, then deleted by another driver's retention pass (a case with
            // retention): only a finished thread is deleted.
            None if self.plan.retention() => Some(ThreadStatus::Cancelled),
            status => status,
        };
        if status != Some(ThreadStatus::Cancelled) {
            self.gates.violation(format!("{}: cancel in line acknowledged, {status:?}", tid(t)));
        }
        ack(&self.acks, &tid(t), |a| a.cancelled = true);
        bump(&self.tally.in_line_cancels);
        Ok(Some(ThreadStatus::Cancelled))
    }

    /// Once a run, while queued thread `t` holding its dedup key is parked where only its
    /// driver moves it on: a start under another id with the same key must return `t`, and
    /// create nothing.
    async fn probe_dedup(&self, t: usize) -> Result<(), cairn::Error> {
        let Some(q) = self.plan.threads[t].queued.filter(|q| q.dedup) else { return Ok(()) };
        if std::mem::replace(&mut self.probed.lock().unwrap()[t], true) {
            return Ok(());
        }
        let _busy = self.busy();
        self.at(t, "dedup probe in flight");
        let again = super::queue::options(StartOptions::id(super::queue::probe_id(t)), Some(q), t);
        let answer = self.engine.start_json("ctl", Acc::default(), again).await?;
        let probe = ThreadId::new(super::queue::probe_id(t)).unwrap();
        if answer.id().as_str() != tid(t) || self.engine.store().thread(&probe).wait()?.is_some() {
            self.gates.violation(format!(
                "{}: a start with its held dedup key answered {}",
                tid(t),
                answer.id()
            ));
        }
        bump(&self.tally.dedup_hits);
        Ok(())
    }

    /// Sends thread `t` the signals of its first `upto` signal nodes that its inbox lacks (the
    /// inbox is the record of what was sent, also across a crash), in order.
    async fn send_signals(&self, t: usize, upto: usize) -> Result<(), cairn::Error> {
        let id = ThreadId::new(tid(t)).unwrap();
        let nodes = self.plan.signal_nodes();
        let mut have = self.engine.store().signals(&id, 0, READ_LIMIT_MAX).wait()?.len();
        while have < upto {
            let node = format!("c{}", nodes[have]);
            let _busy = self.busy();
            self.at(t, format!("signal for {node} in flight"));
            self.engine.signal(&tid(t), super::SIGNAL, answer(&node, t)).await?;
            ack(&self.acks, &tid(t), |a| a.signals += 1);
            bump(&self.tally.signals);
            have += 1;
        }
        Ok(())
    }

    async fn start_and_drive(
        &self,
    ) -> Result<Vec<Result<ThreadStatus, cairn::Error>>, cairn::Error> {
        for (t, tp) in self.plan.threads.iter().enumerate() {
            if self.skip.contains(&t) {
                continue;
            }
            let budgets = tp.budget.map(|l| match l {
                Limit::Steps(n) => Budgets { max_steps: Some(n), ..Budgets::default() },
                Limit::ToolCalls(n) => Budgets { max_tool_calls: Some(n), ..Budgets::default() },
            });
            let opts = StartOptions { budgets, ..StartOptions::id(tid(t)) };
            let opts = super::queue::options(opts, tp.queued, t);
            // Idempotent: after a crash this finds the thread if it was created.
            self.at(t, "start in flight");
            let started = self.engine.start_json("ctl", Acc::default(), opts).await?;
            if started.id().as_str() != tid(t) {
                // Its dedup key is its own: nothing else may hold it.
                self.gates.violation(format!("{}: started as {}", tid(t), started.id()));
            }
            ack(&self.acks, &tid(t), |a| a.started = true);
            if tp.queued.is_some() {
                bump(&self.tally.queued);
            }
            if tp.early_signals {
                self.send_signals(t, self.plan.signal_nodes().len()).await?;
            }
        }
        let drivers =
            (0..self.plan.threads.len()).filter(|t| !self.skip.contains(t)).map(|t| async move {
                let status = self.drive(t).await?;
                self.remove(t).await?;
                Ok(status)
            });
        let schedules = self.plan.schedules.iter().enumerate().map(|(k, sp)| {
            let prior = self.prior.get(&super::schedule::ack_key(k)).cloned().unwrap_or_default();
            async move {
                let books = Books { acks: &self.acks, tally: self.tally, dying: &self.dying };
                super::schedule::drive(&self.engine, &self.clock, sp, k, &prior, books).await
            }
        });
        let (ended, schedules) = futures::join!(
            futures::future::join_all(drivers),
            futures::future::join_all(schedules)
        );
        for r in schedules {
            r?;
        }
        if self.plan.retention() && ended.iter().all(Result::is_ok) {
            // Every thread has ended: the last pass removes those still there.
            self.retention_pass(0).await?;
        }
        Ok(ended)
    }
}

/// What the nodes of a run call back into (replaced for every run).
#[derive(Clone, Copy)]
pub(super) struct Hooks<'a> {
    pub(super) signals: &'a Signals,
    pub(super) gates: &'a Gates,
}

/// A case as each of its runs sees it: its workflow, its plan, the clock the run moves, and
/// what its nodes call back into.
#[derive(Clone, Copy)]
pub(super) struct Case<'a> {
    pub(super) wf: &'a Workflow<Acc>,
    pub(super) plan: &'a Plan,
    pub(super) clock: &'a ManualClock,
    pub(super) hooks: Hooks<'a>,
}

/// Runs a case's plan on database `db`: to the end, or with `crash_after` until the
/// store dies after that many appends, leaving the threads of `skip` alone, the schedule
/// drivers going on from what `prior` acknowledged. Returns the
/// appends made and what was acknowledged.
pub(super) async fn run(
    db: &Db,
    case: Case<'_>,
    crash_after: Option<i64>,
    tally: &Tally,
    skip: &BTreeSet<usize>,
    prior: &BTreeMap<String, Acked>,
) -> Result<(u64, BTreeMap<String, Acked>), TestCaseError> {
    let Case { wf, plan, clock, hooks } = case;
    // Before the open: recovery may resume a thread straight into its hang node.
    let Hooks { signals, gates } = hooks;
    let hang_signals = signals.reset(plan.threads.len());
    let dying = Arc::new(Dying::new(db.open(Durability::None), crash_after));
    let pause_signals = gates.reset(plan.threads.len(), Some(dying.clone()));
    let engine = db
        .tune(Engine::with_store(dying.clone()))
        .workflow(wf)
        .workflow(&super::schedule::tick_workflow())
        // Schedules continue as new every few rounds: the crashes and controls cross links.
        .schedule_ticks_per_run(super::schedule::TICKS_PER_RUN)
        .queue(super::queue::QUEUE, plan.queue.queue_limits())
        .seed(5)
        .concurrency(2)
        .clock(Arc::new(clock.clone()))
        .cancel_grace_ms(50)
        // Passes only when a driver asks (`Engine::retention_pass`): the background one is
        // due after any time the drivers move the clock to.
        .retention(cairn::RetentionPolicy::after_ms(0).every_ms(NEVER_MS))
        .open()
        .await
        .unwrap();
    let acks = AckMap::default();
    let hook_acks = acks.clone();
    engine.on_step(Arc::new(move |thread, step, _| {
        ack(&hook_acks, thread.as_str(), |a| a.step = a.step.max(step));
    }));
    let r = Run {
        engine: engine.clone(),
        clock: clock.clone(),
        plan,
        signals: hang_signals,
        pause_signals,
        gates,
        acks: acks.clone(),
        tally,
        dying: dying.clone(),
        phases: Mutex::new(vec!["not started".to_owned(); plan.threads.len()]),
        paused_parked: Mutex::new(vec![false; plan.threads.len()]),
        probed: Mutex::new(vec![false; plan.threads.len()]),
        skip,
        prior,
    };
    let stuck = std::time::Duration::from_secs(STUCK_SECS);
    let first_error = |res: Vec<Result<ThreadStatus, cairn::Error>>| {
        res.into_iter().enumerate().find_map(|(t, r)| r.err().map(|e| format!("{}: {e}", tid(t))))
    };
    let failure = if crash_after.is_some() {
        // Until the store dies, or the end when the crash point lies past it. Errors are
        // expected once the store died (every driver then ends with one), not before.
        let outcome = tokio::time::timeout(stuck, async {
            tokio::select! {
                () = dying.died.notified() => None,
                r = r.start_and_drive() => Some(r),
            }
        })
        .await;
        match outcome {
            Err(_) => Some(stuck_message(&r)),
            Ok(Some(Err(e))) if !dying.dead() => Some(format!("start: {e}")),
            Ok(Some(Ok(res))) if !dying.dead() => first_error(res),
            Ok(_) => None,
        }
    } else {
        match tokio::time::timeout(stuck, r.start_and_drive()).await {
            Err(_) => Some(stuck_message(&r)),
            Ok(Err(e)) => Some(format!("start: {e}")),
            Ok(Ok(res)) => first_error(res),
        }
    };
    let stop = async {
        // A stuck run may have a node waiting for a cancel: a graceful shutdown would wait too.
        if crash_after.is_some() || failure.is_some() {
            engine.crash().await;
        } else {
            engine.shutdown().await;
        }
    };
    if tokio::time::timeout(std::time::Duration::from_secs(STUCK_SECS), stop).await.is_err() {
        return Err(TestCaseError::fail(format!(
            "engine did not stop (crash_after {crash_after:?})"
        )));
    }
    let appends = dying.appends.load(Ordering::SeqCst);
    drop(r);
    drop(engine);
    drop(dying);
    gates.detach();
    if let Some(f) = failure {
        return Err(TestCaseError::fail(format!("run with crash_after {crash_after:?}: {f}")));
    }
    let acks = acks.lock().unwrap().clone();
    Ok((appends, acks))
}

/// The failure message of a stuck run: where each driver waits, and the logs.
fn stuck_message(r: &Run<'_>) -> String {
    format!(
        "stuck; the drivers:\n{}the logs:\n{}",
        r.phases(),
        dump(r.engine.store().as_ref(), r.plan)
    )
}

/// Every thread's log and status, one event a line (for a stuck case's failure message).
pub(super) fn dump(store: &dyn Store, plan: &Plan) -> String {
    logs(store, (0..plan.threads.len()).map(tid))
}

/// The logs and statuses of threads `ids`, one event a line, each with its lsn.
pub(super) fn logs(store: &dyn Store, ids: impl IntoIterator<Item = String>) -> String {
    let mut out = String::new();
    for id in ids {
        let id = ThreadId::new(id).unwrap();
        let status = store.thread(&id).wait().ok().flatten().map(|r| r.status);
        out.push_str(&format!("{id} ({status:?}):\n"));
        for e in store.read_since(&id, Seq(0), READ_LIMIT_MAX).wait().unwrap_or_default() {
            let lsn = e.bookmark.lsn.0;
            let body = cairn::blocking::decode(store, e).map(|r| format!("{:?}", r.body));
            out.push_str(&format!("  {lsn} {}\n", body.unwrap_or_else(|e| e.to_string())));
        }
    }
    out
}
