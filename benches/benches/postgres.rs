//! PostgreSQL benchmark: the 10-node linear workflow of the engine benchmark, run by 1, 2 and 4
//! engines sharing one PostgreSQL database, each with 64 threads in flight, against one engine on
//! a redb file running the same threads.
//!
//! `cargo bench -p cairn-benches --bench postgres` starts a throwaway cluster (Debian's
//! `postgresql` package; `cairn_storage::pg_cluster`) and prints `BENCH` and `RATIO` lines:
//! node-steps/s per number of engines, the time from start to completion of a thread divided by
//! its steps (p50 and p99 over all threads of a run, the acknowledgement latency of a step under
//! that load), transaction ids assigned per node-step (group commits, savepoints, notifications;
//! not reads), the fraction of the machine's CPU busy during the run (`/proc/stat`: near 1, the
//! run was bound by CPU), the CPU per node-step of the engines' process and of the server while
//! the threads ran, the CPU of opening the engines (apart: the schema of a new database is not
//! a step's), and the ratios `pg_4_workers_vs_1` and `pg_1_worker_vs_redb`. Every figure is the median of
//! `CAIRN_BENCH_RUNS` runs (default 3). The engines run in this one process (one store, one
//! writer connection, four reader connections and a listener each), on the machine that also
//! runs the server.
#![allow(clippy::print_stdout, reason = "a benchmark's output is its printed figures")]

use std::path::Path;

use std::time::{Duration, Instant};

use cairn::dsl::Workflow;
use cairn::{Durability, Engine, Replace, StartOptions, ThreadStatus};
use cairn_benches::{bench_line, cpu, median, per_second, ratio_line, scratch_dir};
use cairn_storage_testkit::pg_cluster::Cluster;

/// Nodes of the workflow, each one step.
const NODES: u64 = 10;
/// The workflow's id.
const WORKFLOW: &str = "bench-linear";
/// Threads in flight per engine.
const CLIENTS: usize = 64;
/// Threads each client runs one after the other (`CAIRN_BENCH_PG_THREADS` sets another number).
const THREADS_PER_CLIENT: usize = 16;
/// Runs per figure.
const RUNS: usize = 3;

fn main() -> anyhow::Result<()> {
    let runs: usize = match std::env::var("CAIRN_BENCH_RUNS") {
        Ok(v) => v.parse()?,
        Err(_) => RUNS,
    };
    let threads_per_client: usize = match std::env::var("CAIRN_BENCH_PG_THREADS") {
        Ok(v) => v.parse()?,
        Err(_) => THREADS_PER_CLIENT,
    };
    let Some(cluster) = Cluster::start("bench postgres") else {
        println!("# no PostgreSQL cluster could start: nothing measured");
        return Ok(());
    };
    let root = scratch_dir(Path::new(env!("CARGO_TARGET_TMPDIR")))?;
    let runtime =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    println!("# {runs} runs per figure; {CLIENTS} threads in flight per engine");
    let statements = std::env::var_os("CAIRN_BENCH_PG_STATEMENTS").is_some();
    if statements {
        sql(
            &cluster.url("postgres"),
            "ALTER SYSTEM SET shared_preload_libraries = 'pg_stat_statements'",
        )?;
        cluster.restart().map_err(anyhow::Error::msg)?;
    }
    let server = cluster.server_pid().map_err(anyhow::Error::msg)?;
    let mut by_workers = Vec::new();
    for workers in worker_counts()? {
        let mut figures = Figures::default();
        for _ in 0..runs {
            let url = cluster.new_database();
            if statements {
                sql(&url, "CREATE EXTENSION pg_stat_statements")?;
            }
            let (engine_before, server_before) = (cpu::own_seconds()?, cpu::tree_seconds(server)?);
            let engines = runtime.block_on(open(&url, workers))?;
            figures.open_engine_ms.push((cpu::own_seconds()? - engine_before) * 1e3);
            figures.open_server_ms.push((cpu::tree_seconds(server)? - server_before) * 1e3);
            if statements {
                // The statements and the WAL of the run alone, not the opens'.
                sql(&url, "SELECT pg_stat_statements_reset(); SELECT pg_stat_reset_shared('wal')")?;
            }
            let before = next_xid(&url)?;
            let cpu = cpu_times()?;
            let (engine_before, server_before) = (cpu::own_seconds()?, cpu::tree_seconds(server)?);
            let run = runtime.block_on(drive(&engines, threads_per_client))?;
            figures.busy.push(cpu_busy_since(cpu)?);
            let steps = run.steps as f64;
            figures.engine_cpu.push((cpu::own_seconds()? - engine_before) * 1e6 / steps);
            figures.server_cpu.push((cpu::tree_seconds(server)? - server_before) * 1e6 / steps);
            let after = next_xid(&url)?;
            runtime.block_on(async {
                for engine in engines {
                    engine.shutdown().await;
                }
            });
            if statements {
                print_statements(&url, run.steps)?;
            }
            figures.rate.push(run.rate);
            figures.p50.push(run.p50_ms);
            figures.p99.push(run.p99_ms);
            figures.commits.push((after - before) as f64 / steps);
        }
        let rate = figures.print(workers);
        by_workers.push((workers, rate));
    }
    let redb_runs = if std::env::var_os("CAIRN_BENCH_PG_WORKERS").is_some() { 0 } else { runs };
    let redb = redb_rates(&runtime, root.path(), redb_runs, threads_per_client)?;
    let rate_of = |n: usize| by_workers.iter().find(|(w, _)| *w == n).map(|(_, r)| *r);
    if let (Some(four), Some(one)) = (rate_of(4), rate_of(1)) {
        println!("{}", ratio_line("pg_4_workers_vs_1", four / one));
    }
    if !redb.is_empty() {
        let redb = median(redb);
        println!("{}", bench_line("redb_1_engine_64_threads", redb, "node-steps/s"));
        if let Some(one) = rate_of(1) {
            println!("{}", ratio_line("pg_1_worker_vs_redb", one / redb));
        }
    }
    Ok(())
}

/// The figures of the runs with one number of workers, one entry per run.
#[derive(Default)]
struct Figures {
    rate: Vec<f64>,
    p50: Vec<f64>,
    p99: Vec<f64>,
    /// Transaction ids per step.
    commits: Vec<f64>,
    busy: Vec<f64>,
    /// CPU microseconds per step, of the engine and of the server, while the threads ran.
    engine_cpu: Vec<f64>,
    server_cpu: Vec<f64>,
    /// CPU milliseconds of opening the engines (connections, the schema on a new database),
    /// of the engines' process and of the server: not part of any step.
    open_engine_ms: Vec<f64>,
    open_server_ms: Vec<f64>,
}

impl Figures {
    /// Prints the median of each figure, for `workers` workers; returns the median rate.
    fn print(self, workers: usize) -> f64 {
        let rate = median(self.rate);
        println!(
            "{}",
            bench_line(&format!("pg_{workers}_workers_64_threads_each"), rate, "node-steps/s")
        );
        println!(
            "{}",
            bench_line(&format!("pg_{workers}_workers_step_latency_p50"), median(self.p50), "ms")
        );
        println!(
            "{}",
            bench_line(&format!("pg_{workers}_workers_step_latency_p99"), median(self.p99), "ms")
        );
        println!(
            "{}",
            bench_line(
                &format!("pg_{workers}_workers_xids_per_step"),
                median(self.commits),
                "xids"
            )
        );
        println!(
            "{}",
            bench_line(&format!("pg_{workers}_workers_cpu_busy"), median(self.busy), "fraction")
        );
        println!(
            "{}",
            bench_line(
                &format!("pg_{workers}_workers_engine_cpu_per_step"),
                median(self.engine_cpu),
                "us"
            )
        );
        println!(
            "{}",
            bench_line(
                &format!("pg_{workers}_workers_server_cpu_per_step"),
                median(self.server_cpu),
                "us"
            )
        );
        println!(
            "{}",
            bench_line(
                &format!("pg_{workers}_workers_open_engine_cpu"),
                median(self.open_engine_ms),
                "ms"
            )
        );
        println!(
            "{}",
            bench_line(
                &format!("pg_{workers}_workers_open_server_cpu"),
                median(self.open_server_ms),
                "ms"
            )
        );
        rate
    }
}

/// The step rate of each of `runs` runs of one engine on a redb file under `root`.
fn redb_rates(
    runtime: &tokio::runtime::Runtime,
    root: &Path,
    runs: usize,
    threads_per_client: usize,
) -> anyhow::Result<Vec<f64>> {
    let mut redb = Vec::new();
    for n in 0..runs {
        let path = root.join(format!("redb-{n}.redb"));
        let run = runtime.block_on(async {
            let engine = Engine::builder(&path)
                .durability(Durability::Immediate)
                .workflow(&linear()?)
                .open()
                .await?;
            let run = drive(std::slice::from_ref(&engine), threads_per_client).await?;
            engine.shutdown().await;
            Ok::<_, anyhow::Error>(run)
        })?;
        redb.push(run.rate);
    }
    Ok(redb)
}

/// Runs `statement` on the database at `url`, off the async runtime.
fn sql(url: &str, statement: &str) -> anyhow::Result<()> {
    let (url, statement) = (url.to_owned(), statement.to_owned());
    std::thread::spawn(move || -> anyhow::Result<()> {
        let mut client = postgres::Client::connect(&url, postgres::NoTls)?;
        client.batch_execute(&statement)?;
        Ok(())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("a statement panicked"))?
}

/// With `CAIRN_BENCH_PG_STATEMENTS`: the statements the run sent to its database, most called
/// first, per node-step (`pg_stat_statements`, preloaded by a restart at the bench's start):
/// calls, rows and server time per step.
fn print_statements(url: &str, steps: u64) -> anyhow::Result<()> {
    let wal = wal_written(url)?;
    let url = url.to_owned();
    let rows = std::thread::spawn(move || -> anyhow::Result<Vec<(i64, f64, i64, String)>> {
        let mut client = postgres::Client::connect(&url, postgres::NoTls)?;
        let rows = client.query(
            "SELECT calls, total_exec_time, rows, query FROM pg_stat_statements \
             WHERE dbid = (SELECT oid FROM pg_database WHERE datname = current_database()) \
             ORDER BY calls DESC LIMIT 30",
            &[],
        )?;
        Ok(rows.iter().map(|r| (r.get(0), r.get(1), r.get(2), r.get(3))).collect())
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the statistics query panicked"))??;
    let per_step = |n: f64| n / steps as f64;
    println!(
        "# WAL per node-step: {:.3} records, {:.3} full-page images, {:.0} bytes",
        per_step(wal.0),
        per_step(wal.1),
        per_step(wal.2)
    );
    println!("# statements per node-step: calls, server us, rows, statement");
    for (calls, ms, returned, query) in rows {
        let query: String = query.split_whitespace().collect::<Vec<_>>().join(" ");
        let query: String = query.chars().take(150).collect();
        println!(
            "# {:8.3} {:8.2} {:8.3}  {query}",
            per_step(calls as f64),
            per_step(ms * 1e3),
            per_step(returned as f64)
        );
    }
    Ok(())
}

/// The WAL the cluster wrote since its statistics were reset (`pg_stat_wal`): records,
/// full-page images and bytes.
fn wal_written(url: &str) -> anyhow::Result<(f64, f64, f64)> {
    let url = url.to_owned();
    std::thread::spawn(move || -> anyhow::Result<(f64, f64, f64)> {
        let mut client = postgres::Client::connect(&url, postgres::NoTls)?;
        let row = client.query_one(
            "SELECT wal_records::float8, wal_fpi::float8, wal_bytes::float8 FROM pg_stat_wal",
            &[],
        )?;
        Ok((row.get(0), row.get(1), row.get(2)))
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the WAL statistics query panicked"))?
}

/// The numbers of engines to measure: `CAIRN_BENCH_PG_WORKERS` (e.g. `1` or `1,4`; the redb
/// reference run is then left out) or 1, 2 and 4.
fn worker_counts() -> anyhow::Result<Vec<usize>> {
    match std::env::var("CAIRN_BENCH_PG_WORKERS") {
        Ok(list) => Ok(list.split(',').map(|n| n.trim().parse()).collect::<Result<_, _>>()?),
        Err(_) => Ok(vec![1, 2, 4]),
    }
}

/// What one run measured.
struct Run {
    steps: u64,
    rate: f64,
    p50_ms: f64,
    p99_ms: f64,
}

/// `workers` engines opened on the database at `url` (the first one creates the schema).
async fn open(url: &str, workers: usize) -> anyhow::Result<Vec<Engine>> {
    let mut engines = Vec::new();
    for _ in 0..workers {
        engines.push(Engine::builder(url).concurrency(CLIENTS).workflow(&linear()?).open().await?);
    }
    Ok(engines)
}

/// Runs `CLIENTS` x `threads_per_client` threads on each engine, all at once.
async fn drive(engines: &[Engine], threads_per_client: usize) -> anyhow::Result<Run> {
    let started = Instant::now();
    let mut tasks = Vec::new();
    for (e, engine) in engines.iter().enumerate() {
        for client in 0..CLIENTS {
            let engine = engine.clone();
            tasks.push(tokio::spawn(async move {
                let mut took = Vec::with_capacity(threads_per_client);
                for n in 0..threads_per_client {
                    let t = Instant::now();
                    let id = format!("e{e}-c{client:02}-{n:03}");
                    let handle = engine.start_json(WORKFLOW, 0u64, StartOptions::id(id)).await?;
                    let outcome = handle.finished().await?;
                    anyhow::ensure!(outcome.status == ThreadStatus::Completed, "{outcome:?}");
                    took.push(t.elapsed());
                }
                Ok::<_, anyhow::Error>(took)
            }));
        }
    }
    let mut took: Vec<Duration> = Vec::new();
    for task in tasks {
        took.extend(task.await??);
    }
    let elapsed = started.elapsed();
    let steps = took.len() as u64 * NODES;
    took.sort();
    let per_step = |q: f64| {
        let i = ((took.len() as f64 * q) as usize).min(took.len() - 1);
        took[i].as_secs_f64() * 1e3 / NODES as f64
    };
    Ok(Run {
        steps,
        rate: per_second(steps, elapsed),
        p50_ms: per_step(0.5),
        p99_ms: per_step(0.99),
    })
}

/// The machine's CPU time counters (`/proc/stat`, all CPUs): (busy, total) in clock ticks.
fn cpu_times() -> anyhow::Result<(u64, u64)> {
    let stat = std::fs::read_to_string("/proc/stat")?;
    let line = stat.lines().next().unwrap_or_default();
    let ticks: Vec<u64> =
        line.split_whitespace().skip(1).map(str::parse).collect::<Result<_, _>>()?;
    anyhow::ensure!(ticks.len() >= 5, "unexpected /proc/stat: {line}");
    // user nice system idle iowait ...: idle and iowait are the not-busy ones.
    let total: u64 = ticks.iter().sum();
    Ok((total - ticks[3] - ticks[4], total))
}

/// The fraction of the machine's CPU time that was busy since `before` (every process: the
/// server, the engines, and anything else running): near 1, the run was bound by CPU.
fn cpu_busy_since(before: (u64, u64)) -> anyhow::Result<f64> {
    let now = cpu_times()?;
    let total = now.1.saturating_sub(before.1).max(1);
    Ok(now.0.saturating_sub(before.0) as f64 / total as f64)
}

/// The next transaction id the cluster will assign: only transactions and savepoints that write
/// or lock rows take one, so the difference over a run counts those (a group commit, a savepoint
/// per batch in a group of several, a notification), not reads.
fn next_xid(url: &str) -> anyhow::Result<i64> {
    let url = url.to_owned();
    std::thread::spawn(move || -> anyhow::Result<i64> {
        let mut client = postgres::Client::connect(&url, postgres::NoTls)?;
        let xid: String =
            client.query_one("SELECT pg_snapshot_xmax(pg_current_snapshot())::text", &[])?.get(0);
        Ok(xid.parse()?)
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the statistics query panicked"))?
}

fn linear() -> anyhow::Result<Workflow<Replace<u64>>> {
    cairn_benches::linear_workflow(WORKFLOW, NODES)
}
