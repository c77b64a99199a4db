//! Engine benchmark: a 10-node linear workflow with a tiny state, run by Cairn's engine, against
//! raw redb on the same disk, in the same process, and (one thread at a time) against the same
//! workflow on `memable`, the closest embedded peer.
//!
//! `cargo bench -p cairn-benches --bench engine` prints `BENCH` and `RATIO` lines (see
//! `benches/README.md`, section "Engine"). Every figure is the median of [`RUNS`] runs; engine and
//! raw-redb runs are interleaved so that drift in the disk's speed hits both sides alike.
//!
//! Environment: `CAIRN_BENCH_RUNS` (default 5) runs per figure, `CAIRN_BENCH_ONLY` (a
//! comma-separated subset of `sequential,concurrent,none,starts,memory,recovery,history,finished`; `none-1`
//! and `none-64` run one half of `none`) the sections run, `CAIRN_BENCH_HISTORY_STEPS` (default
//! 100,000) the steps of the history section's thread,
//! `CAIRN_BENCH_MEMORY_THREADS` (default 10,000 queued or completed threads, 100,000 parked
//! ones) the threads of each memory figure, `CAIRN_BENCH_PAGE_CACHE_BYTES` the page cache of the
//! memory children and of the history section (default: the engine's, 64 MiB). The memory
//! section measures each figure in a fresh child process (this binary, re-run with
//! `CAIRN_BENCH_CHILD` set), so that memory freed by earlier sections cannot hide what the
//! threads cost.
#![allow(clippy::print_stdout, reason = "a benchmark's output is its printed figures")]

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::{Durability, END, Engine, Replace, START, StartOptions, ThreadStatus};
use cairn_benches::{
    SyncCountingFile, bench_line, median, memable_peer, per_second, ratio_line, raw_redb_inserts,
    scratch_dir,
};
use cairn_storage::{Options, RedbStore};
use tokio::runtime::Runtime;

/// Runs per figure (each figure is their median).
const RUNS: usize = 5;
/// Nodes of the benchmark workflow, each one step.
const NODES: u64 = 10;
/// The benchmark workflow's id.
const WORKFLOW: &str = "bench-linear";
/// Threads run one after the other per sequential run (each 10 node-steps).
const SEQUENTIAL_THREADS: usize = 40;
/// Clients of the concurrent runs: each runs its threads one after the other, so this many
/// threads are in flight at once.
const CLIENTS: usize = 64;
/// Threads each client runs per concurrent run.
const THREADS_PER_CLIENT: usize = 10;
/// Records per commit in the raw-redb batch baseline.
const RAW_BATCH: u64 = 100;
/// Threads per sequential run with no fsync (CPU bound, so many more fit in the same time).
const UNSYNCED_SEQUENTIAL_THREADS: usize = 500;
/// Threads started at once for the memory section's queued and completed figures.
const MEMORY_THREADS: usize = 10_000;
/// Threads parked at once for the memory section's parked figures (waiting for input, sleeping,
/// paused): the engine must hold many more of these than of running ones.
const MEMORY_PARKED_THREADS: usize = 100_000;

/// Threads run before the memory section's baseline is taken (runtime, caches, allocator warm).
const MEMORY_WARMUP_THREADS: usize = 200;

/// Threads started per run of the `starts` section.
const STARTED_THREADS: usize = 1_000;

/// The sections of the benchmark, in the order they run (`CAIRN_BENCH_ONLY` picks some).
const SECTIONS: [&str; 8] =
    ["sequential", "concurrent", "none", "starts", "memory", "recovery", "history", "finished"];

/// Ten-step threads the `finished` section reads the final state of.
const FINISHED_THREADS: usize = 200;

/// Unfinished threads the `recovery` section leaves behind a crash
/// (`CAIRN_BENCH_RECOVERY_THREADS`).
const RECOVERY_THREADS: usize = 100_000;
/// Steps of the `history` section's long thread (`CAIRN_BENCH_HISTORY_STEPS`).
const HISTORY_STEPS: u64 = 100_000;
/// Seqs spread over the long thread at which the `history` section times `state_at`.
const HISTORY_SEQS: u64 = 100;
/// Set in a child process to the memory figure it measures.
const CHILD_ENV: &str = "CAIRN_BENCH_CHILD";

fn main() -> anyhow::Result<()> {
    let root = scratch_dir(Path::new(env!("CARGO_TARGET_TMPDIR")))?;
    if let Ok(which) = std::env::var(CHILD_ENV) {
        let default = match which.as_str() {
            "parked" | "sleeping" | "paused" => MEMORY_PARKED_THREADS,
            _ => MEMORY_THREADS,
        };
        let threads = env_usize("CAIRN_BENCH_MEMORY_THREADS", default)?;
        return memory_child(&which, threads, &root.path().join("memory.redb"));
    }
    let runs = env_usize("CAIRN_BENCH_RUNS", RUNS)?;
    let only = std::env::var("CAIRN_BENCH_ONLY").unwrap_or_else(|_| SECTIONS.join(","));
    println!("# scratch dir {} ; {runs} runs per figure", root.path().display());
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let mut dir_n = 0u32;
    let mut fresh = |name: &str| {
        dir_n += 1;
        root.path().join(format!("{dir_n:04}-{name}.redb"))
    };
    for section in only.split(',') {
        match section {
            "sequential" => sequential(&runtime, runs, &mut fresh)?,
            "concurrent" => concurrent(&runtime, runs, &mut fresh)?,
            "none" => unsynced(&runtime, runs, true, true, &mut fresh)?,
            "none-1" => unsynced(&runtime, runs, true, false, &mut fresh)?,
            "none-64" => unsynced(&runtime, runs, false, true, &mut fresh)?,
            "starts" => starts(&runtime, runs, &mut fresh)?,
            "memory" => memory(runs)?,
            "recovery" => recovery(&runtime, runs, &mut fresh)?,
            "history" => history(&runtime, runs, &mut fresh)?,
            "finished" => finished(&runtime, runs, &mut fresh)?,
            other => anyhow::bail!(
                "unknown section {other:?}; known: {},none-1,none-64",
                SECTIONS.join(",")
            ),
        }
    }
    Ok(())
}

/// (a) One thread at a time, `Durability::Immediate`, against raw redb committing one ~200-byte
/// insert durably per node-step the engine ran; then what each step costs in commits and bytes.
fn sequential(
    runtime: &Runtime,
    runs: usize,
    fresh: &mut impl FnMut(&str) -> PathBuf,
) -> anyhow::Result<()> {
    let steps = SEQUENTIAL_THREADS as u64 * NODES;
    let (mut engine, mut raw, mut peer) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..runs {
        let path = fresh("sequential");
        let elapsed = runtime.block_on(on_file(&path, Durability::Immediate, |e| {
            one_at_a_time(e, "seq", SEQUENTIAL_THREADS)
        }))?;
        engine.push(per_second(steps, elapsed));
        raw.push(raw_redb_inserts(&fresh("raw-single"), steps, 1)?);
        let path = fresh("memable");
        let memable = memable_peer::one_at_a_time(&path, SEQUENTIAL_THREADS, NODES);
        peer.push(per_second(steps, runtime.block_on(memable)?));
    }
    let (engine, raw, peer) = (median(engine), median(raw), median(peer));
    println!("{}", bench_line("engine_1_thread_immediate", engine, "node-steps/s"));
    println!("{}", bench_line("raw_redb_1_insert_per_commit", raw, "commits/s"));
    println!("{}", bench_line("memable_1_thread_immediate", peer, "node-steps/s"));
    println!("{}", ratio_line("engine_1_thread_vs_raw_redb", engine / raw));
    println!("{}", ratio_line("engine_1_thread_vs_memable", engine / peer));
    let (mut commits, mut kib) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let counted = runtime.block_on(on_counted_file(&fresh("seq-counted"), |e| {
            one_at_a_time(e, "seq", SEQUENTIAL_THREADS)
        }))?;
        commits.push(counted.syncs / steps as f64);
        kib.push(counted.bytes / counted.syncs.max(1.0) / 1024.0);
    }
    println!("{}", bench_line("engine_1_thread_commits_per_node_step", median(commits), "commits"));
    println!("{}", bench_line("engine_1_thread_written_per_commit", median(kib), "KiB"));
    Ok(())
}

/// (b) 64 threads at once, `Durability::Immediate`, against raw redb inserting 100 records per
/// durable commit; then how many commits the group commit saved and what each wrote.
fn concurrent(
    runtime: &Runtime,
    runs: usize,
    fresh: &mut impl FnMut(&str) -> PathBuf,
) -> anyhow::Result<()> {
    let steps = (CLIENTS * THREADS_PER_CLIENT) as u64 * NODES;
    let (mut engine, mut raw) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let path = fresh("concurrent");
        let elapsed = runtime.block_on(on_file(&path, Durability::Immediate, |e| {
            many_at_once(e, CLIENTS, THREADS_PER_CLIENT)
        }))?;
        engine.push(per_second(steps, elapsed));
        raw.push(raw_redb_inserts(&fresh("raw-batch"), steps.div_ceil(RAW_BATCH), RAW_BATCH)?);
    }
    let (engine, raw) = (median(engine), median(raw));
    println!("{}", bench_line("engine_64_threads_immediate", engine, "node-steps/s"));
    println!("{}", bench_line("raw_redb_100_inserts_per_commit", raw, "records/s"));
    println!("{}", ratio_line("engine_64_threads_vs_raw_redb_batch100", engine / raw));
    let (mut per_commit, mut kib) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let counted = runtime.block_on(on_counted_file(&fresh("conc-counted"), |e| {
            many_at_once(e, CLIENTS, THREADS_PER_CLIENT)
        }))?;
        per_commit.push(steps as f64 / counted.syncs.max(1.0));
        kib.push(counted.bytes / counted.syncs.max(1.0) / 1024.0);
    }
    let per_commit = median(per_commit);
    println!("{}", bench_line("engine_64_threads_node_steps_per_commit", per_commit, "steps"));
    println!("{}", bench_line("engine_64_threads_written_per_commit", median(kib), "KiB"));
    Ok(())
}

/// (c) The same workloads under `Durability::None`: nothing is fsynced, so this is the engine's
/// CPU cost per step (the fold, encoding, the writer hand-off, redb's in-memory commit). `parts`
/// picks (one thread at a time, 64 at once): the sections `none-1` and `none-64` run one part
/// alone (for a profiler).
fn unsynced(
    runtime: &Runtime,
    runs: usize,
    sequential: bool,
    concurrent: bool,
    fresh: &mut impl FnMut(&str) -> PathBuf,
) -> anyhow::Result<()> {
    if sequential {
        let (mut one, mut cpu) = (Vec::new(), Vec::new());
        let steps = UNSYNCED_SEQUENTIAL_THREADS as u64 * NODES;
        for _ in 0..runs {
            let path = fresh("none-seq");
            let (elapsed, on_cpu) =
                runtime.block_on(on_file_timed(&path, Durability::None, |e| {
                    one_at_a_time(e, "none", UNSYNCED_SEQUENTIAL_THREADS)
                }))?;
            one.push(per_second(steps, elapsed));
            cpu.push(on_cpu.as_secs_f64() * 1e6 / steps as f64);
        }
        let one = median(one);
        println!("{}", bench_line("engine_1_thread_durability_none", one, "node-steps/s"));
        println!("{}", bench_line("engine_1_thread_durability_none_step_time", 1e6 / one, "us"));
        let cpu = median(cpu);
        println!("{}", bench_line("engine_1_thread_durability_none_cpu_per_step", cpu, "us"));
    }
    if concurrent {
        let mut many = Vec::new();
        for _ in 0..runs {
            let path = fresh("none-conc");
            let elapsed = runtime.block_on(on_file(&path, Durability::None, |e| {
                many_at_once(e, CLIENTS, THREADS_PER_CLIENT)
            }))?;
            many.push(per_second((CLIENTS * THREADS_PER_CLIENT) as u64 * NODES, elapsed));
        }
        let many = median(many);
        println!("{}", bench_line("engine_64_threads_durability_none", many, "node-steps/s"));
    }
    Ok(())
}

/// (e) Starting [`STARTED_THREADS`] threads, `Durability::Immediate`: a loop that awaits each
/// `start` (one durable commit per start) against one `start_many` (their creations share
/// commits). Timed until every thread exists durably (not until they finish).
fn starts(
    runtime: &Runtime,
    runs: usize,
    fresh: &mut impl FnMut(&str) -> PathBuf,
) -> anyhow::Result<()> {
    let (mut looped, mut many) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let elapsed = runtime.block_on(on_file(
            &fresh("start-loop"),
            Durability::Immediate,
            |e| async move {
                for n in 0..STARTED_THREADS {
                    e.start_json(WORKFLOW, 0_u64, StartOptions::id(format!("s-{n:05}"))).await?;
                }
                Ok(())
            },
        ))?;
        looped.push(per_second(STARTED_THREADS as u64, elapsed));
        let elapsed = runtime.block_on(on_file(
            &fresh("start-many"),
            Durability::Immediate,
            |e| async move {
                let starts =
                    (0..STARTED_THREADS).map(|n| (0_u64, StartOptions::id(format!("s-{n:05}"))));
                e.start_many_json(WORKFLOW, starts).await?;
                Ok(())
            },
        ))?;
        many.push(per_second(STARTED_THREADS as u64, elapsed));
    }
    let (looped, many) = (median(looped), median(many));
    println!("{}", bench_line("engine_start_loop_immediate", looped, "threads/s"));
    println!("{}", bench_line("engine_start_many_immediate", many, "threads/s"));
    println!("{}", ratio_line("engine_start_many_vs_start_loop", many / looped));
    Ok(())
}

/// (f) Recovery at open of a file a crash left with [`RECOVERY_THREADS`] unfinished threads
/// (created by one `start_many`, none run: the engine crashed right after): from `open` to the
/// first step any thread completes, and to every thread finished. Recovery pages through the
/// unfinished threads 500 at a time and spawns each drive as it goes, so the first step does
/// not wait for the whole listing. `Durability::None`: the figure is the engine's, not fsync's.
fn recovery(
    runtime: &Runtime,
    runs: usize,
    fresh: &mut impl FnMut(&str) -> PathBuf,
) -> anyhow::Result<()> {
    let threads = env_usize("CAIRN_BENCH_RECOVERY_THREADS", RECOVERY_THREADS)?;
    let (mut first, mut all) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        let path = fresh("recovery");
        let before = runtime.block_on(async {
            let engine = Engine::builder(&path)
                .durability(Durability::None)
                .concurrency(1)
                .workflow(&stuck()?)
                .workflow(&linear()?)
                .open()
                .await?;
            // One thread holds the only permit, so none of the others runs before the crash.
            engine.start_json(STUCK, 0_u64, StartOptions::id("holder")).await?;
            let starts = (0..threads).map(|n| (0_u64, StartOptions::id(format!("r-{n:06}"))));
            engine.start_many_json(WORKFLOW, starts).await?;
            let last = format!("r-{:06}", threads - 1);
            let last =
                engine.store().last_bookmark(&last.parse()?).wait()?.context("the last start")?;
            engine.crash().await;
            anyhow::Ok(last.lsn)
        })?;
        let (to_first, to_all) = runtime.block_on(async {
            let opened = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH)?;
            let started = Instant::now();
            let engine = Engine::builder(&path)
                .durability(Durability::None)
                .workflow(&stuck()?)
                .workflow(&linear()?)
                .open()
                .await?;
            for n in 0..threads {
                engine.thread(&format!("r-{n:06}")).await?.finished().await?;
            }
            let to_all = started.elapsed();
            // The first step completed after the reopen: the first one in the log after the
            // starts (the engine clock is the system's: event times are ms since the epoch).
            // (A thread that got the permit before the crash may have logged steps then: only
            // steps stamped after the open count.)
            let opened_ms = u64::try_from(opened.as_millis())?;
            let mut cursor = before;
            let first = loop {
                let events = engine.store().read_all_since(cursor, 10_000).wait()?;
                let last =
                    events.last().map(|e| e.bookmark.lsn).context("a step after the reopen")?;
                let found = events.iter().find(|e| {
                    e.kind == cairn::storage::EventKind::StepCompleted
                        && e.bookmark.at_ms >= opened_ms
                });
                if let Some(e) = found {
                    break e.bookmark.at_ms;
                }
                cursor = last;
            };
            let to_first = first - opened_ms;
            engine.crash().await;
            anyhow::Ok((to_first, to_all))
        })?;
        first.push(to_first as f64);
        all.push(to_all.as_secs_f64());
    }
    println!(
        "{}",
        bench_line(&format!("recovery_{threads}_threads_first_step"), median(first), "ms")
    );
    println!(
        "{}",
        bench_line(&format!("recovery_{threads}_threads_all_finished"), median(all), "s")
    );
    Ok(())
}

/// (g) Reading a long history, engine opened with the default builder (so with its default
/// checkpoint policy; `Durability::None` only to write the thread quickly): one thread of
/// [`HISTORY_STEPS`] steps of a one-node loop, then `Engine::replay` of its whole history (per
/// step) and `Engine::state_at` at [`HISTORY_SEQS`] + 1 seqs spread over it, each seq's time the
/// best of three (the slowest and the median of them), each run's figures from one pass over
/// the same file; replay and the slowest `state_at` also in time on the CPU (the calling
/// thread's, which does all of their work).
fn history(
    runtime: &Runtime,
    runs: usize,
    fresh: &mut impl FnMut(&str) -> PathBuf,
) -> anyhow::Result<()> {
    let steps = env_usize("CAIRN_BENCH_HISTORY_STEPS", HISTORY_STEPS as usize)? as u64;
    let path = fresh("history");
    let wf = looping(steps)?;
    let (mut replay, mut replay_cpu) = (Vec::new(), Vec::new());
    let (mut slowest, mut slowest_cpu, mut typical) = (Vec::new(), Vec::new(), Vec::new());
    runtime.block_on(async {
        let engine =
            builder_with_cache(&path)?.durability(Durability::None).workflow(&wf).open().await?;
        let handle = engine.start_json(LOOPING, 0u64, StartOptions::id("long")).await?;
        let outcome = handle.finished().await?;
        anyhow::ensure!(
            outcome.output == Some(serde_json::json!(steps)),
            "the long thread ended {:?} with {:?}",
            outcome.status,
            outcome.output
        );
        let last = engine.store().last_bookmark(&"long".parse()?).wait()?.context("the long thread")?;
        let last = last.seq.0;
        for _ in 0..runs {
            let (started, cpu) = (Instant::now(), on_cpu_ns()?);
            let report = engine.replay("long", &cairn::replay::ReplayOptions::default()).await?;
            let (elapsed, cpu) = (started.elapsed(), on_cpu_ns()? - cpu);
            anyhow::ensure!(report.divergence.is_none(), "replay diverged: {report:?}");
            replay.push(elapsed.as_secs_f64() * 1e6 / steps as f64);
            replay_cpu.push(cpu as f64 / 1e3 / steps as f64);
            // Each seq's time is the best of three tries: on a shared machine one try can lose
            // its CPU for a scheduler slice, tens of ms, which says nothing about `state_at`.
            // Its time on the CPU (this thread's, from the scheduler) is counted apart.
            let (mut times, mut cpus) = (Vec::new(), Vec::new());
            let operator = cairn_tools::Operator::new(&engine);
            for k in 0..=HISTORY_SEQS {
                let seq = (last * k / HISTORY_SEQS).max(1);
                let (mut best, mut best_cpu) = (f64::MAX, f64::MAX);
                for _ in 0..3 {
                    let (started, cpu) = (Instant::now(), on_cpu_ns()?);
                    let view = operator.state_at("long", Some(seq)).await?;
                    let cpu = on_cpu_ns()? - cpu;
                    best = best.min(started.elapsed().as_secs_f64() * 1e3);
                    best_cpu = best_cpu.min(cpu as f64 / 1e6);
                    drop(view);
                }
                times.push(best);
                cpus.push(best_cpu);
            }
            let (at, worst) = times
                .iter()
                .copied()
                .enumerate()
                .fold((0, 0.0), |(i, w), (j, t)| if t > w { (j, t) } else { (i, w) });
            let at = (last * at as u64 / HISTORY_SEQS).max(1);
            let worst_cpu = cpus.iter().copied().fold(0.0, f64::max);
            println!("# state_at slowest at seq {at} ({worst:.3} ms); slowest on the CPU {worst_cpu:.3} ms");
            slowest.push(worst);
            slowest_cpu.push(worst_cpu);
            typical.push(median(times));
        }
        engine.shutdown().await;
        anyhow::Ok(())
    })?;
    let name = |what: &str| format!("{what}_{steps}_step_thread");
    println!("{}", bench_line(&name("replay_per_step"), median(replay), "us"));
    println!("{}", bench_line(&name("replay_per_step_on_cpu"), median(replay_cpu), "us"));
    println!("{}", bench_line(&name("state_at_slowest"), median(slowest), "ms"));
    println!("{}", bench_line(&name("state_at_slowest_on_cpu"), median(slowest_cpu), "ms"));
    println!("{}", bench_line(&name("state_at_median"), median(typical), "ms"));
    Ok(())
}

/// (h) The final state of a finished ten-step thread (`Operator::state_at` at its end, each
/// thread's time the best of three: too short for the scheduler's CPU counts): read from its
/// log (the default: a short thread ends without a completion checkpoint) and from its
/// completion checkpoint (`completion_checkpoint_after(0)`), [`FINISHED_THREADS`] threads each,
/// the median of each.
fn finished(
    runtime: &Runtime,
    runs: usize,
    fresh: &mut impl FnMut(&str) -> PathBuf,
) -> anyhow::Result<()> {
    let wf = linear()?;
    let (mut from_log, mut from_snapshot) = (Vec::new(), Vec::new());
    for _ in 0..runs {
        for (after, out) in [(None, &mut from_log), (Some(0), &mut from_snapshot)] {
            let path = fresh("finished");
            let times = runtime.block_on(async {
                let mut builder = builder_with_cache(&path)?.durability(Durability::None);
                if let Some(events) = after {
                    builder = builder.completion_checkpoint_after(events);
                }
                let engine = builder.workflow(&wf).open().await?;
                one_at_a_time(engine.clone(), "f", FINISHED_THREADS).await?;
                let operator = cairn_tools::Operator::new(&engine);
                let mut times = Vec::with_capacity(FINISHED_THREADS);
                for n in 0..FINISHED_THREADS {
                    let mut best = f64::MAX;
                    for _ in 0..3 {
                        let started = Instant::now();
                        let view = operator.state_at(&format!("f-{n:05}"), None).await?;
                        best = best.min(started.elapsed().as_secs_f64() * 1e6);
                        anyhow::ensure!(view.step == NODES, "ended at step {}", view.step);
                    }
                    times.push(best);
                }
                engine.shutdown().await;
                anyhow::Ok(times)
            })?;
            out.push(median(times));
        }
    }
    let (log, snapshot) = (median(from_log), median(from_snapshot));
    println!("{}", bench_line("state_at_end_of_10_step_thread_from_log", log, "us"));
    println!("{}", bench_line("state_at_end_of_10_step_thread_from_snapshot", snapshot, "us"));
    Ok(())
}

/// Nanoseconds the calling thread has spent on a CPU (`/proc/thread-self/schedstat`): a cost
/// that a loaded machine's scheduler does not inflate, for work done on this thread alone.
fn on_cpu_ns() -> anyhow::Result<u64> {
    let stat = std::fs::read_to_string("/proc/thread-self/schedstat")
        .context("/proc/thread-self/schedstat")?;
    let first = stat.split_whitespace().next().context("an empty schedstat")?;
    first.parse().with_context(|| format!("schedstat: {stat:?}"))
}

/// (d) Memory per thread: the resident-set growth of a fresh process (a child) while
/// [`MEMORY_PARKED_THREADS`] threads are parked (waiting for input, sleeping, paused), while
/// [`MEMORY_THREADS`] wait for a runner permit, and after as many have completed, with the peak
/// during the run.
fn memory(runs: usize) -> anyhow::Result<()> {
    let exe = std::env::current_exe().context("locating the bench binary")?;
    for which in ["parked", "sleeping", "paused", "queued", "completed"] {
        let (mut kept, mut peak, mut marginal) = (Vec::new(), Vec::new(), Vec::new());
        for _ in 0..runs.min(3) {
            let out = std::process::Command::new(&exe)
                .env(CHILD_ENV, which)
                .output()
                .context("running the memory child")?;
            let stdout = String::from_utf8_lossy(&out.stdout);
            anyhow::ensure!(
                out.status.success(),
                "memory child {which} failed: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
            let line = stdout
                .lines()
                .find_map(|l| l.strip_prefix("CHILD "))
                .with_context(|| format!("no CHILD line from the memory child: {stdout}"))?;
            let mut fields = line.split_whitespace().map(str::parse::<f64>);
            let mut next =
                || -> anyhow::Result<f64> { Ok(fields.next().context("a short CHILD line")??) };
            kept.push(next()?);
            peak.push(next()?);
            marginal.push(next()?);
        }
        println!("{}", bench_line(&format!("memory_per_{which}_thread"), median(kept), "KiB"));
        println!("{}", bench_line(&format!("memory_peak_per_{which}_thread"), median(peak), "KiB"));
        let marginal = median(marginal);
        println!("{}", bench_line(&format!("memory_marginal_per_{which}_thread"), marginal, "KiB"));
    }
    Ok(())
}

/// In a child process: start `threads` threads at once and let them park waiting for input
/// (`parked`), sleeping for a day (`sleeping`) or paused while waiting for input (`paused`),
/// finish (`completed`, or `completed-immediate` under `Durability::Immediate`), or wait for a
/// runner (`queued`: a concurrency limit of 1 and a first thread that never finishes, so every
/// other thread waits for a permit); print `CHILD <kept KiB per thread> <peak KiB per thread>
/// <marginal KiB per thread>`, from `VmRSS` once they all stand so and `VmHWM`, each less the
/// `VmRSS` before the first start, and the growth of `VmRSS` over the second half of the
/// threads (the cost of one more once the bounded caches have filled).
fn memory_child(which: &str, threads: usize, path: &Path) -> anyhow::Result<()> {
    let (workflow, want) = match which {
        "parked" | "paused" => (ASKING, Some(ThreadStatus::WaitingInput)),
        "sleeping" => (SLEEPING, Some(ThreadStatus::Sleeping)),
        "completed" | "completed-immediate" => (WORKFLOW, Some(ThreadStatus::Completed)),
        "queued" => (STUCK, None),
        other => anyhow::bail!("unknown memory figure {other:?}"),
    };
    let durability =
        if which.ends_with("-immediate") { Durability::Immediate } else { Durability::None };
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let (kept, peak, marginal) = runtime.block_on(async {
        let engine = builder_with_cache(path)?
            .durability(durability)
            .concurrency(if want.is_some() { 64 } else { 1 })
            .workflow(&linear()?)
            .workflow(&asking()?)
            .workflow(&stuck()?)
            .workflow(&sleeping()?)
            .open()
            .await?;
        one_at_a_time(engine.clone(), "warm", MEMORY_WARMUP_THREADS).await?;
        let before = proc_status_kib("VmRSS")?;
        // In two halves, the resident set measured after each: the second half's growth is
        // the marginal cost of a thread once the bounded caches have filled.
        let mut half = 0;
        for (first, last) in [(0, threads / 2), (threads / 2, threads)] {
            let mut handles = Vec::with_capacity(last - first);
            for n in first..last {
                let id = StartOptions::id(format!("mem-{n:07}"));
                handles.push(engine.start_json(workflow, 0u64, id).await?);
            }
            if let Some(want) = want {
                for handle in &handles {
                    let outcome = handle.wait().await?;
                    let status = outcome.status;
                    anyhow::ensure!(status == want, "{} ended {status:?}", handle.id());
                    if which == "paused" {
                        engine.pause(handle.id().as_str()).await?;
                    }
                }
            }
            drop(handles);
            if first == 0 {
                half = proc_status_kib("VmRSS")?;
            }
        }
        let after = proc_status_kib("VmRSS")?;
        let marginal = after.saturating_sub(half) as f64 / (threads - threads / 2) as f64;
        let kept = after.saturating_sub(before);
        let peak = proc_status_kib("VmHWM")?.saturating_sub(before);
        if want.is_some() {
            // (A stuck thread never reaches a step boundary: `queued` ends with the runtime.)
            engine.shutdown().await;
        }
        Ok::<_, anyhow::Error>((kept, peak, marginal))
    })?;
    let per = |kib: u64| kib as f64 / threads as f64;
    println!("CHILD {} {} {marginal}", per(kept), per(peak));
    Ok(())
}

/// The workflow of every timed run: `NODES` nodes in a line, each adding one to a `u64`.
fn linear() -> anyhow::Result<Workflow<Replace<u64>>> {
    cairn_benches::linear_workflow(WORKFLOW, NODES)
}

/// The long-history workflow of the history section.
const LOOPING: &str = "bench-looping";

/// One node that adds one to a `u64`, looped until it reaches `steps`: one step per loop.
fn looping(steps: u64) -> anyhow::Result<Workflow<Replace<u64>>> {
    let bound = u32::try_from(steps).context("history steps")?;
    Ok(Workflow::<Replace<u64>>::builder(LOOPING, 1)
        .node(
            "inc",
            |s: Arc<Replace<u64>>, _ctx: Ctx| async move { Ok(NodeOutput::update(s.0 + 1)) },
        )
        .edge(START, "inc")
        .route("inc", move |s: &Replace<u64>| if s.0 >= steps { END } else { "inc" }, ["inc", END])
        .loop_bound("inc", bound)
        .build()?)
}

/// The parking workflow of the memory section.
const ASKING: &str = "bench-asking";

/// One node that asks for input, so that its threads park waiting for it.
fn asking() -> anyhow::Result<Workflow<Replace<u64>>> {
    Ok(Workflow::<Replace<u64>>::builder(ASKING, 1)
        .node("ask", |_s: Arc<Replace<u64>>, ctx: Ctx| async move {
            let answer: u64 = ctx.interrupt("a number, please")?;
            Ok(NodeOutput::update(answer))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .build()?)
}

/// The sleeping workflow of the memory section.
const SLEEPING: &str = "bench-sleeping";

/// One node that sleeps for a day (a durable timer), so that its threads park sleeping.
fn sleeping() -> anyhow::Result<Workflow<Replace<u64>>> {
    Ok(Workflow::<Replace<u64>>::builder(SLEEPING, 1)
        .node("nap", |_s: Arc<Replace<u64>>, ctx: Ctx| async move {
            ctx.sleep_ms(24 * 3600 * 1000).await?;
            Ok(NodeOutput::update(1))
        })
        .edge(START, "nap")
        .edge("nap", END)
        .build()?)
}

/// The never-finishing workflow of the memory section.
const STUCK: &str = "bench-stuck";

/// One node that never finishes, so that the thread running it keeps its runner permit.
fn stuck() -> anyhow::Result<Workflow<Replace<u64>>> {
    Ok(Workflow::<Replace<u64>>::builder(STUCK, 1)
        .node("wait", |_s: Arc<Replace<u64>>, _ctx: Ctx| async move {
            std::future::pending::<()>().await;
            Ok(NodeOutput::update(0))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .build()?)
}

/// Opens an engine on a fresh database file at `path`, times `work` on it, shuts it down.
async fn on_file<F, Fut>(path: &Path, durability: Durability, work: F) -> anyhow::Result<Duration>
where
    F: FnOnce(Engine) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    Ok(on_file_timed(path, durability, work).await?.0)
}

/// [`on_file`], with the time the whole process spent on a CPU during `work` (every thread's:
/// the caller's, the tokio workers', the storage writer's), which a loaded machine's scheduler
/// does not inflate as it does the wall clock.
async fn on_file_timed<F, Fut>(
    path: &Path,
    durability: Durability,
    work: F,
) -> anyhow::Result<(Duration, Duration)>
where
    F: FnOnce(Engine) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let engine = Engine::builder(path).durability(durability).workflow(&linear()?).open().await?;
    let (start, cpu) = (Instant::now(), process_cpu()?);
    work(engine.clone()).await?;
    let (elapsed, cpu) = (start.elapsed(), process_cpu()?.saturating_sub(cpu));
    engine.shutdown().await;
    Ok((elapsed, cpu))
}

/// The time this process has spent on a CPU, user and system, all threads (those ended too),
/// to the microsecond (`getrusage`, which Linux sums from the scheduler's own clock;
/// `/proc/self/stat` counts ticks of 10 ms, too coarse for a run of a tenth of a second).
fn process_cpu() -> anyhow::Result<Duration> {
    use nix::sys::resource::{UsageWho, getrusage};
    let usage = getrusage(UsageWho::RUSAGE_SELF).context("getrusage")?;
    let micros = |t: nix::sys::time::TimeVal| -> anyhow::Result<u64> {
        let seconds = u64::try_from(t.tv_sec()).context("a negative CPU time")?;
        let micros = u64::try_from(t.tv_usec()).context("a negative CPU time")?;
        Ok(seconds * 1_000_000 + micros)
    };
    Ok(Duration::from_micros(micros(usage.user_time())? + micros(usage.system_time())?))
}

/// What a run on a [`SyncCountingFile`] did to the file.
struct Counted {
    /// Durable commits (redb syncs once per durable commit).
    syncs: f64,
    /// Bytes written.
    bytes: f64,
}

/// [`on_file`] with `Durability::Immediate` on a file that counts its syncs and writes.
async fn on_counted_file<F, Fut>(path: &Path, work: F) -> anyhow::Result<Counted>
where
    F: FnOnce(Engine) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let (backend, counts) = SyncCountingFile::create(path)?;
    let options = Options { durability: Durability::Immediate, ..Options::default() };
    let store = RedbStore::with_backend(backend, options)?;
    let engine = Engine::with_store(Arc::new(store)).workflow(&linear()?).open().await?;
    let before = counts.snapshot();
    work(engine.clone()).await?;
    let after = counts.snapshot();
    engine.shutdown().await;
    Ok(Counted { syncs: (after.0 - before.0) as f64, bytes: (after.1 - before.1) as f64 })
}

/// Runs `threads` threads of the linear workflow one after the other.
async fn one_at_a_time(engine: Engine, prefix: &str, threads: usize) -> anyhow::Result<()> {
    for n in 0..threads {
        run_thread(&engine, format!("{prefix}-{n:05}")).await?;
    }
    Ok(())
}

/// `clients` tasks at once, each running `each` threads one after the other.
async fn many_at_once(engine: Engine, clients: usize, each: usize) -> anyhow::Result<()> {
    let mut tasks = Vec::with_capacity(clients);
    for client in 0..clients {
        let engine = engine.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0..each {
                run_thread(&engine, format!("c{client:02}-{n:05}")).await?;
            }
            Ok::<_, anyhow::Error>(())
        }));
    }
    for task in tasks {
        task.await??;
    }
    Ok(())
}

/// Starts one thread and waits for it to complete, checking it ran every node.
async fn run_thread(engine: &Engine, id: String) -> anyhow::Result<()> {
    let handle = engine.start_json(WORKFLOW, 0u64, StartOptions::id(id)).await?;
    let outcome = handle.finished().await?;
    anyhow::ensure!(
        outcome.status == ThreadStatus::Completed
            && outcome.output == Some(serde_json::json!(NODES)),
        "thread {} ended {:?} with {:?}",
        handle.id(),
        outcome.status,
        outcome.output
    );
    Ok(())
}

/// A `kB` field of `/proc/self/status` (`VmRSS`, `VmHWM`).
fn proc_status_kib(field: &str) -> anyhow::Result<u64> {
    let status = std::fs::read_to_string("/proc/self/status").context("/proc/self/status")?;
    let line = status
        .lines()
        .find_map(|l| l.strip_prefix(field)?.strip_prefix(':'))
        .with_context(|| format!("no {field} in /proc/self/status"))?;
    let kib = line.trim().trim_end_matches("kB").trim();
    kib.parse().with_context(|| format!("{field}: {line:?}"))
}

/// The engine's default builder for `path`, with the page cache of `CAIRN_BENCH_PAGE_CACHE_BYTES`
/// when it is set.
fn builder_with_cache(path: &Path) -> anyhow::Result<cairn::EngineBuilder> {
    let builder = Engine::builder(path);
    Ok(match std::env::var("CAIRN_BENCH_PAGE_CACHE_BYTES") {
        Ok(bytes) => {
            builder.page_cache_bytes(bytes.parse().context("CAIRN_BENCH_PAGE_CACHE_BYTES")?)
        }
        Err(_) => builder,
    })
}

fn env_usize(name: &str, default: usize) -> anyhow::Result<usize> {
    match std::env::var(name) {
        Ok(value) => value.parse().with_context(|| format!("{name}={value} is not a count")),
        Err(_) => Ok(default),
    }
}
