//! Talking to a thread that `cairn worker` runs, from other processes (issue 41): with `--addr`
//! the worker serves the file's endpoint, and `cairn signal`, `cairn promise complete` (a
//! signal of the engine's own) and `cairn update` sent by other `cairn` processes reach it
//! there: the signal is stored in the thread's inbox, the completion wakes the waiting thread,
//! which the worker runs to its end, and an update is answered by the worker (here a refusal
//! naming the update, which `signoff-demo` does not declare: exit 2).

use std::time::Duration;

use crate::harness::{Spawned, copy, demo_db, on, tempdir};

#[test]
fn a_worker_takes_signals_completions_and_updates_sent_by_other_processes() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let db_arg = db.to_str().expect("utf-8");
    let worker = Spawned::start(
        &["worker", "--db", db_arg, "--addr", "127.0.0.1:0", "--poll-ms", "50"],
        Duration::from_secs(120),
    );
    // The worker announces its endpoint once it is up.
    let announced = std::time::Instant::now();
    while cairn_tools::serve::discovery::find(&db).ok().flatten().is_none() {
        assert!(announced.elapsed() < Duration::from_secs(60), "the worker announced no endpoint");
        std::thread::sleep(Duration::from_millis(50));
    }
    let started = on(&db, &["start", "signoff-demo", "--input", "\"the plan\"", "--id", "w-1"]);
    assert!(started.expect(0).stdout.contains("run by the engine serving"), "through the worker");
    let got = on(&db, &["get-event", "w-1", "promise", "--wait-ms", "30000", "--json"]).expect(0);
    let promise = got.json()["value"].as_str().expect("the promise's id").to_owned();

    // A signal from another process: stored in the thread's inbox by the worker.
    let sent = on(&db, &["signal", "w-1", "note", "\"from another process\""]).expect(0);
    assert!(sent.stdout.contains("w-1"), "{sent:?}");
    // An update from another process: answered by the worker (signoff-demo declares none).
    let update = on(&db, &["update", "w-1", "add_finding", "--args", "\"x\""]).expect(2);
    assert!(update.stderr.contains("the engine serving"), "{update:?}");
    // The promise's completion wakes the thread; the worker runs it to its end.
    on(&db, &["promise", "complete", &promise, "--value", "7"]).expect(0);
    let result = on(&db, &["result", "w-1", "--wait", "60", "--json"]).expect(0);
    assert_eq!(result.json()["status"], "completed", "{result:?}");
    let events = on(&db, &["events", "w-1", "--json"]).expect(0).json();
    let arrived =
        events.as_array().expect("events").iter().filter(|e| e["kind"] == "input_received");
    assert!(arrived.count() >= 1, "the completion woke the thread: {events}");

    let pid = worker_pid(&db);
    assert!(std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap().success());
    assert_eq!(worker.wait(), 0);
}

/// The worker's process id, from its announcement.
fn worker_pid(db: &std::path::Path) -> String {
    let endpoint = cairn_tools::serve::discovery::find(db).expect("read").expect("announced");
    endpoint.pid.to_string()
}
