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
    assert!(events.starts_with("the events of thread demo-0 before seq"), "{events}");
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

/// The first available seq a message names (`... the first available seq is N...`).
fn first_available(text: &str) -> u64 {
    let rest = text.split("the first available seq is ").nth(1).unwrap_or_else(|| panic!("{text}"));
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse().unwrap_or_else(|_| panic!("{text}"))
}

/// After docs/cli.md's own prune, `state --at` past the end and `--diff` from a pruned seq say
/// the same range (issue 38: "has events 1..=46" against "the first available seq is 47"), and
/// following the log from before the pruned point, by `cairn events --follow` and by the
/// endpoint page's own `curl` follow line (docs/endpoint.md), says the events before it were pruned (it streamed an empty
/// 200). Through the engine serving the file the same words and exit code come back.
#[test]
fn after_the_readmes_prune_state_and_following_name_what_was_pruned() {
    use crate::start::{Killer, readme_block, serve, stop};
    let dir = tempdir();
    // Named as the docs' lines name it.
    let db = dir.path().join("cairn-demo.db");
    std::fs::copy(demo_db(), &db).expect("copy the demo database");
    on(&db, &["prune", "--yes"]).expect(0);

    let at = on(&db, &["state", "demo-1", "--at", "999999"]).expect(2).stderr;
    assert!(at.contains("were pruned (the first available seq is"), "{at}");
    let first = first_available(&at);
    let diff = on(&db, &["state", "demo-1", "--diff", "1", "2"]).expect(2).stderr;
    assert!(diff.contains("were pruned (the first available seq is"), "{diff}");
    assert_eq!(first_available(&diff), first, "{at}\n{diff}");
    assert!(first > 21, "docs/endpoint.md's `since=20` asks for pruned events: {at}");

    let followed = on(&db, &["events", "demo-1", "--since", "20", "--follow"]).expect(0).stdout;
    let said = format!("before seq {first} were pruned; the first available seq is {first}");
    assert!(followed.lines().next().is_some_and(|l| l.contains(&said)), "{followed}");
    let json = on(&db, &["events", "demo-1", "--since", "20", "--follow", "--json"]).expect(0);
    assert!(json.stderr.contains(&said), "said beside the JSON lines: {}", json.stderr);

    let (server, address, pid) = serve(&db);
    let guard = Killer(pid);
    let through = on(&db, &["state", "demo-1", "--at", "999999"]).expect(2).stderr;
    assert_eq!(first_available(&through), first, "{through}");
    let port = address.rsplit_once(':').expect("a port").1;
    let line = readme_block("text", "follow=1")
        .lines()
        .find(|l| l.contains("follow=1") && l.starts_with("curl"))
        .expect("docs/endpoint.md's follow line")
        .split("   #")
        .next()
        .expect("the command")
        .replace("PORT", port);
    let out = Command::new("timeout")
        .args(["60", "sh", "-c", &line])
        .current_dir(dir.path())
        .output()
        .expect("curl runs");
    assert!(out.status.success(), "{line}: {}", String::from_utf8_lossy(&out.stderr));
    let stream = String::from_utf8_lossy(&out.stdout);
    assert!(stream.starts_with("event: pruned\n"), "{line}: {stream}");
    assert!(stream.contains(&said), "{stream}");
    stop(server, guard);
}
