//! A database sealed at rest (docs/encryption.md): the commands open it with the keys of
//! `CAIRN_KEYS`; without them a command that needs a sealed value fails naming the key, while
//! listings and `cairn verify` (CRC and structure) work; a bundle is exported decoded with the
//! key and imported sealed.

use std::path::Path;
use std::process::{Command, Stdio};

use crate::harness::{Run, bin, tempdir};

/// The demo's key ring: `k1` seals.
fn keys() -> String {
    format!("k1={}", "a1".repeat(32))
}

/// `cairn ARGS... --db DB` with `CAIRN_KEYS` set to `keys` (unset when `None`).
fn run(db: &Path, keys: Option<&str>, args: &[&str]) -> Run {
    run_with(db, keys.map(|k| ("CAIRN_KEYS", k)), args)
}

/// `cairn ARGS... --db DB` with one key variable set (neither when `None`).
fn run_with(db: &Path, key_var: Option<(&str, &str)>, args: &[&str]) -> Run {
    let mut command = Command::new(bin());
    command.args(args).args(["--db", db.to_str().unwrap()]).env_remove("CAIRN_LOG");
    command.env_remove("CAIRN_KEYS").env_remove("CAIRN_KEYS_FILE").stdin(Stdio::null());
    if let Some((name, value)) = key_var {
        command.env(name, value);
    }
    let out = command.output().expect("the cairn binary runs");
    Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

#[test]
fn sealed_state_reads_with_the_keys_and_names_the_key_without_them() {
    let dir = tempdir();
    let db = dir.path().join("sealed.db");
    let keys = keys();
    run(&db, Some(&keys), &["demo", "--threads", "1", "--quiet"]).expect(0);
    let bytes = std::fs::read(&db).unwrap();
    let sealed = bytes.windows(2).filter(|w| *w == [0xC5, 0x01]).count();
    assert!(sealed > 0, "the demo's bodies are sealed");

    let with = run(&db, Some(&keys), &["state", "demo-0", "--json"]).expect(0).json();
    assert!(with.is_object(), "{with}");
    let events = run(&db, Some(&keys), &["events", "demo-0", "--json"]).expect(0).json();
    assert!(events.as_array().is_some_and(|e| !e.is_empty()), "{events}");

    // The same keys from a file, one entry a line.
    let file = dir.path().join("keys");
    std::fs::write(&file, format!("{keys}\nk0={}\n", "c3".repeat(32))).unwrap();
    let from_file = Some(("CAIRN_KEYS_FILE", file.to_str().unwrap()));
    run_with(&db, from_file, &["state", "demo-0", "--json"]).expect(0);

    let without = run(&db, None, &["state", "demo-0", "--json"]);
    assert_ne!(without.code, 0, "{without:#?}");
    assert!(without.stderr.contains("sealed with key k1"), "{without:#?}");
    let wrong = format!("k1={}", "b2".repeat(32));
    let wrong = run(&db, Some(&wrong), &["state", "demo-0", "--json"]);
    assert!(wrong.stderr.contains("does not open"), "{wrong:#?}");

    // Listings and verify need no key.
    let listed = run(&db, None, &["threads", "--json"]).expect(0).json();
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    run(&db, None, &["verify"]).expect(0);

    // A bundle: exported decoded with the key (refused without it), imported sealed again.
    let bundle = dir.path().join("demo-0.json");
    let bundle = bundle.to_str().unwrap();
    assert_ne!(run(&db, None, &["bundle", "export", "demo-0", "-o", bundle]).code, 0);
    run(&db, Some(&keys), &["bundle", "export", "demo-0", "-o", bundle]).expect(0);
    let copy = dir.path().join("copy.db");
    run(&copy, Some(&keys), &["bundle", "import", bundle]).expect(0);
    run(&copy, Some(&keys), &["state", "demo-0", "--json"]).expect(0);
    let sealed_copy = run(&copy, None, &["state", "demo-0", "--json"]);
    assert!(sealed_copy.stderr.contains("sealed with key k1"), "{sealed_copy:#?}");
}
