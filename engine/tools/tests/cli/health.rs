//! `cairn health` on a finished demo (ok, exit 0) and on a crashed one (its running thread is
//! stuck once the watchdog has passed: exit 5, named in text and JSON).

use crate::harness::{copy, crashed_db, demo_db, on, tempdir};

#[test]
fn health_is_ok_after_the_demo_and_names_the_thread_a_crash_left_running() {
    let dir = tempdir();
    let done = copy(demo_db(), dir.path());
    let ok = on(&done, &["health"]).expect(0);
    assert!(ok.stdout.starts_with("health: ok"), "{}", ok.stdout);
    assert!(
        ok.stdout.contains("signals no node took (waiting over 600000 ms): 0\n"),
        "{}",
        ok.stdout
    );
    let json = on(&done, &["health", "--json"]).expect(0).json();
    assert_eq!(json["ok"], true);
    assert_eq!(json["stuck_threads"], 0);
    assert_eq!(
        (json["signal_backlog"].as_u64(), json["signal_backlog_ms"].as_u64()),
        (Some(0), Some(600_000))
    );

    let dir = tempdir();
    let crashed = copy(crashed_db(), dir.path());
    on(&crashed, &["health"]).expect(0);
    let json = on(&crashed, &["health", "--json", "--watchdog-ms", "0"]).expect(5).json();
    assert_eq!(json["ok"], false);
    assert!(
        json["stuck"].as_array().expect("stuck").iter().any(|s| s["thread"] == "demo-1"),
        "{json}"
    );
    let text = on(&crashed, &["health", "--watchdog-ms", "0"]).expect(5);
    assert!(text.stdout.starts_with("health: attention needed"), "{}", text.stdout);
    assert!(text.stdout.lines().any(|l| l.trim_start().starts_with("demo-1")), "{}", text.stdout);
}
