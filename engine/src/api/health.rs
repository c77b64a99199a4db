//! The engine's telemetry settings, its health report, and the health passes it runs on its
//! own (which keep the health and threads-by-status gauges current for a scraper).

use std::sync::Arc;
use std::time::Duration;

use cairn_storage::Store;

use super::builder::EngineBuilder;
use super::engine::Engine;
use crate::config::Config;
use crate::error::Error;
use crate::telemetry::HealthReport;
use crate::telemetry::metrics::{Metrics, Source};

/// A recorder an engine reports to.
pub(super) type SharedRecorder = Arc<dyn metrics::Recorder + Send + Sync>;

impl EngineBuilder {
    /// Reports the engine's metrics, and its store's, to `recorder` instead of the process's
    /// global recorder (several engines in one process, each with its own; tests).
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(recorder: std::sync::Arc<dyn metrics::Recorder + Send + Sync>) -> Result<(), cairn::Error> {
    /// let engine = cairn::Engine::builder("cairn.db").metrics_recorder(recorder).open().await?;
    /// # Ok(()) }
    /// ```
    pub fn metrics_recorder(mut self, recorder: Arc<dyn metrics::Recorder + Send + Sync>) -> Self {
        self.recorder = Some(recorder);
        self
    }

    /// How long a Running thread may go without a step before the health report calls it
    /// stuck (default 10 minutes); see [`Config::watchdog_ms`].
    pub fn watchdog_ms(mut self, ms: u64) -> Self {
        self.config.watchdog_ms = ms;
        self
    }

    /// The threshold of a slow step commit (default 1,000 ms).
    pub fn slow_commit_ms(mut self, ms: u64) -> Self {
        self.config.slow_commit_ms = ms;
        self
    }

    /// The free space on the database's disk below which a health pass reports it short and
    /// says what to do (default 512 MiB; also below 5% free).
    pub fn health_disk_free_min_bytes(mut self, bytes: u64) -> Self {
        self.config.health_disk_free_min_bytes = bytes;
        self
    }

    /// The resident memory past which a health pass reports this process and says what to do
    /// (default: none).
    pub fn health_memory_max_bytes(mut self, bytes: Option<u64>) -> Self {
        self.config.health_memory_max_bytes = bytes;
        self
    }

    /// The age past which a health pass counts a signal that waits in an unfinished thread's
    /// inbox, which no node of the thread took, in its signal backlog (default 10 minutes):
    /// the report names the threads with the most, and says what to do.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), cairn::Error> {
    /// let engine = cairn::Engine::builder("cairn.db").health_signal_backlog_ms(60_000).open().await?;
    /// # Ok(()) }
    /// ```
    pub fn health_signal_backlog_ms(mut self, ms: u64) -> Self {
        self.config.health_signal_backlog_ms = ms;
        self
    }

    /// How often the engine runs a health pass on its own (`None`: never; default
    /// 60,000 ms).
    pub fn health_every_ms(mut self, ms: Option<u64>) -> Self {
        self.config.health_every_ms = ms.map(|ms| ms.max(1));
        self
    }
}

/// The engine's handles, and its store's pointed at the same recorder.
pub(super) fn metrics_for(
    store: &Arc<dyn Store>,
    recorder: Option<&SharedRecorder>,
    config: &Config,
) -> Metrics {
    let slow = Duration::from_millis(config.slow_commit_ms);
    match recorder {
        Some(recorder) => {
            if let Some(store_metrics) = store.metrics() {
                store_metrics.register(recorder.as_ref());
            }
            Metrics::of(Source::Given(recorder.clone()), slow)
        }
        None => Metrics::global(slow),
    }
}

impl Engine {
    /// A health pass: threads by status, Running threads with no step for longer than the
    /// watchdog, locks held past their time to live, signals waiting in unfinished threads'
    /// inboxes for longer than [`EngineBuilder::health_signal_backlog_ms`] that no node took
    /// (the signal backlog), this engine's slow commits, whether the
    /// database answers (a store on a server) and whether the store takes writes (false, with
    /// the cause, after a failed commit until the store recovered); it also sets the health
    /// gauges
    /// (`cairn_health_*`, `cairn_threads`, `cairn_locks_held`).
    ///
    /// Reads every thread record and the lock table (not the logs), and the inboxes of up to
    /// 1,000 unfinished threads that were sent signals (1,000 signals each); while the store knows its
    /// database unreachable (`cairn_database_up` 0), it reads nothing and reports so at once,
    /// with the cause. A database on a server that leaves one of the pass's reads unanswered
    /// for 750 ms is reported as not answering, with that
    /// reason, so a report never waits on the database longer.
    ///
    /// # Errors
    /// Storage errors reading the records.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run() -> Result<(), cairn::Error> {
    /// let engine = cairn::Engine::builder("cairn.db").open().await?;
    /// let report = engine.health().await?;
    /// if !report.ok {
    ///     eprintln!("{}", serde_json::to_string_pretty(&report)?);
    /// }
    /// # Ok(()) }
    /// ```
    pub async fn health(&self) -> Result<HealthReport, Error> {
        self.health_with_watchdog(self.shell.config.watchdog_ms).await
    }

    /// [`Engine::health`] with another watchdog than the engine's (`cairn health
    /// --watchdog-ms`).
    ///
    /// # Errors
    /// Storage errors reading the records.
    pub async fn health_with_watchdog(&self, watchdog_ms: u64) -> Result<HealthReport, Error> {
        let shell = &self.shell;
        let now = shell.clock.now_ms();
        let store = shell.store.as_ref();
        let thresholds = crate::telemetry::Thresholds {
            watchdog_ms,
            signal_backlog_ms: shell.config.health_signal_backlog_ms,
        };
        let workflows = shell.registry.all().iter().map(|wf| wf.id().to_owned()).collect();
        let mut report =
            crate::telemetry::health_check(store, now, thresholds, &shell.metrics, &workflows)
                .await?;
        report.coordination = Some(shell.coord.kind());
        let config = &shell.config;
        let (file, floor, max) = (
            config.database_file.clone(),
            config.health_disk_free_min_bytes,
            config.health_memory_max_bytes,
        );
        // statvfs and /proc are file-system calls (a hung mount stalls them): off the async
        // workers.
        let read = move || crate::telemetry::ResourceHealth::read(file.as_deref(), floor, max);
        let resources = tokio::task::spawn_blocking(read)
            .await
            .map_err(|e| Error::Invalid(format!("reading the machine's resources: {e}")))?;
        let report = report.with_resources(resources);
        if let Some(database) = report.database.as_ref().filter(|d| !d.reachable) {
            tracing::warn!(
                since_ms = database.since_ms,
                last_error = database.last_error.as_deref().unwrap_or_default(),
                "health: the database does not answer"
            );
        } else if let Some(database) = report.database.as_ref().filter(|d| !d.writable) {
            tracing::warn!(
                since_ms = database.since_ms,
                last_error = database.last_error.as_deref().unwrap_or_default(),
                "health: the store refuses writes until it recovers"
            );
        } else if !report.ok {
            tracing::warn!(
                stuck_threads = report.stuck_threads,
                expired_locks = report.expired_locks,
                signal_backlog = report.signal_backlog,
                slow_commits = report.commits.slow_recent,
                "health: attention needed"
            );
        }
        Ok(report)
    }

    /// Runs a health pass every [`Config::health_every_ms`] until shutdown.
    pub(super) fn spawn_health_passes(&self) {
        let Some(every) = self.shell.config.health_every_ms else { return };
        let engine = self.clone();
        let stopping = self.shell.tasks.stopping().clone();
        self.shell.tasks.spawn(async move {
            loop {
                tokio::select! {
                    () = tokio::time::sleep(Duration::from_millis(every)) => {}
                    () = stopping.cancelled() => return,
                }
                // A pass reads every thread record: off the runtime's worker threads (a file's
                // reads answer inline, so its CPU would be a worker's), still awaiting them.
                let (pass, runtime) = (engine.clone(), tokio::runtime::Handle::current());
                match tokio::task::spawn_blocking(move || runtime.block_on(pass.health())).await {
                    Ok(Ok(report)) => {
                        engine.act_on_health(&report).await;
                    }
                    Ok(Err(e)) => tracing::warn!(error = %e, "health pass"),
                    Err(e) => tracing::warn!(error = %e, "health pass stopped"),
                }
            }
        });
    }
}
