//! Readers and engines starting at the same time (issue 28 item 4). A read fired while `cairn
//! demo` opens and recovers its file (the file held, the endpoint not announced yet) waits for
//! the endpoint instead of exiting 4; an engine opened while a reader holds the file's shared
//! lock waits for the reader instead of exiting 4.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use crate::harness::{bin, copy, on, report, tempdir};

/// A database where a demo of `THREADS` threads aborted part way: most of its threads are
/// unfinished, so the next demo on it recovers them all before its endpoint is up.
const THREADS: &str = "300";

/// How long reads are fired from the start of each demo.
const READING_FOR: Duration = Duration::from_secs(2);

fn crashed_many(dir: &Path) -> PathBuf {
    let path = dir.join("crashed-many.db");
    let run = on(&path, &["demo", "--threads", THREADS, "--quiet", "--crash-after-steps", "250"]);
    assert_ne!(run.code, 0, "the demo was meant to abort: {run:#?}");
    path
}

/// Runs `cairn ARGS --db DB` quietly: its exit code and stderr.
fn code_of(db: &Path, args: &[&str]) -> (i32, String) {
    let out = Command::new(bin())
        .args(args)
        .arg("--db")
        .arg(db)
        .env_remove("CAIRN_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .expect("the cairn binary runs");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

/// Three rounds of: start `cairn demo` on a copy of a crashed file with many unfinished threads
/// and, from the moment it is spawned, fire reads at the file from two threads for
/// [`READING_FOR`] (or until the demo exits). Every read exits 0 (through the endpoint, or from
/// the file before the demo holds it) and so does every demo: none exits 4. Prints `LOAD
/// starting reads=N failed=0 exit4=0 demo_failed=0 ...`.
#[test]
fn reads_fired_while_an_engine_opens_and_recovers_never_exit_4() {
    let dir = tempdir();
    let crashed = crashed_many(dir.path());
    let (mut reads, mut failed, mut demo_failed) = (0_u32, Vec::new(), Vec::new());
    let started = Instant::now();
    let mut demo_ms_max = 0;
    for round in 0..3 {
        let round_dir = dir.path().join(format!("r{round}"));
        std::fs::create_dir(&round_dir).expect("round dir");
        let db = copy(&crashed, &round_dir);
        if round % 2 == 1 {
            // The crashed demo's announcement is still there (its process is gone), as after
            // a real crash.
            let stale = crate::harness::copy(&endpoint_file(&crashed), &round_dir);
            assert_eq!(stale, endpoint_file(&db));
        }
        let running = Arc::new(AtomicBool::new(true));
        let readers: Vec<_> = [&["threads", "--json"][..], &["show", "demo-1", "--json"]]
            .into_iter()
            .map(|args| {
                let (db, running) = (db.clone(), running.clone());
                let args: Vec<String> = args.iter().map(|a| (*a).to_owned()).collect();
                std::thread::spawn(move || {
                    let args: Vec<&str> = args.iter().map(String::as_str).collect();
                    let mut codes = Vec::new();
                    // At least a few reads, and on until the demo is done.
                    while running.load(Ordering::SeqCst) || codes.len() < 3 {
                        codes.push(code_of(&db, &args));
                    }
                    codes
                })
            })
            .collect();
        let demo_started = Instant::now();
        let demo = {
            let db = db.clone();
            std::thread::spawn(move || code_of(&db, &["demo", "--threads", THREADS, "--quiet"]))
        };
        // Reads while the demo opens, recovers and serves (its endpoint is up within a fraction
        // of this even on a loaded machine), then it finishes alone: reads through its endpoint
        // slow it down, and the window this test is about is its start.
        while !demo.is_finished() && demo_started.elapsed() < READING_FOR {
            std::thread::sleep(Duration::from_millis(10));
        }
        running.store(false, Ordering::SeqCst);
        let demo = demo.join().expect("demo thread");
        demo_ms_max = demo_ms_max.max(demo_started.elapsed().as_millis());
        if demo.0 != 0 {
            demo_failed.push(demo);
        }
        for reader in readers {
            for (code, stderr) in reader.join().expect("reader thread") {
                reads += 1;
                if code != 0 {
                    failed.push((code, stderr));
                }
            }
        }
    }
    report(&format!(
        "LOAD starting reads={reads} failed={} exit4={} demo_failed={} demo_ms_max={demo_ms_max} \
         seconds={}",
        failed.len(),
        failed.iter().filter(|(c, _)| *c == 4).count(),
        demo_failed.len(),
        started.elapsed().as_secs()
    ));
    assert!(demo_failed.is_empty(), "a demo failed to start: {demo_failed:#?}");
    assert!(failed.is_empty(), "{} of {reads} reads failed: {failed:#?}", failed.len());
    assert!(reads >= 8, "reads ran during the demos: {reads}");
}

fn endpoint_file(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push(".endpoint");
    PathBuf::from(name)
}

/// A reader holds the file's shared lock (a read in place, as `cairn threads` takes while it
/// reads) when the engine opens: the engine waits for it to let go and runs (exit 0), where it
/// used to exit 4 at once. A file an engine holds for writing is still refused at once.
#[test]
fn an_engine_opened_while_a_reader_holds_the_file_waits_for_the_reader() {
    let dir = tempdir();
    let db = copy(crate::harness::demo_db(), dir.path());
    let reader = cairn::storage::RedbStore::open_read_only_in_place(&db).expect("read in place");
    let (tx, rx) = std::sync::mpsc::channel();
    let release = std::thread::spawn(move || {
        // Held past the engine's first attempt to open: the engine is started meanwhile.
        rx.recv().expect("the engine was started");
        std::thread::sleep(Duration::from_millis(700));
        drop(reader);
    });
    let opened = Instant::now();
    let demo = {
        let db = db.clone();
        std::thread::spawn(move || code_of(&db, &["demo", "--threads", "2", "--quiet"]))
    };
    tx.send(()).expect("release thread");
    let (code, stderr) = demo.join().expect("demo thread");
    release.join().expect("release thread");
    assert_eq!(code, 0, "the engine waited for the reader: {stderr}");
    assert!(opened.elapsed() >= Duration::from_millis(700), "it did wait");

    // An engine holding the file for writing is refused at once, not after the readers' wait.
    let holder = crate::harness::Spawned::start(
        &["__hold", "--db", db.to_str().expect("utf-8")],
        Duration::from_secs(60),
    );
    assert!(holder.next_line().expect("holding").starts_with("holding"));
    let refused = Instant::now();
    let (code, stderr) = code_of(&db, &["demo", "--threads", "1", "--quiet"]);
    assert_eq!(code, 4, "{stderr}");
    assert!(stderr.contains("held by another process"), "{stderr}");
    assert!(
        refused.elapsed() < Duration::from_millis(cairn::storage::READERS_WAIT_MS),
        "refused without waiting for readers: {:?}",
        refused.elapsed()
    );
    assert_eq!(holder.wait(), 0);
}
