//! Read-only commands on a demo database: tables, `--json`, filters.

use serde_json::Value;

use crate::harness::{demo_db, events, on};

/// How many events of `kind` a log holds.
fn count(log: &[Value], kind: &str) -> u64 {
    log.iter().filter(|e| e["kind"] == kind).count() as u64
}

/// The character offset of each header word in the first line of a table.
fn column_starts(table: &str, headers: &[&str]) -> Vec<usize> {
    let header = table.lines().next().expect("a header line");
    headers.iter().map(|h| header.find(h).unwrap_or_else(|| panic!("{h} in {header}"))).collect()
}

#[test]
fn threads_lists_every_demo_thread_as_an_aligned_table() {
    let run = on(demo_db(), &["threads"]).expect(0);
    let starts = column_starts(&run.stdout, &["THREAD", "WORKFLOW", "STATUS", "STEP", "SEQ"]);
    let rows: Vec<&str> = run.stdout.lines().skip(1).collect();
    assert_eq!(rows.len(), 3, "{}", run.stdout);
    for (row, id) in rows.iter().zip(["demo-0", "demo-1", "demo-2"]) {
        assert!(row.starts_with(id), "{row}");
        assert_eq!(&row[starts[1]..starts[1] + 17], "research-agent v1", "{row}");
        assert_eq!(&row[starts[2]..starts[2] + 9], "completed", "{row}");
    }
}

#[test]
fn threads_json_filters_and_pages() {
    let all = on(demo_db(), &["threads", "--json"]).expect(0).json();
    let all = all.as_array().expect("an array");
    assert_eq!(all.len(), 3);
    let demo1 = &all[1];
    assert_eq!(demo1["thread"], "demo-1");
    assert_eq!(demo1["status"], "completed");
    assert_eq!(demo1["workflow"]["id"], "research-agent");
    assert_eq!(demo1["labels"]["demo"], "1");
    let log = events(demo_db(), "demo-1");
    assert_eq!(demo1["step"], count(&log, "step_completed"));
    assert_eq!(demo1["last_seq"], log.len() as u64);

    let ids = |args: &[&str]| -> Vec<String> {
        let mut all = vec!["threads", "--json"];
        all.extend(args);
        on(demo_db(), &all)
            .expect(0)
            .json()
            .as_array()
            .expect("array")
            .iter()
            .map(|t| t["thread"].as_str().expect("id").to_owned())
            .collect()
    };
    assert_eq!(ids(&["--status", "completed"]).len(), 3);
    assert!(ids(&["--status", "running"]).is_empty());
    assert_eq!(ids(&["--workflow", "research-agent", "--limit", "1", "--offset", "1"]), ["demo-1"]);
    assert_eq!(ids(&["--label", "demo=1"]).len(), 3);
    assert!(ids(&["--label", "demo=2"]).is_empty());
    assert!(ids(&["--workflow", "other"]).is_empty());
    let none = on(demo_db(), &["threads", "--status", "failed"]).expect(0);
    assert_eq!(none.stdout.trim(), "no threads match");
}

#[test]
fn show_reports_status_frontier_telemetry_budgets_locks_and_errors() {
    let run = on(demo_db(), &["show", "demo-1"]).expect(0);
    for expected in [
        "status        completed",
        "frontier      (none: END)",
        "progress      5/5 done",
        "labels        demo=1",
        "locks held    none",
        "last error    none",
    ] {
        assert!(run.stdout.contains(expected), "{expected:?} in\n{}", run.stdout);
    }
    let log = events(demo_db(), "demo-1");
    let steps = count(&log, "step_completed");
    let tools = count(&log, "tool_called");
    assert!(steps >= 6 && tools >= 5, "the research path: {steps} steps, {tools} tool calls");
    let telemetry = format!("telemetry     steps {steps}, tool calls {tools}, errors 0, retries 0");
    assert!(run.stdout.contains(&telemetry), "{telemetry:?} in\n{}", run.stdout);
    let v = on(demo_db(), &["show", "demo-1", "--json"]).expect(0).json();
    assert_eq!(v["status"], "completed");
    assert_eq!(v["telemetry"]["steps"], steps);
    assert_eq!(v["budgets"]["steps"]["used"], steps);
    assert_eq!(v["budgets"]["tool_calls"]["used"], tools);
    assert_eq!(v["frontier"], Value::Array(vec![]));
    assert!(v["output"]["answer"].as_str().expect("answer").starts_with("A structured answer"));
    assert_eq!(v["locks"], Value::Array(vec![]));
    assert!(v["last_error"].is_null());
    assert!(v["state_unknown"].is_null(), "the demo workflow is compiled in");
}

#[test]
fn show_and_events_name_an_unknown_thread() {
    let run = on(demo_db(), &["show", "nope"]).expect(1);
    assert!(run.stderr.contains("no thread nope"), "{}", run.stderr);
    on(demo_db(), &["events", "nope"]).expect(1);
}

#[test]
fn events_filter_by_kind_and_seq() {
    let all = events(demo_db(), "demo-1");
    assert_eq!(all[0]["kind"], "thread_created");
    assert_eq!(all[0]["body"]["type"], "thread_created");
    for (i, e) in all.iter().enumerate() {
        assert_eq!(e["seq"], i as u64 + 1, "seqs from 1 without gaps");
    }
    let completed =
        on(demo_db(), &["events", "demo-1", "--kind", "node_completed", "--json"]).expect(0).json();
    let completed = completed.as_array().expect("array");
    assert_eq!(completed.len() as u64, count(&all, "node_completed"));
    assert!(completed.len() >= 6, "every node of the research path completed: {completed:?}");
    assert!(completed.iter().all(|e| e["kind"] == "node_completed"));
    let since = on(demo_db(), &["events", "demo-1", "--since", "40", "--json"]).expect(0).json();
    let since = since.as_array().expect("array");
    assert_eq!(since.len(), all.len() - 40);
    assert_eq!(since[0]["seq"], 41);
    let table = on(demo_db(), &["events", "demo-0"]).expect(0);
    let lines: Vec<&str> = table.stdout.lines().collect();
    assert!(lines[0].starts_with("SEQ"), "{}", table.stdout);
    assert_eq!(lines.len(), 1 + events(demo_db(), "demo-0").len());
    assert!(lines[1].contains("thread_created"));
    let bad = on(demo_db(), &["events", "demo-0", "--kind", "no_such_kind"]).expect(2);
    assert!(bad.stderr.contains("no_such_kind"), "{}", bad.stderr);
}

#[test]
fn checkpoints_list_and_show() {
    let list = on(demo_db(), &["checkpoints", "--json"]).expect(0).json();
    let list = list.as_array().expect("array");
    assert!(list.len() >= 3, "a completion checkpoint per thread at least: {list:?}");
    let mine =
        on(demo_db(), &["checkpoints", "--thread", "demo-1", "--kind", "completion", "--json"])
            .expect(0)
            .json();
    let mine = mine.as_array().expect("array");
    assert_eq!(mine.len(), 1);
    let id = mine[0]["id"].as_u64().expect("id");
    assert_eq!(mine[0]["thread"], "demo-1");
    let table = on(demo_db(), &["checkpoints", "--thread", "demo-1"]).expect(0);
    assert!(table.stdout.starts_with("ID"), "{}", table.stdout);
    let shown = on(demo_db(), &["checkpoint", "show", &id.to_string(), "--json"]).expect(0).json();
    assert_eq!(shown["kind"], "completion");
    assert_eq!(shown["status"], "completed");
    assert!(shown["state"]["answer"].as_str().expect("answer").starts_with("A structured"));
    let text = on(demo_db(), &["checkpoint", "show", &id.to_string()]).expect(0);
    assert!(text.stdout.contains("\"answer\""), "{}", text.stdout);
    on(demo_db(), &["checkpoint", "show", "999999"]).expect(1);
}
