//! Durable schedules: create, list, pause, resume, trigger and delete (`cairn schedule ...`).
//! Each schedule is a chain of threads of the built-in workflow [`ScheduleSpec::WORKFLOW`],
//! `schedule:<name>`, `schedule:<name>~1`, ... (see `schedule_flow.rs` for why a crash at a
//! tick neither loses nor doubles it, and why it continues as new); every call here acts on
//! the live link (`schedule_links.rs`).

use std::collections::BTreeMap;

use cairn_storage::{ThreadFilter, ThreadRecord, ThreadStatus};

use super::engine::Engine;
use super::handle::ThreadHandle;
use super::schedule_flow::{ScheduleSpec, ScheduleState};
use super::schedule_links::{head_of, links, live};
use super::schedule_ticks::Rule;
use crate::config::RecoveryPolicy;
use crate::config::StartOptions;
use crate::core::status::Transition;
use crate::core::thread_ctx::Waiting;
use crate::error::Error;

/// Schedule threads read per page of a listing.
const LIST_PAGE: usize = 1_000;

/// A control of a schedule, applied to its live link.
#[derive(Clone, Copy)]
enum Control {
    Pause,
    Resume,
    Delete,
}

/// A schedule as stored: its state and whether it runs.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub struct ScheduleInfo {
    /// Its name.
    pub name: String,
    /// Its live thread's status: `sleeping` or `running` while it runs, `paused`, `cancelled`
    /// once deleted, `completed` once past its end.
    pub status: ThreadStatus,
    /// Its live thread: `schedule:<name>`, or `schedule:<name>~<n>` after `n` continuations.
    pub thread: String,
    /// What it starts and when, and what it has done.
    pub state: ScheduleState,
}

impl ScheduleInfo {
    /// Schedules one listing ([`Engine::schedules`]) returns at most.
    pub const LIST_MAX: usize = 10_000;
}

/// Checks schedule `name` and `spec` as far as they go without an engine: the name, when it
/// ticks (the cron expression, the time zone, a zero interval), an end before the start.
///
/// # Errors
/// [`Error::Invalid`] naming what is wrong.
pub fn check(name: &str, spec: &ScheduleSpec) -> Result<Rule, Error> {
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
        for version in 1..=ScheduleSpec::WORKFLOW_VERSION {
            let shell = std::sync::Arc::downgrade(&self.shell);
            self.register(&super::schedule_flow::workflow(shell, version))?;
        }
        Ok(())
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
            last_run: None,
            buffered: None,
        };
        // The head's id: a name whose every link was deleted is free (`delete_schedule`).
        let options = StartOptions::id(head_of(name)).label(ScheduleSpec::LABEL, name);
        if self.runs_schedules() {
            self.start_json(ScheduleSpec::WORKFLOW, &state, options).await?;
        } else {
            // Written Created, not driven: an engine that runs schedules drives it from its open
            // (recovery); this one would leave its first tick half done when it closes.
            self.create_json(ScheduleSpec::WORKFLOW, &state, options).await?;
        }
        self.schedule(name).await?.ok_or_else(|| Error::UnknownThread(head_of(name)))
    }

    /// Schedule `name`, if it exists, as its live link holds it.
    ///
    /// # Errors
    /// Storage errors; a schedule thread whose state does not read.
    pub async fn schedule(&self, name: &str) -> Result<Option<ScheduleInfo>, Error> {
        let mut tries = 1;
        loop {
            let Some(record) = live(self.shell.store.as_ref(), name).await? else {
                return Ok(None);
            };
            match self.schedule_of(name, &record).await {
                // The link continued as new and a retention pass deleted it after the walk
                // found it (crash_controls met this): the walk finds its successor.
                Err(Error::UnknownThread(id))
                    if id == record.id.as_str() && tries < ScheduleSpec::CONTROL_TRIES =>
                {
                    tries += 1;
                }
                other => return other.map(Some),
            }
        }
    }

    /// Schedule `name` as its thread's `record` and log hold it.
    async fn schedule_of(&self, name: &str, record: &ThreadRecord) -> Result<ScheduleInfo, Error> {
        let wf = self.shell.registry.workflow_for(record)?;
        let store = self.shell.store.as_ref();
        let ctx = crate::exec::fetch::restore(store, &wf, &record.id, None).await?;
        let state: ScheduleState = serde_json::from_value(ctx.snapshot()?.state)?;
        let thread = record.id.to_string();
        Ok(ScheduleInfo { name: name.to_owned(), status: record.status, thread, state })
    }

    /// Every schedule (deleted ones included, status `cancelled`), by name, at most
    /// [`ScheduleInfo::LIST_MAX`]: each once, as its live link holds it (the walk reads every
    /// schedule thread's record, a page at a time).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn schedules(&self) -> Result<Vec<ScheduleInfo>, Error> {
        let filter = ThreadFilter {
            workflow_id: Some(ScheduleSpec::WORKFLOW.into()),
            ..ThreadFilter::default()
        };
        let store = self.shell.store.as_ref();
        let mut lives: BTreeMap<String, (u64, ThreadRecord)> = BTreeMap::new();
        let mut pages = super::ThreadPages::new(filter, None, LIST_PAGE);
        while let Some(page) = pages.next(store).await? {
            for record in page {
                let Some((name, n)) = ScheduleSpec::link_of(record.id.as_str()) else { continue };
                if lives.get(name).is_none_or(|(best, _)| n > *best) {
                    lives.insert(name.to_owned(), (n, record));
                }
            }
        }
        let mut out = Vec::new();
        for (name, (_, record)) in lives.into_iter().take(ScheduleInfo::LIST_MAX) {
            match self.schedule_of(&name, &record).await {
                // Gone since the listing (continued, then deleted): as `schedule` finds it now.
                Err(Error::UnknownThread(id)) if id == record.id.as_str() => {
                    out.extend(self.schedule(&name).await?);
                }
                other => out.push(other?),
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
        self.control_schedule(name, Control::Pause).await
    }

    /// Resumes a paused schedule. On an engine that does not run schedules (see
    /// [`Engine::create_schedule`]) its thread goes back into the wait it was paused in (the
    /// timer of its next tick), or, paused before its first step, to Running, without a driver:
    /// the next engine that runs schedules drives it.
    ///
    /// # Errors
    /// As [`Engine::pause_schedule`].
    pub async fn resume_schedule(&self, name: &str) -> Result<(), Error> {
        self.control_schedule(name, Control::Resume).await
    }

    /// Resumes the paused link `record` of a schedule.
    async fn resume_link(&self, record: &ThreadRecord) -> Result<(), Error> {
        if self.runs_schedules() {
            return self.resume(record.id.as_str()).await;
        }
        let id = record.id.clone();
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
        self.control_schedule(name, Control::Delete).await
    }

    /// Applies `control` to schedule `name`'s live link; when it fails and the live link has
    /// changed meanwhile (the link continued as new under it), again on the new one, at most
    /// [`ScheduleSpec::CONTROL_TRIES`] times.
    async fn control_schedule(&self, name: &str, control: Control) -> Result<(), Error> {
        let store = self.shell.store.as_ref();
        let mut tries = 0;
        loop {
            let link =
                live(store, name).await?.ok_or_else(|| Error::UnknownThread(head_of(name)))?;
            let result = match control {
                Control::Pause => self.pause(link.id.as_str()).await,
                Control::Resume => self.resume_link(&link).await,
                Control::Delete if link.status.is_terminal() => self.delete_links(name).await,
                Control::Delete => self.cancel(link.id.as_str(), "schedule deleted").await,
            };
            tries += 1;
            let Err(e) = result else { return Ok(()) };
            let moved = live(store, name).await?.is_some_and(|now| now.id != link.id);
            if !moved || tries >= ScheduleSpec::CONTROL_TRIES {
                return Err(e);
            }
            tracing::debug!(schedule = name, link = %link.id, "the link continued: again");
        }
    }

    /// Deletes every link of an ended schedule whole: its name is free.
    async fn delete_links(&self, name: &str) -> Result<(), Error> {
        for link in links(self.shell.store.as_ref(), name).await? {
            self.delete(link.id.as_str(), cairn_storage::DeleteOptions::default()).await?;
        }
        Ok(())
    }

    /// Whether this engine runs schedules' ticks: one that resumes work at open (an
    /// application's engine, `cairn worker`). One opened to inspect or control
    /// (`RecoveryPolicy::Park`: the command line) writes schedules and leaves their threads
    /// waiting, durably, for an engine that runs them: it would close in the middle of a tick.
    fn runs_schedules(&self) -> bool {
        self.shell.config.recovery == RecoveryPolicy::Resume
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
        let info = info.ok_or_else(|| Error::UnknownThread(head_of(name)))?;
        if info.status == ThreadStatus::Cancelled {
            return Err(Error::Invalid(format!(
                "schedule {name:?} is deleted: it starts nothing more"
            )));
        }
        let fresh = self.shell.ids.new_id();
        let id = format!(
            "{}{}-{}",
            ScheduleSpec::triggered_prefix(name),
            self.shell.clock.now_ms(),
            &fresh[..16]
        );
        let options = info.state.spec.start_options(id, name);
        self.start_json(&info.state.spec.workflow, info.state.spec.input, options).await
    }
}
