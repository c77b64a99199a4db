//! The outside load test of issue 15: `cairn demo` writes thousands of threads (the binary, a
//! child process, serving its endpoint as it does by default) while the read commands run over
//! and over against its file. Every call must exit 0, and the peak memory of each `cairn`
//! process (`VmHWM`, sampled from `/proc` while it runs) must stay under a bound that does not
//! grow with the file: the commands read through the endpoint, a page at a time, instead of
//! copying the database. Prints `LOAD cli_reads calls=N failures=0 max_rss_kb=...`.
//!
//! Sizes: `CAIRN_CLI_LOAD_THREADS` (default 3,000).
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{bin, tempdir};

/// Peak resident memory a read command may use, in KiB: a runtime, a page of answers and the
/// output. The copy a read used to make costs the file's size on top (tens of MB here, GBs on
/// a large database).
const RSS_BOUND_KB: u64 = 64 * 1024;

/// How long the demo may take to write everything before the test gives up.
const DEMO_TIMEOUT: Duration = Duration::from_secs(300);

/// One command's run: exit code, output, and its peak resident memory seen in KiB.
pub(crate) struct Call {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
    pub peak_kb: u64,
}

/// Runs `cairn ARGS --db DB`, sampling `/proc/<pid>/status` for `VmHWM` until it exits (the
/// high-water mark only grows, so the last sample is its peak up to that moment).
pub(crate) fn call(db: &Path, args: &[&str]) -> Call {
    let mut child = Command::new(bin())
        .args(args)
        .arg("--db")
        .arg(db)
        // The store says when it reads a copy of the file (memory then grows with it), the
        // command whether it reads through the endpoint or the file.
        .env("CAIRN_LOG", "cairn_storage=info,cairn_tools::cli=info")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the cairn binary runs");
    let status_file = format!("/proc/{}/status", child.id());
    // Read the pipes on threads, so that a large output cannot block the child.
    let mut out = child.stdout.take().expect("stdout");
    let mut err = child.stderr.take().expect("stderr");
    let out = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut out, &mut s).map(|_| s).unwrap_or_default()
    });
    let err = std::thread::spawn(move || {
        let mut s = String::new();
        std::io::Read::read_to_string(&mut err, &mut s).map(|_| s).unwrap_or_default()
    });
    let mut peak_kb = 0;
    let status = loop {
        if let Ok(text) = std::fs::read_to_string(&status_file)
            && let Some(kb) = vm_hwm_kb(&text)
        {
            peak_kb = peak_kb.max(kb);
        }
        if let Some(status) = child.try_wait().expect("wait") {
            break status;
        }
        std::thread::sleep(Duration::from_micros(500));
    };
    Call {
        code: status.code().unwrap_or(-1),
        stdout: out.join().unwrap_or_default(),
        stderr: err.join().unwrap_or_default(),
        peak_kb,
    }
}

/// `VmHWM` of a sample of the `cairn` image only: the pid's status before its `exec` would be
/// the test process's.
fn vm_hwm_kb(status: &str) -> Option<u64> {
    let name = status.lines().find_map(|l| l.strip_prefix("Name:"))?;
    if name.trim() != "cairn" {
        return None;
    }
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    line.split_whitespace().nth(1)?.parse().ok()
}

#[test]
fn read_commands_succeed_in_bounded_memory_while_the_demo_writes() {
    if !cfg!(target_os = "linux") {
        return; // The peak is read from /proc.
    }
    let threads: usize =
        std::env::var("CAIRN_CLI_LOAD_THREADS").ok().and_then(|v| v.parse().ok()).unwrap_or(3_000);
    let dir = tempdir();
    let db = dir.path().join("load.db");
    let started = Instant::now();
    let mut demo = Command::new(bin())
        .args(["demo", "--threads", &threads.to_string(), "--quiet", "--db"])
        .arg(&db)
        .env_remove("CAIRN_LOG")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the demo runs");
    // The demo announces its endpoint once it is serving.
    let announced = cairn_tools::serve::endpoint_path(&db);
    while !announced.exists() {
        assert!(demo.try_wait().expect("wait").is_none(), "the demo ended before serving");
        assert!(started.elapsed() < Duration::from_secs(60), "no endpoint announced");
        std::thread::sleep(Duration::from_millis(20));
    }

    let (mut calls, mut failures, mut max_kb, mut max_db_bytes) = (0u64, 0u64, 0u64, 0u64);
    let (mut served_calls, mut max_args) = (0u64, String::new());
    let mut over: Vec<String> = Vec::new();
    let mut picked = "demo-0".to_owned();
    let mut round = 0usize;
    let mut ran_while_writing = 0u64;
    let demo_status = loop {
        let writing = demo.try_wait().expect("wait").is_none();
        if !writing {
            break demo.wait().expect("wait");
        }
        assert!(started.elapsed() < DEMO_TIMEOUT, "the demo took over {DEMO_TIMEOUT:?}");
        let thread = picked.clone();
        let sets: [Vec<&str>; 7] = [
            vec!["threads", "--json"],
            vec!["threads", "--limit", "1"],
            vec!["show", &thread],
            vec!["events", &thread, "--json"],
            vec!["state", &thread],
            vec!["checkpoints", "--limit", "5"],
            vec!["health", "--watchdog-ms", "3600000"],
        ];
        for args in &sets {
            let served_before = announced.exists();
            let c = call(&db, args);
            // Only a call the endpoint served from start to end counts against the bound: once
            // the demo has stopped, a read copies the file (no engine holds it). Served: the
            // endpoint was announced before and after, and its demo still runs.
            let served =
                served_before && announced.exists() && demo.try_wait().expect("wait").is_none();
            calls += 1;
            if c.code != 0 {
                failures += 1;
                eprintln!("cairn {args:?} exited {}: {}", c.code, c.stderr.trim());
            }
            if served {
                served_calls += 1;
                if c.peak_kb > max_kb {
                    (max_kb, max_args) = (c.peak_kb, args.join(" "));
                }
                if c.peak_kb >= RSS_BOUND_KB {
                    let said = c.stderr.trim();
                    over.push(format!("cairn {args:?}: {} KiB (stderr: {said:?})", c.peak_kb));
                }
            }
            if args[0] == "threads" && args[1] == "--json" && c.code == 0 {
                // The next round reads one of the threads listed (a different one each time).
                let rows: Value = serde_json::from_str(&c.stdout).expect("threads --json");
                let rows = rows.as_array().cloned().unwrap_or_default();
                if !rows.is_empty() {
                    let row = &rows[(round * 7) % rows.len()];
                    picked = row["thread"].as_str().unwrap_or("demo-0").to_owned();
                }
            }
        }
        if demo.try_wait().expect("wait").is_none() {
            ran_while_writing += 1;
        }
        max_db_bytes = max_db_bytes.max(std::fs::metadata(&db).map_or(0, |m| m.len()));
        round += 1;
    };
    let demo_s = started.elapsed().as_secs_f64();
    let mut demo_err = String::new();
    if let Some(mut e) = demo.stderr.take() {
        std::io::Read::read_to_string(&mut e, &mut demo_err).ok();
    }
    assert!(demo_status.success(), "the demo failed: {demo_err}");
    eprintln!(
        "LOAD cli_reads calls={calls} failures={failures} max_rss_kb={max_kb} \
         bound_kb={RSS_BOUND_KB} served_calls={served_calls} max_rss_command=\"{max_args}\" \
         rounds_while_writing={ran_while_writing} threads={threads} db_bytes={max_db_bytes} \
         demo_s={demo_s:.1}"
    );
    assert!(
        ran_while_writing >= 3,
        "too few rounds ran while the demo wrote ({ran_while_writing})"
    );
    assert!(served_calls >= 20, "too few calls went through the endpoint ({served_calls})");
    assert_eq!(failures, 0, "every read command succeeds under load");
    assert!(over.is_empty(), "over the memory bound of {RSS_BOUND_KB} KiB: {over:?}");
    // The endpoint went away with the demo, and the file reads as before.
    assert!(!announced.exists(), "the demo withdraws its endpoint at the end");
    let listed = call(&db, &["threads", "--limit", "1"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    let done = call(&db, &["health", "--json"]);
    let report: Value = serde_json::from_str(&done.stdout).expect("health --json");
    let completed = report["threads"]["completed"].as_u64().unwrap_or(0);
    assert_eq!(completed as usize, threads, "{report}");
}
