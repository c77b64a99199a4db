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
