//! Storage benchmark: Cairn's `RedbStore` against raw redb on the same disk, in the same process.
//!
//! `cargo bench -p cairn-benches --bench storage` prints `BENCH` and `RATIO` lines (see
//! `benches/README.md`). Every figure is the median of [`RUNS`] runs; Cairn and raw-redb runs are
//! interleaved so that drift in the disk's speed hits both sides alike.
//!
//! Environment: `CAIRN_BENCH_READ_EVENTS` (default 1,000,000) sizes the thread `read_since` scans,
//! `CAIRN_BENCH_RUNS` (default 5) the number of runs per figure, `CAIRN_BENCH_ONLY` (a
//! comma-separated subset of `single,concurrent,read,checkpoint`) the sections run.
#![allow(clippy::print_stdout, reason = "a benchmark's output is its printed figures")]

use cairn_storage::{Append, ThreadLog};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context as _;
use cairn_benches::{
    SyncCountingFile, bench_line, event, median, per_second, ratio_line, raw_redb_inserts,
    raw_redb_inserts_counted, raw_redb_threaded_inserts, scratch_dir, thread_id, thread_record,
    timed,
};
use cairn_storage::limits::READ_LIMIT_MAX;
use cairn_storage::{
    Batch, CheckpointKind, CheckpointMeta, Durability, NewCheckpoint, Options, RedbStore, Seq,
    StoreExt, WorkflowRef,
};

/// Runs per figure (each figure is their median).
const RUNS: usize = 5;
/// Appends per single-appender run.
const SINGLE_APPENDS: u64 = 2_000;
/// Concurrent appenders, and appends each makes per run.
const APPENDERS: usize = 64;
const APPENDS_EACH: u64 = 100;
/// Records per commit in the raw-redb batch baseline.
const RAW_BATCH: u64 = 100;
/// Checkpoint saves (and loads) per latency run.
const CHECKPOINT_OPS: u64 = 20;

/// The sections of the benchmark, in the order they run (`CAIRN_BENCH_ONLY` picks some).
const SECTIONS: [&str; 4] = ["single", "concurrent", "read", "checkpoint"];

fn main() -> anyhow::Result<()> {
    let runs = env_usize("CAIRN_BENCH_RUNS", RUNS)?;
    let read_events = env_usize("CAIRN_BENCH_READ_EVENTS", 1_000_000)? as u64;
    let only = std::env::var("CAIRN_BENCH_ONLY").unwrap_or_else(|_| SECTIONS.join(","));
    let root = scratch_dir(Path::new(env!("CARGO_TARGET_TMPDIR")))?;
    println!("# scratch dir {} ; {runs} runs per figure", root.path().display());
    let mut dir_n = 0u32;
    let mut fresh = |name: &str| {
        dir_n += 1;
        root.path().join(format!("{dir_n:04}-{name}.redb"))
    };
    for section in only.split(',') {
        match section {
            "single" => single(runs, &mut fresh)?,
            "concurrent" => concurrent(runs, &mut fresh)?,
            "read" => read(runs, read_events, &fresh("read"))?,
            "checkpoint" => checkpoints(runs, &mut fresh)?,
            other => anyhow::bail!("unknown section {other:?}; known: {}", SECTIONS.join(",")),
        }
    }
    Ok(())
}

/// 1 appender vs raw redb, one ~200-byte record per durable commit.
fn single(runs: usize, fresh: &mut impl FnMut(&str) -> PathBuf) -> anyhow::Result<()> {
    let (mut cairn, mut raw) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        cairn.push(single_appender(&fresh("single"))?);
        raw.push(raw_redb_inserts(&fresh("raw-single"), SINGLE_APPENDS, 1)?);
    }
    let (cairn, raw) = (median(cairn), median(raw));
    println!("{}", bench_line("append_1_appender_immediate", cairn, "appends/s"));
    println!("{}", bench_line("raw_redb_1_insert_per_commit", raw, "commits/s"));
    println!("{}", ratio_line("append_1_appender_vs_raw_redb", cairn / raw));
    // Diagnostic for that ratio: bytes each durable commit writes, Cairn and raw.
    let (mut cairn_kib, mut raw_kib) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        cairn_kib.push(single_appender_written(&fresh("single-counted"))? / 1024.0);
        raw_kib
            .push(raw_redb_inserts_counted(&fresh("raw-counted"), SINGLE_APPENDS, 1)?.1 / 1024.0);
    }
    println!("{}", bench_line("append_1_appender_written_per_commit", median(cairn_kib), "KiB"));
    println!("{}", bench_line("raw_redb_1_written_per_commit", median(raw_kib), "KiB"));
    // And the same appends with no fsync: the CPU and hand-off cost of one append.
    let mut unsynced = Vec::new();
    for _ in 0..runs {
        let options = Options { durability: Durability::None, ..Options::default() };
        unsynced.push(single_appender_on(RedbStore::open(fresh("single-nosync"), options)?)?);
    }
    println!("{}", bench_line("append_1_appender_durability_none", median(unsynced), "appends/s"));
    Ok(())
}

/// 64 concurrent appenders vs raw redb, 100 records per durable commit, with two diagnostics:
/// how many events each durable commit carried, and the same workload with no fsync at all
/// (what the CPU alone allows).
fn concurrent(runs: usize, fresh: &mut impl FnMut(&str) -> PathBuf) -> anyhow::Result<()> {
    let (mut cairn, mut raw) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        cairn.push(concurrent_appenders(&fresh("concurrent"))?);
        let commits = APPENDERS as u64 * APPENDS_EACH / RAW_BATCH;
        raw.push(raw_redb_inserts(&fresh("raw-batch"), commits, RAW_BATCH)?);
    }
    let (cairn, raw) = (median(cairn), median(raw));
    println!("{}", bench_line("append_64_appenders_immediate", cairn, "events/s"));
    println!("{}", bench_line("raw_redb_100_inserts_per_commit", raw, "records/s"));
    println!("{}", ratio_line("append_64_appenders_vs_raw_redb_batch100", cairn / raw));
    let (mut per_commit, mut cairn_kib, mut raw_kib, mut unsynced) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let (_, events, bytes) =
            concurrent_appenders_counted(&fresh("counted"), Durability::Immediate)?;
        per_commit.push(events);
        cairn_kib.push(bytes / 1024.0);
        let commits = APPENDERS as u64 * APPENDS_EACH / RAW_BATCH;
        raw_kib
            .push(raw_redb_inserts_counted(&fresh("raw-counted"), commits, RAW_BATCH)?.1 / 1024.0);
        unsynced.push(concurrent_appenders_counted(&fresh("nosync"), Durability::None)?.0);
    }
    let per_commit = median(per_commit);
    println!("{}", bench_line("append_64_appenders_events_per_commit", per_commit, "events"));
    println!("{}", bench_line("append_64_appenders_written_per_commit", median(cairn_kib), "KiB"));
    println!("{}", bench_line("raw_redb_100_written_per_commit", median(raw_kib), "KiB"));
    // Raw redb with the (thread, seq) key layout Cairn used before v1's release, one record for
    // each of 64 threads per commit (what 64 appenders produce): what that layout cost.
    let (mut keyed, mut keyed_kib) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let (rate, bytes) =
            raw_redb_threaded_inserts(&fresh("raw-threaded"), APPENDS_EACH, APPENDERS)?;
        keyed.push(rate);
        keyed_kib.push(bytes / 1024.0);
    }
    let keyed = median(keyed);
    println!("{}", bench_line("raw_redb_64_threads_1_each_per_commit", keyed, "records/s"));
    println!("{}", bench_line("raw_redb_64_threads_written_per_commit", median(keyed_kib), "KiB"));
    println!("{}", ratio_line("append_64_appenders_vs_raw_redb_same_keys", cairn / keyed));
    println!("{}", bench_line("append_64_appenders_durability_none", median(unsynced), "events/s"));
    Ok(())
}

/// `read_since` over one long thread, built with the largest batches the limits allow.
fn read(runs: usize, read_events: u64, path: &Path) -> anyhow::Result<()> {
    let store = RedbStore::open(path, options())?;
    let (built, build_time) = timed(|| build_thread(&store, read_events));
    built?;
    let build_rate = per_second(read_events, build_time);
    println!("{}", bench_line("build_thread_10k_event_batches", build_rate, "events/s"));
    let mut reads = Vec::new();
    for _ in 0..runs {
        reads.push(read_whole_thread(&store, read_events)?);
    }
    let name = format!("read_since_{read_events}_event_thread");
    println!("{}", bench_line(&name, median(reads), "events/s"));
    store.close()?;
    Ok(())
}

/// Checkpoint save (a durable append of one checkpoint) and load latency.
fn checkpoints(runs: usize, fresh: &mut impl FnMut(&str) -> PathBuf) -> anyhow::Result<()> {
    for (label, size) in [("10kb", 10 * 1024), ("1mb", 1024 * 1024)] {
        let (mut saves, mut loads) = (Vec::new(), Vec::new());
        for _ in 0..runs {
            let (save, load) = checkpoint_latency(&fresh("checkpoint"), size)?;
            saves.push(save);
            loads.push(load);
        }
        println!("{}", bench_line(&format!("checkpoint_save_{label}"), median(saves), "ms"));
        println!("{}", bench_line(&format!("checkpoint_load_{label}"), median(loads), "ms"));
    }
    Ok(())
}

fn options() -> Options {
    Options { durability: Durability::Immediate, ..Options::default() }
}

fn env_usize(name: &str, default: usize) -> anyhow::Result<usize> {
    match std::env::var(name) {
        Ok(value) => value.parse().with_context(|| format!("{name}={value} is not a count")),
        Err(_) => Ok(default),
    }
}

/// One appender, one event per append, each acknowledged after its durable commit.
fn single_appender(path: &Path) -> anyhow::Result<f64> {
    single_appender_on(RedbStore::open(path, options())?)
}

/// The same on a store whose file counts its I/O: bytes written per durable commit.
fn single_appender_written(path: &Path) -> anyhow::Result<f64> {
    let (backend, counts) = SyncCountingFile::create(path)?;
    let store = RedbStore::with_backend(backend, options())?;
    let before = counts.snapshot();
    single_appender_on(store)?;
    let after = counts.snapshot();
    Ok((after.1 - before.1) as f64 / (after.0 - before.0).max(1) as f64)
}

fn single_appender_on(store: RedbStore) -> anyhow::Result<f64> {
    let id = thread_id(0)?;
    store
        .append(Batch { threads: vec![thread_record(id.clone())], ..Batch::default() })?
        .wait_blocking()?;
    let (result, elapsed) = timed(|| -> anyhow::Result<()> {
        for n in 0..SINGLE_APPENDS {
            store
                .append(Batch { events: vec![event(&id, n)], ..Batch::default() })?
                .wait_blocking()?;
        }
        Ok(())
    });
    result?;
    store.close()?;
    Ok(per_second(SINGLE_APPENDS, elapsed))
}

/// [`APPENDERS`] tokio tasks, each appending to its own thread one event at a time.
fn concurrent_appenders(path: &Path) -> anyhow::Result<f64> {
    let store = RedbStore::open(path, options())?;
    let rate = appenders_on(store)?;
    Ok(rate)
}

/// The same on a store whose file counts its I/O: (events/s, events per durable commit, bytes
/// written per durable commit).
fn concurrent_appenders_counted(
    path: &Path,
    durability: Durability,
) -> anyhow::Result<(f64, f64, f64)> {
    let (backend, counts) = SyncCountingFile::create(path)?;
    let store = RedbStore::with_backend(backend, Options { durability, ..Options::default() })?;
    let before = counts.snapshot();
    let rate = appenders_on(store)?;
    let after = counts.snapshot();
    let commits = (after.0 - before.0).max(1) as f64;
    let events = (APPENDERS as u64 * APPENDS_EACH) as f64;
    Ok((rate, events / commits, (after.1 - before.1) as f64 / commits))
}

fn appenders_on(store: RedbStore) -> anyhow::Result<f64> {
    let store = Arc::new(store);
    let ids = (0..APPENDERS).map(thread_id).collect::<anyhow::Result<Vec<_>>>()?;
    let threads = ids.iter().cloned().map(thread_record).collect();
    store.append(Batch { threads, ..Batch::default() })?.wait_blocking()?;
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let (result, elapsed) = timed(|| {
        runtime.block_on(async {
            let mut tasks = Vec::new();
            for id in ids {
                let store = Arc::clone(&store);
                tasks.push(tokio::spawn(async move {
                    for n in 0..APPENDS_EACH {
                        let batch = Batch { events: vec![event(&id, n)], ..Batch::default() };
                        store.append_wait(batch).await?;
                    }
                    Ok::<_, cairn_storage::Error>(())
                }));
            }
            for task in tasks {
                task.await??;
            }
            Ok::<_, anyhow::Error>(())
        })
    });
    result?;
    Ok(per_second(APPENDERS as u64 * APPENDS_EACH, elapsed))
}

/// Appends `events` events to one thread in the largest batches the limits allow.
fn build_thread(store: &RedbStore, events: u64) -> anyhow::Result<()> {
    let id = thread_id(0)?;
    store
        .append(Batch { threads: vec![thread_record(id.clone())], ..Batch::default() })?
        .wait_blocking()?;
    let per_batch = cairn_storage::limits::BATCH_EVENTS_MAX as u64;
    let mut n = 0;
    while n < events {
        let end = (n + per_batch).min(events);
        let batch = Batch { events: (n..end).map(|i| event(&id, i)).collect(), ..Batch::default() };
        store.append(batch)?.wait_blocking()?;
        n = end;
    }
    Ok(())
}

/// Reads the whole thread with `read_since` in pages of the maximum read size; events/s.
fn read_whole_thread(store: &RedbStore, events: u64) -> anyhow::Result<f64> {
    let id = thread_id(0)?;
    let (result, elapsed) = timed(|| -> anyhow::Result<u64> {
        let mut after = Seq(0);
        let mut seen = 0u64;
        loop {
            let page = store.read_since(&id, after, READ_LIMIT_MAX).wait()?;
            let Some(last) = page.last() else { break };
            after = last.bookmark.seq;
            seen += page.len() as u64;
        }
        Ok(seen)
    });
    let seen = result?;
    anyhow::ensure!(seen == events, "read {seen} events, wrote {events}");
    Ok(per_second(seen, elapsed))
}

/// Mean save latency (append of a checkpoint batch, durable) and load latency, in ms.
fn checkpoint_latency(path: &Path, size: usize) -> anyhow::Result<(f64, f64)> {
    let store = RedbStore::open(path, options())?;
    let id = thread_id(0)?;
    let setup = Batch {
        threads: vec![thread_record(id.clone())],
        events: vec![event(&id, 0)],
        ..Batch::default()
    };
    store.append(setup)?.wait_blocking()?;
    let snapshot: Vec<u8> = (0..size).map(|i| (i % 251) as u8).collect();
    let new = |n: u64| NewCheckpoint {
        thread: id.clone(),
        workflow: WorkflowRef {
            id: "bench".into(),
            version: 1,
            fingerprint: "bench-fingerprint".into(),
        },
        kind: CheckpointKind::Periodic,
        snapshot: snapshot.clone(),
        meta: CheckpointMeta::default(),
        created_at_ms: n,
    };
    let mut ids = Vec::new();
    let (saved, save_time) = timed(|| -> anyhow::Result<()> {
        for n in 0..CHECKPOINT_OPS {
            let appended = store
                .append(Batch { checkpoints: vec![new(n)], ..Batch::default() })?
                .wait_blocking()?;
            ids.extend(appended.checkpoints);
        }
        Ok(())
    });
    saved?;
    let (loaded, load_time) = timed(|| -> anyhow::Result<()> {
        for checkpoint in &ids {
            let found = store.checkpoint(*checkpoint).wait()?.context("checkpoint just saved")?;
            anyhow::ensure!(
                found.snapshot.len() == size,
                "snapshot of {} bytes",
                found.snapshot.len()
            );
        }
        Ok(())
    });
    loaded?;
    store.close()?;
    let per_op_ms = |d: std::time::Duration| d.as_secs_f64() * 1_000.0 / CHECKPOINT_OPS as f64;
    Ok((per_op_ms(save_time), per_op_ms(load_time)))
}
