//! T2 real processes: `kill -9` of a child process at random moments, and aborts at chosen
//! points, on a real database file with fsync.
//!
//! The child is this test binary re-run in child mode (`t2_child`, active only with
//! `CAIRN_REL_CHILD_DB` set): it runs nine threads of the canonical linear and fan-out
//! workflows and of `nested` (a sub-workflow child thread and a map node) under `Durability::Immediate` and prints one `ACK <thread> <seq> <digest>` line per
//! event the store acknowledged (printed before the engine itself learns of the ack), and one
//! `DONE <thread> <digest>` line per finished thread (and `STEP <n>` per acknowledged step). With `CAIRN_REL_ABORT_AFTER=K` it calls
//! `std::process::abort()` after K acknowledged steps (the `cairn demo --crash-after-steps` way).
//!
//! The parent kills the child (`SIGKILL`) once a random number of acks has been read, checks
//! that every acknowledged event is in the file with the same bytes, then runs the child again
//! on the same file: it must recover and print exactly the uninterrupted run's results. When the
//! `cairn demo` binary works, some aborts also run through `cairn demo --crash-after-steps` and
//! compare `cairn demo --json` digests.

use cairn::storage::ThreadLog;
use std::collections::BTreeMap;
use std::io::{BufRead, BufReader, Write as _};
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::storage::{Durability, Options, RedbStore, Seq, ThreadId};
use cairn::{Engine, StartOptions};
use cairn_testkit::{Effects, RecordingStore};

use crate::env::{Rng, report, seed, size};
use crate::workflows::{Ledger, fan_out, linear, nested};

const THREADS: usize = 9;

fn digest(bytes: &[u8]) -> String {
    blake3::hash(bytes).to_hex()[..16].to_owned()
}

/// The thread's id and its workflow.
fn thread_of(i: usize) -> (String, &'static str) {
    match i % 3 {
        0 => (format!("lin-{i}"), "linear-tools"),
        1 => (format!("fan-{i}"), "fan-out-join"),
        _ => (format!("nest-{i}"), "nested"),
    }
}

/// The child: runs the threads on the file named by `CAIRN_REL_CHILD_DB`.
#[test]
fn t2_child() {
    let Ok(db) = std::env::var("CAIRN_REL_CHILD_DB") else { return };
    let abort_after: Option<u64> =
        std::env::var("CAIRN_REL_ABORT_AFTER").ok().and_then(|v| v.parse().ok());
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    runtime.block_on(async {
        let options = Options { durability: Durability::Immediate, ..Options::default() };
        let store = RedbStore::open(&db, options).expect("open the database");
        let rec = Arc::new(RecordingStore::new(Arc::new(store)));
        rec.on_ack(Arc::new(|event| {
            let mut out = std::io::stdout().lock();
            let _ = writeln!(
                out,
                "ACK {} {} {}",
                event.thread,
                event.bookmark.seq.0,
                digest(&event.data)
            );
            let _ = out.flush();
        }));
        let fx = Effects::new();
        let engine = Engine::with_store(rec.clone())
            .workflow(&linear(&fx))
            .workflow(&fan_out(&fx))
            .workflow(&nested(&fx))
            .seed(0x00C0_FFEE)
            // Node code reads the clock (recorded); a fixed clock makes every run read the same.
            .clock(Arc::new(cairn_testkit::ManualClock::new(cairn_testkit::CLOCK_START_MS)))
            .concurrency(4)
            .checkpoint_every(Some(2), None)
            .open()
            .await
            .expect("engine");
        engine.on_step(Arc::new(move |_thread, _step, total| {
            {
                let mut out = std::io::stdout().lock();
                let _ = writeln!(out, "STEP {total}");
                let _ = out.flush();
            }
            if abort_after.is_some_and(|k| total >= k) {
                std::process::abort();
            }
        }));
        let mut handles = Vec::new();
        for i in 0..THREADS {
            let (id, workflow) = thread_of(i);
            let input = Ledger { entries: vec![format!("input {i}")], sum: i as u64 };
            let handle =
                engine.start_json(workflow, input, StartOptions::id(id)).await.expect("start");
            handles.push(handle);
        }
        for handle in handles {
            let state: Ledger = handle.output().await.expect("a finished thread");
            let json = serde_json::to_vec(&state).expect("json");
            let mut out = std::io::stdout().lock();
            let _ = writeln!(out, "DONE {} {}", handle.id(), digest(&json));
            let _ = out.flush();
        }
        engine.shutdown().await;
    });
}

/// What one child run printed.
#[derive(Debug, Default)]
struct ChildRun {
    acks: Vec<(String, u64, String)>,
    done: BTreeMap<String, String>,
    /// Steps acknowledged.
    steps: u64,
    /// Whether it exited successfully.
    ok: bool,
}

/// Runs the child on `db`; with `kill_at`, sends SIGKILL once that many acks have been read
/// (plus a random extra delay of up to `jitter_us`).
fn run_child(db: &Path, abort_after: Option<u64>, kill_at: Option<(usize, u64)>) -> ChildRun {
    let mut command = Command::new(std::env::current_exe().expect("test binary"));
    command
        .args(["--exact", "processes::t2_child", "--test-threads=1", "-q"])
        .env("CAIRN_REL_CHILD_DB", db)
        .env_remove("RUST_BACKTRACE")
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    if let Some(k) = abort_after {
        command.env("CAIRN_REL_ABORT_AFTER", k.to_string());
    }
    let mut child = command.spawn().expect("spawn the child");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    let reader = std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut run = ChildRun::default();
    let mut killed = false;
    for line in rx {
        parse(&line, &mut run);
        if let Some((at, jitter_us)) = kill_at
            && !killed
            && run.acks.len() >= at
        {
            if jitter_us > 0 {
                // A random moment after the chosen ack: the kill lands anywhere in what follows.
                std::thread::sleep(Duration::from_micros(jitter_us));
            }
            let _ = child.kill();
            killed = true;
        }
    }
    let status = child.wait().expect("wait");
    let _ = reader.join();
    run.ok = status.success();
    run
}

fn parse(line: &str, run: &mut ChildRun) {
    let parts: Vec<&str> = line.split_whitespace().collect();
    match parts.as_slice() {
        ["ACK", thread, seq, digest] => {
            if let Ok(seq) = seq.parse() {
                run.acks.push(((*thread).to_owned(), seq, (*digest).to_owned()));
            }
        }
        ["STEP", _] => run.steps += 1,
        ["DONE", thread, digest] => {
            run.done.insert((*thread).to_owned(), (*digest).to_owned());
        }
        _ => {}
    }
}

/// Acknowledged events missing from the file or with other bytes.
fn lost_acks(db: &Path, acks: &[(String, u64, String)]) -> u64 {
    let store = RedbStore::open(db, Options::default()).expect("reopen after the kill");
    let mut lost = 0;
    for (thread, seq, want) in acks {
        let id = ThreadId::new(thread.clone()).expect("id");
        match store.read_range(&id, Seq(*seq), Seq(*seq)).wait() {
            Ok(events) if events.len() == 1 && digest(&events[0].data) == *want => {}
            _ => lost += 1,
        }
    }
    let _ = store.close();
    lost
}

#[derive(Default)]
struct Tally {
    runs: u64,
    acked: u64,
    lost: u64,
    unfinished: u64,
    diverged: u64,
    died: u64,
}

/// Interrupts (kill or abort), checks the acks, resumes, compares with the reference.
fn interrupted_case(
    reference: &BTreeMap<String, String>,
    abort_after: Option<u64>,
    kill_at: Option<(usize, u64)>,
    tally: &mut Tally,
    failures: &mut Vec<String>,
    label: &str,
) {
    let dir = tempfile::tempdir().expect("temp dir");
    let db = dir.path().join("t2.db");
    let first = run_child(&db, abort_after, kill_at);
    tally.runs += 1;
    tally.died += u64::from(!first.ok);
    tally.acked += first.acks.len() as u64;
    let lost = if db.exists() { lost_acks(&db, &first.acks) } else { first.acks.len() as u64 };
    tally.lost += lost;
    if lost > 0 {
        failures.push(format!("{label}: {lost} acknowledged events lost"));
    }
    let resumed = run_child(&db, None, None);
    if !resumed.ok || resumed.done.len() != THREADS {
        tally.unfinished += 1;
        failures
            .push(format!("{label}: the resumed run did not finish ({} done)", resumed.done.len()));
    } else if resumed.done != *reference {
        tally.diverged += 1;
        failures.push(format!("{label}: results differ from the uninterrupted run"));
    }
}

#[test]
fn t2_kill_and_abort_real_processes() {
    let started = Instant::now();
    let kills = size("CAIRN_REL_KILLS", 100);
    let aborts = size("CAIRN_REL_ABORTS", 100);
    let base = seed("CAIRN_REL_T2_SEED", 0x0B1A_5EED);
    let mut rng = Rng(base);
    let dir = tempfile::tempdir().expect("temp dir");
    let clean = run_child(&dir.path().join("clean.db"), None, None);
    assert!(clean.ok && clean.done.len() == THREADS, "the uninterrupted child run finishes");
    let total_acks = clean.acks.len() as u64;
    let total_steps = clean.steps;
    let (mut kill, mut abort) = (Tally::default(), Tally::default());
    let mut failures = Vec::new();
    for k in 0..kills {
        let at = rng.below(total_acks) as usize;
        let jitter = if k % 2 == 0 { 0 } else { rng.below(2_000) };
        interrupted_case(
            &clean.done,
            None,
            Some((at, jitter)),
            &mut kill,
            &mut failures,
            &format!("kill #{k} after {at} acks (+{jitter} us, seed {base:#x})"),
        );
    }
    for a in 0..aborts {
        let after = 1 + rng.below(total_steps - 1);
        interrupted_case(
            &clean.done,
            Some(after),
            None,
            &mut abort,
            &mut failures,
            &format!("abort #{a} after {after} steps (seed {base:#x})"),
        );
    }
    let demo = demo_aborts(size("CAIRN_REL_DEMO_ABORTS", 10), &mut rng, &mut failures);
    report(&format!(
        "RELIABILITY T2_processes kills={} kill_acked={} kill_lost_acked={} kill_unfinished={} \
         kill_diverged={} aborts={} abort_died={} abort_acked={} abort_lost_acked={} \
         abort_unfinished={} abort_diverged={} {demo} clean_acks={total_acks} seed={base:#x} \
         secs={:.1}",
        kill.runs,
        kill.acked,
        kill.lost,
        kill.unfinished,
        kill.diverged,
        abort.runs,
        abort.died,
        abort.acked,
        abort.lost,
        abort.unfinished,
        abort.diverged,
        started.elapsed().as_secs_f64()
    ));
    assert!(failures.is_empty(), "{} failures:\n{}", failures.len(), failures.join("\n"));
    assert_eq!(abort.died, abort.runs, "every abort point must be reached");
}

/// `cairn demo --crash-after-steps K` then `cairn demo --json`, compared with an uninterrupted
/// `cairn demo --json`. Returns the summary fields (or why it was skipped).
fn demo_aborts(n: u64, rng: &mut Rng, failures: &mut Vec<String>) -> String {
    let bin = crate::env::cairn_bin();
    let dir = tempfile::tempdir().expect("temp dir");
    let demo = |db: &Path, extra: &[String]| {
        Command::new(&bin)
            .args(["demo", "--quiet", "--json", "--threads", "4", "--db"])
            .arg(db)
            .args(extra)
            .stderr(Stdio::piped())
            .output()
            .expect("run cairn demo")
    };
    let clean = demo(&dir.path().join("clean.db"), &[]);
    if !clean.status.success() {
        let why = String::from_utf8_lossy(&clean.stderr);
        let why = why.lines().last().unwrap_or("").replace(' ', "_");
        return format!("demo_aborts=skipped demo_error={why}");
    }
    let (mut runs, mut diverged) = (0, 0);
    for i in 0..n {
        let db = dir.path().join(format!("abort-{i}.db"));
        let k = 1 + rng.below(20);
        let _ = demo(&db, &["--crash-after-steps".into(), k.to_string()]);
        let resumed = demo(&db, &[]);
        runs += 1;
        if !resumed.status.success() || resumed.stdout != clean.stdout {
            diverged += 1;
            failures.push(format!("cairn demo aborted after {k} steps: the rerun differs"));
        }
    }
    format!("demo_aborts={runs} demo_diverged={diverged}")
}
