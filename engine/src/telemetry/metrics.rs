//! The engine's metric handles, registered once when the engine opens with the recorder it was
//! given ([`crate::EngineBuilder::metrics_recorder`]) or the process's global one. Without a
//! recorder every handle is a no-op; with one, recording is an atomic operation on a handle
//! (no name lookup on the hot path).
//!
//! The step, node and tool metrics carry a `workflow` label: a thread's runner takes its
//! workflow's handles once per drive ([`Metrics::for_workflow`], registered at the first use of
//! a workflow and kept). Node failures and retries also carry `node`, registered when one
//! happens (a failure is rare; the label's values are the nodes of registered workflows).

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn_storage::{CheckpointKind, ThreadStatus};
use metrics::{Counter, Gauge, Histogram, Key, Label, Metadata, Recorder, Unit};

use super::names::*;

/// The engine's handles (clones share them: a clone takes one reference count, where a clone
/// of the handles took one a field, a dozen, and a thread's runner takes several; and a struct
/// that holds it, in a future copied at its await, holds a pointer, not 440 bytes).
#[derive(Clone)]
pub(crate) struct Metrics(Arc<Handles>);

impl std::ops::Deref for Metrics {
    type Target = Handles;

    fn deref(&self) -> &Handles {
        &self.0
    }
}

/// The handles themselves ([`Metrics`] shares them).
#[derive(Clone)]
pub(crate) struct Handles {
    pub steps: Counter,
    pub step_seconds: Histogram,
    commit_seconds: Histogram,
    commits_slow: Counter,
    tool_calls_real: Counter,
    tool_calls_memo: Counter,
    pub tool_seconds: Histogram,
    pub thread_failures: Counter,
    /// A workflow's node attempts' times, by node (registered with its handles; a node of a
    /// later version is registered at its first attempt). Keyed by the workflow's own names:
    /// a fast hasher, looked up at every attempt.
    node_seconds: Arc<HashMap<String, Histogram, foldhash::fast::RandomState>>,
    /// A workflow's threads ended, by terminal status.
    threads_ended: Arc<[(ThreadStatus, Counter)]>,
    /// A workflow's threads' times from creation to end.
    thread_seconds: Histogram,
    /// Schedule ticks' lag, tick to run started.
    schedule_lag: Histogram,
    threads: Arc<[(ThreadStatus, Gauge)]>,
    /// Checkpoints written, by kind (indexed by the kind's on-disk discriminant).
    checkpoints: Arc<[(CheckpointKind, Counter)]>,
    pub waiting_permit: Gauge,
    pub timers_armed: Gauge,
    pub lease_takeovers: Counter,
    pub runners_fenced: Counter,
    pub locks_held: Gauge,
    pub stuck_threads: Gauge,
    pub expired_locks: Gauge,
    pub signal_backlog: Gauge,
    /// Threads deleted by the retention policy.
    pub deleted_by_retention: Counter,
    /// Threads deleted by hand (`Engine::delete`).
    pub deleted_by_hand: Counter,
    /// Step commits slower than the threshold since open, and the slowest, in µs.
    slow: Arc<SlowCommits>,
    /// Where handles are registered (labelled ones after open).
    source: Source,
    /// The workflow these handles are labelled with (none: the engine's own).
    workflow: Option<Arc<str>>,
    /// Each workflow's handles, registered at its first thread.
    by_workflow: Arc<Mutex<HashMap<Arc<str>, Metrics>>>,
    /// Each queue's depth and running gauges, registered at the first admission pass that saw it.
    by_queue: Arc<Mutex<HashMap<String, (Gauge, Gauge)>>>,
    /// Each registered workflow's threads-by-status gauges, registered at the first health
    /// pass that counted it.
    workflow_threads: Arc<Mutex<HashMap<String, WorkflowGauges>>>,
}

/// One workflow's threads-by-status gauges.
type WorkflowGauges = Arc<[(ThreadStatus, Gauge)]>;

/// The recorder handles are registered with.
#[derive(Clone)]
pub(crate) enum Source {
    /// The one given to the engine.
    Given(Arc<dyn Recorder + Send + Sync>),
    /// The process's global recorder (a no-op until one is installed).
    Global,
}

impl Source {
    fn with<T>(&self, f: impl FnOnce(&dyn Recorder) -> T) -> T {
        match self {
            Source::Given(r) => f(r.as_ref()),
            Source::Global => metrics::with_recorder(f),
        }
    }
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
    /// Handles of `source`; `slow_commit` is the threshold of a slow commit.
    pub fn of(source: Source, slow_commit: Duration) -> Metrics {
        source.clone().with(|recorder| Metrics::registered(recorder, source, slow_commit))
    }

    fn registered(recorder: &dyn Recorder, source: Source, slow_commit: Duration) -> Metrics {
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
        let checkpoints = CheckpointKind::ALL
            .iter()
            .map(|k| {
                let key = labelled(CHECKPOINTS, "kind", k.as_str());
                (*k, recorder.register_counter(&key, &META))
            })
            .collect();
        Metrics(Arc::new(Handles {
            checkpoints,
            // A workflow's own (`for_workflow`): the engine's are never recorded to, so they
            // are not registered (an unlabelled series stuck at 0 would only mislead).
            steps: Counter::noop(),
            step_seconds: Histogram::noop(),
            tool_calls_real: Counter::noop(),
            tool_calls_memo: Counter::noop(),
            tool_seconds: Histogram::noop(),
            thread_failures: Counter::noop(),
            node_seconds: Arc::default(),
            threads_ended: Arc::new([]),
            thread_seconds: Histogram::noop(),
            schedule_lag: histogram(SCHEDULE_LAG_SECONDS),
            commit_seconds: histogram(COMMIT_SECONDS),
            commits_slow: counter(COMMITS_SLOW),
            threads,
            waiting_permit: gauge(WAITING_PERMIT),
            timers_armed: gauge(TIMERS_ARMED),
            lease_takeovers: counter(LEASE_TAKEOVERS),
            runners_fenced: counter(RUNNERS_FENCED),
            locks_held: gauge(LOCKS_HELD),
            stuck_threads: gauge(STUCK_THREADS),
            expired_locks: gauge(EXPIRED_LOCKS),
            signal_backlog: gauge(SIGNAL_BACKLOG),
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
            source,
            workflow: None,
            by_workflow: Arc::default(),
            by_queue: Arc::default(),
            workflow_threads: Arc::default(),
        }))
    }

    /// Handles of the global recorder (no-ops when none is installed).
    pub fn global(slow_commit: Duration) -> Metrics {
        Metrics::of(Source::Global, slow_commit)
    }

    /// These handles with the step, node and tool ones labelled `workflow`, whose nodes are
    /// `nodes` (registered at the workflow's first thread, then taken from the cache).
    pub fn for_workflow<'a>(
        &self,
        workflow: &str,
        nodes: impl IntoIterator<Item = &'a str>,
    ) -> Metrics {
        let mut cache = self.by_workflow.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(m) = cache.get(workflow) {
            return m.clone();
        }
        let name: Arc<str> = workflow.into();
        let labelled = self.source.with(|r| self.labelled(r, &name, nodes));
        cache.insert(name, labelled.clone());
        labelled
    }

    /// These handles labelled `workflow` = `name`, registered with `r`.
    fn labelled<'a>(
        &self,
        r: &dyn Recorder,
        name: &Arc<str>,
        nodes: impl IntoIterator<Item = &'a str>,
    ) -> Metrics {
        let key = |metric: &'static str, more: Option<(&'static str, String)>| {
            let mut labels = vec![Label::new("workflow", name.to_string())];
            labels.extend(more.map(|(k, v)| Label::new(k, v)));
            Key::from_parts(metric, labels)
        };
        let memo = |v: &str| Some(("memo", v.to_owned()));
        let mut m = Handles::clone(&self.0);
        m.steps = r.register_counter(&key(STEPS, None), &META);
        m.step_seconds = r.register_histogram(&key(STEP_SECONDS, None), &META);
        m.tool_calls_real = r.register_counter(&key(TOOL_CALLS, memo("false")), &META);
        m.tool_calls_memo = r.register_counter(&key(TOOL_CALLS, memo("true")), &META);
        m.tool_seconds = r.register_histogram(&key(TOOL_CALL_SECONDS, None), &META);
        m.thread_failures = r.register_counter(&key(THREAD_FAILURES, None), &META);
        m.node_seconds = Arc::new(
            nodes
                .into_iter()
                .map(|n| {
                    let node = Some(("node", n.to_owned()));
                    (n.to_owned(), r.register_histogram(&key(NODE_SECONDS, node), &META))
                })
                .collect(),
        );
        m.threads_ended = ThreadStatus::ALL
            .iter()
            .filter(|s| s.is_terminal())
            .map(|s| {
                let status = Some(("status", s.as_str().to_owned()));
                (*s, r.register_counter(&key(THREADS_ENDED, status), &META))
            })
            .collect();
        m.thread_seconds = r.register_histogram(&key(THREAD_SECONDS, None), &META);
        m.workflow = Some(name.clone());
        Metrics(Arc::new(m))
    }

    /// An attempt of `node` took `took_ms` (labelled `workflow`, with
    /// [`Metrics::for_workflow`]'s handles, and `node`).
    pub fn node_attempt(&self, node: &str, took_ms: u64) {
        let seconds = took_ms as f64 / 1e3;
        match self.node_seconds.get(node) {
            Some(h) => h.record(seconds),
            None => {
                let mut labels = Vec::with_capacity(2);
                if let Some(w) = &self.workflow {
                    labels.push(Label::new("workflow", w.to_string()));
                }
                labels.push(Label::new("node", node.to_owned()));
                let key = Key::from_parts(NODE_SECONDS, labels);
                self.source.with(|r| r.register_histogram(&key, &META).record(seconds));
            }
        }
    }

    /// A schedule's run started `lag_ms` after its tick.
    pub fn schedule_lag(&self, lag_ms: u64) {
        self.schedule_lag.record(lag_ms as f64 / 1e3);
    }

    /// A node attempt of `node` failed; `retried`: it will be tried again. Labelled `workflow`
    /// (with [`Metrics::for_workflow`]'s handles) and `node`.
    pub fn node_failed(&self, node: &str, retried: bool) {
        let mut labels = Vec::with_capacity(2);
        if let Some(w) = &self.workflow {
            labels.push(Label::new("workflow", w.to_string()));
        }
        labels.push(Label::new("node", node.to_owned()));
        self.source.with(|r| {
            let failures = Key::from_parts(NODE_FAILURES, labels.clone());
            r.register_counter(&failures, &META).increment(1);
            if retried {
                r.register_counter(&Key::from_parts(RETRIES, labels), &META).increment(1);
            }
        });
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

    /// A thread ended under this engine in `status` (terminal), `took_ms` after its creation:
    /// counts it by status (and a failure apart), records its time.
    pub fn thread_ended(&self, status: ThreadStatus, took_ms: u64) {
        if status == ThreadStatus::Failed {
            self.thread_failures.increment(1);
        }
        if let Some((_, c)) = self.threads_ended.iter().find(|(s, _)| *s == status) {
            c.increment(1);
        }
        self.thread_seconds.record(took_ms as f64 / 1e3);
    }

    /// Sets the locks held to `n`: the lock table's size, read after an end released locks
    /// (the health check sets it too).
    pub fn set_locks_held(&self, n: usize) {
        self.locks_held.set(n as f64);
    }

    /// Counts a checkpoint of `kind` submitted with a runner's batch or written by a control.
    pub fn checkpoint(&self, kind: CheckpointKind) {
        if let Some((_, c)) = self.checkpoints.iter().find(|(k, _)| *k == kind) {
            c.increment(1);
        }
    }

    /// Sets queue `name`'s gauges: threads waiting in it and admitted, unfinished ones.
    pub fn queue(&self, name: &str, waiting: u64, running: u64) {
        let mut cache = self.by_queue.lock().unwrap_or_else(|e| e.into_inner());
        if !cache.contains_key(name) {
            let key = |metric| Key::from_parts(metric, vec![Label::new("queue", name.to_owned())]);
            let gauges = self.source.with(|r| {
                (
                    r.register_gauge(&key(QUEUE_DEPTH), &META),
                    r.register_gauge(&key(QUEUE_RUNNING), &META),
                )
            });
            cache.insert(name.to_owned(), gauges);
        }
        if let Some((depth, run)) = cache.get(name) {
            depth.set(waiting as f64);
            run.set(running as f64);
        }
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

    /// Sets workflow `workflow`'s threads-by-status gauges (`cairn_workflow_threads`). The
    /// caller passes registered workflows only, which bounds the label's values.
    pub fn workflow_threads(&self, workflow: &str, count: impl Fn(ThreadStatus) -> u64) {
        let gauges = {
            let mut cache = self.workflow_threads.lock().unwrap_or_else(|e| e.into_inner());
            let made = cache.entry(workflow.to_owned()).or_insert_with(|| {
                self.source.with(|r| {
                    let key = |s: &ThreadStatus| {
                        let labels = vec![
                            Label::new("workflow", workflow.to_owned()),
                            Label::new("status", s.as_str()),
                        ];
                        Key::from_parts(WORKFLOW_THREADS, labels)
                    };
                    ThreadStatus::ALL
                        .iter()
                        .map(|s| (*s, r.register_gauge(&key(s), &META)))
                        .collect()
                })
            });
            made.clone()
        };
        for (status, gauge) in gauges.iter() {
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
        (NODE_SECONDS, "one node attempt, its tool calls included"),
        (THREAD_SECONDS, "a thread from its creation to its end"),
        (SCHEDULE_LAG_SECONDS, "a schedule's tick to the start of its run"),
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
        (THREADS_ENDED, "threads that ended, by status"),
        (LEASE_TAKEOVERS, "threads taken over from another lease owner"),
        (RUNNERS_FENCED, "runners fenced off their thread"),
        (THREADS_DELETED, "threads deleted whole; by=retention or hand"),
        (CHECKPOINTS, "checkpoints written, by kind"),
    ];
    for (name, help) in counters {
        r.describe_counter(name.into(), Some(Unit::Count), help.into());
    }
    let gauges = [
        (THREADS, "threads by stored status, at the latest health pass"),
        (WORKFLOW_THREADS, "threads by workflow and stored status, at the latest health pass"),
        (WAITING_PERMIT, "runnable threads waiting for a permit"),
        (TIMERS_ARMED, "timers and deadlines armed"),
        (LOCKS_HELD, "durable locks in the store"),
        (STUCK_THREADS, "running threads with no step past the watchdog"),
        (EXPIRED_LOCKS, "locks held past their time to live"),
        (SIGNAL_BACKLOG, "signals past the backlog threshold no node took, unfinished threads"),
        (QUEUE_DEPTH, "threads waiting in the queue, at the latest admission pass"),
        (QUEUE_RUNNING, "threads of the queue admitted and unfinished, at the latest pass"),
    ];
    for (name, help) in gauges {
        r.describe_gauge(name.into(), Some(Unit::Count), help.into());
    }
}
