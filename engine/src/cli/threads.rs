//! `cairn threads` (a filtered, paged listing) and `cairn show THREAD` (one thread in detail),
//! through a running engine's endpoint when one serves the file, else from the file.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::{ThreadFilter, ThreadStatus};
use serde_json::Value;

use super::EXIT_FAILED;
use super::common::{
    Common, fail, open_read_only, parse_label, print_json, print_text, record_of, thread_id,
};
use super::endpoint;
use super::table::{Table, cut, short_json, time};
use crate::debug::views::{NaturalFirst, thread_details, thread_row, threads_page};
use crate::limits::SERVE_PAGE_MAX;

/// Arguments of `cairn threads`.
#[derive(Debug, clap::Args)]
pub struct ThreadsArgs {
    #[command(flatten)]
    common: Common,
    /// Only threads with this status (created, running, paused, waiting_input, sleeping,
    /// completed, failed, cancelled, timed_out, blocked, queued).
    #[arg(long)]
    status: Option<ThreadStatus>,
    /// Only threads of this workflow id.
    #[arg(long)]
    workflow: Option<String>,
    /// Only threads with this label (KEY=VALUE); give it several times for threads with
    /// every one of them.
    #[arg(long, value_parser = parse_label)]
    label: Vec<(String, String)>,
    /// Most threads listed (at least 1).
    #[arg(long, default_value_t = 100, value_parser = super::common::parse_positive)]
    limit: usize,
    /// Threads skipped first (in id order).
    #[arg(long, default_value_t = 0)]
    offset: usize,
}

/// Arguments of `cairn show`.
#[derive(Debug, clap::Args)]
pub struct ShowArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id.
    thread: String,
}

pub(super) async fn threads(args: ThreadsArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let filter =
        ThreadFilter { status: args.status, workflow_id: args.workflow, labels: args.label };
    let found = endpoint::through(&args.common.db, |ep| {
        rows_through(ep, &filter, args.offset, args.limit)
    })?;
    let rows = match found {
        Some(rows) => rows,
        None => {
            let engine = open_read_only(&args.common.db, wfs).await?;
            let records =
                threads_page(engine.store().as_ref(), &filter, args.offset, args.limit).await?;
            records.iter().map(thread_row).collect()
        }
    };
    if args.common.json {
        return print_json(&rows);
    }
    let mut table =
        Table::new(&["THREAD", "WORKFLOW", "STATUS", "STEP", "SEQ", "UPDATED", "PROGRESS"]);
    for r in &rows {
        let progress = match (&r["last_error"], &r["progress"]) {
            (Value::String(e), _) if r["status"] == "failed" => cut(e, 60),
            (_, p) if !p.is_null() => progress_text(&r["status"], p),
            _ => String::new(),
        };
        let w = &r["workflow"];
        table.row(vec![
            r["thread"].as_str().unwrap_or_default().to_owned(),
            format!("{} v{}", w["id"].as_str().unwrap_or_default(), w["version"]),
            r["status"].as_str().unwrap_or_default().to_owned(),
            if r["step"].is_null() { String::new() } else { r["step"].to_string() },
            r["last_seq"].as_u64().map(|s| s.to_string()).unwrap_or_default(),
            time(r["updated_at_ms"].as_u64().unwrap_or_default()),
            progress,
        ]);
    }
    if table.is_empty() {
        print_text("no threads match");
    } else {
        print_text(&table.render());
    }
    Ok(())
}

/// The listing through a running engine's endpoint: every matching thread is walked with the
/// cursor a page at a time and only the `offset + limit` first in natural order are kept, so the
/// rows are the file path's and memory holds those and one page.
fn rows_through(
    ep: &endpoint::Endpoint,
    filter: &ThreadFilter,
    offset: usize,
    limit: usize,
) -> anyhow::Result<Vec<Value>> {
    let mut query: Vec<(&str, String)> = vec![("limit", SERVE_PAGE_MAX.to_string())];
    if let Some(status) = filter.status {
        query.push(("status", status.to_string()));
    }
    if let Some(workflow) = &filter.workflow_id {
        query.push(("workflow", workflow.clone()));
    }
    if !filter.labels.is_empty() {
        let labels: Vec<String> = filter.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
        query.push(("label", labels.join(",")));
    }
    let mut first = NaturalFirst::new(offset.saturating_add(limit));
    let mut after: Option<String> = None;
    loop {
        let mut q = query.clone();
        if let Some(a) = &after {
            q.push(("after", a.clone()));
        }
        let mut page = ep.get("/api/threads", &q)?;
        if let Value::Array(rows) = page["threads"].take() {
            for row in rows {
                let id = row["thread"].as_str().unwrap_or_default().to_owned();
                first.offer(id, row);
            }
        }
        match page["next"].as_str() {
            // A cursor that does not move would walk forever: a broken or foreign server.
            Some(next) if after.as_deref() == Some(next) => {
                return Err(fail(
                    EXIT_FAILED,
                    format!("the endpoint's cursor did not move ({next})"),
                ));
            }
            Some(next) => after = Some(next.to_owned()),
            None => return Ok(first.finish(offset, limit)),
        }
    }
}

pub(super) async fn show(args: ShowArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let found = endpoint::through(&args.common.db, |ep| {
        thread_id(&args.thread)?;
        ep.get(&format!("/api/threads/{}", endpoint::segment(&args.thread)), &[])
    })?;
    let view = match found {
        Some(view) => view,
        None => {
            let engine = open_read_only(&args.common.db, wfs).await?;
            let record = record_of(&engine, &args.thread).await?;
            thread_details(&engine, &record).await?
        }
    };
    if args.common.json {
        return print_json(&view);
    }
    print_text(&render(&view));
    Ok(())
}

fn render(v: &Value) -> String {
    let mut t = Table::new(&["", ""]);
    let mut kv = |k: &str, v: String| t.row(vec![k.to_owned(), v]);
    let w = &v["workflow"];
    kv("thread", short_json(&v["thread"], 200));
    kv(
        "workflow",
        format!(
            "{} v{} ({})",
            w["id"].as_str().unwrap_or(""),
            w["version"],
            cut(w["fingerprint"].as_str().unwrap_or(""), 16)
        ),
    );
    kv("status", short_json(&v["status"], 40));
    kv("step", format!("{} (seq {}, first stored seq {})", v["step"], v["seq"], v["first_seq"]));
    let frontier: Vec<String> = v["frontier"]
        .as_array()
        .map(|a| a.iter().map(|n| short_json(n, 60)).collect())
        .unwrap_or_default();
    kv("frontier", if frontier.is_empty() { "(none: END)".into() } else { frontier.join(", ") });
    if !v["waiting"].is_null() {
        kv("waiting", short_json(&v["waiting"], 100));
    }
    if let Some(p) = v["progress"].as_object() {
        kv("progress", progress_text(&v["status"], &v["progress"]));
        if let Some(detail) = p.get("detail").and_then(Value::as_str) {
            kv("detail", cut(detail, 120));
        }
    }
    for link in ["continued_from", "continued_as"] {
        if let Some(thread) = v[link].as_str() {
            kv(link, thread.to_owned());
        }
    }
    kv("created", time(v["created_at_ms"].as_u64().unwrap_or(0)));
    kv("updated", time(v["updated_at_ms"].as_u64().unwrap_or(0)));
    if let Some(p) = v["parent"].as_object() {
        let thread = p["thread"].as_str().unwrap_or("");
        let parent = match (p["seq"].as_u64(), p["via"].as_str()) {
            (Some(seq), _) => format!("{thread} at seq {seq}"),
            (None, Some(via)) => format!("{thread} ({via})"),
            (None, None) => thread.to_owned(),
        };
        kv("parent", parent);
    }
    if let Some(labels) = v["labels"].as_object().filter(|l| !l.is_empty()) {
        let l: Vec<String> =
            labels.iter().map(|(k, x)| format!("{k}={}", short_json(x, 40))).collect();
        kv("labels", l.join(" "));
    }
    let tel = &v["telemetry"];
    kv(
        "telemetry",
        format!(
            "steps {}, tool calls {}, errors {}, retries {}, checkpoints {}",
            tel["steps"], tel["tool_calls"], tel["errors"], tel["retries"], tel["checkpoints"]
        ),
    );
    if let Some(nodes) = tel["node_ms"].as_object().filter(|n| !n.is_empty()) {
        let n: Vec<String> = nodes.iter().map(|(k, ms)| format!("{k} {ms} ms")).collect();
        kv("node time", n.join(", "));
    }
    let mut budgets = Vec::new();
    if let Some(b) = v["budgets"].as_object() {
        for (name, x) in b {
            match x["limit"].as_u64() {
                Some(limit) => budgets.push(format!("{name} {}/{limit}", x["used"])),
                None => budgets.push(format!("{name} {}", x["used"])),
            }
        }
    }
    kv("budgets used", budgets.join(", "));
    let locks: Vec<String> = v["locks"]
        .as_array()
        .map(|a| {
            a.iter()
                .map(|l| {
                    format!(
                        "{} (until {})",
                        l["name"].as_str().unwrap_or(""),
                        time(l["expires_at_ms"].as_u64().unwrap_or(0))
                    )
                })
                .collect()
        })
        .unwrap_or_default();
    kv("locks held", if locks.is_empty() { "none".into() } else { locks.join(", ") });
    if let Some(lease) = v["lease"].as_object() {
        kv(
            "lease",
            format!(
                "{} until {}",
                lease["owner"].as_str().unwrap_or(""),
                time(lease["expires_at_ms"].as_u64().unwrap_or(0))
            ),
        );
    }
    match v["last_error"].as_object() {
        Some(e) => kv(
            "last error",
            format!(
                "seq {} {}: {}",
                e["seq"],
                e["task"].as_str().unwrap_or(""),
                e["error"].as_str().unwrap_or("")
            ),
        ),
        None => match v["status_reason"].as_str() {
            Some(reason) => kv("last error", reason.to_owned()),
            None => kv("last error", "none".into()),
        },
    }
    if let Some(why) = v["state_unknown"].as_str() {
        kv("state", format!("not decodable here: {why}"));
    }
    t.render().lines().skip(1).map(|l| format!("{l}\n")).collect()
}

/// A thread's progress as shown: `step/total message`, or `done` for a completed thread whose
/// last report was short of its last step (a short route: the demo's direct answer reports
/// step 1 of 5 and ends).
fn progress_text(status: &Value, p: &Value) -> String {
    let (step, total) = (p["step"].as_u64(), p["total"].as_u64());
    if status == "completed" && step < total {
        return "done".into();
    }
    format!("{}/{} {}", p["step"], p["total"], p["message"].as_str().unwrap_or_default())
}
