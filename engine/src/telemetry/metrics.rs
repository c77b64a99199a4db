//! The engine's metric handles, registered once when the engine opens with the recorder it was
//! given ([`crate::EngineBuilder::metrics_recorder`]) or the process's global one. Without a
//! recorder every handle is a no-op; with one, recording is an atomic operation on a handle
//! (no name lookup on the hot path).

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use cairn_storage::ThreadStatus;
use metrics::{Counter, Gauge, Histogram, Key, Label, Metadata, Recorder, Unit};

use super::names::*;

/// The engine's handles (clones share them).
#[derive(Clone)]
pub(crate) struct Metrics {
    pub steps: Counter,
    pub step_seconds: Histogram,
    commit_seconds: Histogram,
    commits_slow: Counter,
    tool_calls_real: Counter,
    tool_calls_memo: Counter,
    pub tool_seconds: Histogram,
    pub retries: Counter,
    pub node_failures: Counter,
    pub thread_failures: Counter,
    threads: Arc<[(ThreadStatus, Gauge)]>,
    pub waiting_permit: Gauge,
    pub timers_armed: Gauge,
    pub lease_takeovers: Counter,
    pub runners_fenced: Counter,
    pub locks_held: Gauge,
    pub stuck_threads: Gauge,
    pub expired_locks: Gauge,
    /// Threads deleted by the retention policy.
    pub deleted_by_retention: Counter,
    /// Threads deleted by hand (`Engine::delete`).
    pub deleted_by_hand: Counter,
    /// Step commits slower than the threshold since open, and the slowest, in µs.
    slow: Arc<SlowCommits>,
}

/// What the health report says of commits.
#[derive(Debug)]
pub(crate) struct SlowCommits {
    pub threshold: Duration,
    pub count: AtomicU64,
    /// Since the previous health pass (which takes them).
    pub recent: AtomicU64,
    pub slowest_us: AtomicU64,
}

static META: Metadata<'static> = Metadata::new(module_path!(), metrics::Level::INFO, None);

impl Metrics {
    /// Handles of `recorder`; `slow_commit` is the threshold of a slow commit.
    pub fn of(recorder: &dyn Recorder, slow_commit: Duration) -> Metrics {
        describe(recorder);
        let counter =
            |name: &'static str| recorder.register_counter(&Key::from_static_name(name), &META);
        let gauge =
            |name: &'static str| recorder.register_gauge(&Key::from_static_name(name), &META);
        let histogram =
            |name: &'static str| recorder.register_histogram(&Key::from_static_name(name), &META);
        let labelled = |name: &'static str, key: &'static str, value: &'static str| {
            Key::from_parts(name, vec![Label::from_static_parts(key, value)])
        };
        let threads = ThreadStatus::ALL
            .iter()
            .map(|s| (*s, recorder.register_gauge(&labelled(THREADS, "status", s.as_str()), &META)))
            .collect();
        Metrics {
            steps: counter(STEPS),
            step_seconds: histogram(STEP_SECONDS),
            commit_seconds: histogram(COMMIT_SECONDS),
            commits_slow: counter(COMMITS_SLOW),
            tool_calls_real: recorder
                .register_counter(&labelled(TOOL_CALLS, "memo", "false"), &META),
            tool_calls_memo: recorder
                .register_counter(&labelled(TOOL_CALLS, "memo", "true"), &META),
            tool_seconds: histogram(TOOL_CALL_SECONDS),
            retries: counter(RETRIES),
            node_failures: counter(NODE_FAILURES),
            thread_failures: counter(THREAD_FAILURES),
            threads,
            waiting_permit: gauge(WAITING_PERMIT),
            timers_armed: gauge(TIMERS_ARMED),
            lease_takeovers: counter(LEASE_TAKEOVERS),
            runners_fenced: counter(RUNNERS_FENCED),
            locks_held: gauge(LOCKS_HELD),
            stuck_threads: gauge(STUCK_THREADS),
            expired_locks: gauge(EXPIRED_LOCKS),
            deleted_by_retention: recorder
                .register_counter(&labelled(THREADS_DELETED, "by", "retention"), &META),
            deleted_by_hand: recorder
                .register_counter(&labelled(THREADS_DELETED, "by", "hand"), &META),
            slow: Arc::new(SlowCommits {
                threshold: slow_commit,
                count: AtomicU64::new(0),
                recent: AtomicU64::new(0),
                slowest_us: AtomicU64::new(0),
            }),
        }
    }

    /// Handles of the global recorder (no-ops when none is installed).
    pub fn global(slow_commit: Duration) -> Metrics {
        metrics::with_recorder(|r| Metrics::of(r, slow_commit))
    }

    /// Counts a tool call: a memo hit, or a real call (whose time is recorded apart).
    pub fn tool_call(&self, memo: bool) {
        if memo { &self.tool_calls_memo } else { &self.tool_calls_real }.increment(1);
    }

    /// Records the time from a step's batch submitted to durable.
    pub fn commit(&self, took: Duration) {
        self.commit_seconds.record(took.as_secs_f64());
        if took > self.slow.threshold {
            self.commits_slow.increment(1);
            self.slow.count.fetch_add(1, Ordering::Relaxed);
            self.slow.recent.fetch_add(1, Ordering::Relaxed);
        }
        self.slow.slowest_us.fetch_max(took.as_micros() as u64, Ordering::Relaxed);
    }

    /// Counts a runnable thread waiting for a permit until the guard drops.
    pub fn waiting_permit(&self) -> Waiting {
        self.waiting_permit.increment(1.0);
        Waiting(self.waiting_permit.clone())
    }

    /// Runs a tool call's future, recording its time.
    pub async fn time_tool<F: std::future::Future>(&self, call: F) -> F::Output {
        let started = Instant::now();
        let output = call.await;
        self.tool_seconds.record(started.elapsed().as_secs_f64());
        output
    }

    /// A thread ended in `status` (terminal): counts a failure.
    pub fn thread_ended(&self, status: ThreadStatus) {
        if status == ThreadStatus::Failed {
            self.thread_failures.increment(1);
        }
    }

    /// Sets the locks held to `n`: the lock table's size, read after an end released locks
    /// (the health check sets it too).
    pub fn set_locks_held(&self, n: usize) {
        self.locks_held.set(n as f64);
    }

    /// Slow commits so far.
    pub fn slow_commits(&self) -> &SlowCommits {
        &self.slow
    }

    /// Sets the threads-by-status gauges.
    pub fn threads(&self, count: impl Fn(ThreadStatus) -> u64) {
        for (status, gauge) in self.threads.iter() {
            gauge.set(count(*status) as f64);
        }
    }
}

/// One runnable thread waiting for a permit; uncounted when dropped (also when its task is).
pub(crate) struct Waiting(Gauge);

impl Drop for Waiting {
    fn drop(&mut self) {
        self.0.decrement(1.0);
    }
}

fn describe(r: &dyn Recorder) {
    let histograms = [
        (STEP_SECONDS, "one step from planning to its batch submitted"),
        (COMMIT_SECONDS, "a runner batch from submitted to durable"),
        (TOOL_CALL_SECONDS, "a tool call that ran"),
    ];
    for (name, help) in histograms {
        r.describe_histogram(name.into(), Some(Unit::Seconds), help.into());
    }
    let counters = [
        (STEPS, "steps run"),
        (COMMITS_SLOW, "step commits slower than the slow-commit threshold"),
        (TOOL_CALLS, "tool calls; memo=true: a recorded result returned"),
        (RETRIES, "node attempts retried"),
        (NODE_FAILURES, "node attempts that failed"),
        (THREAD_FAILURES, "threads that ended Failed"),
        (LEASE_TAKEOVERS, "threads taken over from another lease owner"),
        (RUNNERS_FENCED, "runners fenced off their thread"),
        (THREADS_DELETED, "threads deleted whole; by=retention or hand"),
    ];
    for (name, help) in counters {
        r.describe_counter(name.into(), Some(Unit::Count), help.into());
    }
    let gauges = [
        (THREADS, "threads by stored status, at the latest health pass"),
        (WAITING_PERMIT, "runnable threads waiting for a permit"),
        (TIMERS_ARMED, "timers and deadlines armed"),
        (LOCKS_HELD, "durable locks in the store"),
        (STUCK_THREADS, "running threads with no step past the watchdog"),
        (EXPIRED_LOCKS, "locks held past their time to live"),
    ];
    for (name, help) in gauges {
        r.describe_gauge(name.into(), Some(Unit::Count), help.into());
    }
}
