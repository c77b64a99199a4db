//! `cairn batch` (issue 43 item 1): `--dry-run` counts the threads a filter matches; on a file
//! no engine holds the batch runs in the command's process to its end; `batch show` answers its
//! progress; through `cairn serve` the serving engine runs it; bad usage exits 2.

use crate::harness::{demo_db, on, tempdir};
use crate::start::{Killer, serve, stop};

#[test]
fn cairn_batch_counts_first_applies_by_filter_and_shows_progress() {
    let dir = tempdir();
    let db = dir.path().join("batch.db");
    std::fs::copy(demo_db(), &db).expect("copy the demo database");
    for (id, team) in [("c-1", "a"), ("c-2", "a"), ("c-3", "b")] {
        let label = format!("team={team}");
        let input = r#"{"question":"q"}"#;
        on(&db, &["start", "research-agent", "--input", input, "--id", id, "--label", &label])
            .expect(0);
    }
    let team_a = "status=created,label.team=a";
    let dry = on(&db, &["batch", "cancel", "--filter", team_a, "--dry-run", "--json"]).expect(0);
    let dry = dry.json();
    assert_eq!((&dry["dry_run"], &dry["total"]), (&true.into(), &2.into()), "{dry}");
    on(&db, &["show", "c-1", "--json"]).expect(0);
    let done = on(&db, &["batch", "cancel", "--filter", team_a, "--id", "b-1"]).expect(0);
    assert!(
        done.stdout.contains("b-1 (cancel): finished, 2 of 2 done: 2 applied"),
        "{}",
        done.stdout
    );
    let shown = on(&db, &["show", "c-1", "--json"]).expect(0).json();
    assert_eq!(shown["status"], "cancelled", "{shown}");
    let untouched = on(&db, &["show", "c-3", "--json"]).expect(0).json();
    assert_eq!(untouched["status"], "created", "{untouched}");
    let progress = on(&db, &["batch", "show", "b-1", "--json"]).expect(0).json();
    assert_eq!((&progress["applied"], &progress["finished"]), (&2.into(), &true.into()));
    // The same id again: the batch as it stands, nothing applied again.
    let again = on(&db, &["batch", "cancel", "--filter", team_a, "--id", "b-1", "--json"]);
    assert_eq!(again.expect(0).json()["applied"], 2);
    // Bad usage: an unknown operation or filter key, a signal without its name.
    on(&db, &["batch", "frob"]).expect(2);
    on(&db, &["batch", "pause", "--filter", "colour=red"]).expect(2);
    on(&db, &["batch", "pause", "--filter", "status=sleepy"]).expect(2);
    on(&db, &["batch", "signal", "--filter", "workflow=x"]).expect(2);

    let (server, _address, pid) = serve(&db);
    let guard = Killer(pid);
    let cancelled = "status=cancelled";
    let dry = on(&db, &["batch", "delete", "--filter", cancelled, "--dry-run", "--json"]).expect(0);
    assert_eq!((&dry.json()["total"], &dry.json()["through"]), (&2.into(), &"endpoint".into()));
    on(&db, &["batch", "delete", "--filter", cancelled, "--id", "b-2"]).expect(0);
    // The batch is a thread: its result is its end.
    on(&db, &["result", "b-2", "--wait", "60"]).expect(0);
    let progress = on(&db, &["batch", "show", "b-2", "--json"]).expect(0).json();
    assert_eq!((&progress["applied"], &progress["finished"]), (&2.into(), &true.into()));
    on(&db, &["show", "c-1"]).expect(1);
    stop(server, guard);
}

#[test]
fn cairn_batch_reset_forks_each_matching_thread_and_cancels_it_here_and_through_serve() {
    let dir = tempdir();
    let db = dir.path().join("reset.db");
    std::fs::copy(demo_db(), &db).expect("copy the demo database");
    for (id, team) in [("r-a", "a"), ("r-b", "b"), ("r-c", "c")] {
        let label = format!("team={team}");
        let input = r#"{"question":"q"}"#;
        on(&db, &["start", "research-agent", "--input", input, "--id", id, "--label", &label])
            .expect(0);
    }
    let team_a = "label.team=a";
    let dry = on(&db, &["batch", "reset", "--filter", team_a, "--dry-run", "--json"]).expect(0);
    assert_eq!((&dry.json()["op"], &dry.json()["total"]), (&"reset".into(), &1.into()));
    let done = on(&db, &["batch", "reset", "--filter", team_a, "--to", "start", "--id", "x-1"]);
    let done = done.expect(0);
    assert!(
        done.stdout.contains("x-1 (reset): finished, 1 of 1 done: 1 applied"),
        "{}",
        done.stdout
    );
    let original = on(&db, &["show", "r-a", "--json"]).expect(0).json();
    assert_eq!(original["status"], "cancelled", "{original}");
    // The new thread is written for the next engine that runs threads (this one parks).
    let fork = on(&db, &["show", "r-a.reset.x-1", "--json"]).expect(0).json();
    assert_eq!(fork["status"], "created", "{fork}");
    let untouched = on(&db, &["show", "r-b", "--json"]).expect(0).json();
    assert_eq!(untouched["status"], "created", "{untouched}");
    on(&db, &["show", "r-b.reset.x-1"]).expect(1);
    // Bad points are bad usage.
    on(&db, &["batch", "reset", "--filter", team_a, "--to", "seq:0"]).expect(2);
    on(&db, &["batch", "reset", "--filter", team_a, "--to", "yesterday"]).expect(2);

    let (server, _address, pid) = serve(&db);
    let guard = Killer(pid);
    // The serving engine runs the created threads: r-b ends before its reset, which then only
    // forks it (an ended thread stays as it is).
    on(&db, &["result", "r-b", "--wait", "60"]).expect(0);
    let team_b = "label.team=b";
    let made =
        on(&db, &["batch", "reset", "--filter", team_b, "--to", "seq:1", "--id", "x-2", "--json"]);
    assert_eq!(made.expect(0).json()["through"], "endpoint");
    on(&db, &["result", "x-2", "--wait", "60"]).expect(0);
    let progress = on(&db, &["batch", "show", "x-2", "--json"]).expect(0).json();
    assert_eq!((&progress["applied"], &progress["finished"]), (&1.into(), &true.into()));
    let original = on(&db, &["show", "r-b", "--json"]).expect(0).json();
    assert_eq!(original["status"], "completed", "{original}");
    // The new thread runs on the serving engine, from the start, to its end.
    on(&db, &["result", "r-b.reset.x-2", "--wait", "60"]).expect(0);
    let fork = on(&db, &["show", "r-b.reset.x-2", "--json"]).expect(0).json();
    assert_eq!((&fork["status"], &fork["labels"]["team"]), (&"completed".into(), &"b".into()));
    on(&db, &["show", "r-c.reset.x-2"]).expect(1);
    stop(server, guard);
}

/// `--thread T` (repeatable): the batch acts on exactly those threads (an id of no thread is
/// skipped, counted so), here and through `cairn serve` (the body's `filter.ids`).
#[test]
fn cairn_batch_thread_narrows_the_batch_to_the_named_threads_here_and_through_serve() {
    let dir = tempdir();
    let db = dir.path().join("batch-ids.db");
    std::fs::copy(demo_db(), &db).expect("copy the demo database");
    for id in ["c-1", "c-2", "c-3"] {
        let input = r#"{"question":"q"}"#;
        on(&db, &["start", "research-agent", "--input", input, "--id", id]).expect(0);
    }
    let named = ["--thread", "c-1", "--thread", "c-3", "--thread", "nobody"];
    let dry = on(&db, &[&["batch", "cancel", "--dry-run", "--json"][..], &named].concat());
    assert_eq!(dry.expect(0).json()["total"], 2, "the two named threads that exist");
    let done = on(&db, &[&["batch", "cancel", "--json"][..], &named].concat()).expect(0).json();
    assert_eq!((&done["applied"], &done["skipped"]), (&2.into(), &1.into()), "{done}");
    for (id, status) in [("c-1", "cancelled"), ("c-2", "created"), ("c-3", "cancelled")] {
        assert_eq!(on(&db, &["show", id, "--json"]).expect(0).json()["status"], status, "{id}");
    }
    let (server, _address, pid) = serve(&db);
    let guard = Killer(pid);
    let args = ["batch", "pause", "--thread", "c-2", "--thread", "nobody", "--dry-run", "--json"];
    let dry = on(&db, &args).expect(0).json();
    assert_eq!((&dry["total"], &dry["through"]), (&1.into(), &"endpoint".into()), "{dry}");
    stop(server, guard);
}
