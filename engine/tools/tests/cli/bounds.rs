//! Bounds and messages a new user meets: a demo of absurdly many threads is refused by a named
//! limit, a listing of 0 threads or an empty correlation id is a usage error, and the messages
//! name what the user typed (the schedule, the bundle file, `--force`, the input a schedule
//! needs).

use crate::harness::{cairn, copy, demo_db, on, tempdir};

#[test]
fn arguments_out_of_bounds_are_usage_errors_that_say_the_bound() {
    let dir = tempdir();
    let fresh = dir.path().join("never.db");
    for n in ["100000000000", "0"] {
        let run = on(&fresh, &["demo", "--threads", n, "--quiet"]).expect(2);
        assert!(run.stderr.contains("DEMO_THREADS_MAX"), "{}", run.stderr);
        assert!(!fresh.exists(), "nothing was written");
    }
    let db = copy(demo_db(), dir.path());
    let run = on(&db, &["threads", "--limit", "0"]).expect(2);
    assert!(run.stderr.contains("at least 1"), "{}", run.stderr);
    let run = on(&db, &["trace", ""]).expect(2);
    assert!(run.stderr.contains("correlation id is empty"), "{}", run.stderr);
}

#[test]
fn messages_name_what_the_user_gave() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let run = on(&db, &["schedule", "pause", "n1"]).expect(1);
    assert!(run.stderr.contains("no schedule n1"), "{}", run.stderr);
    assert!(!run.stderr.contains("schedule:n1"), "{}", run.stderr);

    let not_json = dir.path().join("notes.txt");
    std::fs::write(&not_json, "hello").unwrap();
    let run = cairn(&["bundle", "show", not_json.to_str().unwrap()]).expect(1);
    assert!(run.stderr.contains("notes.txt is not a bundle"), "{}", run.stderr);
    assert!(!run.stderr.contains("bundle $"), "{}", run.stderr);

    let args = ["schedule", "create", "h", "--workflow", "research-agent", "--every", "1h"];
    let run = on(&db, &args).expect(2);
    assert!(
        run.stderr.contains("needs an input") && run.stderr.contains("--input"),
        "{}",
        run.stderr
    );
    let mut with_input = args.to_vec();
    with_input.extend(["--input", r#"{"question":"q"}"#]);
    on(&db, &with_input).expect(0);
    let run = on(&db, &["delete", "schedule:h"]).expect(1);
    assert!(run.stderr.contains("--force") && !run.stderr.contains("with force"), "{}", run.stderr);
}
