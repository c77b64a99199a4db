//! `cairn threads` (a filtered, paged listing) and `cairn show THREAD` (one thread in detail).

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::{ThreadFilter, ThreadStatus};
use serde_json::Value;

use super::common::{Common, open_read_only, parse_label, print_json, print_text, record_of};
use super::table::{Table, cut, short_json, time};
use crate::debug::views::{record_summary, thread_details, thread_row, threads_page};

/// Arguments of `cairn threads`.
#[derive(Debug, clap::Args)]
pub struct ThreadsArgs {
    #[command(flatten)]
    common: Common,
    /// Only threads with this status (created, running, paused, waiting_input, sleeping,
    /// completed, failed, cancelled, timed_out, blocked).
    #[arg(long)]
    status: Option<ThreadStatus>,
    /// Only threads of this workflow id.
    #[arg(long)]
    workflow: Option<String>,
    /// Only threads with this label (KEY=VALUE).
    #[arg(long, value_parser = parse_label)]
    label: Option<(String, String)>,
    /// Most threads listed.
    #[arg(long, default_value_t = 100)]
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
    let engine = open_read_only(&args.common.db, wfs).await?;
    let filter =
        ThreadFilter { status: args.status, workflow_id: args.workflow, label: args.label };
    let records = threads_page(engine.store().as_ref(), &filter, args.offset, args.limit)?;
    if args.common.json {
        let rows: Vec<Value> = records.iter().map(thread_row).collect();
        return print_json(&rows);
    }
    let mut table =
        Table::new(&["THREAD", "WORKFLOW", "STATUS", "STEP", "SEQ", "UPDATED", "PROGRESS"]);
    for r in &records {
        let s = record_summary(r);
        let progress = match (s.get("last_error"), s.get("progress")) {
            (Some(Value::String(e)), _) if r.status == ThreadStatus::Failed => cut(e, 60),
            (_, Some(p)) if !p.is_null() => format!(
                "{}/{} {}",
                p["step"],
                p["total"],
                p["message"].as_str().unwrap_or_default()
            ),
            _ => String::new(),
        };
        table.row(vec![
            r.id.to_string(),
            format!("{} v{}", r.workflow.id, r.workflow.version),
            r.status.to_string(),
            s.get("step").map(Value::to_string).unwrap_or_default(),
            r.last.map(|b| b.seq.to_string()).unwrap_or_default(),
            time(r.updated_at_ms),
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

pub(super) async fn show(args: ShowArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let engine = open_read_only(&args.common.db, wfs).await?;
    let record = record_of(&engine, &args.thread)?;
    let view = thread_details(&engine, &record)?;
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
        kv(
            "progress",
            format!("{}/{} {}", p["step"], p["total"], p["message"].as_str().unwrap_or("")),
        );
        if let Some(detail) = p.get("detail").and_then(Value::as_str) {
            kv("detail", cut(detail, 120));
        }
    }
    kv("created", time(v["created_at_ms"].as_u64().unwrap_or(0)));
    kv("updated", time(v["updated_at_ms"].as_u64().unwrap_or(0)));
    if let Some(p) = v["parent"].as_object() {
        kv("parent", format!("{} at seq {}", p["thread"].as_str().unwrap_or(""), p["seq"]));
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
