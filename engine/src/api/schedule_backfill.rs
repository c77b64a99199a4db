//! Backfilling a schedule: one run per tick that fell in a past (or any) range, started by the
//! same id the tick itself would have started (`<name>@<tick ms>`), so that it is exactly once:
//! a backfill repeated, or run again after a crash midway, finds the runs it (or the schedule's
//! own tick) made and starts only the missing ones. Bounded by
//! [`crate::limits::SCHEDULE_BACKFILL_RUNS_MAX`] runs a call: a range holding more is refused
//! before anything starts.

use serde::Serialize;

use super::engine::Engine;
use super::schedule_links::head_of;
use super::schedule_ticks::Rule;
use crate::error::Error;
use crate::limits::SCHEDULE_BACKFILL_RUNS_MAX;

/// What [`Engine::backfill_schedule`] did.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Backfilled {
    /// The ticks in the range, oldest first (one run each).
    pub ticks: Vec<u64>,
    /// How many of their runs this call wrote (the others existed: an earlier backfill's, or
    /// the schedule's own tick's).
    pub created: usize,
}

impl Backfilled {
    /// Runs one backfill starts at most (`SCHEDULE_BACKFILL_RUNS_MAX`).
    pub const RUNS_MAX: usize = SCHEDULE_BACKFILL_RUNS_MAX;
}

impl Engine {
    /// Starts schedule `name`'s workflow once for every tick in `[from_ms, to_ms]` (by its rule,
    /// anchor and end), as thread `<name>@<tick ms>` labelled `schedule=<name>`, as the tick
    /// would have. A run that exists is left as it is, so a repeated or interrupted backfill
    /// starts each at most once. The schedule itself is not changed (its state counts its own
    /// ticks). On an engine that does not run threads (the command line) the runs are written
    /// `created`, for the next engine that does.
    ///
    /// # Errors
    /// [`Error::UnknownThread`] for no such schedule; [`Error::Invalid`] for a range that ends
    /// before it starts, or a deleted schedule; [`Error::LimitExceeded`] for a range of more
    /// than `SCHEDULE_BACKFILL_RUNS_MAX` ticks (nothing is started); what a start may return.
    pub async fn backfill_schedule(
        &self,
        name: &str,
        from_ms: u64,
        to_ms: u64,
    ) -> Result<Backfilled, Error> {
        if to_ms < from_ms {
            return Err(Error::Invalid(format!(
                "backfill ends ({to_ms}) before it starts ({from_ms})"
            )));
        }
        let info = self.schedule(name).await?.ok_or_else(|| Error::UnknownThread(head_of(name)))?;
        if info.status == cairn_storage::ThreadStatus::Cancelled {
            return Err(Error::Invalid(format!(
                "schedule {name:?} is deleted: it starts nothing more"
            )));
        }
        let spec = &info.state.spec;
        let ticks = ticks_between(
            &Rule::new(&spec.every)?,
            info.state.anchor_ms,
            spec.end_ms,
            from_ms,
            to_ms,
        )?;
        let mut created = 0;
        for &tick in &ticks {
            let id = super::schedule_flow::ScheduleSpec::tick_thread_id(name, tick);
            let options = spec.start_options(id, name);
            let drive = self.shell.config.recovery == crate::config::RecoveryPolicy::Resume;
            let wrote =
                self.write_start(&spec.workflow, spec.input.clone(), options, drive).await?;
            created += usize::from(wrote.created);
        }
        Ok(Backfilled { ticks, created })
    }
}

/// The ticks of `rule` in `[from_ms, to_ms]` before `end_ms`, oldest first.
///
/// # Errors
/// [`Error::LimitExceeded`] past [`SCHEDULE_BACKFILL_RUNS_MAX`].
fn ticks_between(
    rule: &Rule,
    anchor_ms: u64,
    end_ms: Option<u64>,
    from_ms: u64,
    to_ms: u64,
) -> Result<Vec<u64>, Error> {
    let mut ticks = Vec::new();
    // Strictly after the cursor: a tick at the epoch itself (0 ms) is never backfilled.
    let mut cursor = from_ms.saturating_sub(1);
    loop {
        let next = rule.next_after(cursor, anchor_ms);
        let Some(t) = next.filter(|t| *t <= to_ms && end_ms.is_none_or(|end| *t < end)) else {
            return Ok(ticks);
        };
        if ticks.len() == SCHEDULE_BACKFILL_RUNS_MAX {
            return Err(Error::LimitExceeded {
                limit: "runs of one schedule backfill",
                value: SCHEDULE_BACKFILL_RUNS_MAX as u64 + 1,
                max: SCHEDULE_BACKFILL_RUNS_MAX as u64,
            });
        }
        ticks.push(t);
        cursor = t;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::schedule_ticks::Every;

    #[test]
    fn a_range_holds_the_ticks_of_the_rule_ends_included_and_is_bounded() {
        let r = Rule::new(&Every::Interval { ms: 10 }).unwrap();
        assert_eq!(ticks_between(&r, 5, None, 15, 45).unwrap(), [15, 25, 35, 45]);
        assert_eq!(ticks_between(&r, 5, Some(35), 0, 100).unwrap(), [5, 15, 25]);
        assert!(ticks_between(&r, 5, None, 16, 24).unwrap().is_empty());
        let too_many = ticks_between(&r, 0, None, 0, 10 * SCHEDULE_BACKFILL_RUNS_MAX as u64 + 10);
        assert!(matches!(too_many, Err(Error::LimitExceeded { .. })), "{too_many:?}");
        let just = ticks_between(&r, 0, None, 1, 10 * SCHEDULE_BACKFILL_RUNS_MAX as u64);
        assert_eq!(just.unwrap().len(), SCHEDULE_BACKFILL_RUNS_MAX);
    }
}
