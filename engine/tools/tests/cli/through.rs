//! The read commands through a running engine's endpoint print what they print reading the
//! file, text and `--json` alike; an announcement beside a path where no file is proves they
//! went through the endpoint (the file path would exit 4 there). `health` is the serving
//! engine's own report: the same but for its commits.

use std::time::Duration;

use serde_json::Value;

use crate::harness::{Spawned, copy, demo_db, on, tempdir};

/// Every read command with the arguments this test compares, on the demo's three threads.
fn reads(checkpoint: &str) -> Vec<Vec<String>> {
    let lines: [&[&str]; 44] = [
        &["threads"],
        &["threads", "--json"],
        &["threads", "--limit", "1", "--offset", "1"],
        &["threads", "--status", "completed", "--label", "tenant=acme", "--json"],
        &["threads", "--workflow", "nobody"],
        &["show", "demo-1"],
        &["show", "demo-1", "--json"],
        &["events", "demo-1"],
        &["events", "demo-1", "--json"],
        &["events", "demo-1", "--since", "20", "--kind", "node_completed", "--kind", "progress"],
        &["events", "demo-1", "--follow", "--json"],
        &["state", "demo-1"],
        &["state", "demo-1", "--json"],
        &["state", "demo-1", "--at", "14"],
        &["state", "demo-1", "--diff", "1", "30"],
        &["state", "demo-1", "--diff", "1", "30", "--json"],
        &["state", "demo-1", "--at-time", "99999999999999", "--json"],
        &["state", "demo-1", "--at-time", "99999999999999", "--session", "--json"],
        &["state", "demo-1", "--at-time", "99999999999999", "--session"],
        &["checkpoints"],
        &["checkpoints", "--json"],
        &["checkpoints", "--thread", "demo-1", "--kind", "node", "--limit", "1"],
        &["checkpoint", "show", checkpoint],
        &["checkpoint", "show", checkpoint, "--json"],
        &["trace"],
        &["trace", "--json", "--thread", "demo-1"],
        &["trace", "--between", "user", "classify", "--to-ms", "99999999999999"],
        &["trace", "--thread", "demo-1", "--chain", "m1", "--states", "--json"],
        &["trace", "--thread", "demo-1", "--chain", "m1", "--states"],
        &["verify"],
        &["verify", "--json"],
        &["replay", "demo-1"],
        &["replay", "demo-2", "--json", "--verify"],
        &["resumable"],
        &["resumable", "--json", "--max-age", "3650d"],
        // Refusals: the same message and exit code.
        &["show", "nobody"],
        &["state", "nobody", "--at-time", "1", "--session"],
        &["trace", "--thread", "nobody", "--chain", "m1", "--states"],
        &["trace", "--thread", "nobody", "--chain", "m1"],
        &["state", "demo-1", "--at", "100000"],
        &["checkpoint", "show", "999"],
        &["events", "nobody", "--json"],
        &["replay", "nobody"],
        &["resumable", "--json", "--max-age", "1s"],
    ];
    lines.iter().map(|l| l.iter().map(|a| (*a).to_owned()).collect()).collect()
}

/// `bundle export` with the arguments this test compares (each writes `out`).
fn exports(out: &str) -> Vec<Vec<String>> {
    let lines: [&[&str]; 5] = [
        &["bundle", "export", "demo-1", "-o", out],
        &["bundle", "export", "demo-2", "-o", out, "--gzip", "--json"],
        &[
            "bundle",
            "export",
            "demo-1",
            "-o",
            out,
            "--last-events",
            "7",
            "--no-checkpoints",
            "--secret",
            "acme-corp",
            "--redact-key",
            "tenant",
            "--meta",
            "ticket=T-1",
            "--max-payload-bytes",
            "64",
        ],
        &["bundle", "export", "nobody", "-o", out],
        &["bundle", "export", "demo-1", "-o", out, "--secret", "abc"],
    ];
    lines.iter().map(|l| l.iter().map(|a| (*a).to_owned()).collect()).collect()
}

/// What an export printed and wrote: exit code, stdout (the size of a gzip bundle left out: the
/// export time inside it changes how well it compresses), stderr, and the bundle written
/// without its export time.
fn exported(run: crate::harness::Run, out: &std::path::Path) -> (i32, String, String, Value) {
    let bundle = match std::fs::read(out) {
        Ok(bytes) => {
            let bundle = cairn_tools::debug::Bundle::from_bytes(&bytes).expect("a bundle");
            let mut value = serde_json::to_value(&bundle).expect("JSON");
            value.as_object_mut().expect("an object").remove("timestamp");
            let _ = std::fs::remove_file(out);
            value
        }
        Err(_) => Value::Null,
    };
    let mut stdout = run.stdout.clone();
    if run.stdout.contains("gzip") {
        let json: Result<Value, _> = serde_json::from_str(&run.stdout);
        if let Ok(mut json) = json {
            json["bytes"] = Value::Null;
            stdout = json.to_string();
        }
    }
    (run.code, stdout, run.stderr, bundle)
}

#[test]
fn read_commands_print_through_the_endpoint_what_they_print_from_the_file() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let checkpoints = on(&db, &["checkpoints", "--json"]).expect(0).json();
    let checkpoint = checkpoints[0]["id"].to_string();
    let from_file: Vec<_> = reads(&checkpoint)
        .iter()
        .map(|args| on(&db, &args.iter().map(String::as_str).collect::<Vec<_>>()))
        .collect();
    let out = dir.path().join("out.bundle");
    let out_arg = out.to_str().expect("utf-8");
    let exports_from_file: Vec<_> = exports(out_arg)
        .iter()
        .map(|args| exported(on(&db, &args.iter().map(String::as_str).collect::<Vec<_>>()), &out))
        .collect();

    // A copy to read the file beside the served one (the served one is held, unchanged).
    let db_copy = dir.path().join("copy.db");
    std::fs::copy(&db, &db_copy).expect("copy");
    let db_arg = db.to_str().expect("utf-8");
    let server = Spawned::start(&["serve", "--json", "--db", db_arg], Duration::from_secs(120));
    let first: Value =
        serde_json::from_str(&server.next_line().expect("the address line")).expect("JSON");
    // The same announcement beside a path with no file: only the endpoint can answer there.
    let elsewhere = dir.path().join("elsewhere.db");
    std::fs::copy(
        cairn_tools::serve::endpoint_path(&db),
        cairn_tools::serve::endpoint_path(&elsewhere),
    )
    .expect("copy the announcement");
    // Differences are collected and asserted once the server is stopped (a panic here would
    // leave it running).
    let mut differ = Vec::new();
    for (args, file) in reads(&checkpoint).iter().zip(&from_file) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let served = on(&elsewhere, &args);
        if (served.code, &served.stdout, &served.stderr) != (file.code, &file.stdout, &file.stderr)
        {
            differ.push(format!("{args:?}: through the endpoint {served:#?}, file {file:#?}"));
        }
    }
    for (args, file) in exports(out_arg).iter().zip(&exports_from_file) {
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let served = exported(on(&elsewhere, &args), &out);
        if &served != file {
            differ.push(format!("{args:?}: through the endpoint {served:#?}, file {file:#?}"));
        }
    }
    // Health is the serving engine's own report: the same threads, its own commits, time and
    // machine readings (its process's memory, its file's path).
    let mut file_health = on(&db_copy, &["health", "--json"]).expect(0).json();
    let mut served_health = on(&elsewhere, &["health", "--json"]).expect(0).json();
    let pid = first["pid"].as_u64().expect("pid").to_string();
    let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
    assert!(killed.success());
    assert_eq!(server.wait(), 0);
    for report in [&mut file_health, &mut served_health] {
        let report = report.as_object_mut().expect("a report");
        report.remove("commits");
        report.remove("at_ms");
        let resources = report.remove("resources").expect("the machine is read");
        assert!(resources["memory_bytes"].as_u64().is_some_and(|m| m > 0), "{resources}");
    }
    assert!(differ.is_empty(), "{differ:#?}");
    assert_eq!(served_health, file_health);
    // Without the endpoint the path has no database.
    on(&elsewhere, &["threads"]).expect(4);
}
