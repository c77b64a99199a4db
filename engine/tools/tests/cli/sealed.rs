//! A database sealed at rest (docs/encryption.md): the commands open it with the keys of
//! `CAIRN_KEYS`; without them the reads show each sealed value as a placeholder naming its key
//! and the clear fields as usual, while a wrong key is an error; listings and `cairn verify`
//! (CRC and structure) work without the key; a bundle is exported decoded with the key and
//! imported sealed.

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

    let wrong = format!("k1={}", "b2".repeat(32));
    let wrong = run(&db, Some(&wrong), &["state", "demo-0", "--json"]);
    assert_ne!(wrong.code, 0, "{wrong:#?}");
    assert!(wrong.stderr.contains("does not open"), "{wrong:#?}");

    // Listings and verify need no key.
    let listed = run(&db, None, &["threads", "--json"]).expect(0).json();
    assert_eq!(listed.as_array().map(Vec::len), Some(1), "{listed}");
    run(&db, None, &["verify"]).expect(0);

    // A bundle: exported decoded with the key, imported sealed again.
    let bundle = dir.path().join("demo-0.json");
    let bundle = bundle.to_str().unwrap();
    run(&db, Some(&keys), &["bundle", "export", "demo-0", "-o", bundle]).expect(0);
    let decoded = std::fs::read_to_string(bundle).unwrap();
    assert!(decoded.contains("A direct answer.") && !decoded.contains("\"sealed\""));
    let copy = dir.path().join("copy.db");
    run(&copy, Some(&keys), &["bundle", "import", bundle]).expect(0);
    run(&copy, Some(&keys), &["state", "demo-0", "--json"]).expect(0);
    let sealed_copy = run(&copy, None, &["state", "demo-0", "--json"]).expect(0).json();
    assert_eq!(sealed_copy["state"], placeholder(), "{sealed_copy}");
}

/// Without the key `bundle export` writes the thread sealed, as stored (a `sealed` marker
/// naming the codec and key, no value in the clear); `bundle show` checks it without the key
/// and refuses one with an altered byte; imported into a fresh database without the key, the
/// thread reads with the key exactly as the original (state, events, result), and `verify`
/// passes there without it.
#[test]
fn a_bundle_exported_without_the_key_is_sealed_and_reads_with_it_after_import() {
    let dir = tempdir();
    let db = dir.path().join("sealed.db");
    let keys = keys();
    run(&db, Some(&keys), &["demo", "--threads", "1", "--quiet"]).expect(0);
    let file = dir.path().join("sealed-bundle.json");
    let file = file.to_str().unwrap();
    let out = run(&db, None, &["bundle", "export", "demo-0", "-o", file, "--json"]).expect(0);
    assert_eq!(out.json()["sealed"]["keys"], serde_json::json!(["k1"]), "{out:#?}");
    let text = std::fs::read_to_string(file).unwrap();
    let doc: serde_json::Value = serde_json::from_str(&text).unwrap();
    assert_eq!(doc["sealed"], serde_json::json!({"codecs": ["aes256gcm"], "keys": ["k1"]}));
    assert!(!text.contains("A direct answer."), "a value in the clear in the sealed bundle");
    // A flag that changes bodies needs the key.
    let secret =
        run(&db, None, &["bundle", "export", "demo-0", "-o", file, "--secret", "abcdefgh"]);
    assert_eq!(secret.code, 2, "{secret:#?}");
    let shown = run(&db, None, &["bundle", "show", file, "--json"]).expect(0).json();
    assert_eq!((shown["checksums"].as_str(), shown["events"].as_u64()), (Some("ok"), Some(17)));
    // One altered byte of a sealed body: refused, naming where.
    let mut altered = doc.clone();
    let data = altered["events"][3]["data"].as_str().unwrap().to_owned();
    let flipped =
        if data.starts_with('A') { data.replacen('A', "B", 1) } else { format!("A{}", &data[1..]) };
    altered["events"][3]["data"] = flipped.into();
    let bad = dir.path().join("altered.json");
    std::fs::write(&bad, altered.to_string()).unwrap();
    let refused = run(&db, None, &["bundle", "show", bad.to_str().unwrap()]);
    assert_eq!(refused.code, 1, "{refused:#?}");
    assert!(refused.stderr.contains("$.events[3].data"), "{refused:#?}");

    let copy = dir.path().join("copy.db");
    run(&copy, None, &["bundle", "import", file]).expect(0);
    run(&copy, None, &["verify"]).expect(0);
    let without = run(&copy, None, &["state", "demo-0", "--json"]).expect(0).json();
    assert_eq!(without["state"], placeholder(), "{without}");
    for args in [&["state", "demo-0", "--json"][..], &["result", "demo-0", "--json"]] {
        let original = run(&db, Some(&keys), args).expect(0).json();
        let imported = run(&copy, Some(&keys), args).expect(0).json();
        assert_eq!(original, imported, "{args:?}");
        assert!(!imported.to_string().contains("encrypted"), "{imported}");
    }
    let events = |db: &Path| {
        let mut all = run(db, Some(&keys), &["events", "demo-0", "--json"]).expect(0).json();
        all.as_array_mut()
            .unwrap()
            .iter_mut()
            .for_each(|e| drop(e.as_object_mut().unwrap().remove("lsn")));
        all
    };
    assert_eq!(events(&db), events(&copy));
}

/// `{"encrypted": true, "codec": "aes256gcm", "key": "k1"}`.
fn placeholder() -> serde_json::Value {
    serde_json::json!({"encrypted": true, "codec": "aes256gcm", "key": "k1"})
}

/// Without the key `show`, `state`, `events` and `result` answer: each sealed value the
/// placeholder, the clear fields (status, step, frontier, summaries, kinds, nodes) as with the
/// key; with the key the values, and no placeholder.
#[test]
fn without_the_key_the_reads_show_placeholders_and_the_clear_fields() {
    let dir = tempdir();
    let db = dir.path().join("sealed.db");
    let keys = keys();
    run(&db, Some(&keys), &["demo", "--threads", "1", "--quiet"]).expect(0);
    let read = |keys: Option<&str>, args: &[&str]| run(&db, keys, args).expect(0).json();
    let (with, without) = (Some(keys.as_str()), None);

    let state = read(without, &["state", "demo-0", "--json"]);
    let keyed = read(with, &["state", "demo-0", "--json"]);
    assert_eq!((&state["state"], &state["sealed"]), (&placeholder(), &serde_json::json!(["k1"])));
    for clear in ["status", "step", "frontier", "seq", "thread"] {
        assert_eq!(state[clear], keyed[clear], "{clear}: {state} / {keyed}");
    }
    assert!(keyed["state"]["answer"].is_string() && keyed.get("sealed").is_none(), "{keyed}");
    // An earlier seq: its status, step and frontier come only from the sealed fold.
    let early = read(without, &["state", "demo-0", "--at", "3", "--json"]);
    assert_eq!(early["state"], placeholder(), "{early}");
    assert!(early.get("step").is_none() && early.get("status").is_none(), "{early}");
    // At a time: the seq from the clear bookmarks, the state sealed; before any event, the
    // bad argument it is with the key.
    let at = read(without, &["state", "demo-0", "--at-time", "99999999999999", "--json"]);
    assert_eq!((&at["seq"], &at["state"]), (&state["seq"], &placeholder()), "{at}");
    let none = run(&db, None, &["state", "demo-0", "--at-time", "1"]);
    assert_eq!(none.code, 2, "{none:#?}");
    assert!(none.stderr.contains("no event recorded"), "{none:#?}");
    let text = run(&db, None, &["state", "demo-0"]).expect(0).stdout;
    assert!(text.contains("encrypted (key k1") && text.contains("completed"), "{text}");

    let events = read(without, &["events", "demo-0", "--json"]);
    let keyed_events = read(with, &["events", "demo-0", "--json"]);
    let (events, keyed_events) = (events.as_array().unwrap(), keyed_events.as_array().unwrap());
    assert_eq!(events.len(), keyed_events.len());
    for (e, k) in events.iter().zip(keyed_events) {
        assert_eq!(e["body"], placeholder(), "{e}");
        assert_ne!(k["body"], placeholder(), "{k}");
        for clear in ["seq", "kind", "node", "status", "summary", "at_ms"] {
            assert_eq!(e[clear], k[clear], "{clear}");
        }
    }

    let show = read(without, &["show", "demo-0", "--json"]);
    let keyed_show = read(with, &["show", "demo-0", "--json"]);
    assert_eq!((&show["output"], &show["telemetry"]), (&placeholder(), &placeholder()));
    for clear in ["status", "step", "seq", "frontier", "labels", "workflow", "progress_text"] {
        assert_eq!(show[clear], keyed_show[clear], "{clear}");
    }
    assert_eq!(keyed_show["output"], keyed["state"], "with the key, the output");
    let text = run(&db, None, &["show", "demo-0"]).expect(0).stdout;
    assert!(text.contains("telemetry") && text.contains("encrypted (key k1"), "{text}");

    let result = read(without, &["result", "demo-0", "--json"]);
    assert_eq!((&result["status"], &result["output"]), (&"completed".into(), &placeholder()));
    let keyed_result = read(with, &["result", "demo-0", "--json"]);
    assert_eq!(keyed_result["output"], keyed["state"], "{keyed_result}");
}
