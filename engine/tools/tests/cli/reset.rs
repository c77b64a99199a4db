//! `cairn reset THREAD --to start|checkpoint|seq:N [--key K]` (issue 43 item 1): one thread
//! forked at the point into `<THREAD>.reset.<K>` and cancelled, on a free file and through
//! `cairn serve`; it prints the new thread's id; the same key again makes no second fork; a bad
//! `--to` exits 2 naming the flag and writes nothing; an unknown thread exits 1 naming it.
//! Control: the other threads are untouched.

use crate::harness::{demo_db, on, tempdir};
use crate::start::{Killer, serve, stop};

/// The ids of every thread in `db`, sorted.
fn ids(db: &std::path::Path) -> Vec<String> {
    let all = on(db, &["threads", "--json"]).expect(0).json();
    let rows = all.as_array().expect("an array").iter();
    let mut ids: Vec<String> = rows.map(|t| t["thread"].as_str().unwrap().to_owned()).collect();
    ids.sort();
    ids
}

fn status(db: &std::path::Path, thread: &str) -> String {
    let shown = on(db, &["show", thread, "--json"]).expect(0).json();
    shown["status"].as_str().unwrap().to_owned()
}

/// `db`: the demo database with threads `r-a`, `r-b` and `r-c` created (not run).
fn three_threads(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempdir();
    let db = dir.path().join(name);
    std::fs::copy(demo_db(), &db).expect("copy the demo database");
    for id in ["r-a", "r-b", "r-c"] {
        let input = r#"{"question":"q"}"#;
        on(&db, &["start", "research-agent", "--input", input, "--id", id]).expect(0);
    }
    (dir, db)
}

#[test]
fn cairn_reset_forks_one_thread_and_cancels_it_once_per_key_on_a_file() {
    let (_dir, db) = three_threads("reset-one.db");
    let before = ids(&db);
    // Bad points: usage errors naming the flag, before anything is written.
    for bad in ["yesterday", "seq:0", "seq:x", ""] {
        let run = on(&db, &["reset", "r-a", "--to", bad]).expect(2);
        assert!(run.stderr.contains("--to"), "{bad:?}: {}", run.stderr);
    }
    on(&db, &["reset", "r-a"]).expect(2);
    assert_eq!(ids(&db), before, "nothing written");
    assert_eq!(status(&db, "r-a"), "created");
    let run = on(&db, &["reset", "nobody", "--to", "start"]).expect(1);
    assert!(run.stderr.contains("no thread nobody"), "{}", run.stderr);
    // A seq outside the log: refused (exit 2), nothing written.
    on(&db, &["reset", "r-a", "--to", "seq:999", "--key", "k"]).expect(2);
    assert_eq!(ids(&db), before, "nothing written");

    let done = on(&db, &["reset", "r-a", "--to", "start", "--key", "k1"]).expect(0);
    assert_eq!(done.stdout.lines().next(), Some("r-a.reset.k1"), "{}", done.stdout);
    assert_eq!(status(&db, "r-a"), "cancelled");
    // The new thread is left for the next engine that runs threads (this one parks).
    let fork = on(&db, &["show", "r-a.reset.k1", "--json"]).expect(0).json();
    assert_eq!(fork["status"], "created", "{fork}");
    assert_eq!(fork["parent"]["thread"], "r-a", "{fork}");
    let after = ids(&db);
    assert_eq!(after.len(), before.len() + 1, "{after:?}");
    // The same key again: the same new thread, no second fork.
    let again = on(&db, &["reset", "r-a", "--to", "start", "--key", "k1", "--json"]).expect(0);
    assert_eq!(again.json()["thread"], "r-a.reset.k1");
    assert_eq!(ids(&db), after, "no second fork");
    // Control: the other threads untouched.
    for other in ["r-b", "r-c"] {
        assert_eq!(status(&db, other), "created", "{other}");
    }
}

#[test]
fn cairn_reset_goes_through_cairn_serve_which_runs_the_new_thread() {
    let (_dir, db) = three_threads("reset-serve.db");
    // Paused on the free file: the serving engine leaves r-a parked until it is reset.
    on(&db, &["pause", "r-a"]).expect(0);
    let (server, _address, pid) = serve(&db);
    let guard = Killer(pid);
    on(&db, &["result", "r-b", "--wait", "60"]).expect(0);
    on(&db, &["result", "r-c", "--wait", "60"]).expect(0);
    let before = ids(&db);
    let run = on(&db, &["reset", "r-a", "--to", "seq:x"]).expect(2);
    assert!(run.stderr.contains("--to"), "{}", run.stderr);
    let run = on(&db, &["reset", "nobody", "--to", "start"]).expect(1);
    assert!(run.stderr.contains("nobody"), "{}", run.stderr);
    assert_eq!(ids(&db), before, "nothing written");

    let done = on(&db, &["reset", "r-a", "--to", "start", "--key", "k2"]).expect(0);
    assert_eq!(done.stdout.lines().next(), Some("r-a.reset.k2"), "{}", done.stdout);
    assert!(done.stdout.contains("through the engine serving the file"), "{}", done.stdout);
    assert_eq!(status(&db, "r-a"), "cancelled");
    // The serving engine runs the new thread, from the start, to its end.
    on(&db, &["result", "r-a.reset.k2", "--wait", "60"]).expect(0);
    assert_eq!(status(&db, "r-a.reset.k2"), "completed");
    let again = on(&db, &["reset", "r-a", "--to", "start", "--key", "k2", "--json"]).expect(0);
    assert_eq!(again.json()["thread"], "r-a.reset.k2");
    let after = ids(&db);
    assert_eq!(after.len(), before.len() + 1, "one fork in all: {after:?}");
    // Control: the other threads ran to their end and were not reset.
    for other in ["r-b", "r-c"] {
        assert_eq!(status(&db, other), "completed", "{other}");
    }
    stop(server, guard);
}
