//! Graphs of compiled-in workflows, message tracing across threads, usage errors.

use std::sync::Arc;

use cairn::dsl::Message;
use cairn::{Ctx, END, Engine, NodeOutput, Replace, START, StartOptions, Workflow};

use crate::harness::{cairn, demo_db, on, tempdir};

#[test]
fn graph_prints_the_demo_workflow_as_dot_or_mermaid() {
    let dot = cairn(&["graph", "research-agent", "--format", "dot"]).expect(0);
    assert!(dot.stdout.starts_with("digraph"), "{}", dot.stdout);
    for node in ["classify", "plan", "search_web", "synthesize", "review", "finalize"] {
        assert!(dot.stdout.contains(node), "{node} in the graph");
    }
    let mermaid = cairn(&["graph", "research-agent", "--format", "mermaid"]).expect(0);
    assert!(mermaid.stdout.starts_with("flowchart"), "{}", mermaid.stdout);
    let json = cairn(&["graph", "research-agent", "--json"]).expect(0).json();
    assert_eq!(json["version"], 1);
    assert_eq!(json["format"], "dot");
    let unknown = cairn(&["graph", "nope"]).expect(2);
    assert!(unknown.stderr.contains("workflow nope is not registered"), "{}", unknown.stderr);
    assert!(unknown.stderr.contains("research-agent v1"), "names what is known");
    cairn(&["graph", "research-agent", "--format", "svg"]).expect(2);
}

#[test]
fn usage_errors_exit_2() {
    cairn(&["no-such-command"]).expect(2);
    on(demo_db(), &["threads", "--no-such-flag"]).expect(2);
    on(demo_db(), &["threads", "--label", "no-equals-sign"]).expect(2);
    on(demo_db(), &["threads", "--status", "bogus"]).expect(2);
    on(demo_db(), &["show"]).expect(2);
    let help = cairn(&["--help"]).expect(0);
    assert!(help.stdout.contains("Exit codes"), "{}", help.stdout);
    assert!(!help.stdout.contains("__hold"), "the internal command is hidden");
}

/// Two threads exchange messages tagged with correlation ids; a third talks about something else.
fn messaging_workflow() -> Workflow<Replace<String>> {
    Workflow::<Replace<String>>::builder("messaging", 1)
        .node("ask", |s: Arc<Replace<String>>, ctx: Ctx| async move {
            let topic = s.0.clone();
            ctx.message(
                Message::new("planner", format!("request about {topic}"))
                    .to("coder")
                    .correlation_id(topic.clone()),
            );
            ctx.message(
                Message::new("coder", format!("reply about {topic}"))
                    .to("planner")
                    .correlation_id(topic.clone()),
            );
            ctx.message(Message::new("coder", "untagged chatter"));
            Ok(NodeOutput::update(format!("{topic} done")))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .build()
        .expect("valid workflow")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn trace_finds_every_message_of_a_correlation_id_across_threads() {
    let dir = tempdir();
    let db = dir.path().join("messages.db");
    let wf = messaging_workflow();
    let engine = Engine::builder(&db).workflow(&wf).open().await.expect("open");
    for (id, topic) in [("t-a", "corr-7"), ("t-b", "corr-7"), ("t-c", "corr-9")] {
        let handle = engine
            .start_json("messaging", topic.to_owned(), StartOptions::id(id))
            .await
            .expect("start");
        handle.finished().await.expect("finished");
    }
    engine.shutdown().await;
    drop(engine);

    let found = on(&db, &["trace", "corr-7", "--json"]).expect(0).json();
    let found = found.as_array().expect("array");
    assert_eq!(found.len(), 4, "two messages in each of t-a and t-b: {found:?}");
    let threads: Vec<&str> = found.iter().map(|m| m["thread"].as_str().expect("thread")).collect();
    assert_eq!(threads, ["t-a", "t-a", "t-b", "t-b"], "in log (lsn) order");
    assert_eq!(found[0]["role"], "planner");
    assert_eq!(found[0]["to"], "coder");
    assert_eq!(found[1]["content"], "reply about corr-7");
    assert_eq!(found[0]["node"], "ask");
    let lsns: Vec<u64> = found.iter().map(|m| m["lsn"].as_u64().expect("lsn")).collect();
    assert!(lsns.windows(2).all(|w| w[0] < w[1]));
    let table = on(&db, &["trace", "corr-9"]).expect(0);
    assert!(table.stdout.starts_with("LSN"), "{}", table.stdout);
    assert_eq!(table.stdout.lines().count(), 3, "header and two messages:\n{}", table.stdout);
    assert!(table.stdout.lines().skip(1).all(|l| l.contains("t-c")));
    // One session only, read through its own log; and between two parties, either way.
    let t_b = on(&db, &["trace", "corr-7", "--thread", "t-b", "--json"]).expect(0).json();
    let t_b: Vec<&str> =
        t_b.as_array().expect("array").iter().map(|m| m["thread"].as_str().unwrap()).collect();
    assert_eq!(t_b, ["t-b", "t-b"]);
    let args = ["trace", "--thread", "t-c", "--between", "coder", "planner", "--json"];
    let between = on(&db, &args).expect(0).json();
    assert_eq!(between.as_array().expect("array").len(), 2, "{between}");
    let none = on(&db, &["trace", "corr-404"]).expect(0);
    assert!(none.stdout.contains("no messages carry correlation id corr-404"));
    // A thread of a workflow this binary does not have: inspection works, the state is unknown.
    let shown = on(&db, &["show", "t-a", "--json"]).expect(0).json();
    assert_eq!(shown["status"], "completed");
    assert!(shown["state_unknown"].as_str().expect("why").contains("messaging"));
    let text = on(&db, &["show", "t-a"]).expect(0);
    assert!(text.stdout.contains("not decodable here"), "{}", text.stdout);
    let state = on(&db, &["state", "t-a"]).expect(1);
    assert!(state.stderr.contains("compiled into the binary"), "{}", state.stderr);
    on(&db, &["events", "t-a"]).expect(0);
    on(&db, &["verify"]).expect(0);
}

/// `workflows` lists what the binary has, `graph` refuses a database it would not read, thread
/// listings are in natural order, and `fork --update` reads a large update from a file or stdin.
#[test]
fn workflows_graph_natural_order_and_fork_updates_from_a_file_or_stdin() {
    use std::io::Write as _;
    let listed = crate::harness::cairn(&["workflows", "--json"]).expect(0).json();
    assert_eq!(listed[0]["id"], "research-agent", "{listed}");
    assert!(listed[0]["nodes"].as_u64().is_some_and(|n| n > 3), "{listed}");
    let refused = crate::harness::cairn(&["graph", "research-agent", "--db", "x.db"]).expect(2);
    assert!(refused.stderr.contains("--db"), "{}", refused.stderr);

    let dir = crate::harness::tempdir();
    let db = dir.path().join("twelve.db");
    crate::harness::on(&db, &["demo", "--threads", "12", "--quiet"]).expect(0);
    let list = crate::harness::on(&db, &["threads", "--json"]).expect(0).json();
    let ids: Vec<&str> =
        list.as_array().expect("rows").iter().map(|r| r["thread"].as_str().expect("id")).collect();
    let natural: Vec<String> = (0..12).map(|i| format!("demo-{i}")).collect();
    assert_eq!(ids, natural, "demo-2 before demo-10");
    let page = crate::harness::on(&db, &["threads", "--json", "--offset", "9", "--limit", "2"])
        .expect(0)
        .json();
    assert_eq!(page[0]["thread"], "demo-9", "paging follows the natural order: {page}");
    assert_eq!(page[1]["thread"], "demo-10", "{page}");

    let update = dir.path().join("update.json");
    std::fs::write(&update, r#"{"Plan":["from","a","file"]}"#).expect("write");
    let at_file = format!("@{}", update.display());
    let forked =
        crate::harness::on(&db, &["fork", "demo-1", "--at", "14", "--update", &at_file, "--json"])
            .expect(0)
            .json();
    assert_eq!(forked["status"], "completed", "{forked}");
    let mut child = std::process::Command::new(crate::harness::bin())
        .args(["fork", "demo-1", "--at", "14", "--update", "-", "--json", "--db"])
        .arg(&db)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("spawn");
    child.stdin.take().expect("stdin").write_all(br#"{"Plan":["from","stdin"]}"#).expect("write");
    let out = child.wait_with_output().expect("wait");
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stdout));
    let missing =
        crate::harness::on(&db, &["fork", "demo-1", "--at", "14", "--update", "@nope.json"])
            .expect(2);
    assert!(missing.stderr.contains("cannot read the file"), "{}", missing.stderr);
}

/// The demo ends by saying where to look next: the database, a thread's details and log, and
/// the endpoint, each command running as printed in the shell that ran the demo. With no `cairn`
/// on the PATH (after `cargo run --release -- demo`) it names this binary by its path, with the
/// line that installs `cairn` (it said `cairn show demo-0`, which that shell did not find).
#[test]
fn the_demo_says_where_to_look_next() {
    let dir = crate::harness::tempdir();
    let db = dir.path().join("next.db");
    let path = std::path::absolute(&db).unwrap().display().to_string();
    let bin = std::path::Path::new(crate::harness::bin());
    let bin_dir = bin.parent().expect("the binary's directory");
    // The working directory holds the binary two levels down: `./debug/cairn`, say.
    let cwd = bin_dir.parent().expect("the target directory");
    let bare = "/usr/bin:/bin".to_owned();
    let with_cairn = format!("{}:{bare}", bin_dir.display());
    let shell = |command: &str, path_var: &str| {
        std::process::Command::new("sh")
            .args(["-c", command])
            .current_dir(cwd)
            .env("PATH", path_var)
            .env_remove("CAIRN_LOG")
            .stdin(std::process::Stdio::null())
            .output()
            .expect("sh runs")
    };
    let demo = |path_var: &str| {
        let command = format!("{} demo --threads 2 --quiet --db {path}", bin.display());
        let out = shell(&command, path_var);
        assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    // The printed commands, as a reader copies them: what follows `look next:` up to the comment.
    let commands = |out: &str| -> Vec<String> {
        let start = out.find("look next:").unwrap_or_else(|| panic!("{out}"));
        out[start + "look next:".len()..]
            .lines()
            .filter_map(|line| line.split(" #").next())
            .map(str::trim)
            .filter(|c| c.contains(" --db "))
            .map(str::to_owned)
            .collect()
    };

    for path_var in [&bare, &with_cairn] {
        let out = demo(path_var);
        assert!(out.contains(&format!("database: {path}")), "{out}");
        let printed = commands(&out);
        assert_eq!(printed.len(), 3, "show, events, serve: {out}");
        let program = if path_var == &bare {
            assert!(
                out.contains("cargo install --locked --path engine --features cli"),
                "the install line: {out}"
            );
            format!("./{}", bin.strip_prefix(cwd).unwrap().display())
        } else {
            assert!(!out.contains("cargo install"), "{out}");
            "cairn".to_owned()
        };
        assert_eq!(printed[0], format!("{program} show demo-0 --db {path}"), "{out}");
        assert_eq!(printed[2], format!("{program} serve --db {path}"), "{out}");
        // The show and events commands work as printed, in the demo's shell.
        for command in &printed[..2] {
            let ran = shell(command, path_var);
            let stderr = String::from_utf8_lossy(&ran.stderr);
            assert!(ran.status.success(), "`{command}` with PATH={path_var}: {stderr}");
        }
    }
    let json = crate::harness::on(&db, &["demo", "--threads", "2", "--quiet", "--json"]).expect(0);
    assert!(!json.stdout.contains("look next"), "--json prints JSON lines only");
}

/// The demo's result table labels every column and says what its digest and the id ending an
/// answer are; it prints no address of its endpoint (which ends with it, issue 38: a newcomer
/// opened it after the demo and found nothing) but the `cairn serve` that serves the file after
/// it, with the web view.
#[test]
fn the_demos_table_is_labelled_and_it_prints_no_address_that_dies_with_it() {
    let dir = crate::harness::tempdir();
    let db = dir.path().join("labelled.db");
    let out = crate::harness::on(&db, &["demo", "--threads", "8", "--quiet"]).expect(0).stdout;
    let lines: Vec<&str> = out.lines().collect();
    let header = lines.iter().position(|l| l.starts_with("THREAD")).expect(&out);
    let columns: Vec<&str> = lines[header].split("  ").filter(|c| !c.is_empty()).collect();
    let columns: Vec<&str> = columns.iter().map(|c| c.trim()).collect();
    assert_eq!(columns, ["THREAD", "STATUS", "OUTPUT DIGEST", "ANSWER"], "{out}");
    // Each row's cells start under their headers.
    let at = |c: &str| lines[header].find(c).unwrap();
    for row in &lines[header + 1..header + 9] {
        assert!(row.starts_with("demo-"), "{out}");
        for c in ["STATUS", "OUTPUT DIGEST", "ANSWER"] {
            let cell = &row[at(c)..];
            assert!(row[..at(c)].ends_with(' ') && !cell.starts_with(' '), "{c} in {row:?}");
        }
    }
    assert!(lines[header + 1].contains("completed"), "{out}");
    assert!(out.contains("OUTPUT DIGEST: the first 16 hex digits of the BLAKE3 hash"), "{out}");
    assert!(out.contains("[8 hex digits] ending an ANSWER: an id\nthe workflow drew"), "{out}");
    assert!(!out.contains("http://"), "an address that ends with the demo: {out}");
    let path = std::path::absolute(&db).unwrap().display().to_string();
    let serve = format!("cairn serve --db {path}");
    let serve = lines.iter().find(|l| l.contains(&serve)).expect(&out);
    assert!(serve.contains("the web view"), "{serve}");
}

/// `cairn demo | head -0`: with its reader gone before it prints, the demo's output stops at the
/// closed pipe and the process ends quietly (exit 0, no panic), as every other command's does.
#[test]
fn the_demo_ends_quietly_when_its_reader_goes_away() {
    let dir = tempdir();
    let db = dir.path().join("piped.db");
    let mut child = std::process::Command::new(crate::harness::bin())
        .args(["demo", "--threads", "3", "--quiet", "--no-serve", "--db"])
        .arg(&db)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("cairn demo starts");
    // The read end closes before the demo prints anything: its first write meets a closed pipe.
    drop(child.stdout.take());
    let done = child.wait_with_output().expect("cairn demo ends");
    let stderr = String::from_utf8_lossy(&done.stderr);
    assert!(!stderr.contains("panicked"), "{stderr}");
    assert_eq!(done.status.code(), Some(0), "{stderr}");
    // It finished its work before it printed.
    on(&db, &["verify"]).expect(0);
}
