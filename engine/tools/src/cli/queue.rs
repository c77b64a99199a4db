//! `cairn queue list|define`: named queues (`docs/queues.md`). A queue's threads are admitted
//! by whichever engine resumes work on the database (`cairn worker`, an embedded engine);
//! these commands read queues (through the endpoint of an engine serving the file, when one
//! does: `GET /api/queues`) and write their limits.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use cairn_storage::{QueueLimits, QueueState, RateLimit};

use super::common::{Common, open_read_only, open_writable, print_json, print_text, usage};
use super::table::Table;
use crate::debug::rows::QueuesPage;

/// `cairn queue ...`.
#[derive(Debug, clap::Args)]
pub struct QueueCommand {
    #[command(subcommand)]
    action: Action,
}

#[derive(Debug, clap::Subcommand)]
enum Action {
    /// Lists queues: limits, running and waiting threads, in all and per key.
    List(Common),
    /// Defines a queue, or replaces its limits (its threads are kept).
    Define(DefineArgs),
}

/// Arguments of `cairn queue define`.
#[derive(Debug, clap::Args)]
struct DefineArgs {
    #[command(flatten)]
    common: Common,
    /// The queue's name.
    #[arg(value_parser = parse_queue_name)]
    name: String,
    /// Threads of the queue running at once, at most.
    #[arg(long)]
    concurrency: Option<u32>,
    /// Threads of one key running at once, at most.
    #[arg(long)]
    per_key: Option<u32>,
    /// Starts per window, at most: N/DURATION, e.g. 100/60s, 5/1s (units ms, s, m, h).
    #[arg(long, value_parser = parse_rate)]
    rate: Option<RateLimit>,
    /// Starts of one key per window, at most (as --rate).
    #[arg(long, value_parser = parse_rate)]
    rate_per_key: Option<RateLimit>,
    /// Refuse a start over a rate (the caller hears when to retry) instead of keeping it
    /// waiting.
    #[arg(long)]
    rate_drops: bool,
    /// Debounce starts per key: a start supersedes the key's waiting one and runs after this
    /// quiet period (DURATION, e.g. 500ms, 2s).
    #[arg(long, value_parser = parse_duration_ms)]
    debounce: Option<u64>,
    /// Run a key's waiting starts as one batch run (its input: their inputs' list) once this
    /// many wait.
    #[arg(long)]
    batch_max: Option<u32>,
    /// ... or once the oldest has waited this long (DURATION).
    #[arg(long, value_parser = parse_duration_ms)]
    batch_window: Option<u64>,
    /// A key's fairness weight, KEY=N (repeatable; 1 to 1,000): between starts of equal
    /// priority, keys are admitted in proportion to their weights.
    #[arg(long = "weight", value_parser = parse_weight)]
    weights: Vec<(String, u32)>,
    /// The fairness weight of keys without a --weight (1 when absent).
    #[arg(long)]
    default_weight: Option<u32>,
}

/// `KEY=N`.
fn parse_weight(text: &str) -> Result<(String, u32), String> {
    let (key, n) = text.rsplit_once('=').ok_or_else(|| format!("{text:?}: use KEY=N"))?;
    let n = n.trim().parse().map_err(|_| format!("{text:?}: the weight is a number"))?;
    Ok((key.to_owned(), n))
}

/// A duration: N with a unit (ms, s, m, h; none is seconds).
fn parse_duration_ms(text: &str) -> Result<u64, String> {
    parse_rate(&format!("1/{text}")).map(|r| r.period_ms)
}

/// A queue name argument, checked as clap parses it: an empty or oversized name is a usage
/// error, in `queue define` and `start --queue` alike.
pub(super) fn parse_queue_name(name: &str) -> Result<String, String> {
    cairn_storage::check_queue_name(name).map(|()| name.to_owned()).map_err(|e| e.to_string())
}

fn parse_rate(text: &str) -> Result<RateLimit, String> {
    let bad = || format!("{text:?}: use N/DURATION, e.g. 100/60s");
    let (n, period) = text.split_once('/').ok_or_else(bad)?;
    let starts = n.trim().parse().map_err(|_| bad())?;
    let period = period.trim();
    let digits = period.trim_end_matches(|c: char| c.is_ascii_alphabetic());
    let unit_ms = match &period[digits.len()..] {
        "ms" => 1,
        "s" | "" => 1_000,
        "m" => 60_000,
        "h" => 3_600_000,
        _ => return Err(bad()),
    };
    let period_ms: u64 = digits.parse().map_err(|_| bad())?;
    Ok(RateLimit { starts, period_ms: period_ms.saturating_mul(unit_ms) })
}

/// A rate's period as `--rate` takes it, in the largest unit that divides it (`3600000` ms is
/// `1h`, `90000` is `90s`).
fn period(ms: u64) -> String {
    let units = [(3_600_000, "h"), (60_000, "m"), (1_000, "s")];
    match units.iter().find(|(unit, _)| ms > 0 && ms.is_multiple_of(*unit)) {
        Some((unit, name)) => format!("{}{name}", ms / unit),
        None => format!("{ms}ms"),
    }
}

pub(super) async fn command(cmd: QueueCommand, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    match cmd.action {
        Action::List(common) => {
            // Through the endpoint of an engine serving the file, if one does (its live store).
            let found = super::endpoint::through(&common.db, |ep| ep.get("/api/queues", &[]))?;
            if let Some(out) = found {
                let page: QueuesPage = crate::serve::wire::read(out, "queue list")?;
                return show(&page.queues, common.json);
            }
            let engine = open_read_only(&common.db, wfs).await?;
            let list = engine.queues().await;
            engine.shutdown().await;
            show(&list?, common.json)
        }
        Action::Define(args) => {
            let limits = QueueLimits {
                concurrency_max: args.concurrency,
                per_key_max: args.per_key,
                rate: args.rate,
                rate_per_key: args.rate_per_key,
                rate_drops: args.rate_drops,
                debounce_ms: args.debounce,
                batch_max: args.batch_max,
                batch_window_ms: args.batch_window,
                fairness: (!args.weights.is_empty() || args.default_weight.is_some()).then(|| {
                    cairn_storage::Fairness::new(args.default_weight.unwrap_or(1), args.weights)
                }),
            };
            limits.check().map_err(|e| usage(e.to_string()))?;
            let engine = open_writable(&args.common.db, wfs).await?;
            let defined = engine.define_queue(&args.name, limits).await;
            let list = engine.queues().await;
            engine.shutdown().await;
            defined?;
            let list: Vec<QueueState> = list?.into_iter().filter(|q| q.name == args.name).collect();
            show(&list, args.common.json)
        }
    }
}

fn show(list: &[QueueState], json: bool) -> anyhow::Result<()> {
    if json {
        return print_json(&list);
    }
    let limit = |n: Option<u32>| n.map_or_else(|| "-".to_string(), |n| n.to_string());
    let mut table = Table::new(&[
        "QUEUE",
        "KEY",
        "RUNNING",
        "WAITING",
        "CONCURRENCY",
        "PER KEY",
        "RATE",
        "FLOW",
    ]);
    for q in list {
        let rate = q
            .limits
            .rate
            .map_or_else(|| "-".into(), |r| format!("{}/{}", r.starts, period(r.period_ms)));
        table.row(vec![
            q.name.clone(),
            "*".into(),
            q.running.to_string(),
            q.waiting.to_string(),
            limit(q.limits.concurrency_max),
            limit(q.limits.per_key_max),
            rate,
            flow(&q.limits),
        ]);
        for (key, counts) in &q.keys {
            table.row(vec![
                String::new(),
                if key.is_empty() { "\"\"".into() } else { key.clone() },
                counts.running.to_string(),
                counts.waiting.to_string(),
                String::new(),
                String::new(),
                String::new(),
                String::new(),
            ]);
        }
    }
    print_text(&table.render());
    Ok(())
}

/// A queue's flow control in a few words (`-` for none): as `queue define` takes it.
fn flow(limits: &QueueLimits) -> String {
    let mut parts = Vec::new();
    if let Some(r) = limits.rate_per_key {
        parts.push(format!("rate-per-key {}/{}", r.starts, period(r.period_ms)));
    }
    if limits.rate_drops {
        parts.push("rate-drops".into());
    }
    if let Some(ms) = limits.debounce_ms {
        parts.push(format!("debounce {}", period(ms)));
    }
    if let Some(n) = limits.batch_max {
        parts.push(format!("batch-max {n}"));
    }
    if let Some(ms) = limits.batch_window_ms {
        parts.push(format!("batch-window {}", period(ms)));
    }
    if let Some(fair) = limits.fairness.as_ref().filter(|f| f.differs()) {
        let each: Vec<String> = fair.weights.iter().map(|(k, w)| format!("{k}={w}")).collect();
        parts.push(format!("weights {} (others {})", each.join(" "), fair.default_weight.max(1)));
    }
    if parts.is_empty() { "-".into() } else { parts.join(", ") }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rates_parse_with_units() {
        assert_eq!(parse_rate("100/60s"), Ok(RateLimit { starts: 100, period_ms: 60_000 }));
        assert_eq!(parse_rate("5/250ms"), Ok(RateLimit { starts: 5, period_ms: 250 }));
        assert_eq!(parse_rate("2/1h"), Ok(RateLimit { starts: 2, period_ms: 3_600_000 }));
        // Listed as it is written.
        for (ms, text) in [(3_600_000, "1h"), (90_000, "90s"), (120_000, "2m"), (250, "250ms")] {
            assert_eq!(period(ms), text);
            assert_eq!(parse_rate(&format!("1/{text}")).map(|r| r.period_ms), Ok(ms));
        }
        assert!(parse_rate("5").is_err());
        assert!(parse_rate("x/1s").is_err());
        assert!(parse_rate("5/1y").is_err());
        assert_eq!(parse_duration_ms("500ms"), Ok(500));
        let limits =
            QueueLimits { debounce_ms: Some(2_000), rate_drops: true, ..QueueLimits::default() };
        assert_eq!(flow(&limits), "rate-drops, debounce 2s");
        let fair = cairn_storage::Fairness::new(1, [("gold".to_owned(), 3)]);
        let weighted = QueueLimits { fairness: Some(fair), ..QueueLimits::default() };
        assert_eq!(flow(&weighted), "weights gold=3 (others 1)");
        assert_eq!(parse_weight("a=b=2"), Ok(("a=b".to_owned(), 2)));
        assert!(parse_weight("gold").is_err() && parse_weight("gold=x").is_err());
    }
}
