//! A bundle of the seed format (0.1.0) imports for viewing only (issue 28 item 5): `bundle
//! import` says exactly what the imported thread can and cannot do, and every claim holds.

use std::path::{Path, PathBuf};

use serde_json::Value;

use crate::harness::{demo_db, on, tempdir};

/// The seed document's example bundle (the seed framework's format, version 0.1.0).
fn seed_example() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/it/fixtures/seed000_example.json")
}

const THREAD: &str = "1702886400000-abc123";

/// The command line a capability named in `bundle import`'s output stands for.
fn command_of(name: &str, out: &str) -> Vec<String> {
    let args: Vec<&str> = match name {
        "show" => vec!["show", THREAD],
        "events" => vec!["events", THREAD],
        "threads" => vec!["threads"],
        "checkpoints" => vec!["checkpoints", "--thread", THREAD],
        "checkpoint show" => vec!["checkpoint", "show", "1"],
        "bundle export" => vec!["bundle", "export", THREAD, "-o", out],
        "verify" => vec!["verify"],
        "pause" => vec!["pause", THREAD],
        "cancel" => vec!["cancel", THREAD],
        "delete" => vec!["delete", THREAD],
        "state" => vec!["state", THREAD],
        "replay" => vec!["replay", THREAD],
        "fork" => vec!["fork", THREAD, "--at", "2"],
        "resume" => vec!["resume", THREAD],
        "input" => vec!["input", THREAD, "{}"],
        "rollback" => vec!["rollback", THREAD, "--to", "1"],
        other => panic!("bundle import names {other:?}, which this test does not know: add it"),
    };
    args.into_iter().map(str::to_owned).collect()
}

fn names(v: &Value) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("a list of commands: {v}"))
        .iter()
        .map(|n| n.as_str().expect("a command name").to_owned())
        .collect()
}

#[test]
fn a_seed_format_import_says_what_its_thread_can_do_and_every_claim_holds() {
    let dir = tempdir();
    let example = seed_example();
    let file = example.to_str().expect("utf-8");

    // In words: the usual line, then what the thread is for.
    let text = on(&dir.path().join("text.db"), &["bundle", "import", file]).expect(0).stdout;
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(lines[0].starts_with(&format!("imported thread {THREAD} (3 events)")), "{text}");
    assert!(lines[1].contains("seed-format (0.1.0) bundle and has no Cairn workflow"), "{text}");

    // As JSON: the same lists, each of which is checked below against the real commands.
    let db = dir.path().join("seed.db");
    let json = on(&db, &["bundle", "import", file, "--json"]).expect(0).json();
    let seed = &json["seed_format"];
    assert_eq!(seed["version"], "0.1.0", "{json}");
    let (reads, controls, refused) =
        (names(&seed["reads"]), names(&seed["controls"]), names(&seed["refused"]));
    for name in reads.iter().chain(&controls).chain(&refused) {
        assert!(lines[1].contains(name.as_str()), "the sentence names {name}: {text}");
    }
    let out = dir.path().join("again.json");
    let out = out.to_str().expect("utf-8");
    for name in &reads {
        let args = command_of(name, out);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        on(&db, &args).expect(0);
    }
    for name in &refused {
        let args = command_of(name, out);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        let run = on(&db, &args).expect(1);
        if name == "fork" {
            assert!(run.stderr.contains("seed-format (0.1.0) bundle"), "{}", run.stderr);
        }
    }
    // Last, as they change the thread: pause, cancel (it ends), delete (a finished thread).
    for name in &controls {
        let args = command_of(name, out);
        let args: Vec<&str> = args.iter().map(String::as_str).collect();
        on(&db, &args).expect(0);
    }

    // A Cairn bundle's import says nothing of the kind: its thread replays and forks here.
    let bundle = dir.path().join("demo-1.json");
    let bundle = bundle.to_str().expect("utf-8");
    on(demo_db(), &["bundle", "export", "demo-1", "-o", bundle]).expect(0);
    let other = dir.path().join("other.db");
    let text = on(&other, &["bundle", "import", bundle]).expect(0).stdout;
    assert_eq!(text.lines().count(), 1, "{text}");
    let json =
        on(&dir.path().join("third.db"), &["bundle", "import", bundle, "--json"]).expect(0).json();
    assert!(json.get("seed_format").is_none(), "{json}");
}
