//! The health policy from the command line (issue 43): `cairn serve --stuck-action cancel`
//! cancels a stuck thread, while the default (report) leaves it running (the control); a bad
//! value of `--stuck-action` / `--expired-locks` exits 2 naming the flag, on `cairn serve` and
//! `cairn worker`.
//!
//! The stuck thread: the crashed demo's `demo-1`, left Running by the crash and repinned to a
//! worker build no engine here runs (`cairn repin`), so `cairn serve` (no build id) leaves it
//! as it is: Running, no step, which its health passes (every 50 ms, watchdog 0) call stuck.

use std::path::Path;
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::harness::{Spawned, copy, crashed_db, on, tempdir};

/// A `cairn serve` of a test: stopped with SIGTERM by [`Served::stop`], killed if the test
/// fails first (the child would outlive the test process otherwise).
struct Served {
    server: Option<Spawned>,
    pid: String,
}

impl Served {
    /// `cairn serve --json` on `db`, passes every 50 ms with watchdog 0, and `extra` flags.
    fn start(db: &Path, extra: &[&str]) -> Served {
        let db_arg = db.to_str().expect("utf-8");
        let mut args = vec!["serve", "--json", "--db", db_arg];
        args.extend_from_slice(&["--stuck-after-ms", "0", "--health-every-ms", "50"]);
        args.extend_from_slice(extra);
        let server = Spawned::start(&args, Duration::from_secs(120));
        let first = server.next_line().expect("the address line");
        let announced: Value = serde_json::from_str(&first).expect("JSON");
        let pid = announced["pid"].as_u64().expect("pid").to_string();
        Served { server: Some(server), pid }
    }

    /// Stops it with SIGTERM; it exits 0.
    fn stop(mut self) {
        let killed = std::process::Command::new("kill").args(["-TERM", &self.pid]).status();
        assert!(killed.expect("kill").success());
        assert_eq!(self.server.take().expect("running").wait(), 0);
    }
}

impl Drop for Served {
    fn drop(&mut self) {
        if self.server.is_some() {
            let _ = std::process::Command::new("kill").args(["-9", &self.pid]).status();
        }
    }
}

/// A copy of the crashed demo whose `demo-1` (Running) no engine of this binary drives.
fn stuck_db(dir: &Path) -> std::path::PathBuf {
    let db = copy(crashed_db(), dir);
    on(&db, &["repin", "demo-1", "2026.12.2"]).expect(0);
    let shown = on(&db, &["result", "demo-1", "--json"]).expect(6).json();
    assert_eq!(shown["status"], "running", "{shown}");
    db
}

#[test]
fn serve_with_stuck_action_cancel_cancels_a_stuck_thread_and_the_default_only_reports() {
    let dir = tempdir();
    let db = stuck_db(dir.path());
    let served = Served::start(&db, &["--stuck-action", "cancel"]);
    let started = Instant::now();
    let ended = on(&db, &["result", "demo-1", "--wait", "60", "--json"]).expect(1).json();
    let took = started.elapsed();
    assert_eq!(ended["status"], "cancelled", "{ended}");
    let events = on(&db, &["events", "demo-1", "--json"]).expect(0).stdout;
    assert!(events.contains("watchdog: no step for"), "the reason is recorded: {events}");
    served.stop();

    // The control: the same stuck thread under the default policy (report) stays Running,
    // for far longer than the cancel took and for many passes (every 50 ms).
    let dir = tempdir();
    let db = stuck_db(dir.path());
    let served = Served::start(&db, &[]);
    let watched = (took * 4).max(Duration::from_secs(2));
    let secs = watched.as_secs().to_string();
    let kept = on(&db, &["result", "demo-1", "--wait", &secs, "--json"]).expect(6).json();
    assert_eq!(kept["status"], "running", "{kept}");
    // The engine's report names it stuck all the while.
    let health = on(&db, &["health", "--json", "--watchdog-ms", "0"]).expect(5).json();
    let named = health["stuck"].as_array().expect("stuck").iter().any(|s| s["thread"] == "demo-1");
    assert!(named, "{health}");
    served.stop();
}

#[test]
fn a_bad_health_policy_value_exits_2_naming_the_flag() {
    let dir = tempdir();
    let db = copy(crashed_db(), dir.path());
    let bad = on(&db, &["serve", "--stuck-action", "kill"]).expect(2);
    assert!(bad.stderr.contains("--stuck-action"), "{bad:?}");
    let bad = on(&db, &["worker", "--expired-locks", "cancel"]).expect(2);
    assert!(bad.stderr.contains("--expired-locks"), "{bad:?}");
    let bad = on(&db, &["worker", "--stuck-action", "paused", "--exit-when-idle"]).expect(2);
    assert!(bad.stderr.contains("--stuck-action"), "{bad:?}");
    // The control: good values are taken (the worker runs the file's work and exits when idle).
    let args =
        ["worker", "--stuck-action", "pause", "--expired-locks", "release", "--exit-when-idle"];
    on(&db, &args).expect(0);
}
