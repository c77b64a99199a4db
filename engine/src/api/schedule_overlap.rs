//! What a schedule does with a tick while the run it started before is still running (its
//! overlap policy, [`Overlap`]), and the recorded calls a schedule's node makes to start, look
//! at and cancel its runs.
//!
//! Every look at another thread (is the previous run still running?) and every start or cancel
//! is a recorded tool call of the schedule's thread, so a replay or a resume after a crash
//! reads back what the first run saw and decided: a tick skipped, buffered or started stays so.
//! A start that ran but was not recorded runs again with the same id (`<name>@<tick ms>`), which
//! answers the thread the first one made; a cancel that ran but was not recorded runs again and
//! finds the run ended (no error). [`Overlap::AllowAll`] (the default) makes no look at all and
//! keeps no trace of its runs: its rounds are those of schedules stored before overlap policies.

use std::sync::Weak;

use cairn_dsl::{Ctx, NodeError, ToolError};
use serde::{Deserialize, Serialize};

use super::engine::Engine;
use super::schedule_flow::{ScheduleSpec, ScheduleState};
use crate::exec::shell::Shell;

/// What a tick does while the previous run its schedule started is still running.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// Starts it anyway: runs may overlap (the default, and what every schedule did before).
    #[default]
    AllowAll,
    /// Starts nothing: the tick is counted as skipped in the schedule's state.
    Skip,
    /// Keeps the tick waiting, one at most (a later tick replaces it, the replaced one counted
    /// as skipped), and starts it when the running one ends (looked at every
    /// `limits::SCHEDULE_BUFFER_POLL_MS` until then).
    BufferOne,
    /// Cancels the running one, then starts the new one.
    CancelOther,
}

impl Overlap {
    /// How often `buffer_one` looks whether the run before its waiting tick has ended
    /// (`limits::SCHEDULE_BUFFER_POLL_MS`).
    pub const BUFFER_POLL_MS: u64 = crate::limits::SCHEDULE_BUFFER_POLL_MS;

    /// Whether this is [`Overlap::AllowAll`] (then not stored in the spec).
    pub fn is_default(&self) -> bool {
        *self == Overlap::AllowAll
    }
}

impl std::str::FromStr for Overlap {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "allow_all" => Ok(Overlap::AllowAll),
            "skip" => Ok(Overlap::Skip),
            "buffer_one" => Ok(Overlap::BufferOne),
            "cancel_other" => Ok(Overlap::CancelOther),
            other => {
                Err(format!("overlap {other:?}: one of allow_all, skip, buffer_one, cancel_other"))
            }
        }
    }
}

/// The recorded calls of one round of a schedule's node.
pub(super) struct Runs<'a> {
    pub ctx: &'a Ctx,
    pub shell: &'a Weak<Shell>,
}

impl Runs<'_> {
    /// Starts the run of `tick` (idempotent on its id) and returns its id.
    pub async fn start(&self, s: &ScheduleState, tick: u64) -> Result<String, NodeError> {
        let id = ScheduleSpec::tick_thread_id(&s.name, tick);
        let (workflow, input) = (s.spec.workflow.clone(), s.spec.input.clone());
        let options = s.spec.start_options(id.clone(), &s.name);
        let engine = self.engine();
        self.ctx
            .tool("start", id, move |id: String, _| async move {
                let engine = engine?;
                let started_ms = engine.shell.clock.now_ms();
                engine
                    .start_json(&workflow, input, options)
                    .await
                    .map_err(|e| ToolError::fatal(e.to_string()))?;
                // Not again for a start recorded before a crash: its result is returned, this
                // is not run (a jitter delays the start, and counts in the lag).
                engine.shell.metrics.schedule_lag(started_ms.saturating_sub(tick));
                Ok(id)
            })
            .await
    }

    /// Whether run `id` has not ended (a run that does not exist has).
    async fn running(&self, id: &str) -> Result<bool, NodeError> {
        let engine = self.engine();
        self.ctx
            .tool("running", id.to_owned(), move |id: String, _| async move {
                let engine = engine?;
                let Ok(id) = cairn_storage::ThreadId::new(id) else { return Ok(false) };
                let record = engine.store().thread(&id).await;
                let record = record.map_err(|e| ToolError::retryable(e.to_string()))?;
                Ok(record.is_some_and(|r| !r.status.is_terminal()))
            })
            .await
    }

    /// Cancels run `id`; one that ended meanwhile is left as it is.
    async fn cancel(&self, id: &str) -> Result<(), NodeError> {
        let engine = self.engine();
        self.ctx
            .tool("cancel", id.to_owned(), move |id: String, _| async move {
                let why = "the schedule's next tick cancelled it (overlap cancel_other)";
                match engine?.cancel(&id, why).await {
                    // Ended meanwhile (or deleted): nothing to cancel.
                    Ok(())
                    | Err(crate::Error::Transition { .. } | crate::Error::UnknownThread(_)) => {
                        Ok(())
                    }
                    Err(e) => Err(ToolError::retryable(e.to_string())),
                }
            })
            .await
    }

    fn engine(&self) -> Result<Engine, ToolError> {
        let shell = self.shell.upgrade();
        shell
            .map(|shell| Engine { shell })
            .ok_or_else(|| ToolError::retryable("the engine is closing"))
    }

    /// Starts each of `ticks` (picked by the catch-up policy), or not, as `s`'s overlap policy
    /// says, counting into `s` what it started and skipped.
    pub async fn start_ticks(&self, s: &mut ScheduleState, ticks: &[u64]) -> Result<(), NodeError> {
        let overlap = s.spec.overlap;
        for &tick in ticks {
            let busy = match (&s.last_run, overlap) {
                (_, Overlap::AllowAll) | (None, _) => None,
                (Some(prev), _) => self.running(prev).await?.then(|| prev.clone()),
            };
            match (busy, overlap) {
                (Some(_), Overlap::Skip) => s.skipped += 1,
                (Some(_), Overlap::BufferOne) => {
                    if s.buffered.replace(tick).is_some() {
                        s.skipped += 1;
                    }
                }
                (busy, _) => {
                    if let Some(prev) = busy {
                        self.cancel(&prev).await?;
                    }
                    let id = self.start(s, tick).await?;
                    s.started += 1;
                    if overlap != Overlap::AllowAll {
                        s.last_run = Some(id);
                    }
                }
            }
        }
        Ok(())
    }

    /// Starts the tick [`Overlap::BufferOne`] keeps waiting once the run before it has ended.
    pub async fn start_buffered(&self, s: &mut ScheduleState) -> Result<(), NodeError> {
        let Some(tick) = s.buffered else { return Ok(()) };
        if let Some(prev) = &s.last_run
            && self.running(prev).await?
        {
            return Ok(());
        }
        s.buffered = None;
        s.last_run = Some(self.start(s, tick).await?);
        s.started += 1;
        Ok(())
    }
}
