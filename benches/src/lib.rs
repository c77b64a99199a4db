//! Shared helpers for the benchmark binaries in `benches/benches/`: timing and medians, the
//! output lines, scratch directories on the real disk, the event shape every storage figure uses,
//! and the raw-redb baselines Cairn is compared against.
//!
//! Output contract (read by humans and scripts): one line per figure, `BENCH <name> <value>
//! <unit>`, and one per comparison, `RATIO <name> <value>`, where every value is the median of
//! several runs made in the same process on the same disk.

pub mod cpu;
pub mod memable_peer;

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use anyhow::Context as _;
use cairn_storage::{EventKind, EventStatus, NewEvent, ThreadId, ThreadRecord, WorkflowRef};
use redb::backends::FileBackend;
use redb::{Database, StorageBackend, TableDefinition};

/// Bytes of the value in the raw-redb baselines; a Cairn event built by [`event`] frames to
/// about the same size, so both sides move the same bytes per record.
pub const RECORD_BYTES: usize = 200;

/// The median of `samples` (the mean of the middle two for an even count).
///
/// # Panics
///
/// If `samples` is empty: every figure is measured at least once, so that is a bug in the bench.
///
/// # Examples
///
/// ```
/// assert_eq!(cairn_benches::median(vec![3.0, 1.0, 2.0]), 2.0);
/// assert_eq!(cairn_benches::median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
/// ```
#[must_use]
pub fn median(mut samples: Vec<f64>) -> f64 {
    assert!(!samples.is_empty(), "median of no samples");
    samples.sort_by(f64::total_cmp);
    let mid = samples.len() / 2;
    if samples.len() % 2 == 1 { samples[mid] } else { (samples[mid - 1] + samples[mid]) / 2.0 }
}

/// Items per second for `items` done in `elapsed`.
#[must_use]
pub fn per_second(items: u64, elapsed: Duration) -> f64 {
    items as f64 / elapsed.as_secs_f64().max(f64::MIN_POSITIVE)
}

/// Runs `f` and returns its result with the time it took.
pub fn timed<T>(f: impl FnOnce() -> T) -> (T, Duration) {
    let start = Instant::now();
    let out = f();
    (out, start.elapsed())
}

/// The `BENCH` line for a figure.
///
/// # Examples
///
/// ```
/// assert_eq!(cairn_benches::bench_line("append", 1234.56, "appends/s"), "BENCH append 1235 appends/s");
/// assert_eq!(cairn_benches::bench_line("load", 0.123, "ms"), "BENCH load 0.123 ms");
/// ```
#[must_use]
pub fn bench_line(name: &str, value: f64, unit: &str) -> String {
    // Rates are big numbers where decimals are noise; latencies in ms need three decimals.
    if value >= 100.0 {
        format!("BENCH {name} {value:.0} {unit}")
    } else {
        format!("BENCH {name} {value:.3} {unit}")
    }
}

/// The `RATIO` line for a comparison.
///
/// # Examples
///
/// ```
/// assert_eq!(cairn_benches::ratio_line("x_vs_y", 0.8123), "RATIO x_vs_y 0.81");
/// ```
#[must_use]
pub fn ratio_line(name: &str, value: f64) -> String {
    format!("RATIO {name} {value:.2}")
}

/// Set (to anything) to keep the scratch directory and its files after the run, for a look at
/// them: `cairn threads` on the `recovery` section's file of 100,000 threads, say.
pub const KEEP_ENV: &str = "CAIRN_BENCH_KEEP";

/// A scratch directory under `parent`, removed when dropped (unless [`KEEP_ENV`] is set). Benches pass
/// `env!("CARGO_TARGET_TMPDIR")`, which lives on the same disk as the build (not a tmpfs `/tmp`),
/// so fsync costs what it costs for users.
///
/// # Errors
///
/// If the directory cannot be created.
pub fn scratch_dir(parent: &Path) -> anyhow::Result<tempfile::TempDir> {
    std::fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    tempfile::Builder::new()
        .prefix("cairn-bench-")
        .disable_cleanup(std::env::var_os(KEEP_ENV).is_some())
        .tempdir_in(parent)
        .with_context(|| format!("scratch dir in {}", parent.display()))
}

/// A thread id for benchmark thread number `n`.
///
/// # Errors
///
/// Never for the ids built here; propagated rather than unwrapped.
pub fn thread_id(n: usize) -> anyhow::Result<ThreadId> {
    Ok(ThreadId::new(format!("bench-thread-{n:05}"))?)
}

/// The thread record a benchmark creates before appending to thread `id`.
#[must_use]
pub fn thread_record(id: ThreadId) -> ThreadRecord {
    let workflow =
        WorkflowRef { id: "bench".into(), version: 1, fingerprint: "bench-fingerprint".into() };
    ThreadRecord::new(id, workflow, 0)
}

/// One ordinary step event of about [`RECORD_BYTES`] bytes once framed: a node name, a short
/// summary and some JSON-like data, as the engine writes for a completed node.
#[must_use]
pub fn event(thread: &ThreadId, n: u64) -> NewEvent {
    let data = format!(r#"{{"step":{n},"output":"{}"}}"#, "x".repeat(120)).into_bytes();
    NewEvent {
        thread: thread.clone(),
        kind: EventKind::NodeCompleted,
        node: Some("summarise".into()),
        status: EventStatus::Success,
        summary: format!("node summarise completed step {n}"),
        payload: None,
        data,
        at_ms: n,
        correlation: None,
    }
}

const RAW_TABLE: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("raw");

/// Raw redb baseline: `commits` write transactions of `per_commit` inserts of [`RECORD_BYTES`]
/// bytes each, every commit durable (redb's default `Immediate`), into a fresh database at
/// `path`. Returns records per second.
///
/// # Errors
///
/// Any redb error.
pub fn raw_redb_inserts(path: &Path, commits: u64, per_commit: u64) -> anyhow::Result<f64> {
    raw_redb_inserts_on(Database::create(path)?, commits, per_commit)
}

/// [`raw_redb_inserts`] on a [`SyncCountingFile`]: (records per second, bytes written per
/// durable commit).
///
/// # Errors
///
/// Any redb error.
pub fn raw_redb_inserts_counted(
    path: &Path,
    commits: u64,
    per_commit: u64,
) -> anyhow::Result<(f64, f64)> {
    let (backend, counts) = SyncCountingFile::create(path)?;
    let db = Database::builder().create_with_backend(backend)?;
    let before = counts.snapshot();
    let rate = raw_redb_inserts_on(db, commits, per_commit)?;
    let after = counts.snapshot();
    let syncs = (after.0 - before.0).max(1);
    Ok((rate, (after.1 - before.1) as f64 / syncs as f64))
}

fn raw_redb_inserts_on(db: Database, commits: u64, per_commit: u64) -> anyhow::Result<f64> {
    let value = vec![0x5Au8; RECORD_BYTES];
    let (result, elapsed) = timed(|| -> anyhow::Result<()> {
        let mut key = 0u64;
        for _ in 0..commits {
            let txn = db.begin_write()?;
            {
                let mut table = txn.open_table(RAW_TABLE)?;
                for _ in 0..per_commit {
                    table.insert(key, value.as_slice())?;
                    key += 1;
                }
            }
            txn.commit()?;
        }
        Ok(())
    });
    result?;
    Ok(per_second(commits * per_commit, elapsed))
}

/// A redb file backend that counts `sync_data` calls and bytes written: redb makes one sync per
/// durable commit, so events per sync is the average group-commit size and bytes per sync the
/// write amplification, the two figures that explain the concurrent-append throughput.
#[derive(Debug)]
pub struct SyncCountingFile {
    inner: FileBackend,
    counts: Arc<IoCounts>,
}

/// What a [`SyncCountingFile`] has seen.
#[derive(Debug, Default)]
pub struct IoCounts {
    /// `sync_data` calls.
    pub syncs: AtomicU64,
    /// Bytes passed to `write`.
    pub bytes_written: AtomicU64,
}

impl IoCounts {
    /// (syncs, bytes written) so far.
    #[must_use]
    pub fn snapshot(&self) -> (u64, u64) {
        (self.syncs.load(Ordering::Relaxed), self.bytes_written.load(Ordering::Relaxed))
    }
}

impl SyncCountingFile {
    /// A backend over a new file at `path`, and the counters it increments.
    ///
    /// # Errors
    ///
    /// If the file cannot be created.
    pub fn create(path: &Path) -> anyhow::Result<(SyncCountingFile, Arc<IoCounts>)> {
        let file = std::fs::OpenOptions::new()
            .read(true)
            .write(true)
            .create_new(true)
            .open(path)
            .with_context(|| format!("creating {}", path.display()))?;
        let counts = Arc::new(IoCounts::default());
        let inner = FileBackend::new(file)?;
        Ok((SyncCountingFile { inner, counts: Arc::clone(&counts) }, counts))
    }
}

impl StorageBackend for SyncCountingFile {
    fn len(&self) -> Result<u64, std::io::Error> {
        self.inner.len()
    }

    fn read(&self, offset: u64, out: &mut [u8]) -> Result<(), std::io::Error> {
        self.inner.read(offset, out)
    }

    fn set_len(&self, len: u64) -> Result<(), std::io::Error> {
        self.inner.set_len(len)
    }

    fn sync_data(&self) -> Result<(), std::io::Error> {
        self.counts.syncs.fetch_add(1, Ordering::Relaxed);
        self.inner.sync_data()
    }

    fn write(&self, offset: u64, data: &[u8]) -> Result<(), std::io::Error> {
        self.counts.bytes_written.fetch_add(data.len() as u64, Ordering::Relaxed);
        self.inner.write(offset, data)
    }

    fn close(&self) -> Result<(), std::io::Error> {
        self.inner.close()
    }
}

const THREADED_TABLE: TableDefinition<'_, (&str, u64), &[u8]> = TableDefinition::new("threaded");

/// Raw redb with the event key layout Cairn used before v1's release: `commits` durable commits,
/// each inserting one [`RECORD_BYTES`] record for each of `threads` threads under the key
/// `(thread id, seq)`, on a [`SyncCountingFile`]. This shows what that key layout costs (each
/// commit touches one leaf per thread). Returns (records per second, bytes written per durable
/// commit).
///
/// # Errors
///
/// Any redb error.
pub fn raw_redb_threaded_inserts(
    path: &Path,
    commits: u64,
    threads: usize,
) -> anyhow::Result<(f64, f64)> {
    let (backend, counts) = SyncCountingFile::create(path)?;
    let db = Database::builder().create_with_backend(backend)?;
    let ids: Vec<String> = (0..threads).map(|n| format!("bench-thread-{n:05}")).collect();
    let value = vec![0x5Au8; RECORD_BYTES];
    let before = counts.snapshot();
    let (result, elapsed) = timed(|| -> anyhow::Result<()> {
        for seq in 1..=commits {
            let txn = db.begin_write()?;
            {
                let mut table = txn.open_table(THREADED_TABLE)?;
                for id in &ids {
                    table.insert((id.as_str(), seq), value.as_slice())?;
                }
            }
            txn.commit()?;
        }
        Ok(())
    });
    result?;
    let after = counts.snapshot();
    let written = (after.1 - before.1) as f64 / (after.0 - before.0).max(1) as f64;
    Ok((per_second(commits * threads as u64, elapsed), written))
}

/// The benchmarks' workflow: `nodes` nodes in a line, each adding one to a `u64` state, with id
/// `id` (a thread of it takes `nodes` steps and ends with `nodes` as its output).
///
/// # Errors
/// If the workflow does not build (a bug).
pub fn linear_workflow(
    id: &str,
    nodes: u64,
) -> anyhow::Result<cairn::Workflow<cairn::Replace<u64>>> {
    use cairn::dsl::{Ctx, NodeOutput};
    let mut b = cairn::Workflow::<cairn::Replace<u64>>::builder(id, 1);
    for i in 0..nodes {
        b = b.node(
            format!("n{i}"),
            |s: std::sync::Arc<cairn::Replace<u64>>, _ctx: Ctx| async move {
                Ok(NodeOutput::update(s.0 + 1))
            },
        );
    }
    b = b.edge(cairn::START, "n0");
    for i in 1..nodes {
        b = b.edge(format!("n{}", i - 1), format!("n{i}"));
    }
    Ok(b.edge(format!("n{}", nodes - 1), cairn::END).build()?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_is_about_record_bytes() {
        let id = thread_id(1).unwrap();
        let e = event(&id, 12345);
        let size = e.data.len() + e.summary.len() + e.node.as_ref().map_or(0, String::len);
        assert!((RECORD_BYTES - 40..=RECORD_BYTES).contains(&size), "event carries {size} bytes");
    }

    #[test]
    fn raw_baseline_writes_what_it_says() {
        let dir = scratch_dir(&std::env::temp_dir()).unwrap();
        let path = dir.path().join("raw.redb");
        let rate = raw_redb_inserts(&path, 3, 7).unwrap();
        assert!(rate > 0.0);
        let db = Database::open(&path).unwrap();
        let txn = redb::ReadableDatabase::begin_read(&db).unwrap();
        let table = txn.open_table(RAW_TABLE).unwrap();
        assert_eq!(redb::ReadableTableMetadata::len(&table).unwrap(), 21);
    }
}
