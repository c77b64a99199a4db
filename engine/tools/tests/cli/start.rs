//! `cairn start` (issue 32 item 1): through `cairn serve`'s endpoint it starts the thread in
//! that engine and waits for its result; on a file no engine holds it writes the thread
//! `created` without running it, and the next engine to open the file (`cairn worker`)
//! completes it. The `curl` and Python lines of docs/endpoint.md for
//! `POST /api/workflows/ID/threads` run as written against `cairn serve` (its port put in for
//! `PORT`).

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

use crate::harness::{Spawned, demo_db, on, tempdir};

const INPUT: &str = r#"{"question":"What is a lease?"}"#;

/// `cairn serve --json` on `db`: the process, its address and its pid.
pub fn serve(db: &Path) -> (Spawned, String, String) {
    let db_arg = db.to_str().expect("utf-8");
    let server = Spawned::start(&["serve", "--json", "--db", db_arg], Duration::from_secs(180));
    let first: Value =
        serde_json::from_str(&server.next_line().expect("the address line")).expect("JSON");
    let address = first["address"].as_str().expect("address").to_owned();
    let pid = first["pid"].as_u64().expect("pid").to_string();
    (server, address, pid)
}

/// Stops `cairn serve` with SIGTERM and checks it exits cleanly.
pub fn stop(server: Spawned, guard: Killer) {
    let killed = Command::new("kill").args(["-TERM", &guard.0]).status().expect("kill");
    std::mem::forget(guard);
    assert!(killed.success());
    assert_eq!(server.wait(), 0);
}

/// Kills `cairn serve` (by its pid) when a failed assertion unwinds past it: the process would
/// otherwise outlive the test and hold the test runner's output open.
pub struct Killer(pub String);

impl Drop for Killer {
    fn drop(&mut self) {
        let _ = Command::new("kill").args(["-KILL", &self.0]).status();
    }
}

/// The fenced block of docs/endpoint.md that opens with "```{lang}" and contains `needle`.
pub fn readme_block(lang: &str, needle: &str) -> String {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let text = std::fs::read_to_string(root.join("docs/endpoint.md")).expect("docs/endpoint.md");
    let fence = format!("```{lang}\n");
    text.split(fence.as_str())
        .skip(1)
        .filter_map(|rest| rest.split("```").next())
        .find(|block| block.contains(needle))
        .unwrap_or_else(|| panic!("docs/endpoint.md has a {lang} block with {needle:?}"))
        .to_owned()
}

#[test]
fn cairn_start_through_cairn_serve_runs_the_thread_and_the_readme_snippets_work() {
    let dir = tempdir();
    // Named as docs/endpoint.md's snippets name it: their token file is `cairn-demo.db.token`.
    let db = dir.path().join("cairn-demo.db");
    std::fs::copy(demo_db(), &db).expect("copy the demo database");
    let (server, address, pid) = serve(&db);
    let guard = Killer(pid);

    let args = ["start", "research-agent", "--input", INPUT, "--id", "s-1", "--label", "team=a"];
    let mut waited = args.to_vec();
    waited.extend(["--wait", "60", "--json"]);
    let first = on(&db, &waited).expect(0).json();
    assert_eq!(first["through"], "endpoint", "{first}");
    assert_eq!((&first["thread"], &first["created"]), (&"s-1".into(), &true.into()), "{first}");
    assert_eq!((&first["finished"], &first["status"]), (&true.into(), &"completed".into()));
    assert!(first["output"]["answer"].as_str().is_some_and(|a| !a.is_empty()), "{first}");
    let again = on(&db, &args).expect(0);
    assert!(again.stdout.contains("s-1: exists, run by the engine serving"), "{}", again.stdout);
    let shown = on(&db, &["show", "s-1", "--json"]).expect(0).json();
    assert_eq!(shown["labels"]["team"], "a", "{shown}");
    // Refusals of the engine: an unknown workflow, an input that is no state of the workflow.
    let unknown = on(&db, &["start", "no-such", "--input", "{}"]).expect(2);
    assert!(unknown.stderr.contains("(workflow)"), "{}", unknown.stderr);
    let listed = "workflow no-such is not registered; registered: research-agent v1";
    assert!(unknown.stderr.contains(listed), "as without an engine: {}", unknown.stderr);
    on(&db, &["start", "research-agent", "--input", "5"]).expect(2);

    // The page's curl line, as written but for the port.
    let port = address.rsplit_once(':').expect("a port").1;
    let curl = readme_block("bash", "/api/workflows/").trim().replace("PORT", port);
    let out = Command::new("sh").args(["-c", &curl]).current_dir(dir.path()).output().unwrap();
    assert!(out.status.success(), "{curl}: {}", String::from_utf8_lossy(&out.stderr));
    let answer: Value = serde_json::from_slice(&out.stdout).expect("curl printed JSON");
    assert_eq!((&answer["thread"], &answer["created"]), (&"asked-1".into(), &true.into()));
    assert_eq!(answer["status"], "completed", "{answer}");
    assert_eq!(answer["link"], "/api/threads/asked-1");
    // The page's Python lines, as written but for the port.
    let python = readme_block("python", "urllib").replace("PORT", port);
    let out = Command::new("python3").args(["-c", &python]).current_dir(dir.path()).output();
    let out = out.expect("python3 runs");
    assert!(out.status.success(), "{python}: {}", String::from_utf8_lossy(&out.stderr));
    let printed = String::from_utf8_lossy(&out.stdout);
    assert!(printed.starts_with("asked-2 completed "), "{printed}");
    stop(server, guard);
    let shown = on(&db, &["show", "asked-2", "--json"]).expect(0).json();
    assert_eq!(shown["status"], "completed", "{shown}");
}

#[test]
fn cairn_start_on_a_free_file_writes_the_thread_created_and_the_next_engine_runs_it() {
    let dir = tempdir();
    let db = dir.path().join("free.db");
    std::fs::copy(demo_db(), &db).expect("copy the demo database");
    let start = ["start", "research-agent", "--input", INPUT, "--id", "c-1", "--label", "team=b"];
    let written = on(&db, &start).expect(0);
    assert!(written.stdout.contains("c-1: written created in"), "{}", written.stdout);
    assert!(written.stdout.contains("not run by this command"), "{}", written.stdout);
    let shown = on(&db, &["show", "c-1", "--json"]).expect(0).json();
    assert_eq!(shown["status"], "created", "left for an engine, not running: {shown}");
    assert_eq!(shown["labels"]["team"], "b", "{shown}");
    let mut json = start.to_vec();
    json.push("--json");
    let again = on(&db, &json).expect(0).json();
    assert_eq!((&again["created"], &again["through"]), (&false.into(), &"database".into()));
    // Waiting on a file nothing would run the thread on is refused before anything is written.
    let refused =
        on(&db, &["start", "research-agent", "--input", INPUT, "--id", "c-2", "--wait", "5"]);
    let refused = refused.expect(1);
    assert!(refused.stderr.contains("no engine serves"), "{}", refused.stderr);
    on(&db, &["show", "c-2"]).expect(1);
    // Bad usage: input that is not JSON or no state of the workflow, an unknown workflow.
    on(&db, &["start", "research-agent", "--input", "nope"]).expect(2);
    on(&db, &["start", "research-agent", "--input", "5"]).expect(2);
    on(&db, &["start", "no-such", "--input", "{}"]).expect(2);
    on(&db, &["start", "research-agent", "--input", "{}", "--key", "k"]).expect(2);

    // The next engine to open the file runs it.
    on(&db, &["worker", "--exit-when-idle"]).expect(0);
    let shown = on(&db, &["show", "c-1", "--json"]).expect(0).json();
    assert_eq!(shown["status"], "completed", "{shown}");
    on(&db, &["result", "c-1"]).expect(0);
}

/// On PostgreSQL (when a local cluster can be started; skipped otherwise): the thread is
/// written created, and a worker on the database runs it.
#[test]
fn cairn_start_on_postgres_writes_the_thread_created_and_a_worker_runs_it() {
    use cairn_storage_testkit::pg_cluster::Cluster;
    let Some(cluster) = Cluster::start("cairn_start_on_postgres") else { return };
    let url = cluster.new_database();
    let db = Path::new(&url);
    on(db, &["init"]).expect(0);
    let start = ["start", "research-agent", "--input", INPUT, "--id", "p-1", "--json"];
    let written = on(db, &start).expect(0).json();
    assert_eq!((&written["created"], &written["status"]), (&true.into(), &"created".into()));
    assert_eq!(written["through"], "database", "{written}");
    on(db, &["worker", "--exit-when-idle", "--poll-ms", "100"]).expect(0);
    let shown = on(db, &["show", "p-1", "--json"]).expect(0).json();
    assert_eq!(shown["status"], "completed", "{shown}");
}

/// Runs `cairn ARGS... --db DB` with `stdin` as its standard input.
fn on_with_stdin(db: &Path, args: &[&str], stdin: &str) -> crate::harness::Run {
    use std::io::Write as _;
    let mut child = Command::new(crate::harness::bin())
        .args(args)
        .arg("--db")
        .arg(db)
        .env_remove("CAIRN_LOG")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("spawn cairn");
    child.stdin.take().expect("stdin").write_all(stdin.as_bytes()).expect("write stdin");
    let out = child.wait_with_output().expect("cairn runs");
    crate::harness::Run {
        code: out.status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Every JSON argument reads `@FILE`, and `@-` from stdin, through one parser (issue 38: `start
/// --input @file` was refused as bad JSON while `fork --update @file` worked).
#[test]
fn every_json_argument_reads_a_file_or_stdin() {
    let dir = tempdir();
    let db = dir.path().join("free.db");
    std::fs::copy(demo_db(), &db).expect("copy the demo database");
    let write = |name: &str, text: &str| {
        let path = dir.path().join(name);
        std::fs::write(&path, text).expect("write");
        format!("@{}", path.display())
    };
    let input = write("input.json", INPUT);
    let question = |thread: &str| {
        let state = on(&db, &["state", thread, "--json"]).expect(0).json();
        state["state"]["question"].as_str().map(str::to_owned)
    };
    on(&db, &["start", "research-agent", "--input", &input, "--id", "f-1"]).expect(0);
    assert_eq!(question("f-1").as_deref(), Some("What is a lease?"));
    let piped = ["start", "research-agent", "--input", "@-", "--id", "f-2"];
    on_with_stdin(&db, &piped, INPUT).expect(0);
    assert_eq!(question("f-2").as_deref(), Some("What is a lease?"));
    let schedule = ["schedule", "create", "s", "--workflow", "research-agent", "--every", "1h"];
    let mut with_input = schedule.to_vec();
    with_input.extend(["--input", &input]);
    on(&db, &with_input).expect(0);
    let about = write("about.json", "\"web\"");
    let bare = on(&db, &["query", "demo-1", "findings_about", "web"]).expect(0).json();
    assert_eq!(on(&db, &["query", "demo-1", "findings_about", &about]).expect(0).json(), bare);
    let update = write("update.json", r#"{"Plan":["alpha","beta"]}"#);
    on(&db, &["fork", "demo-1", "--at", "14", "--update", &update, "--no-run"]).expect(0);
    // A file that cannot be read is a usage error naming it, in every command.
    let missing = format!("@{}", dir.path().join("missing.json").display());
    for args in [
        vec!["start", "research-agent", "--input", &missing],
        vec!["query", "demo-1", "findings_about", &missing],
        vec!["signal", "demo-1", "note", &missing],
        vec!["input", "demo-1", &missing],
        vec!["fork", "demo-1", "--at", "14", "--update", &missing],
        [&schedule[..], &["--input", &missing]].concat(),
    ] {
        let run = on(&db, &args).expect(2);
        assert!(run.stderr.contains("cannot read the file"), "{args:?}: {}", run.stderr);
    }
}

/// `cairn start --delay-ms` (and the rest of the start options) writes the thread created with
/// its start time (the engine tests, `it::delayed_start`, run it at its time). A delay with a
/// queue, and an unknown budget, are bad usage.
#[test]
fn cairn_start_with_a_delay_leaves_the_thread_created_until_its_time() {
    let dir = tempdir();
    let db = dir.path().join("later.db");
    std::fs::copy(demo_db(), &db).expect("copy the demo database");
    let day = "86400000";
    let start = ["start", "research-agent", "--input", INPUT, "--id", "l-1", "--delay-ms", day];
    on(&db, &start).expect(0);
    let budgets = r#"{"max_steps": 50}"#;
    let whole = ["start", "research-agent", "--input", INPUT, "--id", "l-2", "--deadline-ms", day];
    let mut whole = whole.to_vec();
    whole.extend(["--budgets", budgets, "--permission", "net", "--start-at-ms", "1"]);
    on(&db, &whole).expect(0);
    // (A worker with --exit-when-idle would wait for l-1: a created thread is work to come.)
    for id in ["l-1", "l-2"] {
        let shown = on(&db, &["show", id, "--json"]).expect(0).json();
        assert_eq!(shown["status"], "created", "written, left for an engine: {shown}");
    }
    let queued = ["start", "research-agent", "--input", "{}", "--queue", "q", "--delay-ms", "5"];
    on(&db, &queued).expect(2);
    on(&db, &["start", "research-agent", "--input", INPUT, "--budgets", r#"{"nope": 1}"#])
        .expect(2);
}
