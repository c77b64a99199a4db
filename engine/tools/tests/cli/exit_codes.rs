//! Exit codes are the same for the same kind of failure in every command: any invalid argument
//! value is a usage error (2), whether clap or the command finds it, and writes nothing; so is
//! a bundle file that cannot be read (as `--update @FILE` is), not the database's exit code 4.

use crate::harness::{copy, demo_db, on, tempdir};

#[test]
fn every_invalid_argument_value_is_a_usage_error() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let out = dir.path().join("b.json");
    let out = out.to_str().expect("utf-8");
    let schedule = |rest: &[&str]| {
        let mut all = vec!["schedule", "create", "s", "--workflow", "research-agent"];
        all.extend_from_slice(rest);
        all.extend(["--input", r#"{"question":"q"}"#]);
        all.into_iter().map(str::to_owned).collect::<Vec<_>>()
    };
    let cases: Vec<(Vec<String>, &str)> = vec![
        (schedule(&["--cron", "99 3 * * *"]), "99 3 * * *"),
        (schedule(&["--cron", "0 3 * * *", "--tz", "Atlantis/Capital"]), "Atlantis/Capital"),
        (schedule(&["--every", "0s"]), "more than 0"),
        (schedule(&["--every=-1h"]), "-1h"),
        (schedule(&["--every", "1h", "--start-ms", "10", "--end-ms", "5"]), "before it starts"),
        (
            ["schedule", "create", "bad name", "--workflow", "research-agent", "--every", "1h"]
                .into_iter()
                .chain(["--input", r#"{"question":"q"}"#])
                .map(str::to_owned)
                .collect(),
            "schedule name",
        ),
        (["queue", "define", "", "--concurrency", "1"].map(str::to_owned).to_vec(), "queue name"),
        (["queue", "define", "q", "--concurrency", "0"].map(str::to_owned).to_vec(), "concurrency"),
        (
            ["fork", "demo-1", "--at", "3", "--update", r#"{"nope":1}"#]
                .map(str::to_owned)
                .to_vec(),
            "--update is not an update of research-agent",
        ),
        (["fork", "demo-1", "--at", "3", "--update", "{"].map(str::to_owned).to_vec(), "JSON"),
        (
            ["bundle", "export", "demo-1", "--secret", "", "-o", out].map(str::to_owned).to_vec(),
            "too short to redact",
        ),
    ];
    for (args, says) in &cases {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = on(&db, &args).expect(2);
        assert!(run.stderr.contains(says), "{args:?} says {says:?}: {}", run.stderr);
    }
    // Nothing was written by any of them.
    let threads = on(&db, &["threads", "--json"]).expect(0).json();
    assert_eq!(threads.as_array().map(Vec::len), Some(3), "{threads}");
    assert_eq!(on(&db, &["queue", "list", "--json"]).expect(0).json(), serde_json::json!([]));
    assert!(!std::path::Path::new(out).exists());

    let missing = dir.path().join("missing.json");
    let missing = missing.to_str().expect("utf-8");
    for args in [vec!["bundle", "show", missing], vec!["bundle", "import", missing]] {
        let run = on(&db, &args).expect(2);
        assert!(run.stderr.contains("cannot read"), "{args:?}: {}", run.stderr);
    }
}

/// Arguments the engine finds wrong are usage errors too, as README's table says (issue 38: an
/// empty `start --id`, a query without its argument and a seq past the end exited 1), and each
/// names what there is.
#[test]
fn arguments_the_engine_refuses_are_usage_errors_naming_what_there_is() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let input = r#"{"question":"q"}"#;
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["start", "research-agent", "--input", input, "--id", ""], "thread id \"\""),
        (vec!["show", ""], "thread id \"\""),
        (vec!["query", "demo-1", "findings_about"], "findings_about"),
        (vec!["query", "demo-1", "budget"], "it has: findings, findings_about"),
        (vec!["state", "demo-1", "--at", "999999"], "has events 1..="),
        (vec!["state", "demo-1", "--at", "0"], "seq 0 is not one of them"),
        (vec!["state", "demo-1", "--diff", "1", "999999"], "seq 999999 is not one of them"),
        (vec!["state", "demo-1", "--at-time", "1"], "no event recorded at or before 1 ms"),
        (vec!["fork", "demo-1", "--at", "999999"], "seq 999999 is not one of them"),
    ];
    for (args, says) in &cases {
        let run = on(&db, args).expect(2);
        assert!(run.stderr.contains(says), "{args:?} says {says:?}: {}", run.stderr);
    }
    let threads = on(&db, &["threads", "--json"]).expect(0).json();
    assert_eq!(threads.as_array().map(Vec::len), Some(3), "nothing was written: {threads}");
}

/// An unknown workflow reads the same in `start` and `graph` and `schedule create`, with the same
/// exit code (2), names a version only when one was asked, and lists the registered ones
/// (issue 38: "workflow nope-wf v0 is not registered", no list, `graph` exiting 1).
#[test]
fn an_unknown_workflow_is_a_usage_error_listing_the_registered_ones() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let said = "workflow nope-wf is not registered; registered: research-agent v1";
    let start = on(&db, &["start", "nope-wf", "--input", "{}"]).expect(2);
    assert!(start.stderr.contains(said), "{}", start.stderr);
    assert!(!start.stderr.contains("cairn.schedule"), "internal: {}", start.stderr);
    let graph = crate::harness::cairn(&["graph", "nope-wf"]).expect(2);
    assert!(graph.stderr.contains(said), "{}", graph.stderr);
    let versioned = crate::harness::cairn(&["graph", "nope-wf", "--version", "3"]).expect(2);
    assert!(
        versioned.stderr.contains("workflow nope-wf v3 is not registered"),
        "{}",
        versioned.stderr
    );
    let schedule = ["schedule", "create", "s", "--workflow", "nope-wf", "--every", "1h"];
    let schedule = on(&db, &schedule).expect(2);
    assert!(schedule.stderr.contains(said), "{}", schedule.stderr);
}

/// An empty id or name is a usage error in every command that takes one, as README's table
/// says (several exited 1: `checkpoint create`, `result`, `delete`, `query`, `fork --id`,
/// `rollback`, `trace --thread`, `start --queue`, the schedule commands), and writes nothing.
#[test]
fn an_empty_id_or_name_is_a_usage_error_in_every_command() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let out = dir.path().join("b.json");
    let out = out.to_str().expect("utf-8");
    let input = r#"{"question":"q"}"#;
    let cases: Vec<Vec<&str>> = vec![
        vec!["show", ""],
        vec!["events", ""],
        vec!["state", ""],
        vec!["checkpoints", "--thread", ""],
        vec!["checkpoint", "create", ""],
        vec!["result", ""],
        vec!["delete", ""],
        vec!["resume", ""],
        vec!["pause", ""],
        vec!["cancel", ""],
        vec!["abandon", ""],
        vec!["input", "", "1"],
        vec!["signal", "", "n", "1"],
        vec!["query", "", "findings"],
        vec!["fork", "", "--at", "1"],
        vec!["fork", "demo-1", "--at", "3", "--id", ""],
        vec!["rollback", "", "--to", "1"],
        vec!["replay", ""],
        vec!["bundle", "export", "", "-o", out],
        vec!["trace", "--thread", ""],
        vec!["start", "research-agent", "--input", input, "--id", ""],
        vec!["start", "research-agent", "--input", input, "--queue", ""],
        vec!["schedule", "trigger", ""],
        vec!["schedule", "pause", ""],
        vec!["schedule", "resume", ""],
        vec!["schedule", "delete", ""],
    ];
    for args in &cases {
        on(&db, args).expect(2);
    }
    let threads = on(&db, &["threads", "--json"]).expect(0).json();
    assert_eq!(threads.as_array().map(Vec::len), Some(3), "nothing was written: {threads}");
    assert!(!std::path::Path::new(out).exists());
}
