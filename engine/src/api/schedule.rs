//! Durable schedules: create, list, pause, resume, trigger and delete (`cairn schedule ...`).
//! Each schedule is a thread of the built-in workflow [`SCHEDULE_WORKFLOW`] with the id
//! `schedule:<name>` (see `schedule_flow.rs` for why a crash at a tick neither loses nor
//! doubles it).

use cairn_storage::{Page, ThreadFilter, ThreadId, ThreadRecord, ThreadStatus};

use super::engine::Engine;
use super::handle::ThreadHandle;
use super::schedule_flow::{SCHEDULE_LABEL, SCHEDULE_WORKFLOW, ScheduleSpec, ScheduleState};
use super::schedule_ticks::Rule;
use crate::config::RecoveryPolicy;
use crate::config::StartOptions;
use crate::coord::Due;
use crate::core::status::Transition;
use crate::core::thread_ctx::Waiting;
use crate::error::Error;
use crate::exec::drive::spawn_drive;
use crate::exec::start;

/// Schedules one listing returns at most.
pub const SCHEDULES_LIST_MAX: usize = 10_000;

/// A schedule as stored: its state and whether it runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ScheduleInfo {
    /// Its name.
    pub name: String,
    /// Its thread's status: `sleeping` or `running` while it runs, `paused`, `cancelled` once
    /// deleted, `completed` once past its end.
    pub status: ThreadStatus,
    /// What it starts and when, and what it has done.
    pub state: ScheduleState,
}

/// The thread id of schedule `name`.
fn thread_of(name: &str) -> String {
    format!("schedule:{name}")
}

/// Checks schedule `name` and `spec` as far as they go without an engine: the name, when it
/// ticks (the cron expression, the time zone, a zero interval), an end before the start.
///
/// # Errors
/// [`Error::Invalid`] naming what is wrong.
pub(crate) fn check(name: &str, spec: &ScheduleSpec) -> Result<Rule, Error> {
    if name.is_empty()
        || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
    {
        return Err(Error::Invalid(format!(
            "schedule name {name:?}: use letters, digits, '-', '_' and '.'"
        )));
    }
    if let (Some(start), Some(end)) = (spec.start_ms, spec.end_ms)
        && end <= start
    {
        return Err(Error::Invalid(format!("schedule ends ({end}) before it starts ({start})")));
    }
    Rule::new(&spec.every)
}

impl Engine {
    /// Registers the schedule workflow, starting threads on this engine.
    pub(crate) fn register_schedules(&self) -> Result<(), Error> {
        self.register(&super::schedule_flow::workflow(std::sync::Arc::downgrade(&self.shell)))
    }

    /// Creates schedule `name` (letters, digits, `-`, `_`, `.`): from now on, each tick starts
    /// `spec.workflow` as thread `<name>@<tick ms>`, labelled `schedule=<name>`. Creating a
    /// schedule that exists with the same spec returns it; with another spec is an error.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad name or spec (the cron expression, the time zone, an unknown
    /// workflow, an end before the start) or a name taken by another spec; storage errors.
    pub async fn create_schedule(
        &self,
        name: &str,
        spec: ScheduleSpec,
    ) -> Result<ScheduleInfo, Error> {
        let rule = check(name, &spec)?;
        let target = self.shell.registry.latest(&spec.workflow, None)?;
        // Checked now, not at the first tick: a schedule whose every start would fail is refused.
        target.state_from_json(&spec.input).map_err(|e| {
            Error::Invalid(format!("schedule input is not a valid state of {}: {e}", target.id()))
        })?;
        if let Some(existing) = self.schedule(name).await? {
            if existing.state.spec == spec {
                return Ok(existing);
            }
            return Err(Error::Invalid(format!(
                "schedule {name:?} exists with another spec: delete it first"
            )));
        }
        let anchor_ms = spec.start_ms.unwrap_or_else(|| self.shell.clock.now_ms());
        let next_tick_ms = rule
            .next_after(anchor_ms.saturating_sub(1), anchor_ms)
            .filter(|t| spec.end_ms.is_none_or(|end| *t < end));
        let state = ScheduleState {
            name: name.to_owned(),
            spec,
            anchor_ms,
            last_tick_ms: None,
            next_tick_ms,
            started: 0,
            skipped: 0,
        };
        let options = StartOptions::id(thread_of(name)).label(SCHEDULE_LABEL, name);
        if self.runs_schedules() {
            self.start(SCHEDULE_WORKFLOW, &state, options).await?;
        } else {
            // Written Created, not driven: an engine that runs schedules drives it from its open
            // (recovery) or from `run_schedules`; this one would leave its first tick half done
            // when it closes.
            let wf = self.shell.registry.latest(SCHEDULE_WORKFLOW, None)?;
            let id = self.start_id(&options)?;
            let input = serde_json::to_value(&state)?;
            start::create(&self.shell, self.new_thread((&wf, &id), input, &options)).await?;
        }
        self.schedule(name).await?.ok_or_else(|| Error::UnknownThread(thread_of(name)))
    }

    /// Schedule `name`, if it exists.
    ///
    /// # Errors
    /// Storage errors; a schedule thread whose state does not read.
    pub async fn schedule(&self, name: &str) -> Result<Option<ScheduleInfo>, Error> {
        let id = ThreadId::new(thread_of(name))?;
        let Some(record) = self.shell.store.thread(&id).await? else { return Ok(None) };
        if record.workflow.id != SCHEDULE_WORKFLOW {
            return Err(Error::Invalid(format!("thread {id} is not a schedule")));
        }
        self.schedule_of(name, &record).await.map(Some)
    }

    /// Schedule `name` as its thread's `record` and log hold it.
    async fn schedule_of(&self, name: &str, record: &ThreadRecord) -> Result<ScheduleInfo, Error> {
        let wf = self.shell.registry.workflow_for(record)?;
        let store = self.shell.store.as_ref();
        let ctx = crate::exec::fetch::restore(store, &wf, &record.id, None).await?;
        let state: ScheduleState = serde_json::from_value(ctx.snapshot()?.state)?;
        Ok(ScheduleInfo { name: name.to_owned(), status: record.status, state })
    }

    /// Every schedule (deleted ones included, status `cancelled`), by name.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn schedules(&self) -> Result<Vec<ScheduleInfo>, Error> {
        let filter =
            ThreadFilter { workflow_id: Some(SCHEDULE_WORKFLOW.into()), ..ThreadFilter::default() };
        let page = Page { limit: SCHEDULES_LIST_MAX, offset: 0 };
        let mut out = Vec::new();
        for record in self.shell.store.list_threads(&filter, page).await? {
            if let Some(name) = record.id.as_str().strip_prefix("schedule:") {
                out.push(self.schedule_of(name, &record).await?);
            }
        }
        Ok(out)
    }

    /// Pauses schedule `name`: no tick starts until it is resumed (then the catch-up policy
    /// decides about the ticks missed meanwhile).
    ///
    /// # Errors
    /// [`Error::UnknownThread`] for no such schedule; a schedule that is not running.
    pub async fn pause_schedule(&self, name: &str) -> Result<(), Error> {
        self.pause(&self.schedule_thread(name).await?).await
    }

    /// Resumes a paused schedule. On an engine that does not run schedules (see
    /// [`Engine::create_schedule`]) its thread goes back into the wait it was paused in (the
    /// timer of its next tick), or, paused before its first step, to Running, without a driver:
    /// the next engine that runs schedules drives it.
    ///
    /// # Errors
    /// As [`Engine::pause_schedule`].
    pub async fn resume_schedule(&self, name: &str) -> Result<(), Error> {
        let thread = self.schedule_thread(name).await?;
        if self.runs_schedules() {
            return self.resume(&thread).await;
        }
        let id = ThreadId::new(thread)?;
        let record = crate::exec::parked::stored(&self.shell, &id).await?;
        if record.status != ThreadStatus::Paused {
            return Err(Error::WrongStatus {
                thread: id.to_string(),
                status: record.status,
                detail: "only a paused schedule resumes".into(),
            });
        }
        let wf = self.shell.registry.workflow_for(&record)?;
        let ctx = crate::exec::fetch::restore(self.shell.store.as_ref(), &wf, &id, None).await?;
        let next = match ctx.meta.waiting {
            Some(Waiting::Timer { .. }) => Transition::Sleep,
            _ => Transition::Run,
        };
        let status = record.status;
        crate::exec::parked::write_parked(&self.shell, &id, status, vec![], Some(next)).await
    }

    /// Deletes schedule `name`: it starts nothing more. An unfinished one's thread ends
    /// Cancelled (the threads it started are left as they are), and the name is then taken
    /// until the thread is pruned or the schedule deleted again; one that has ended (deleted,
    /// failed, past its end) is deleted whole, and its name is free.
    ///
    /// # Errors
    /// As [`Engine::pause_schedule`].
    pub async fn delete_schedule(&self, name: &str) -> Result<(), Error> {
        let thread = self.schedule_thread(name).await?;
        let record = crate::exec::parked::stored(&self.shell, &ThreadId::new(&*thread)?).await?;
        if record.status.is_terminal() {
            self.delete(&thread, cairn_storage::DeleteOptions::default()).await?;
            return Ok(());
        }
        self.cancel(&thread, "schedule deleted").await
    }

    /// Whether this engine runs schedules' ticks: one that resumes work at open (an
    /// application's engine, `cairn worker`). One opened to inspect or control
    /// (`RecoveryPolicy::Park`: the command line) writes schedules and leaves their threads
    /// waiting, durably, for an engine that runs them: it would close in the middle of a tick.
    fn runs_schedules(&self) -> bool {
        self.shell.config.recovery == RecoveryPolicy::Resume
    }

    /// Runs the schedules of the database on this engine from now on, though it was opened to
    /// park what it finds (`cairn serve`, which serves the file until interrupted): each
    /// schedule waiting for an engine (created, or left running by a stopped one) is driven,
    /// and each sleeping one has the timer of its next tick armed. Returns how many it took.
    /// An engine that resumes work does this at open. On a shared database (PostgreSQL) it
    /// takes none: the workers serving it run the schedules, under their leases.
    ///
    /// # Errors
    /// Storage errors; a schedule thread whose log does not restore.
    pub async fn run_schedules(&self) -> Result<usize, Error> {
        let mut taken = 0;
        if self.shell.coord.has_peers() {
            return Ok(taken);
        }
        for status in [ThreadStatus::Created, ThreadStatus::Running, ThreadStatus::Sleeping] {
            let filter = ThreadFilter {
                workflow_id: Some(SCHEDULE_WORKFLOW.into()),
                status: Some(status),
                ..ThreadFilter::default()
            };
            let page = Page { limit: SCHEDULES_LIST_MAX, offset: 0 };
            for record in self.shell.store.list_threads(&filter, page).await? {
                let id = record.id.clone();
                if self.shell.coord.is_driven(&id) {
                    continue;
                }
                if status == ThreadStatus::Sleeping {
                    let wf = self.shell.registry.workflow_for(&record)?;
                    let store = self.shell.store.as_ref();
                    let ctx = crate::exec::fetch::restore(store, &wf, &id, None).await?;
                    if let Some(due) = Due::timer_of(&ctx) {
                        self.shell.coord.arm(&id, due);
                    }
                } else {
                    spawn_drive(&self.shell, id, "schedule run by this engine");
                }
                taken += 1;
            }
        }
        Ok(taken)
    }

    /// Starts schedule `name`'s workflow now, outside its ticks, as a thread of its own:
    /// `<name>@now-<now ms>-<16 hex digits>`, labelled `schedule=<name>` like its ticks'. Each
    /// call starts one (two in one millisecond start two), and none is a tick's thread
    /// (`<name>@<tick ms>`): a trigger at a tick's time runs beside the tick, not instead of it.
    ///
    /// # Errors
    /// As [`Engine::pause_schedule`]; [`Error::Invalid`] for a deleted schedule (it starts
    /// nothing more); what starting the workflow may return.
    pub async fn trigger_schedule(&self, name: &str) -> Result<ThreadHandle, Error> {
        let info = self.schedule(name).await?;
        let info = info.ok_or_else(|| Error::UnknownThread(thread_of(name)))?;
        if info.status == ThreadStatus::Cancelled {
            return Err(Error::Invalid(format!(
                "schedule {name:?} is deleted: it starts nothing more"
            )));
        }
        let fresh = self.shell.ids.new_id();
        let id = format!("{name}@now-{}-{}", self.shell.clock.now_ms(), &fresh[..16]);
        let options = info.state.spec.start_options(id, name);
        self.start_json(&info.state.spec.workflow, info.state.spec.input, options).await
    }

    async fn schedule_thread(&self, name: &str) -> Result<String, Error> {
        match self.schedule(name).await? {
            Some(_) => Ok(thread_of(name)),
            None => Err(Error::UnknownThread(thread_of(name))),
        }
    }
}
