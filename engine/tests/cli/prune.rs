//! A pruned file stays usable: every command works on a pruned thread (the demo runs again with
//! the same results, `events` says where the stored log starts, a bundle of a pruned thread
//! starts from its checkpoint and imports), and `prune` asks first on a terminal.

use std::process::{Command, Stdio};

use crate::harness::{bin, copy, demo_db, on, tempdir};

fn sha(path: &std::path::Path) -> String {
    blake3::hash(&std::fs::read(path).expect("read")).to_hex().to_string()
}

#[test]
fn every_command_works_on_a_pruned_file() {
    let dir = tempdir();
    let db = dir.path().join("pruned.db");
    let before = on(&db, &["demo", "--threads", "3", "--quiet", "--json"]).expect(0).stdout;
    let pruned = on(&db, &["prune"]).expect(0);
    assert!(pruned.stdout.contains("pruned 3 threads"), "{}", pruned.stdout);
    // The demo again on the same file: finished pruned threads are finished, same answers.
    let again = on(&db, &["demo", "--threads", "3", "--quiet", "--json"]).expect(0).stdout;
    assert_eq!(again, before);
    // `events` says where the stored log starts instead of printing a bare header.
    let events = on(&db, &["events", "demo-0"]).expect(0).stdout;
    assert!(events.starts_with("the log of demo-0 before seq"), "{events}");
    on(&db, &["show", "demo-0"]).expect(0);
    on(&db, &["state", "demo-0"]).expect(0);
    on(&db, &["verify"]).expect(0);
    // A bundle of a pruned thread starts from its checkpoint, and imports.
    let bundle = dir.path().join("demo-0.json");
    let bundle_arg = bundle.to_str().expect("utf-8");
    on(&db, &["bundle", "export", "demo-0", "-o", bundle_arg]).expect(0);
    let other = dir.path().join("other.db");
    on(&other, &["bundle", "import", bundle_arg]).expect(0);
    let state = |db: &std::path::Path| on(db, &["state", "demo-0", "--json"]).expect(0).json();
    assert_eq!(state(&other), state(&db), "the imported thread restores the same state");
    let shown = on(&other, &["show", "demo-0", "--json"]).expect(0).json();
    assert_eq!(shown["status"], "completed", "{shown}");
    on(&other, &["verify"]).expect(0);
}

/// `prune` asks on a terminal (a pseudo-terminal from `script`), and removes nothing on "n";
/// `--yes` and a script's stdin do not ask.
#[test]
fn prune_asks_on_a_terminal_and_not_with_yes() {
    let dir = tempdir();
    let db = copy(demo_db(), dir.path());
    let untouched = sha(&db);
    let command = format!("{} prune --db {}", bin(), db.display());
    let asked = Command::new("script")
        .args(["-qec", &command, "/dev/null"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .and_then(|mut child| {
            use std::io::Write as _;
            child.stdin.take().expect("stdin").write_all(b"n\n")?;
            child.wait_with_output()
        })
        .expect("`script` (util-linux) runs prune on a pseudo-terminal");
    let text = String::from_utf8_lossy(&asked.stdout);
    assert!(text.contains("[y/N]"), "asked: {text}");
    assert!(text.contains("nothing was pruned"), "{text}");
    assert_eq!(sha(&db), untouched, "answering n changed nothing, not even redb's header");
    let yes = on(&db, &["prune", "--yes"]).expect(0);
    assert!(yes.stdout.contains("pruned 3 threads"), "{}", yes.stdout);
}
