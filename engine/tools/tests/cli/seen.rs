//! What a user sees: a completed thread that took a short route shows as done (not "1/5
//! classifying the question"), and the crash recipe says it aborts, then how many threads the
//! next run recovered.

use crate::harness::{copy, demo_db, on, tempdir};

#[test]
fn a_completed_thread_of_a_short_route_shows_as_done() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let table = on(&db, &["threads"]).expect(0).stdout;
    let row = table.lines().find(|l| l.starts_with("demo-0 ")).expect("demo-0 listed");
    assert!(row.contains("completed") && row.trim_end().ends_with("done"), "{table}");
    assert!(!row.contains("1/5"), "{table}");
    let long = table.lines().find(|l| l.starts_with("demo-1 ")).expect("demo-1 listed");
    assert!(long.trim_end().ends_with("5/5 done"), "the whole route keeps its last step: {table}");
    let shown = on(&db, &["show", "demo-0"]).expect(0).stdout;
    let line = shown.lines().find(|l| l.starts_with("progress")).expect("a progress line");
    assert_eq!(line.split_whitespace().collect::<Vec<_>>(), ["progress", "done"], "{shown}");
}

#[test]
fn the_crash_recipe_says_it_aborts_and_the_next_run_says_what_it_recovered() {
    let dir = tempdir();
    let db = dir.path().join("crash.db");
    let crashed = on(&db, &["demo", "--threads", "3", "--quiet", "--crash-after-steps", "3"]);
    assert_ne!(crashed.code, 0, "{crashed:#?}");
    assert!(
        crashed.stderr.contains("aborting after 3 acknowledged steps, as asked"),
        "{crashed:#?}"
    );
    let list = on(&db, &["threads", "--json"]).expect(0).json();
    let unfinished = list.as_array().unwrap().iter().filter(|t| t["status"] != "completed").count();
    assert!(unfinished > 0, "{list}");
    let again = on(&db, &["demo", "--threads", "3", "--quiet"]).expect(0);
    let s = if unfinished == 1 { "" } else { "s" };
    let said = format!("recovered: {unfinished} unfinished thread{s} of an earlier run resumed");
    let line = again.stdout.lines().find(|l| l.starts_with("recovered")).unwrap_or_default();
    assert!(line.starts_with(&said), "{said:?} in {again:#?}");
    // A run with nothing to recover says nothing about it.
    let third = on(&db, &["demo", "--threads", "3", "--quiet"]).expect(0);
    assert!(!third.stdout.contains("recovered"), "{third:#?}");
}
