//! Many workers on one PostgreSQL database, under chaos: four worker processes (this test
//! binary re-run in worker mode, `pg_worker_child`) share the threads of the chaos workflow
//! (`pg_chaos_workflow.rs`: tools, a lock, a timer, a human answer, a child thread) while the
//! parent `kill -9`s workers (and starts them again), stops one with `SIGSTOP` past its lease
//! and lets it go on with `SIGCONT`, ends the writers' connections with
//! `pg_terminate_backend`, and restarts the server once (an immediate stop, as a crash).
//!
//! Every worker prints one `ACK <thread> <seq> <digest>` line per event its store acknowledged
//! and `FENCED <n>` when its count of fenced runners moves. At the end: every acknowledged
//! event is in the database with the same bytes (`lost_acked`), no thread completed twice
//! (`double_completions`), every final state equals a single-process redb run's
//! (`diverged`), no tool ran more often than a driver durably announced a call of it
//! (`ToolCalled`) before running it (`repeated_recorded_effects`: a tool whose result was
//! recorded and that ran again without a new announcement), `verify` is clean, and the fence
//! was exercised (`fenced` > 0: a stopped worker's write was refused).
//!
//! Sizes: `CAIRN_REL_PG_THREADS` (200 here; the soak runs 2,000), `CAIRN_REL_PG_SECONDS` (the
//! time the threads get to finish), `CAIRN_REL_SEED`.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use cairn::storage::{Catalog, Maintenance};
use std::collections::{BTreeMap, HashMap};
use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use cairn::event::Body;
use cairn::storage::{Durability, Page, PgStore, Seq, ThreadFilter, ThreadId, ThreadStatus};
use cairn::{Engine, RecoveryPolicy, StartOptions};
use cairn_storage_testkit::pg_cluster::Cluster;
use cairn_testkit::RecordingStore;

use crate::env::{Rng, report, seed, size};
use crate::pg_chaos_workflow::{CHAOS, answer_for, chaos, input_for};
use crate::workflows::Ledger;

const WORKERS: usize = 4;
/// Short, so that the test waits out dead workers' leases in seconds.
const LEASE_TTL_MS: u64 = 1_500;
/// The engines' seed: the same in every worker and in the reference run.
const ENGINE_SEED: u64 = 0x00C0_FFEE;

fn thread_id(i: usize) -> String {
    format!("c-{i:05}")
}

fn digest(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex()[..16].to_owned()
}

fn say(line: &str) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
}

/// A worker: serves the database named by `CAIRN_PGW_URL`, starting its share of the threads
/// (idempotent: a worker started again starts the same ids), answering every thread it sees
/// waiting, until SIGTERM.
#[test]
fn pg_worker_child() {
    let Ok(url) = std::env::var("CAIRN_PGW_URL") else { return };
    let ledger = std::path::PathBuf::from(std::env::var("CAIRN_PGW_LEDGER").expect("ledger"));
    let first = size("CAIRN_PGW_FIRST", 0) as usize;
    let count = size("CAIRN_PGW_COUNT", 0) as usize;
    // Warnings and errors to stderr (a file of the parent's): what a failure report shows.
    let _ = tracing_subscriber::fmt()
        .with_writer(std::io::stderr)
        .with_env_filter(tracing_subscriber::EnvFilter::new("warn"))
        .try_init();
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let store = loop {
            match PgStore::connect(&url, Durability::Immediate) {
                Ok(store) => break store,
                // The server may be restarting.
                Err(_) => tokio::time::sleep(Duration::from_millis(200)).await,
            }
        };
        let rec = Arc::new(RecordingStore::new(Arc::new(store)));
        rec.on_ack(Arc::new(|event| {
            say(&format!("ACK {} {} {}", event.thread, event.bookmark.seq.0, digest(&event.data)));
        }));
        let engine = Engine::with_store(rec.clone())
            .workflow(&chaos(&ledger))
            .seed(ENGINE_SEED)
            .lease_ttl_ms(LEASE_TTL_MS)
            .poll_ms(100)
            .concurrency(16)
            .recovery(RecoveryPolicy::Resume)
            // The checks read whole logs (acknowledged events, announced tool calls).
            .prune_history(false)
            .open()
            .await
            .expect("engine");
        for i in first..first + count {
            let id = thread_id(i);
            while engine
                .start_json(CHAOS, input_for(&id), StartOptions::id(id.clone()))
                .await
                .is_err()
            {
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
        }
        let mut terminate =
            tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())
                .expect("signal");
        let mut fenced = 0;
        loop {
            tokio::select! {
                _ = terminate.recv() => break,
                () = tokio::time::sleep(Duration::from_millis(100)) => {}
            }
            if engine.fenced_runners() != fenced {
                fenced = engine.fenced_runners();
                say(&format!("FENCED {fenced}"));
            }
            let waiting = ThreadFilter {
                status: Some(ThreadStatus::WaitingInput),
                ..ThreadFilter::default()
            };
            let Ok(page) =
                engine.store().list_threads(&waiting, Page { limit: 64, offset: 0 }).wait()
            else {
                continue;
            };
            for record in page {
                // Another worker may answer first: then this one is refused, which is fine.
                let _ = engine.send_input(record.id.as_str(), answer_for(record.id.as_str())).await;
            }
        }
        engine.shutdown().await;
        say(&format!("FENCED {}", engine.fenced_runners()));
    });
}

/// What the workers printed, across all their lives.
#[derive(Default)]
struct Heard {
    acks: Vec<(String, u64, String)>,
    /// Fenced runners per worker life.
    fenced: HashMap<u64, u64>,
}

struct Worker {
    child: Child,
    stopped_until: Option<Instant>,
}

struct Pool {
    url: String,
    ledger: std::path::PathBuf,
    threads: usize,
    heard: Arc<Mutex<Heard>>,
    lives: u64,
    readers: Vec<std::thread::JoinHandle<()>>,
}

impl Pool {
    /// Starts worker `k` (a new life of it).
    fn spawn(&mut self, k: usize) -> Worker {
        let share = self.threads.div_ceil(WORKERS);
        let first = k * share;
        let count = share.min(self.threads.saturating_sub(first));
        let mut child = Command::new(std::env::current_exe().expect("test binary"))
            .args(["--exact", "pg_workers::pg_worker_child", "--test-threads=1", "-q"])
            .env("CAIRN_PGW_URL", &self.url)
            .env("CAIRN_PGW_LEDGER", &self.ledger)
            .env("CAIRN_PGW_FIRST", first.to_string())
            .env("CAIRN_PGW_COUNT", count.to_string())
            .env_remove("RUST_BACKTRACE")
            .stdout(Stdio::piped())
            .stderr(
                std::fs::File::create(
                    self.ledger.with_file_name(format!("worker-{}.log", self.lives)),
                )
                .map_or_else(|_| Stdio::null(), Stdio::from),
            )
            .spawn()
            .expect("spawn a worker");
        let life = self.lives;
        self.lives += 1;
        let stdout = child.stdout.take().expect("stdout");
        let heard = self.heard.clone();
        self.readers.push(std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                let parts: Vec<&str> = line.split_whitespace().collect();
                let mut heard = heard.lock().unwrap();
                match parts.as_slice() {
                    ["ACK", thread, seq, digest] => {
                        if let Ok(seq) = seq.parse() {
                            heard.acks.push(((*thread).to_owned(), seq, (*digest).to_owned()));
                        }
                    }
                    ["FENCED", n] => {
                        if let Ok(n) = n.parse() {
                            heard.fenced.insert(life, n);
                        }
                    }
                    _ => {}
                }
            }
        }));
        Worker { child, stopped_until: None }
    }
}

fn signal(child: &Child, sig: &str) {
    let _ = Command::new("kill").args([sig, &child.id().to_string()]).status();
}

/// The chaos threads started so far and those of them not yet ended, or `None` while the
/// database cannot be read (restarting).
fn progress(store: &PgStore) -> Option<(usize, usize)> {
    let filter = ThreadFilter { workflow_id: Some(CHAOS.into()), ..ThreadFilter::default() };
    let all = store.list_threads(&filter, Page { limit: 10_000, offset: 0 }).wait().ok()?;
    Some((all.len(), all.iter().filter(|r| !r.status.is_terminal()).count()))
}

/// The last lines of every worker's log, for a failure report.
fn worker_logs(dir: &Path) -> String {
    let mut out = String::new();
    for entry in std::fs::read_dir(dir).into_iter().flatten().flatten() {
        let name = entry.file_name().to_string_lossy().into_owned();
        if name.starts_with("worker-") {
            let text = std::fs::read_to_string(entry.path()).unwrap_or_default();
            let tail: Vec<&str> = text.lines().rev().take(8).collect();
            out.push_str(&format!("\n--- {name} ---\n"));
            for line in tail.into_iter().rev() {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// Ends the writers' connections; how many.
fn terminate_writers(url: &str) -> u64 {
    let Ok(mut admin) = postgres::Client::connect(url, postgres::NoTls) else { return 0 };
    admin
        .query_one(
            "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity \
             WHERE datname = current_database() AND application_name = 'cairn-writer'",
            &[],
        )
        .map_or(0, |row| u64::try_from(row.get::<_, i64>(0)).unwrap_or(0))
}

#[derive(Default, Debug)]
struct Chaos {
    kills: u64,
    stops: u64,
    terminations: u64,
    restarts: u64,
}

#[test]
fn pg_workers_chaos() {
    let Some(cluster) = Cluster::start("pg_workers_chaos") else { return };
    let threads = size("CAIRN_REL_PG_THREADS", 200) as usize;
    let seconds = size("CAIRN_REL_PG_SECONDS", 300);
    let case_seed = seed("CAIRN_REL_SEED", 0x5EED_0014);
    let url = cluster.new_database();
    let dir = tempfile::tempdir().expect("temp dir");
    let ledger = dir.path().join("ledger.txt");
    // Creates the schema once, before the workers race to.
    let store = PgStore::connect(&url, Durability::Immediate).expect("connect");
    let mut pool = Pool {
        url: url.clone(),
        ledger: ledger.clone(),
        threads,
        heard: Arc::default(),
        lives: 0,
        readers: Vec::new(),
    };
    let mut workers: Vec<Worker> = (0..WORKERS).map(|k| pool.spawn(k)).collect();
    let mut rng = Rng(case_seed);
    let mut chaos = Chaos::default();
    let deadline = Instant::now() + Duration::from_secs(seconds);
    let started = Instant::now();
    loop {
        std::thread::sleep(Duration::from_millis(250));
        let now = Instant::now();
        for w in &mut workers {
            if w.stopped_until.is_some_and(|t| now >= t) {
                signal(&w.child, "-CONT");
                w.stopped_until = None;
            }
        }
        assert!(
            now < deadline,
            "threads unfinished after {seconds} s: {:?} {chaos:?}{}",
            progress(&store),
            worker_logs(dir.path())
        );
        let Some((started, left)) = progress(&store) else { continue };
        if started == threads && left == 0 {
            break;
        }
        // Chaos while there is work; each kind at least once (the restart exactly once).
        let done = (started - left) as f64 / threads as f64;
        let k = rng.below(WORKERS as u64) as usize;
        let roll = rng.below(100);
        let running = workers.iter().filter(|w| w.stopped_until.is_none()).count();
        if (roll < 4 || (chaos.kills == 0 && done > 0.5)) && workers[k].stopped_until.is_none() {
            let _ = workers[k].child.kill();
            let _ = workers[k].child.wait();
            workers[k] = pool.spawn(k);
            chaos.kills += 1;
        } else if (roll < 7 || (chaos.stops == 0 && done > 0.2))
            && running > 1
            && workers[k].stopped_until.is_none()
            && done < 0.9
        {
            signal(&workers[k].child, "-STOP");
            workers[k].stopped_until = Some(now + Duration::from_millis(LEASE_TTL_MS + 1_500));
            chaos.stops += 1;
        } else if roll < 10 || (chaos.terminations == 0 && done > 0.3) {
            chaos.terminations += terminate_writers(&url);
        } else if chaos.restarts == 0 && done > 0.4 {
            cluster.restart().expect("the server restarts");
            chaos.restarts += 1;
        }
    }
    let elapsed = started.elapsed();
    for w in &mut workers {
        if w.stopped_until.is_some() {
            signal(&w.child, "-CONT");
        }
        signal(&w.child, "-TERM");
    }
    for w in &mut workers {
        let _ = w.child.wait();
    }
    for reader in pool.readers.drain(..) {
        let _ = reader.join();
    }
    let heard = std::mem::take(&mut *pool.heard.lock().unwrap());
    let fenced: u64 = heard.fenced.values().sum();

    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let reference = runtime.block_on(reference_run(dir.path(), threads));
    let (lost_acked, double_completions, diverged, repeated, statuses) =
        runtime.block_on(check(&url, &ledger, &heard.acks, &reference));
    let verify = store.verify().expect("verify");
    report(&format!(
        "RELIABILITY pg_workers workers={WORKERS} threads={threads} seconds={} kills={} stops={} \
         fenced={fenced} terminations={} restarts={} acked={} double_completions={double_completions} \
         lost_acked={lost_acked} diverged={diverged} repeated_recorded_effects={repeated} seed={case_seed:#x}",
        elapsed.as_secs(),
        chaos.kills,
        chaos.stops,
        chaos.terminations,
        chaos.restarts,
        heard.acks.len(),
    ));
    assert!(verify.is_clean(), "{:?}", verify.problems);
    assert_eq!(statuses.get("completed").copied(), Some(threads), "{statuses:?}");
    assert_eq!(lost_acked, 0, "acknowledged events missing or changed");
    assert_eq!(double_completions, 0);
    assert_eq!(diverged, 0, "final states differ from the single-process run");
    assert_eq!(repeated, 0, "a tool ran without a durable announcement of its call");
    assert!(chaos.kills > 0 && chaos.stops > 0 && chaos.terminations > 0 && chaos.restarts == 1);
    assert!(fenced > 0, "no stopped worker's write was refused: the fence was not exercised");
}

/// The same threads on a redb file, one process, nothing crashing: their final states.
async fn reference_run(dir: &Path, threads: usize) -> BTreeMap<String, Ledger> {
    let ledger = dir.join("reference-ledger.txt");
    let engine = Engine::builder(dir.join("reference.db"))
        .workflow(&chaos(&ledger))
        .seed(ENGINE_SEED)
        .concurrency(64)
        .open()
        .await
        .expect("reference engine");
    for i in 0..threads {
        let id = thread_id(i);
        engine
            .start_json(CHAOS, input_for(&id), StartOptions::id(id.clone()))
            .await
            .expect("start");
    }
    let mut out = BTreeMap::new();
    while out.len() < threads {
        for i in 0..threads {
            let id = thread_id(i);
            if out.contains_key(&id) {
                continue;
            }
            let handle = engine.thread(&id).await.expect("thread");
            match handle.status().await.expect("status") {
                ThreadStatus::WaitingInput => {
                    engine.send_input(&id, answer_for(&id)).await.expect("input");
                }
                ThreadStatus::Completed => {
                    out.insert(id, handle.output::<Ledger>().await.expect("output"));
                }
                status => assert!(!status.is_terminal(), "reference thread {id} ended {status}"),
            }
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    engine.shutdown().await;
    out
}

/// Lost acks, double completions, diverged states, tool executions beyond their announced
/// calls, and the threads by status.
async fn check(
    url: &str,
    ledger: &Path,
    acks: &[(String, u64, String)],
    reference: &BTreeMap<String, Ledger>,
) -> (u64, u64, u64, u64, BTreeMap<String, usize>) {
    let engine = Engine::builder(url)
        .workflow(&chaos(ledger))
        .recovery(RecoveryPolicy::Park)
        .open()
        .await
        .expect("engine for the checks");
    let mut by_thread: BTreeMap<&str, Vec<(u64, &str)>> = BTreeMap::new();
    for (thread, seq, digest) in acks {
        by_thread.entry(thread).or_default().push((*seq, digest));
    }
    let mut lost = 0;
    for (thread, acked) in &by_thread {
        let id = ThreadId::new(*thread).expect("id");
        let stored: HashMap<u64, String> =
            match engine.store().read_since(&id, Seq(0), 10_000).wait() {
                Ok(events) => {
                    events.into_iter().map(|e| (e.bookmark.seq.0, digest(&e.data))).collect()
                }
                // A thread with acknowledged events that is not stored: every one of them is lost.
                Err(e) => {
                    eprintln!("LOST {thread}: {e}");
                    HashMap::new()
                }
            };
        for (seq, d) in acked {
            let found = stored.get(seq).map(String::as_str);
            if found != Some(*d) {
                lost += 1;
                // Which events, and what the database holds instead: the report names them.
                eprintln!("LOST {thread} seq {seq}: acknowledged {d}, stored {found:?}");
            }
        }
    }
    let mut announced: HashMap<(String, String), u64> = HashMap::new();
    let (mut doubles, mut diverged) = (0, 0);
    let mut statuses = BTreeMap::new();
    let all =
        engine.store().list_threads(&ThreadFilter::default(), Page { limit: 10_000, offset: 0 });
    for record in all.wait().expect("list") {
        if &*record.workflow.id == CHAOS {
            *statuses.entry(record.status.to_string()).or_insert(0) += 1;
        }
        let handle = engine.thread(record.id.as_str()).await.expect("thread");
        let mut events = handle.events(0).expect("events");
        let mut completions = 0;
        while let Some(recorded) = events.try_next().await.expect("event") {
            match recorded.body {
                Body::StatusChanged { to: ThreadStatus::Completed, .. } => completions += 1,
                Body::ToolCalled { name, input, .. } => {
                    let input = input.as_str().map(str::to_owned).unwrap_or_default();
                    *announced.entry((name, input)).or_default() += 1;
                }
                _ => {}
            }
        }
        doubles += u64::from(completions > 1);
        if record.status == ThreadStatus::Failed {
            let error = handle.outcome().await.ok().and_then(|o| o.error).unwrap_or_default();
            *statuses.entry(format!("failed: {error}")).or_insert(0) += 1;
        }
        if let Some(expected) = reference.get(record.id.as_str()) {
            let wait = Duration::from_secs(10);
            let got = tokio::time::timeout(wait, handle.output::<Ledger>()).await;
            if got.ok().and_then(Result::ok).as_ref() != Some(expected) {
                diverged += 1;
            }
        }
    }
    let mut ran: HashMap<(String, String), u64> = HashMap::new();
    for line in std::fs::read_to_string(ledger).unwrap_or_default().lines() {
        if let Some((tool, input)) = line.split_once('\t') {
            *ran.entry((tool.to_owned(), input.to_owned())).or_default() += 1;
        }
    }
    let repeated =
        ran.iter().map(|(k, n)| n.saturating_sub(announced.get(k).copied().unwrap_or(0))).sum();
    engine.shutdown().await;
    (lost, doubles, diverged, repeated, statuses)
}
