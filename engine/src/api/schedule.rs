//! Durable schedules: create, list, pause, resume, trigger and delete (`cairn schedule ...`).
//! Each schedule is a thread of the built-in workflow [`SCHEDULE_WORKFLOW`] with the id
//! `schedule:<name>` (see `schedule_flow.rs` for why a crash at a tick neither loses nor
//! doubles it).

use cairn_storage::{Page, ThreadFilter, ThreadId, ThreadRecord, ThreadStatus};

use super::engine::Engine;
use super::handle::ThreadHandle;
use super::schedule_flow::{SCHEDULE_LABEL, SCHEDULE_WORKFLOW, ScheduleSpec, ScheduleState};
use super::schedule_ticks::Rule;
use crate::config::StartOptions;
use crate::error::Error;

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
        if name.is_empty()
            || !name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(Error::Invalid(format!(
                "schedule name {name:?}: use letters, digits, '-', '_' and '.'"
            )));
        }
        let rule = Rule::new(&spec.every)?;
        let target = self.shell.registry.latest(&spec.workflow, None)?;
        // Checked now, not at the first tick: a schedule whose every start would fail is refused.
        target.state_from_json(&spec.input).map_err(|e| {
            Error::Invalid(format!("schedule input is not a valid state of {}: {e}", target.id()))
        })?;
        if let (Some(start), Some(end)) = (spec.start_ms, spec.end_ms)
            && end <= start
        {
            return Err(Error::Invalid(format!(
                "schedule ends ({end}) before it starts ({start})"
            )));
        }
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
        self.start(SCHEDULE_WORKFLOW, &state, options).await?;
        self.schedule(name).await?.ok_or_else(|| Error::UnknownThread(thread_of(name)))
    }

    /// Schedule `name`, if it exists.
    ///
    /// # Errors
    /// Storage errors; a schedule thread whose state does not read.
    pub async fn schedule(&self, name: &str) -> Result<Option<ScheduleInfo>, Error> {
        let id = ThreadId::new(thread_of(name))?;
        let Some(record) = self.shell.store.thread_async(&id).await? else { return Ok(None) };
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
        for record in self.shell.store.list_threads_async(&filter, page).await? {
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

    /// Resumes a paused schedule.
    ///
    /// # Errors
    /// As [`Engine::pause_schedule`].
    pub async fn resume_schedule(&self, name: &str) -> Result<(), Error> {
        self.resume(&self.schedule_thread(name).await?).await
    }

    /// Deletes schedule `name`: it starts nothing more (its thread ends Cancelled; the threads
    /// it started are left as they are). The name is then taken until the thread is pruned.
    ///
    /// # Errors
    /// As [`Engine::pause_schedule`].
    pub async fn delete_schedule(&self, name: &str) -> Result<(), Error> {
        self.cancel(&self.schedule_thread(name).await?, "schedule deleted").await
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
