//! When a schedule ticks: cron expressions in a time zone (`croner`, which follows Vixie cron
//! over daylight-saving changes: a fixed time that falls in the spring-forward gap runs right
//! after it, once; a fixed time in the fall-back overlap runs once, at its first occurrence),
//! fixed intervals, a start and an end, and which of the ticks missed while no engine ran are
//! still started (the catch-up policy). Pure functions of the spec and times: a schedule's
//! thread computes the same ticks when it is replayed or resumed.

use std::str::FromStr as _;

use chrono::{DateTime, TimeZone as _, Utc};
use chrono_tz::Tz;
use serde::{Deserialize, Serialize};

use crate::error::Error;

/// How often a schedule ticks.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Every {
    /// A cron expression (5 fields, or 6 with seconds first) in an IANA time zone
    /// (`"Europe/Berlin"`, `"UTC"`).
    Cron {
        /// The expression, e.g. `"0 9 * * MON-FRI"`.
        expr: String,
        /// The time zone its fields are read in.
        tz: String,
    },
    /// Every `ms` milliseconds from the schedule's start (or its creation).
    Interval {
        /// The period, > 0.
        ms: u64,
    },
}

/// Which ticks missed while no engine ran (a downtime, a pause) are started when the schedule
/// wakes up late.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CatchUp {
    /// None of the missed ticks: only a tick due at most [`CatchUp::GRACE_MS`] ago starts.
    #[default]
    Skip,
    /// The latest missed tick only.
    One,
    /// Every missed tick, oldest first, at most `max` (the latest `max`) and at most
    /// [`CatchUp::TICKS_PER_WAKE_MAX`].
    All {
        /// How many missed ticks are started at most.
        max: u32,
    },
}

impl Every {
    /// The first tick strictly after `after_ms`, counting intervals from `anchor_ms` (the
    /// schedule's start, or its creation); `None` when there is none (an expression that never
    /// matches again). What a schedule's thread computes: a check of its history recomputes its
    /// rounds with it (`cairn_testkit::check_schedule`).
    ///
    /// # Errors
    /// [`Error::Invalid`] naming what is wrong (the expression, the zone, a zero interval).
    ///
    /// # Examples
    /// ```
    /// use cairn::Every;
    /// assert_eq!(Every::Interval { ms: 1_000 }.next_after(2_500, 0)?, Some(3_000));
    /// // Friday 2023-11-17 09:00 UTC, then Monday 2023-11-20 09:00 UTC.
    /// let weekdays = Every::Cron { expr: "0 9 * * MON-FRI".into(), tz: "UTC".into() };
    /// assert_eq!(weekdays.next_after(1_700_211_600_000, 0)?, Some(1_700_470_800_000));
    /// assert!(Every::Interval { ms: 0 }.next_after(0, 0).is_err());
    /// # Ok::<(), cairn::Error>(())
    /// ```
    pub fn next_after(&self, after_ms: u64, anchor_ms: u64) -> Result<Option<u64>, Error> {
        Ok(Rule::new(self)?.next_after(after_ms, anchor_ms))
    }
}

/// A parsed [`Every`]: what finds a schedule's ticks.
pub enum Rule {
    /// A cron expression in a time zone.
    Cron(Box<croner::Cron>, Tz),
    /// A fixed interval, ms.
    Interval(u64),
}

impl Rule {
    /// Parses and checks `every`.
    ///
    /// # Errors
    /// [`Error::Invalid`] naming what is wrong (the expression, the zone, a zero interval).
    pub fn new(every: &Every) -> Result<Rule, Error> {
        match every {
            Every::Cron { expr, tz } => {
                let zone = Tz::from_str(tz).map_err(|_| {
                    Error::Invalid(format!("schedule time zone {tz:?} is not an IANA zone name"))
                })?;
                let cron = croner::Cron::from_str(expr)
                    .map_err(|e| Error::Invalid(format!("schedule cron {expr:?}: {e}")))?;
                Ok(Rule::Cron(Box::new(cron), zone))
            }
            Every::Interval { ms: 0 } => {
                Err(Error::Invalid("schedule interval must be more than 0 ms".into()))
            }
            Every::Interval { ms } => Ok(Rule::Interval(*ms)),
        }
    }

    /// The first tick strictly after `after_ms`, counting intervals from `anchor_ms`; `None`
    /// when there is none (an expression that never matches again).
    pub fn next_after(&self, after_ms: u64, anchor_ms: u64) -> Option<u64> {
        match self {
            Rule::Interval(period) => {
                if after_ms < anchor_ms {
                    return Some(anchor_ms);
                }
                let k = (after_ms - anchor_ms) / period + 1;
                anchor_ms.checked_add(k.checked_mul(*period)?)
            }
            Rule::Cron(cron, zone) => {
                // From the whole second (a cron tick is one): the next one is strictly after it
                // and so after `after_ms`.
                let after = i64::try_from(after_ms / 1_000).ok()?;
                let at: DateTime<Utc> = Utc.timestamp_opt(after, 0).single()?;
                let next = cron.find_next_occurrence(&at.with_timezone(zone), false).ok()?;
                u64::try_from(next.timestamp_millis()).ok()
            }
        }
    }
}

/// The ticks due in `(after_ms, now_ms]` before `end_ms` (oldest first, at most
/// [`CatchUp::TICKS_PER_WAKE_MAX`], the latest kept) and the next tick after `now_ms`
/// (`None`: the schedule has ended).
pub(crate) fn due(
    rule: &Rule,
    anchor_ms: u64,
    after_ms: u64,
    now_ms: u64,
    end_ms: Option<u64>,
) -> (Vec<u64>, Option<u64>) {
    let ends = |t: u64| end_ms.is_some_and(|end| t >= end);
    let mut ticks = std::collections::VecDeque::new();
    let mut cursor = after_ms;
    loop {
        let Some(t) = rule.next_after(cursor, anchor_ms).filter(|t| !ends(*t)) else {
            return (ticks.into(), None);
        };
        if t > now_ms {
            return (ticks.into(), Some(t));
        }
        if ticks.len() == CatchUp::TICKS_PER_WAKE_MAX {
            ticks.pop_front();
        }
        ticks.push_back(t);
        cursor = t;
    }
}

impl CatchUp {
    /// How late a tick may be started under [`CatchUp::Skip`] (a wake-up is never exactly on
    /// time).
    pub const GRACE_MS: u64 = 60_000;

    /// Ticks one wake-up of a schedule computes at most: a schedule that missed more (a
    /// minutely schedule after a long downtime) starts at most this many under
    /// [`CatchUp::All`], the latest, and skips the rest.
    pub const TICKS_PER_WAKE_MAX: usize = 1_000;

    /// Of the `due` ticks (oldest first), the ones to start at `now_ms`.
    pub(crate) fn pick(self, due: &[u64], now_ms: u64) -> Vec<u64> {
        match self {
            CatchUp::Skip => due
                .last()
                .filter(|t| now_ms.saturating_sub(**t) <= CatchUp::GRACE_MS)
                .map(|t| vec![*t])
                .unwrap_or_default(),
            CatchUp::One => due.last().map(|t| vec![*t]).unwrap_or_default(),
            CatchUp::All { max } => {
                let keep = (max as usize).min(due.len());
                due[due.len() - keep..].to_vec()
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(s: &str) -> u64 {
        DateTime::parse_from_rfc3339(s).unwrap().timestamp_millis() as u64
    }

    #[test]
    fn intervals_count_from_the_anchor() {
        let r = Rule::new(&Every::Interval { ms: 10 }).unwrap();
        assert_eq!(r.next_after(0, 5), Some(5));
        assert_eq!(r.next_after(5, 5), Some(15));
        assert_eq!(r.next_after(14, 5), Some(15));
        assert_eq!(due(&r, 0, 0, 35, Some(30)), (vec![10, 20], None));
        assert_eq!(due(&r, 0, 0, 35, None), (vec![10, 20, 30], Some(40)));
    }

    #[test]
    fn cron_reads_its_fields_in_the_zone_across_daylight_saving() {
        let r = Rule::new(&Every::Cron { expr: "30 2 * * *".into(), tz: "Europe/Berlin".into() })
            .unwrap();
        // 2026-03-29: 02:00 jumps to 03:00 in Berlin; the 02:30 run comes right after the gap.
        let next = r.next_after(ms("2026-03-28T12:00:00Z"), 0).unwrap();
        assert_eq!(next, ms("2026-03-29T01:00:00Z"), "03:00 CEST, once");
        // 2026-10-25: 03:00 falls back to 02:00; 02:30 happens twice, the run once.
        let first = r.next_after(ms("2026-10-24T12:00:00Z"), 0).unwrap();
        assert_eq!(first, ms("2026-10-25T00:30:00Z"), "02:30 CEST");
        let after = r.next_after(first, 0).unwrap();
        assert_eq!(after, ms("2026-10-26T01:30:00Z"), "next day 02:30 CET, not 02:30 CET today");
    }

    #[test]
    fn bad_specs_are_named() {
        let e = Rule::new(&Every::Cron { expr: "61 * * * *".into(), tz: "UTC".into() });
        assert!(matches!(e, Err(Error::Invalid(m)) if m.contains("61 * * * *")));
        let e = Rule::new(&Every::Cron { expr: "* * * * *".into(), tz: "Mars/Olympus".into() });
        assert!(matches!(e, Err(Error::Invalid(m)) if m.contains("Mars/Olympus")));
        assert!(Rule::new(&Every::Interval { ms: 0 }).is_err());
    }

    #[test]
    fn catch_up_picks_what_the_policy_says() {
        let due = [100, 200, 300];
        assert_eq!(CatchUp::Skip.pick(&due, 300 + CatchUp::GRACE_MS), vec![300]);
        assert_eq!(CatchUp::Skip.pick(&due, 301 + CatchUp::GRACE_MS), Vec::<u64>::new());
        assert_eq!(CatchUp::One.pick(&due, 10_000_000), vec![300]);
        assert_eq!(CatchUp::All { max: 2 }.pick(&due, 10_000_000), vec![200, 300]);
        assert_eq!(CatchUp::All { max: 9 }.pick(&due, 10_000_000), vec![100, 200, 300]);
    }
}
