//! `cairn threads` (a filtered, paged listing) and `cairn show THREAD` (one thread in detail),
//! through a running engine's endpoint when one serves the file, else from the file.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::{ThreadFilter, ThreadStatus};

use super::EXIT_FAILED;
use super::common::{Common, fail, open_read_only, parse_label, print_json, print_text, record_of};
use super::control::ThreadArgs;
use super::endpoint;
use super::table::{Table, cut, short_json, time};
use crate::debug::rows::{
    Budget, Budgets, Redactable, Sealable, ThreadDetails, ThreadRow, ThreadsPage,
};
use crate::debug::views::{NaturalFirst, thread_details, thread_row, threads_page};
use crate::limits::SERVE_PAGE_MAX;
use crate::serve::wire;
use cairn::sealing::Placeholder;

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
        let progress = match &r.last_error {
            Some(e) if r.status == "failed" => cut(e, 60),
            _ => r.progress_text.clone().unwrap_or_default(),
        };
        table.row(vec![
            r.thread.clone(),
            format!("{} v{}", r.workflow.id, r.workflow.version),
            r.status.clone(),
            r.step.map(|s| s.to_string()).unwrap_or_default(),
            r.last_seq.map(|s| s.to_string()).unwrap_or_default(),
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

/// The listing through a running engine's endpoint: every matching thread is walked with the
/// cursor a page at a time and only the `offset + limit` first in natural order are kept, so the
/// rows are the file path's and memory holds those and one page.
fn rows_through(
    ep: &endpoint::Endpoint,
    filter: &ThreadFilter,
    offset: usize,
    limit: usize,
) -> anyhow::Result<Vec<ThreadRow>> {
    let mut query: Vec<(&str, String)> = vec![("limit", SERVE_PAGE_MAX.to_string())];
    query.extend(filter.status.map(|s| ("status", s.to_string())));
    query.extend(filter.workflow_id.iter().map(|w| ("workflow", w.clone())));
    let labels: Vec<String> = filter.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    query.extend((!labels.is_empty()).then(|| ("label", labels.join(","))));
    let mut first = NaturalFirst::new(offset.saturating_add(limit));
    let mut after: Option<String> = None;
    loop {
        let mut q = query.clone();
        if let Some(a) = &after {
            q.push(("after", a.clone()));
        }
        let page: ThreadsPage = wire::read(ep.get("/api/threads", &q)?, "page of threads")?;
        for row in page.threads {
            first.offer(row.thread.clone(), row);
        }
        match page.next.as_deref() {
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

pub(super) async fn show(args: ThreadArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let found = endpoint::through(&args.common.db, |ep| {
        let answer = ep.get(&format!("/api/threads/{}", endpoint::segment(&args.thread)), &[])?;
        Ok(wire::read::<ThreadDetails>(answer, "thread")?)
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

fn render(v: &ThreadDetails) -> String {
    let mut t = Table::new(&["", ""]);
    let mut kv = |k: &str, v: String| t.pair(k, v);
    let w = &v.workflow;
    kv("thread", cut(&v.thread, 200));
    kv("workflow", format!("{} v{} ({})", w.id, w.version, cut(&w.fingerprint, 16)));
    kv("status", cut(&v.status, 40));
    kv("step", format!("{} (seq {}, first stored seq {})", v.step, v.seq, v.first_seq));
    let frontier: Vec<String> = v.frontier.iter().map(|n| cut(n, 60)).collect();
    kv("frontier", if frontier.is_empty() { "(none: END)".into() } else { frontier.join(", ") });
    if let Some(waiting) = &v.waiting {
        kv("waiting", sealed_or(waiting, |w| short_json(w, 100)));
    }
    if let Some(p) = &v.progress {
        kv("progress", v.progress_text.clone().unwrap_or_default());
        if let Some(detail) = &p.detail {
            kv("detail", cut(detail, 120));
        }
    }
    for (link, thread) in [("continued_from", &v.continued_from), ("continued_as", &v.continued_as)]
    {
        match thread {
            Some(Sealable::Open(thread)) => kv(link, thread.clone()),
            Some(Sealable::Sealed(p)) => kv(link, encrypted(p)),
            None => {}
        }
    }
    kv("created", time(v.created_at_ms));
    kv("updated", time(v.updated_at_ms));
    if let Some(p) = &v.parent {
        kv(
            "parent",
            match (p.seq, &p.via) {
                (Some(seq), _) => format!("{} at seq {seq}", p.thread),
                (None, Some(via)) => format!("{} ({via})", p.thread),
                (None, None) => p.thread.clone(),
            },
        );
    }
    if !v.labels.is_empty() {
        let l: Vec<String> = v.labels.iter().map(|(k, x)| format!("{k}={}", cut(x, 40))).collect();
        kv("labels", l.join(" "));
    }
    match &v.telemetry {
        Sealable::Open(tel) => {
            kv(
                "telemetry",
                format!(
                    "steps {}, tool calls {}, errors {}, retries {}, checkpoints {}",
                    tel.steps, tel.tool_calls, tel.errors, tel.retries, tel.checkpoints
                ),
            );
            if !tel.node_ms.is_empty() {
                let n: Vec<String> =
                    tel.node_ms.iter().map(|(k, ms)| format!("{k} {ms} ms")).collect();
                kv("node time", n.join(", "));
            }
        }
        Sealable::Sealed(p) => kv("telemetry", encrypted(p)),
    }
    kv("budgets used", budgets(&v.budgets));
    let locks: Vec<String> =
        v.locks.iter().map(|l| format!("{} (until {})", l.name, time(l.expires_at_ms))).collect();
    kv("locks held", if locks.is_empty() { "none".into() } else { locks.join(", ") });
    if let Some(lease) = &v.lease {
        kv("lease", format!("{} until {}", lease.owner, time(lease.expires_at_ms)));
    }
    let last_error = match (&v.last_error, &v.status_reason) {
        (Some(Sealable::Open(e)), _) => format!("seq {} {}: {}", e.seq, e.task, e.error),
        (Some(Sealable::Sealed(_)) | None, Some(reason)) => reason.clone(),
        (Some(Sealable::Sealed(p)), None) => encrypted(p),
        (None, None) => "none".into(),
    };
    kv("last error", last_error);
    if let Some(why) = &v.state_unknown {
        kv("state", format!("not decodable here: {why}"));
    }
    t.render()
}

/// A value sealed with a key this reader lacks, as `show` prints it.
fn encrypted(p: &Placeholder) -> String {
    format!("encrypted (key {}, codec {})", p.key, p.codec)
}

/// `value` shown by `show`, or [`encrypted`] for a placeholder.
fn sealed_or(value: &serde_json::Value, show: impl Fn(&serde_json::Value) -> String) -> String {
    Placeholder::of_json(value).map_or_else(|| show(value), |p| encrypted(&p))
}

/// The budgets' use, one line.
fn budgets(b: &Sealable<Budgets>) -> String {
    let b = match b {
        Sealable::Open(b) => b,
        Sealable::Sealed(p) => return encrypted(p),
    };
    let tokens = match &b.tokens {
        Redactable::Shown(used) => budget("tokens", used),
        Redactable::Redacted(text) => format!("tokens {text}"),
    };
    let (cost, steps) = (budget("cost_micros", &b.cost_micros), budget("steps", &b.steps));
    let (calls, wall) = (budget("tool_calls", &b.tool_calls), budget("wall_ms", &b.wall_ms));
    [cost, steps, tokens, calls, wall].join(", ")
}

/// One budget as shown: `name used/limit`, or `name used` without a limit.
fn budget(name: &str, b: &Budget) -> String {
    match b.limit {
        Some(limit) => format!("{name} {}/{limit}", b.used),
        None => format!("{name} {}", b.used),
    }
}
