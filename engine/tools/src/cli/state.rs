//! `cairn state THREAD [--at SEQ | --at-time MS] [--diff SEQ SEQ]`: time travel over a thread's log (the user
//! state needs the workflow compiled into the binary: it is folded by the workflow's reducer).

use std::sync::Arc;

use cairn_dsl::DynWorkflow;

use super::common::{Common, argument_error, open_read_only, print_json, print_text, record_of};
use super::endpoint;
use super::table::{pretty, short_json};
use crate::debug::rows::{SessionAt, StateDiff, StateRow};
use crate::debug::views::state_at;
use crate::serve::wire;

/// Arguments of `cairn state`.
#[derive(Debug, clap::Args)]
pub struct StateArgs {
    #[command(flatten)]
    common: Common,
    /// The thread id.
    #[arg(value_parser = super::common::parse_thread_id)]
    thread: String,
    /// The state after the event at this seq (default: after the last event).
    #[arg(long, conflicts_with_all = ["diff", "at_time"])]
    at: Option<u64>,
    /// The state as it stood at this time (ms since the epoch, engine clock): after the last
    /// event recorded at or before it.
    #[arg(long, value_name = "MS", conflicts_with = "diff")]
    at_time: Option<u64>,
    /// What changed between the states after two seqs (JSON pointers).
    #[arg(long, num_args = 2, value_names = ["SEQ", "SEQ"])]
    diff: Option<Vec<u64>>,
    /// With --at-time: the thread and every thread it started (sub-workflow and child
    /// threads, at any depth), each as it stood then (read from the file).
    #[arg(long, requires = "at_time")]
    session: bool,
}

pub(super) async fn state(args: StateArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    if let (true, Some(at_ms)) = (args.session, args.at_time) {
        return session(&args, at_ms, wfs).await;
    }
    let found = match endpoint::through(&args.common.db, |ep| through(ep, &args))? {
        Some(found) => found,
        None => {
            let engine = open_read_only(&args.common.db, wfs).await?;
            let record = record_of(&engine, &args.thread).await?;
            // A time the thread has no state at is a bad argument (exit 2), as a seq is.
            match args.diff.as_deref() {
                Some([a, b]) => Found::Diff(
                    crate::Operator::new(&engine)
                        .diff(&args.thread, *a, *b)
                        .await
                        .map_err(argument_error)?,
                ),
                _ => Found::View(
                    state_at(&engine, &record, args.at, args.at_time)
                        .await
                        .map_err(argument_error)?,
                ),
            }
        }
    };
    let view = match found {
        Found::View(view) => view,
        Found::Diff(changes) => return print_diff(&args, changes),
    };
    if args.common.json {
        return print_json(&view);
    }
    let text = match (&view.step, &view.status, &view.frontier) {
        (Some(step), Some(status), Some(frontier)) => {
            let next = if frontier.is_empty() { "END".into() } else { frontier.join(", ") };
            format!("(step {step}, {status}; next: {next})")
        }
        // An earlier seq of a sealed log read without its key: only a fold says these.
        _ => "(step, status and frontier sealed)".to_owned(),
    };
    print_text(&format!(
        "thread {} after seq {} {text}\n{}",
        view.thread,
        view.seq,
        sealed_pretty(&view.state)
    ));
    Ok(())
}

/// `state` pretty-printed, or `encrypted (key k1, codec aes256gcm)` for a placeholder.
pub(super) fn sealed_pretty(state: &serde_json::Value) -> String {
    match cairn::sealing::Placeholder::of_json(state) {
        Some(p) => {
            format!("encrypted (key {}, codec {}): set CAIRN_KEYS to read it", p.key, p.codec)
        }
        None => pretty(state),
    }
}

/// Prints the changes between the states after two seqs.
fn print_diff(args: &StateArgs, changes: Vec<crate::debug::Change>) -> anyhow::Result<()> {
    let Some([a, b]) = args.diff.as_deref() else { return Ok(()) };
    if args.common.json {
        return print_json(&StateDiff { changes, from: *a, thread: args.thread.clone(), to: *b });
    }
    if changes.is_empty() {
        print_text(&format!("no change between seq {a} and seq {b}"));
        return Ok(());
    }
    let mut text = String::new();
    for c in changes {
        let path = if c.path.is_empty() { "(whole state)" } else { c.path.as_str() };
        let line = match (&c.before, &c.after) {
            (Some(x), Some(y)) => {
                format!("~ {path}: {} -> {}", short_json(x, 80), short_json(y, 80))
            }
            (None, Some(y)) => format!("+ {path}: {}", short_json(y, 120)),
            (Some(x), None) => format!("- {path}: {}", short_json(x, 120)),
            (None, None) => format!("? {path}"),
        };
        text.push_str(&line);
        text.push('\n');
    }
    print_text(&text);
    Ok(())
}

/// What `cairn state` shows: a state or the changes between two.
enum Found {
    View(StateRow),
    Diff(Vec<crate::debug::Change>),
}

/// The state or the diff through a running engine's endpoint.
fn through(ep: &endpoint::Endpoint, args: &StateArgs) -> anyhow::Result<Found> {
    let path = format!("/api/threads/{}/state", endpoint::segment(&args.thread));
    if let Some([a, b]) = args.diff.as_deref() {
        let diff = ep.get(&path, &[("diff", format!("{a},{b}"))])?;
        return Ok(Found::Diff(wire::read::<StateDiff>(diff, "diff")?.changes));
    }
    let query = match (args.at_time, args.at) {
        (Some(ms), _) => vec![("at_time", ms.to_string())],
        (None, Some(seq)) => vec![("at", seq.to_string())],
        (None, None) => Vec::new(),
    };
    Ok(Found::View(wire::read(ep.get(&path, &query)?, "state")?))
}

/// `cairn state THREAD --at-time MS --session`: each thread of the session as it stood then
/// (through a running engine's endpoint, else from the file).
async fn session(args: &StateArgs, at_ms: u64, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let through = endpoint::through(&args.common.db, |ep| {
        let path = format!("/api/threads/{}/state", endpoint::segment(&args.thread));
        let query = [("at_time", at_ms.to_string()), ("session", "1".to_owned())];
        Ok(wire::read::<SessionAt>(ep.get(&path, &query)?, "session")?.threads)
    })?;
    let threads = match through {
        Some(threads) => threads,
        None => {
            let engine = super::common::open_read_only_or_copy(&args.common.db, wfs).await?;
            // An unknown thread is refused in the words of every other read.
            record_of(&engine, &args.thread).await?;
            crate::Operator::new(&engine).session_state_at_time(&args.thread, at_ms).await?
        }
    };
    if args.common.json {
        return print_json(&threads);
    }
    let mut out = String::new();
    for t in &threads {
        let from = t.parent.as_deref().map(|p| format!(" (started by {p})")).unwrap_or_default();
        match &t.state {
            Some(view) => out.push_str(&format!(
                "thread {}{from} after seq {} (step {}, {})\n{}\n",
                t.thread,
                view.seq,
                view.step,
                view.status,
                pretty(&view.state)
            )),
            None => out.push_str(&format!("thread {}{from}: nothing recorded yet\n", t.thread)),
        }
    }
    print_text(out.trim_end());
    Ok(())
}
