//! The health report: what an operator must look at now (seed 004's fault detection). A health
//! pass reads every thread record and the lock table (never a thread's log), so it runs as well
//! on a file no engine holds (`cairn health --db FILE`) as inside a running engine. For the
//! signal backlog it also reads the inboxes of unfinished threads (one read each, bounded:
//! `HEALTH_SIGNAL_THREADS_MAX` threads, `HEALTH_SIGNALS_PER_THREAD_MAX` signals each) and
//! compares them with the signal cursors their record's summary keeps.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::Ordering;
use std::time::Duration;

use cairn_storage::{Page, Store, ThreadFilter, ThreadStatus};
use serde::{Deserialize, Serialize};

use super::metrics::Metrics;
use super::resources::ResourceHealth;
use crate::limits::{
    HEALTH_DATABASE_WAIT_MS, HEALTH_ITEMS_MAX, HEALTH_SIGNAL_THREADS_MAX,
    HEALTH_SIGNALS_PER_THREAD_MAX,
};

/// The report of one health pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct HealthReport {
    /// True when nothing below needs attention: no stuck thread, no expired lock, no slow commit.
    pub ok: bool,
    /// When the pass ran, engine-clock ms.
    pub at_ms: u64,
    /// Threads by stored status (every status, zeros included).
    pub threads: BTreeMap<String, u64>,
    /// The watchdog the pass applied, ms.
    pub watchdog_ms: u64,
    /// Running threads whose record has not moved for longer than the watchdog.
    pub stuck_threads: u64,
    /// The first 100 (`HEALTH_ITEMS_MAX`) of them, longest idle first.
    pub stuck: Vec<StuckThread>,
    /// Locks held past their time to live (nobody renewed or released them).
    pub expired_locks: u64,
    /// The first 100 (`HEALTH_ITEMS_MAX`) of them, longest expired first.
    pub expired: Vec<ExpiredLock>,
    /// Step commits of this engine (none when no engine runs in this process).
    pub commits: CommitHealth,
    /// The age past which a signal no node took counts in the backlog, ms (0 in a report of an
    /// engine that predates the backlog).
    #[serde(default)]
    pub signal_backlog_ms: u64,
    /// Signals older than `signal_backlog_ms` waiting in unfinished threads' inboxes that no
    /// node of the thread took (a signal of a name is taken when a node receives it or a later
    /// one of that name). Counted over the first 1,000 (`HEALTH_SIGNAL_THREADS_MAX`) unfinished
    /// threads, 1,000 (`HEALTH_SIGNALS_PER_THREAD_MAX`) signals each.
    #[serde(default)]
    pub signal_backlog: u64,
    /// The first 100 (`HEALTH_ITEMS_MAX`) threads with a backlog, most signals first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub backlogged: Vec<SignalBacklog>,
    /// Whether the store's database answers (a store on a server) and takes writes (absent for
    /// a file that never had a commit fail). While it does not answer, the report is made
    /// without reading it (the counts above are zeros); while either fails, `ok` is false and
    /// `last_error` says why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub database: Option<DatabaseHealth>,
    /// How the engine that made the report coordinates with others on its database (absent
    /// where no engine runs: `cairn health --db FILE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub coordination: Option<Coordination>,
    /// The machine: free space on the database's disk, this process's memory (absent where
    /// the pass ran on a store alone).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<ResourceHealth>,
    /// What to do about each thing that needs attention, one sentence each (the recommended
    /// actions; empty when `ok`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub actions: Vec<String>,
}

/// How an engine coordinates with whoever else drives threads on its database: chosen from
/// what the store declares when it opens ([`cairn_storage::Backend::shared`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Coordination {
    /// In memory: only this process writes the database (a redb file, held by its lock), so a
    /// lease found on a thread belongs to a process that died and is taken over at once.
    Local,
    /// Through the database several processes share (PostgreSQL): another engine's lease is
    /// taken over only once it has lapsed, and controls reach runners in other processes.
    Shared,
}

/// What the report says of the store's database.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DatabaseHealth {
    /// Whether its last round trip (a statement, a check, a connection) was answered.
    pub reachable: bool,
    /// Whether the store takes writes: false from a commit that failed part way (the disk is
    /// full, an I/O error: `last_error`) until the store has reopened its database, which a
    /// file store does by itself once the cause clears.
    #[serde(default = "writable_by_default")]
    pub writable: bool,
    /// Since when it is as it is, ms since the Unix epoch (this machine's clock).
    pub since_ms: u64,
    /// The last failure (a refused connection, a missed deadline, the commit that poisoned
    /// the store: "disk full during commit: ..."), kept after recovery.
    pub last_error: Option<String>,
}

impl DatabaseHealth {
    /// Whether the database answers and takes writes.
    pub fn is_ok(&self) -> bool {
        self.reachable && self.writable
    }
}

/// A report of an engine that predates `writable` wrote none: its database took writes.
fn writable_by_default() -> bool {
    true
}

impl From<cairn_storage::telemetry::DatabaseState> for DatabaseHealth {
    fn from(s: cairn_storage::telemetry::DatabaseState) -> DatabaseHealth {
        DatabaseHealth {
            reachable: s.reachable,
            writable: s.writable,
            since_ms: s.since_ms,
            last_error: s.last_error,
        }
    }
}

/// A Running thread with no step for longer than the watchdog.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct StuckThread {
    /// The thread.
    pub thread: String,
    /// Its workflow id.
    pub workflow: String,
    /// Its workflow version.
    pub version: u32,
    /// How long since its record last moved, ms.
    pub idle_ms: u64,
}

/// A lock held past its time to live.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExpiredLock {
    /// The resource's name.
    pub name: String,
    /// The thread that holds it.
    pub holder: String,
    /// How long ago it lapsed, ms.
    pub expired_ms: u64,
}

/// An unfinished thread with signals in its inbox that no node took, older than the threshold.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SignalBacklog {
    /// The thread.
    pub thread: String,
    /// Its workflow id.
    pub workflow: String,
    /// How many of its signals wait past the threshold.
    pub signals: u64,
    /// Their names, without repeats (sorted; at most 8).
    pub names: Vec<String>,
    /// How long the oldest of them has waited, ms.
    pub oldest_ms: u64,
}

/// The thresholds a health pass applies.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Thresholds {
    /// A Running thread with no step for longer is stuck, ms.
    pub watchdog_ms: u64,
    /// A signal no node took counts in the backlog once older, ms.
    pub signal_backlog_ms: u64,
}

/// What the report says of this engine's step commits.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CommitHealth {
    /// The threshold of a slow commit, ms.
    pub slow_commit_ms: u64,
    /// Slow commits since the previous health pass (what `ok` judges).
    pub slow_recent: u64,
    /// Slow commits since the engine opened.
    pub slow_total: u64,
    /// The slowest commit since the engine opened, µs.
    pub slowest_us: u64,
}

/// Runs a health pass over `store` at `now_ms` and sets the health gauges of `metrics`, with
/// the store's async reads. A store that knows its database unreachable is not read (a report
/// must come back while the database does not: each read would wait for its deadline); one
/// whose database stops answering during the pass, or does not answer one of its reads within
/// [`HEALTH_DATABASE_WAIT_MS`], is reported so, not as an error.
pub(crate) async fn check(
    store: &dyn Store,
    now_ms: u64,
    thresholds: Thresholds,
    metrics: &Metrics,
    workflows: &BTreeSet<String>,
) -> Result<HealthReport, cairn_storage::Error> {
    let watchdog_ms = thresholds.watchdog_ms;
    let unreachable = |database: DatabaseHealth| HealthReport {
        ok: false,
        at_ms: now_ms,
        threads: ThreadStatus::ALL.iter().map(|s| (s.as_str().to_owned(), 0)).collect(),
        watchdog_ms,
        stuck_threads: 0,
        stuck: Vec::new(),
        expired_locks: 0,
        expired: Vec::new(),
        commits: commit_health(metrics, false),
        signal_backlog_ms: thresholds.signal_backlog_ms,
        signal_backlog: 0,
        backlogged: Vec::new(),
        database: Some(database),
        coordination: None,
        resources: None,
        actions: Vec::new(),
    };
    let server = store.database();
    if let Some(database) = server.clone().filter(|d| !d.reachable) {
        return Ok(unreachable(database.into()));
    }
    // A database on a server is waited for a bounded time per read; a file answers at once.
    let wait = server.map(|_| Duration::from_millis(HEALTH_DATABASE_WAIT_MS));
    match read_and_check(store, now_ms, thresholds, (metrics, workflows), wait).await {
        Err(cairn_storage::Error::Unavailable { cause, since_ms }) => {
            let writable = store.database().is_none_or(|d| d.writable);
            let last_error = Some(cause);
            let database = DatabaseHealth { reachable: false, writable, since_ms, last_error };
            Ok(unreachable(database))
        }
        Err(e @ cairn_storage::Error::Storage { .. }) => match store.database() {
            Some(database) if !database.reachable => Ok(unreachable(database.into())),
            _ => Err(e),
        },
        Ok(mut report) => {
            report.database = store.database().map(DatabaseHealth::from);
            report.ok &= report.database.as_ref().is_none_or(DatabaseHealth::is_ok);
            Ok(report)
        }
        Err(e) => Err(e),
    }
}

/// `reading`'s answer, within `wait` if given: past it, [`cairn_storage::Error::Unavailable`]
/// saying so (the database did not answer the health pass in time).
async fn answered<T>(
    wait: Option<Duration>,
    reading: impl std::future::IntoFuture<Output = Result<T, cairn_storage::Error>>,
) -> Result<T, cairn_storage::Error> {
    let Some(wait) = wait else { return reading.await };
    let since_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX));
    tokio::time::timeout(wait, reading.into_future()).await.unwrap_or_else(|_| {
        Err(cairn_storage::Error::Unavailable {
            cause: format!("no answer to the health pass's read within {} ms", wait.as_millis()),
            since_ms,
        })
    })
}

/// What the report says of this engine's step commits (`take`: the recent slow ones are
/// counted from now on afresh).
fn commit_health(metrics: &Metrics, take: bool) -> CommitHealth {
    let slow = metrics.slow_commits();
    CommitHealth {
        slow_commit_ms: slow.threshold.as_millis() as u64,
        slow_recent: if take {
            slow.recent.swap(0, Ordering::Relaxed)
        } else {
            slow.recent.load(Ordering::Relaxed)
        },
        slow_total: slow.count.load(Ordering::Relaxed),
        slowest_us: slow.slowest_us.load(Ordering::Relaxed),
    }
}

/// [`check`]'s reads and what it finds in them.
async fn read_and_check(
    store: &dyn Store,
    now_ms: u64,
    thresholds: Thresholds,
    (metrics, workflows): (&Metrics, &BTreeSet<String>),
    wait: Option<Duration>,
) -> Result<HealthReport, cairn_storage::Error> {
    let watchdog_ms = thresholds.watchdog_ms;
    // Threads by (workflow, status), of the registered workflows only (the label's bound).
    let mut by_workflow: BTreeMap<(&str, ThreadStatus), u64> = BTreeMap::new();
    // Unfinished threads whose inbox the backlog reads (the first ones listed).
    let mut inboxes: Vec<(cairn_storage::ThreadId, String, Vec<u8>)> = Vec::new();
    let mut counts: BTreeMap<ThreadStatus, u64> =
        ThreadStatus::ALL.iter().map(|s| (*s, 0)).collect();
    let mut stuck = Vec::new();
    let mut stuck_threads = 0;
    let limit = 500;
    let mut offset = 0;
    loop {
        let page =
            answered(wait, store.list_threads(&ThreadFilter::default(), Page { limit, offset }))
                .await?;
        offset += page.len();
        for record in &page {
            *counts.entry(record.status).or_default() += 1;
            if let Some(wf) = workflows.get(&*record.workflow.id) {
                *by_workflow.entry((wf.as_str(), record.status)).or_default() += 1;
            }
            let waits = !record.status.is_terminal() && record.status != ThreadStatus::Queued;
            if waits && inboxes.len() < HEALTH_SIGNAL_THREADS_MAX {
                let summary = record.summary.clone();
                inboxes.push((record.id.clone(), record.workflow.id.to_string(), summary));
            }
            let idle_ms = now_ms.saturating_sub(record.updated_at_ms);
            if record.status == ThreadStatus::Running && idle_ms > watchdog_ms {
                stuck_threads += 1;
                stuck.push(StuckThread {
                    thread: record.id.to_string(),
                    workflow: record.workflow.id.to_string(),
                    version: record.workflow.version,
                    idle_ms,
                });
                keep_first(&mut stuck, |s| std::cmp::Reverse(s.idle_ms));
            }
        }
        if page.len() < limit {
            break;
        }
    }
    let locks = answered(wait, store.locks()).await?;
    let (expired_locks, expired) = expired_locks_of(&locks, now_ms);
    let (signal_backlog, backlogged) =
        signal_backlog(store, &inboxes, now_ms, thresholds.signal_backlog_ms, wait).await?;
    let commits = commit_health(metrics, true);
    metrics.signal_backlog.set(signal_backlog as f64);
    metrics.threads(|s| counts.get(&s).copied().unwrap_or(0));
    for wf in workflows {
        metrics.workflow_threads(wf, |s| by_workflow.get(&(wf.as_str(), s)).copied().unwrap_or(0));
    }
    metrics.stuck_threads.set(stuck_threads as f64);
    metrics.expired_locks.set(expired_locks as f64);
    metrics.locks_held.set(locks.len() as f64);
    Ok(HealthReport {
        ok: stuck_threads == 0
            && expired_locks == 0
            && signal_backlog == 0
            && commits.slow_recent == 0,
        at_ms: now_ms,
        threads: counts.into_iter().map(|(s, n)| (s.as_str().to_owned(), n)).collect(),
        watchdog_ms,
        stuck_threads,
        stuck,
        expired_locks,
        expired,
        commits,
        signal_backlog_ms: thresholds.signal_backlog_ms,
        signal_backlog,
        backlogged,
        database: None,
        coordination: None,
        resources: None,
        actions: Vec::new(),
    }
    .finish())
}

/// The locks of `locks` past their time to live at `now_ms`: how many, and the longest expired.
fn expired_locks_of(locks: &[cairn_storage::LockRecord], now_ms: u64) -> (u64, Vec<ExpiredLock>) {
    let mut expired = Vec::new();
    let mut count = 0;
    for lock in locks {
        if !lock.is_live(now_ms) {
            count += 1;
            expired.push(ExpiredLock {
                name: lock.name.clone(),
                holder: lock.owner.clone(),
                expired_ms: now_ms.saturating_sub(lock.expires_at_ms),
            });
            keep_first(&mut expired, |l| std::cmp::Reverse(l.expired_ms));
        }
    }
    (count, expired)
}

/// The signal backlog of `inboxes` (thread, workflow, record summary): per thread, the signals
/// of its inbox older than `backlog_ms` whose number is past the cursor its summary keeps for
/// their name (no node took them). The engine's own names (`cairn.`: updates, promises,
/// children's ends) are taken otherwise, and not counted; nor a name a partial summary lacks.
async fn signal_backlog(
    store: &dyn Store,
    inboxes: &[(cairn_storage::ThreadId, String, Vec<u8>)],
    now_ms: u64,
    backlog_ms: u64,
    wait: Option<Duration>,
) -> Result<(u64, Vec<SignalBacklog>), cairn_storage::Error> {
    const NAMES_SHOWN: usize = 8;
    let mut total = 0;
    let mut backlogged = Vec::new();
    for (thread, workflow, summary) in inboxes {
        let signals =
            answered(wait, store.signals(thread, 0, HEALTH_SIGNALS_PER_THREAD_MAX)).await?;
        if signals.is_empty() {
            continue;
        }
        let (cursors, partial) = cairn_core::summary::signal_cursors(summary);
        let mut count = 0;
        let mut oldest_ms = 0;
        let mut names = std::collections::BTreeSet::new();
        for signal in &signals {
            let age = now_ms.saturating_sub(signal.at_ms);
            if age <= backlog_ms || signal.name.starts_with("cairn.") {
                continue;
            }
            let taken = match cursors.get(&signal.name) {
                Some(cursor) => signal.n <= *cursor,
                None => partial,
            };
            if !taken {
                count += 1;
                oldest_ms = oldest_ms.max(age);
                if names.len() < NAMES_SHOWN {
                    names.insert(signal.name.clone());
                }
            }
        }
        if count > 0 {
            total += count;
            backlogged.push(SignalBacklog {
                thread: thread.to_string(),
                workflow: workflow.clone(),
                signals: count,
                names: names.into_iter().collect(),
                oldest_ms,
            });
            keep_first(&mut backlogged, |b| std::cmp::Reverse((b.signals, b.oldest_ms)));
        }
    }
    backlogged.sort_by_key(|b| std::cmp::Reverse((b.signals, b.oldest_ms)));
    backlogged.truncate(HEALTH_ITEMS_MAX);
    Ok((total, backlogged))
}

/// Keeps the 100 (`HEALTH_ITEMS_MAX`) smallest items by `key` (sorted), so a report stays bounded
/// however many threads are stuck.
fn keep_first<T, K: Ord>(items: &mut Vec<T>, key: impl FnMut(&T) -> K) {
    if items.len() > 2 * HEALTH_ITEMS_MAX {
        items.sort_by_key(key);
        items.truncate(HEALTH_ITEMS_MAX);
    }
}

/// Threads with a signal backlog the recommended actions name one by one (the report lists
/// more).
const BACKLOG_ACTIONS_MAX: usize = 3;

impl HealthReport {
    /// Adds what a pass read of the machine, and the recommended action for everything that
    /// needs attention (`ok` false when any resource is short).
    pub(crate) fn with_resources(mut self, resources: ResourceHealth) -> HealthReport {
        let mut actions = Vec::new();
        if let Some(d) = self.database.as_ref().filter(|d| !d.reachable || !d.writable) {
            let why = d.last_error.as_deref().unwrap_or("no error recorded");
            actions.push(format!(
                "the database does not {} ({why}): check the server or the disk; the engine \
                 retries on its own and recovers once it does",
                if d.reachable { "take writes" } else { "answer" }
            ));
        }
        if self.stuck_threads > 0 {
            actions.push(format!(
                "{} running threads made no step for over {} ms: look at what their node waits \
                 for (`cairn show ID`), then cancel or pause them (`cairn cancel ID`), or let a \
                 HealthPolicy do it",
                self.stuck_threads, self.watchdog_ms
            ));
        }
        if self.expired_locks > 0 {
            actions.push(format!(
                "{} locks are held past their time to live: their holders neither renewed nor \
                 released them; a HealthPolicy with ExpiredLockAction::Release clears them",
                self.expired_locks
            ));
        }
        for b in self.backlogged.iter().take(BACKLOG_ACTIONS_MAX) {
            actions.push(format!(
                "thread {} has {} signals ({}) waiting for over {} ms that no node took: check \
                 the names it receives (`cairn show {}`) or cancel it (`cairn cancel {}`)",
                b.thread,
                b.signals,
                b.names.join(", "),
                b.oldest_ms,
                b.thread,
                b.thread
            ));
        }
        if self.backlogged.len() > BACKLOG_ACTIONS_MAX {
            actions.push(format!(
                "{} signals in all wait in unfinished threads that took none of them: see \
                 `backlogged` in the report",
                self.signal_backlog
            ));
        }
        if self.commits.slow_recent > 0 {
            actions.push(format!(
                "{} step commits took over {} ms since the last pass: the disk (or the database \
                 server) is slow or saturated",
                self.commits.slow_recent, self.commits.slow_commit_ms
            ));
        }
        let short = resources.actions();
        self.ok &= short.is_empty();
        actions.extend(short);
        self.actions = actions;
        self.resources = Some(resources);
        self
    }

    /// Sorts and bounds the named items (after [`check`] gathered them).
    fn finish(mut self) -> HealthReport {
        self.stuck.sort_by_key(|s| std::cmp::Reverse(s.idle_ms));
        self.stuck.truncate(HEALTH_ITEMS_MAX);
        self.expired.sort_by_key(|l| std::cmp::Reverse(l.expired_ms));
        self.expired.truncate(HEALTH_ITEMS_MAX);
        self
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_long_list_is_cut_to_the_longest_items() {
        let mut items: Vec<u64> = (0..(3 * HEALTH_ITEMS_MAX as u64)).collect();
        keep_first(&mut items, |n| std::cmp::Reverse(*n));
        assert_eq!(items.len(), HEALTH_ITEMS_MAX);
        assert_eq!(items[0], 3 * HEALTH_ITEMS_MAX as u64 - 1);
    }
}
