//! What a store's writer reports of each group commit: the `group_commit` tracing span's fields
//! and the `cairn_storage_*` metrics, the same for every backend.
//!
//! Metrics go through the `metrics` facade. The handles are registered once, at open, with the
//! process's global recorder (none installed: no-op handles, nothing measured), or later with a
//! recorder the engine is given ([`StoreMetrics::register`]); a group commit then costs a few
//! atomic adds. Names and units are in docs/observability.md ("Metrics").

use std::sync::{Arc, PoisonError, RwLock};
use std::time::Duration;

use metrics::{Counter, Gauge, Histogram, Key, Label, Metadata, Recorder, Unit};
use tokio::sync::watch;

/// Group commits, by outcome (`ok`, `failed`).
pub const GROUP_COMMITS: &str = "cairn_storage_group_commits_total";
/// Writes (batches, checkpoint deletions, prunes) per group commit.
pub const GROUP_WRITES: &str = "cairn_storage_group_writes";
/// Time of one group commit's commit call, in seconds (for a durable one: with its sync).
pub const GROUP_COMMIT_SECONDS: &str = "cairn_storage_group_commit_duration_seconds";
/// Group commits that were synced to disk (redb `Immediate`; PostgreSQL `synchronous_commit`).
pub const FSYNCS: &str = "cairn_storage_fsyncs_total";
/// Events committed.
pub const EVENTS: &str = "cairn_storage_events_total";
/// Bytes of events, payloads and snapshots committed.
pub const BYTES: &str = "cairn_storage_bytes_total";
/// Counter: group transactions rolled back after meeting another writer and run again.
pub const GROUP_RETRIES: &str = "cairn_storage_group_retries_total";
/// Counter: sync reads that crossed the network from inside an async runtime (PostgreSQL), each
/// blocking its thread for a round trip: through `block_in_place` on a multi-thread runtime,
/// the whole runtime on a `current_thread` one. The engine's paths await their reads; what
/// this counts is left to find.
pub const BLOCKING_READS: &str = "cairn_storage_blocking_reads_total";
/// Gauge: 1 while the store's database answers, 0 from the first connection that failed or
/// missed its deadline until one answers again (PostgreSQL; a file store never sets it).
pub const DATABASE_UP: &str = "cairn_database_up";
/// Gauge: 1 while the store accepts writes, 0 from a failed commit that poisoned it (the disk
/// is full, an I/O error) until it has reopened its database (a file store; never set by a
/// store that never refused writes).
pub const DATABASE_WRITABLE: &str = "cairn_database_writable";
/// Counter: connections to the database that failed, were refused or missed a deadline (each
/// one the store gave up and replaced).
pub const DATABASE_FAILURES: &str = "cairn_database_failures_total";

/// Whether a store's database answers, as its connections last found (see
/// [`Backend::database`](crate::store::Backend::database)).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DatabaseState {
    /// Whether the last round trip (a statement, a check, a connection) was answered.
    pub reachable: bool,
    /// Whether the store accepts writes: false from a commit that failed part way (the disk is
    /// full, an I/O error) until the store has reopened its database (see
    /// [`crate::Error::Poisoned`]).
    pub writable: bool,
    /// Since when it is as it is: ms since the Unix epoch, on this machine's clock.
    pub since_ms: u64,
    /// The last failure (a refused connection, a missed deadline, the commit that poisoned
    /// the store), kept after recovery.
    pub last_error: Option<String>,
}

impl DatabaseState {
    /// [`crate::Error::Unavailable`] naming the cause, while the database does not answer;
    /// `None` while it does.
    pub fn unavailable(&self) -> Option<crate::error::Error> {
        (!self.reachable).then(|| crate::error::Error::Unavailable {
            cause: self.last_error.clone().unwrap_or_else(|| "no answer".to_owned()),
            since_ms: self.since_ms,
        })
    }
}

/// Resolves once the database has not answered for `after` (at once if it has not for that
/// long already), with [`DatabaseState::unavailable`]'s error; never while it answers, nor for a
/// store that has no server (`changes` from [`StoreMetrics::database_changes`]). What a wait
/// that needs the database selects on, so that it ends with the reason instead of waiting on.
pub async fn unavailable_for(
    changes: &mut watch::Receiver<Option<DatabaseState>>,
    after: Duration,
) -> crate::error::Error {
    loop {
        let state = changes.borrow_and_update().clone();
        let down = state.and_then(|s| s.unavailable().map(|e| (s.since_ms, e)));
        let left = down.as_ref().map(|(since_ms, _)| {
            let due_ms =
                since_ms.saturating_add(u64::try_from(after.as_millis()).unwrap_or(u64::MAX));
            Duration::from_millis(due_ms.saturating_sub(now_ms()))
        });
        match (down, left) {
            (Some((_, e)), Some(left)) if left.is_zero() => return e,
            (_, left) => {
                let sleep = async {
                    match left {
                        Some(left) => tokio::time::sleep(left).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = sleep => {}
                    changed = changes.changed() => if changed.is_err() {
                        // The store is gone: nothing will say the database is down.
                        return std::future::pending().await;
                    }
                }
            }
        }
    }
}

/// What one group commit did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GroupFigures {
    /// Writes in the group.
    pub writes: usize,
    /// Events of its batches.
    pub events: usize,
    /// Bytes of its batches (events, payloads, snapshots).
    pub bytes: usize,
    /// Time of the commit call.
    pub commit: Duration,
    /// Whether the commit was synced to disk.
    pub durable: bool,
    /// Whether it committed.
    pub ok: bool,
    /// Transactions the group ran in before the last (PostgreSQL: rolled back after meeting
    /// another writer's rows; always 0 on a file).
    pub retries: u32,
}

impl GroupFigures {
    /// The sync part of the commit in µs as the span reports it: the commit call's time when
    /// the commit was durable (the sync dominates it, and neither backend times it apart), else 0.
    pub fn fsync_us(&self) -> u64 {
        if self.durable { self.commit.as_micros() as u64 } else { 0 }
    }

    /// Records the figures on `span` (a `group_commit` span with these fields empty).
    pub fn record_on(&self, span: &tracing::Span) {
        span.record("writes", self.writes);
        span.record("events", self.events);
        span.record("bytes", self.bytes);
        span.record("commit_us", self.commit.as_micros() as u64);
        span.record("fsync_us", self.fsync_us());
        span.record("retries", self.retries);
    }
}

/// The `group_commit` span of one group on `backend`, its figures left for
/// [`GroupFigures::record_on`] (and `callers`) to fill in.
pub(crate) fn group_span(backend: &'static str, durable: bool) -> tracing::Span {
    tracing::debug_span!(
        "group_commit",
        backend,
        durable,
        writes = tracing::field::Empty,
        callers = tracing::field::Empty,
        events = tracing::field::Empty,
        bytes = tracing::field::Empty,
        commit_us = tracing::field::Empty,
        fsync_us = tracing::field::Empty,
        retries = tracing::field::Empty,
    )
}

/// The bytes a batch brings: its events, payloads and snapshots.
pub(crate) fn batch_bytes(batch: &crate::batch::Batch) -> usize {
    let events: usize = batch.events.iter().map(|e| e.data.len() + e.summary.len()).sum();
    let payloads: usize = batch.payloads.iter().map(Vec::len).sum();
    let snapshots: usize = batch.checkpoints.iter().map(|c| c.snapshot.len()).sum();
    events + payloads + snapshots
}

/// A store's metric handles, shared by the store and its writer thread, and the database's
/// state as its connections last found it.
#[derive(Clone)]
pub struct StoreMetrics(Arc<RwLock<Handles>>, Arc<watch::Sender<Option<DatabaseState>>>);

impl std::fmt::Debug for StoreMetrics {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("StoreMetrics")
    }
}

struct Handles {
    ok: Counter,
    failed: Counter,
    writes: Histogram,
    commit_seconds: Histogram,
    fsyncs: Counter,
    events: Counter,
    bytes: Counter,
    retries: Counter,
    blocking_reads: Counter,
    database_up: Gauge,
    database_writable: Gauge,
    database_failures: Counter,
}

impl Default for StoreMetrics {
    /// Handles of the global recorder.
    fn default() -> StoreMetrics {
        StoreMetrics(
            Arc::new(RwLock::new(metrics::with_recorder(Handles::of))),
            Arc::new(watch::Sender::new(None)),
        )
    }
}

impl StoreMetrics {
    /// Reports to `recorder` from now on (the engine's, when it was given one).
    pub fn register(&self, recorder: &dyn Recorder) {
        let handles = Handles::of(recorder);
        match self.database() {
            Some(state) => {
                handles.database_up.set(if state.reachable { 1.0 } else { 0.0 });
                handles.database_writable.set(if state.writable { 1.0 } else { 0.0 });
            }
            // No failure reported: a store that writes takes writes.
            None => handles.database_writable.set(1.0),
        }
        *self.0.write().unwrap_or_else(PoisonError::into_inner) = handles;
    }

    /// The database's state, once a connection reported it, or a failed commit poisoned the
    /// store (`None` for a file store that never had a commit fail).
    pub fn database(&self) -> Option<DatabaseState> {
        self.1.borrow().clone()
    }

    /// [`StoreMetrics::database`] while the database does not answer; `None` while it does
    /// (copying nothing: what every write asks before it queues).
    #[cfg(feature = "postgres")]
    pub(crate) fn database_down(&self) -> Option<DatabaseState> {
        self.1.borrow().as_ref().filter(|s| !s.reachable).cloned()
    }

    /// Every change of [`StoreMetrics::database`], as it happens: what a wait that needs the
    /// database (a read, a caller waiting for a thread) watches to end at once with
    /// [`DatabaseState::unavailable`] when it stops answering.
    pub fn database_changes(&self) -> watch::Receiver<Option<DatabaseState>> {
        self.1.subscribe()
    }

    /// A round trip was answered: the database is reachable (logged when it was not).
    pub fn database_answered(&self) {
        self.1.send_if_modified(|state| {
            if state.as_ref().is_some_and(|s| s.reachable) {
                return false;
            }
            let last_error = state.as_ref().and_then(|s| s.last_error.clone());
            if let Some(down) = state.as_ref() {
                let down_ms = now_ms().saturating_sub(down.since_ms);
                tracing::warn!(down_ms, "the database answers again");
            }
            let writable = state.as_ref().is_none_or(|s| s.writable);
            *state =
                Some(DatabaseState { reachable: true, writable, since_ms: now_ms(), last_error });
            self.0.read().unwrap_or_else(PoisonError::into_inner).database_up.set(1.0);
            true
        });
    }

    /// A connection failed, was refused or missed its deadline (`what`): counted, and the
    /// database is unreachable until a round trip is answered (logged once per outage).
    pub fn database_failed(&self, what: &str) {
        let h = self.0.read().unwrap_or_else(PoisonError::into_inner);
        h.database_failures.increment(1);
        self.1.send_modify(|state| match state.as_mut() {
            Some(s) if !s.reachable => s.last_error = Some(what.to_owned()),
            _ => {
                tracing::warn!(error = what, "the database does not answer");
                *state = Some(DatabaseState {
                    reachable: false,
                    writable: state.as_ref().is_none_or(|s| s.writable),
                    since_ms: now_ms(),
                    last_error: Some(what.to_owned()),
                });
                h.database_up.set(0.0);
            }
        });
    }

    /// One connection was lost (the server ended it, its socket failed) while the database
    /// may well answer on a fresh one: counted, not an outage (a failed reconnection, or a
    /// missed deadline, is one: [`StoreMetrics::database_failed`]).
    pub fn connection_lost(&self, what: &str) {
        self.0.read().unwrap_or_else(PoisonError::into_inner).database_failures.increment(1);
        tracing::debug!(error = what, "a database connection was lost");
    }

    /// A commit failed part way (`cause`) and the store refuses writes until it recovers:
    /// not writable from now (the database may still be read).
    pub fn writes_refused(&self, cause: &str) {
        self.1.send_modify(|state| {
            let reachable = state.as_ref().is_none_or(|s| s.reachable);
            *state = Some(DatabaseState {
                reachable,
                writable: false,
                since_ms: now_ms(),
                last_error: Some(cause.to_owned()),
            });
        });
        self.0.read().unwrap_or_else(PoisonError::into_inner).database_writable.set(0.0);
    }

    /// The store recovered from [`StoreMetrics::writes_refused`]: writable again (the cause is
    /// kept as the last error).
    pub fn writes_accepted(&self) {
        let changed = self.1.send_if_modified(|state| {
            let Some(s) = state.as_mut().filter(|s| !s.writable) else { return false };
            s.writable = true;
            s.since_ms = now_ms();
            true
        });
        if changed {
            self.0.read().unwrap_or_else(PoisonError::into_inner).database_writable.set(1.0);
        }
    }

    /// Counts one group commit.
    pub fn group(&self, figures: &GroupFigures) {
        let h = self.0.read().unwrap_or_else(PoisonError::into_inner);
        h.retries.increment(u64::from(figures.retries));
        if !figures.ok {
            h.failed.increment(1);
            return;
        }
        h.ok.increment(1);
        h.writes.record(figures.writes as f64);
        h.commit_seconds.record(figures.commit.as_secs_f64());
        if figures.durable {
            h.fsyncs.increment(1);
        }
        h.events.increment(figures.events as u64);
        h.bytes.increment(figures.bytes as u64);
    }

    /// Counts one sync read that blocked a thread of an async runtime ([`BLOCKING_READS`]).
    pub fn blocking_read(&self) {
        self.0.read().unwrap_or_else(PoisonError::into_inner).blocking_reads.increment(1);
    }
}

static META: Metadata<'static> = Metadata::new(module_path!(), metrics::Level::INFO, None);

impl Handles {
    fn of(r: &dyn Recorder) -> Handles {
        describe(r);
        let commits = |outcome: &'static str| {
            r.register_counter(
                &Key::from_parts(GROUP_COMMITS, vec![Label::from_static_parts("outcome", outcome)]),
                &META,
            )
        };
        Handles {
            ok: commits("ok"),
            failed: commits("failed"),
            writes: r.register_histogram(&Key::from_static_name(GROUP_WRITES), &META),
            commit_seconds: r
                .register_histogram(&Key::from_static_name(GROUP_COMMIT_SECONDS), &META),
            fsyncs: r.register_counter(&Key::from_static_name(FSYNCS), &META),
            events: r.register_counter(&Key::from_static_name(EVENTS), &META),
            bytes: r.register_counter(&Key::from_static_name(BYTES), &META),
            retries: r.register_counter(&Key::from_static_name(GROUP_RETRIES), &META),
            blocking_reads: r.register_counter(&Key::from_static_name(BLOCKING_READS), &META),
            database_up: r.register_gauge(&Key::from_static_name(DATABASE_UP), &META),
            database_writable: r.register_gauge(&Key::from_static_name(DATABASE_WRITABLE), &META),
            database_failures: r.register_counter(&Key::from_static_name(DATABASE_FAILURES), &META),
        }
    }
}

fn describe(r: &dyn Recorder) {
    r.describe_counter(GROUP_COMMITS.into(), None, "group commits, by outcome".into());
    r.describe_histogram(GROUP_WRITES.into(), Some(Unit::Count), "writes per group".into());
    r.describe_histogram(
        GROUP_COMMIT_SECONDS.into(),
        Some(Unit::Seconds),
        "time of a group's commit call (with its sync when durable)".into(),
    );
    r.describe_counter(FSYNCS.into(), None, "group commits synced to disk".into());
    r.describe_counter(EVENTS.into(), None, "events committed".into());
    r.describe_counter(BYTES.into(), Some(Unit::Bytes), "bytes committed".into());
    r.describe_counter(
        GROUP_RETRIES.into(),
        None,
        "group transactions rolled back after meeting another writer and run again".into(),
    );
    r.describe_counter(
        BLOCKING_READS.into(),
        None,
        "sync reads over the network that blocked a thread of an async runtime".into(),
    );
    r.describe_gauge(DATABASE_UP.into(), None, "1 while the database answers, else 0".into());
    r.describe_gauge(
        DATABASE_WRITABLE.into(),
        None,
        "1 while the store accepts writes, 0 after a commit that failed until it recovers".into(),
    );
    r.describe_counter(
        DATABASE_FAILURES.into(),
        None,
        "database connections that failed or missed a deadline".into(),
    );
}

/// This machine's clock, ms since the Unix epoch (when a database state began).
pub(crate) fn now_ms() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| u64::try_from(d.as_millis()).unwrap_or(u64::MAX))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_failed_connection_is_an_outage_until_an_answer_and_a_lost_one_is_not() {
        let m = StoreMetrics::default();
        assert_eq!(m.database(), None, "nothing known before a connection reports");
        m.database_answered();
        assert!(m.database().is_some_and(|s| s.reachable));
        m.connection_lost("terminated by an administrator");
        assert!(m.database().is_some_and(|s| s.reachable), "one lost connection is no outage");
        m.database_failed("connect: refused");
        let down = m.database().unwrap();
        assert!(!down.reachable);
        match down.unavailable() {
            Some(crate::error::Error::Unavailable { cause, since_ms }) => {
                assert_eq!((cause.as_str(), since_ms), ("connect: refused", down.since_ms));
            }
            other => panic!("{other:?}"),
        }
        m.database_failed("connect: refused again");
        let still = m.database().unwrap();
        assert_eq!(still.since_ms, down.since_ms, "the outage began at its first failure");
        assert_eq!(still.last_error.as_deref(), Some("connect: refused again"));
        m.database_answered();
        assert!(m.database().unwrap().unavailable().is_none());
    }

    #[test]
    fn a_wait_on_the_database_ends_once_it_has_been_away_long_enough() {
        let rt = tokio::runtime::Builder::new_current_thread().enable_time().build().unwrap();
        rt.block_on(async {
            let short = Duration::from_millis(50);
            let m = StoreMetrics::default();
            let mut changes = m.database_changes();
            m.database_answered();
            let waiting =
                tokio::time::timeout(short, unavailable_for(&mut changes, Duration::ZERO));
            assert!(waiting.await.is_err(), "no end while the database answers");
            // A wait in progress ends when the store learns the database is gone.
            let mut watching = m.database_changes();
            let waiter = tokio::spawn(async move {
                unavailable_for(&mut watching, Duration::ZERO).await.to_string()
            });
            tokio::task::yield_now().await;
            m.database_failed("no answer within 2000 ms");
            let told = tokio::time::timeout(Duration::from_secs(5), waiter).await.unwrap().unwrap();
            assert_eq!(told, "the database does not answer: no answer within 2000 ms");
            // With a grace: not before the outage is that old.
            let grace = Duration::from_millis(300);
            let started = std::time::Instant::now();
            let e =
                tokio::time::timeout(Duration::from_secs(5), unavailable_for(&mut changes, grace))
                    .await
                    .expect("ended after its grace");
            assert!(matches!(e, crate::error::Error::Unavailable { .. }));
            assert!(started.elapsed() >= grace - short, "ended after {:?}", started.elapsed());
        });
    }

    #[test]
    fn fsync_time_is_the_commit_time_of_a_durable_group_only() {
        let commit = Duration::from_micros(1_500);
        let durable = GroupFigures { commit, durable: true, ..GroupFigures::default() };
        assert_eq!(durable.fsync_us(), 1_500);
        assert_eq!(GroupFigures { durable: false, ..durable }.fsync_us(), 0);
    }
}
