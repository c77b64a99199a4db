//! The database file itself: missing, not Cairn, damaged, held by another process; verify,
//! prune and checkpoint deletion.

use std::time::Duration;

use crate::harness::{Spawned, copy, demo_db, events, on, tempdir};

#[test]
fn a_missing_file_is_exit_4_and_is_not_created() {
    let dir = tempdir();
    let missing = dir.path().join("missing.db");
    for args in
        [&["threads"][..], &["verify"], &["show", "demo-0"], &["cancel", "demo-0"], &["prune"]]
    {
        let run = on(&missing, args).expect(4);
        assert!(run.stderr.contains("no database at"), "{args:?}: {}", run.stderr);
        assert!(!missing.exists(), "{args:?} created the file");
    }
}

#[test]
fn a_file_that_is_not_cairn_is_exit_4_and_left_untouched() {
    let dir = tempdir();
    let path = dir.path().join("notes.db");
    let content = b"these are my notes, not a database\n".repeat(200);
    std::fs::write(&path, &content).expect("write");
    for args in [&["threads"][..], &["verify"], &["cancel", "demo-0"], &["resumable"]] {
        let run = on(&path, args).expect(4);
        assert!(run.stderr.contains("is not a Cairn database"), "{args:?}: {}", run.stderr);
    }
    assert_eq!(std::fs::read(&path).expect("read"), content);
}

#[test]
fn a_file_of_a_newer_format_is_exit_4() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    // The meta table's leaf holds its values in key order: created_at_ms (8 bytes),
    // format_version (2), last_checkpoint_id (8), last_lsn (8), magic ("CAIRNDB"). Raise the
    // version in place, as a newer Cairn would have written it.
    let mut bytes = std::fs::read(&db).expect("read");
    let magic = bytes.windows(7).position(|w| w == b"CAIRNDB").expect("the meta magic");
    let at = magic - 18;
    let current = cairn::storage::FORMAT_VERSION.to_le_bytes();
    assert_eq!(bytes[at..at + 2], current, "the format version sits where expected");
    bytes[at..at + 2].copy_from_slice(&(cairn::storage::FORMAT_VERSION + 8).to_le_bytes());
    std::fs::write(&db, &bytes).expect("write");
    for args in [&["threads"][..], &["verify"], &["cancel", "demo-0"]] {
        let run = on(&db, args).expect(4);
        assert!(run.stderr.contains("newer than this cairn reads"), "{args:?}: {}", run.stderr);
    }
    assert_eq!(std::fs::read(&db).expect("read"), bytes, "left untouched");
}

#[test]
fn verify_is_clean_on_a_demo_database() {
    let run = on(demo_db(), &["verify"]).expect(0);
    assert!(run.stdout.starts_with("ok: 3 threads"), "{}", run.stdout);
    assert_eq!(run.stderr, "", "no progress bar drawn when stderr is not a terminal");
    let v = on(demo_db(), &["verify", "--json"]).expect(0).json();
    assert_eq!(v["clean"], true);
    assert_eq!(v["threads"], 3);
    assert!(v["problems"].as_array().expect("problems").is_empty());
}

/// Flips one byte of every copy of `needle` in the file (redb may keep stale copies of a page,
/// so every copy is hit and the live one certainly is).
fn damage(path: &std::path::Path, needle: &[u8]) -> usize {
    let mut bytes = std::fs::read(path).expect("read db");
    let mut hits = 0;
    let mut at = 0;
    while let Some(i) = bytes[at..].windows(needle.len()).position(|w| w == needle) {
        let i = at + i;
        bytes[i + needle.len() / 2] ^= 0x20;
        hits += 1;
        at = i + needle.len();
    }
    std::fs::write(path, bytes).expect("write db");
    hits
}

#[test]
fn verify_exits_3_naming_the_damaged_frame() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    // The finalize step's summary is in one event only: demo-1's node_completed of finalize.
    let log = events(&db, "demo-1");
    let target = log
        .iter()
        .find(|e| e["kind"] == "node_completed" && e["node"] == "finalize")
        .expect("finalize completed");
    let seq = target["seq"].as_u64().expect("seq");
    let summary = target["summary"].as_str().expect("summary").to_owned();
    assert!(damage(&db, summary.as_bytes()) >= 1, "the summary is stored in the file");
    let run = on(&db, &["verify"]).expect(3);
    let line =
        run.stdout.lines().find(|l| l.starts_with("events")).unwrap_or_else(|| {
            panic!("a problem in table events:\n{}\n{}", run.stdout, run.stderr)
        });
    // The CRC covers a batch frame (a run of the thread's events, at most FRAME_EVENTS_MAX),
    // so the problem names the frame by its last event: the damaged one or one after it.
    let in_frame = |named: u64| (seq..seq + 64).contains(&named);
    let cells: Vec<&str> = line.split_whitespace().collect();
    assert_eq!(cells[1], "demo-1", "{line}");
    assert!(in_frame(cells[2].parse().expect("a seq")), "{line} (damaged seq {seq})");
    assert!(run.stderr.contains("problems found"), "{}", run.stderr);
    let v = on(&db, &["verify", "--json"]).expect(3).json();
    let problems = v["problems"].as_array().expect("problems");
    assert!(
        problems.iter().any(|p| p["table"] == "events"
            && p["thread"] == "demo-1"
            && p["seq"].as_u64().is_some_and(in_frame)),
        "{problems:?}"
    );
    // Reading the damaged thread is refused as damage (exit 3), never shown as data; the other
    // threads still read.
    let read = on(&db, &["events", "demo-1"]).expect(3);
    assert!(read.stderr.contains("corrupted"), "{}", read.stderr);
    on(&db, &["events", "demo-0"]).expect(0);
}

#[test]
fn write_and_read_commands_on_a_file_held_without_an_endpoint_exit_4() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let db_arg = db.to_str().expect("utf-8");
    let holder = Spawned::start(&["__hold", "--db", db_arg], Duration::from_secs(120));
    let first = holder.next_line().expect("the holder reports that it holds the file");
    assert!(first.starts_with("holding"), "{first}");
    for args in [
        &["cancel", "demo-1"][..],
        &["pause", "demo-1"],
        &["prune"],
        &["resumable"],
        &["checkpoint", "delete", "1"],
    ] {
        let run = on(&db, args).expect(4);
        assert!(run.stderr.contains("held by another process"), "{args:?}: {}", run.stderr);
    }
    // It serves no endpoint: read commands say so up front instead of copying a file being
    // written (commands no endpoint answers read a snapshot).
    for args in [
        &["threads", "--json"][..],
        &["show", "demo-1"],
        &["verify"],
        &["checkpoints"],
        &["events", "demo-1"],
        &["bundle", "export", "demo-1", "-o", "/dev/null"],
        &["replay", "demo-1"],
    ] {
        let run = on(&db, args).expect(4);
        assert!(
            run.stderr.contains("serves no endpoint to read through"),
            "{args:?}: {}",
            run.stderr
        );
    }
    on(&db, &["prune", "--dry-run"]).expect(0);
    assert_eq!(holder.wait(), 0, "the holder exits cleanly once its stdin closes");
    // Released: writes work again.
    on(&db, &["resumable"]).expect(0);
}

#[test]
fn prune_keeps_every_thread_restorable() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let before = on(&db, &["show", "demo-1", "--json"]).expect(0).json();
    let dry = on(&db, &["prune", "--dry-run", "--json"]).expect(0).json();
    assert_eq!(dry["events_removed"], 0);
    assert_eq!(events(&db, "demo-1"), events(demo_db(), "demo-1"), "a dry run removes nothing");
    let report = on(&db, &["prune", "--json"]).expect(0).json();
    assert!(report["events_removed"].as_u64().expect("count") > 0, "{report}");
    on(&db, &["verify"]).expect(0);
    let after = on(&db, &["show", "demo-1", "--json"]).expect(0).json();
    for key in ["status", "step", "seq", "frontier", "telemetry", "output", "last_seq"] {
        assert_eq!(after[key], before[key], "{key} survives the prune");
    }
    assert!(after["first_seq"].as_u64().expect("first seq") > 1, "{after}");
    // The retained log starts after the kept checkpoint, which for a completed thread is its
    // completion checkpoint: nothing is left before or after it, and listing events is no error.
    let first = after["first_seq"].as_u64().expect("first seq");
    assert_eq!(Some(first), after["last_seq"].as_u64().map(|s| s + 1), "{after}");
    let kept = on(&db, &["events", "demo-1", "--json"]).expect(0).json();
    assert_eq!(kept, serde_json::json!([]));
    let checkpoints = on(&db, &["checkpoints", "--json"]).expect(0).json();
    assert_eq!(checkpoints.as_array().expect("array").len(), 3, "one per thread: {checkpoints}");
    // The checkpoint a pruned thread restores from is protected.
    let id = checkpoints
        .as_array()
        .expect("array")
        .iter()
        .find(|c| c["thread"] == "demo-1")
        .and_then(|c| c["id"].as_u64())
        .expect("demo-1's checkpoint")
        .to_string();
    let refused = on(&db, &["checkpoint", "delete", &id]).expect(1);
    assert!(refused.stderr.contains("unrestorable"), "{}", refused.stderr);
    // A second prune has nothing left to do.
    let again = on(&db, &["prune", "--json"]).expect(0).json();
    assert_eq!(again["events_removed"], 0, "{again}");
}

#[test]
fn checkpoint_delete_removes_one_checkpoint() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let list = on(&db, &["checkpoints", "--thread", "demo-1", "--json"]).expect(0).json();
    let list = list.as_array().expect("array").clone();
    assert!(list.len() >= 2, "demo-1 has a node and a completion checkpoint: {list:?}");
    let id = list.last().and_then(|c| c["id"].as_u64()).expect("id").to_string();
    let run = on(&db, &["checkpoint", "delete", &id, "--json"]).expect(0).json();
    assert_eq!(run["deleted"], true);
    let after = on(&db, &["checkpoints", "--thread", "demo-1", "--json"]).expect(0).json();
    assert_eq!(after.as_array().expect("array").len(), list.len() - 1);
    on(&db, &["checkpoint", "delete", &id]).expect(1);
    on(&db, &["verify"]).expect(0);
    on(&db, &["show", "demo-1"]).expect(0);
}
