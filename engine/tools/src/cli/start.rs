//! `cairn start WORKFLOW --input JSON [--id ID] [--label K=V]... [--queue Q [--key K]
//! [--priority N] [--dedup D]] [--deadline-ms MS] [--budgets JSON] [--permission P]...
//! [--start-at-ms T | --delay-ms MS] [--wait SECS]`: starts a thread (everything
//! `StartOptions` takes; a delayed start is created at once and runs from its time).
//!
//! - Through a running engine's endpoint when one is announced for the file (`POST
//!   /api/workflows/{id}/threads` with the token of `<db>.token`, as the controls are posted,
//!   `remote.rs`): that engine runs the thread; `--wait` waits for its result (one long poll in
//!   the start, then `cairn result --wait`'s polls).
//! - On a file no engine holds, and on PostgreSQL: the thread is written `created` (queued, on a
//!   queue) and not run ([`cairn::Engine::create`]): this process exits, and the next engine
//!   that opens the file (`cairn serve`, `cairn worker`, an application) runs it, as on a shared
//!   database any worker polling it does. A thread is never left `running` with nothing driving
//!   it. `--wait` on PostgreSQL waits through the database for a worker to finish it; on a file
//!   nothing would run it while this command waits, so it is refused before anything is written.
//!
//! The command says which it did. Exit codes: 0 started (with `--wait`: completed), 1 refused
//! or ended otherwise, 2 bad usage (the input is not JSON, not a state of the workflow, an
//! unknown workflow), 6 not finished by the end of `--wait`.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn_dsl::DynWorkflow;
use serde_json::{Value, json};

use super::common::{
    Common, argument_error, fail, json_arg, open_writable, parse_label, print_json, print_text,
    usage,
};
use super::{EXIT_FAILED, EXIT_PENDING, endpoint, remote, result};
use crate::limits::RESULT_WAIT_MS_MAX;
use crate::serve::wire::{self, Started, ThreadResult};
use cairn::admin::is_postgres_url;
use cairn::{Error, StartOptions};

/// Arguments of `cairn start`.
#[derive(Debug, clap::Args)]
pub struct StartArgs {
    #[command(flatten)]
    common: Common,
    /// The workflow to start (`cairn workflows` lists them).
    workflow: String,
    /// The thread's input (its initial state), as JSON; `@FILE` reads it from a file, `@-`
    /// from stdin.
    #[arg(long)]
    input: String,
    /// The thread's id: starting an id that exists answers that thread (idempotent).
    #[arg(long, value_parser = super::common::parse_thread_id)]
    id: Option<String>,
    /// A label KEY=VALUE (repeatable).
    #[arg(long = "label", value_parser = parse_label)]
    labels: Vec<(String, String)>,
    /// The queue the thread waits in until its limits admit it.
    #[arg(long, value_parser = super::queue::parse_queue_name)]
    queue: Option<String>,
    /// Its concurrency key in the queue.
    #[arg(long, requires = "queue")]
    key: Option<String>,
    /// Its priority in the queue (higher first).
    #[arg(long, requires = "queue")]
    priority: Option<u8>,
    /// Its deduplication key in the queue: a thread holding it answers instead.
    #[arg(long, requires = "queue")]
    dedup: Option<String>,
    /// The thread times out this long after its creation (ms).
    #[arg(long, value_name = "MS")]
    deadline_ms: Option<u64>,
    /// Budgets replacing the workflow's, as JSON: `max_steps`, `max_tool_calls`, `max_tokens`,
    /// `max_cost_micros`, `max_wall_ms`, `warn_fraction` (each optional).
    #[arg(long, value_name = "JSON")]
    budgets: Option<String>,
    /// A permission granted to the thread's tool calls, replacing the workflow's (repeatable).
    #[arg(long = "permission", value_name = "P")]
    permissions: Vec<String>,
    /// A delayed start: created now, run from this time (ms since the epoch). Not with a queue.
    #[arg(long, value_name = "T", conflicts_with_all = ["delay_ms", "queue"])]
    start_at_ms: Option<u64>,
    /// A delayed start this long from now (ms). Not with a queue.
    #[arg(long, value_name = "MS", conflicts_with = "queue")]
    delay_ms: Option<u64>,
    /// Wait up to this many seconds for the thread's result (exit 6 if it has not finished).
    #[arg(long, value_name = "SECS")]
    wait: Option<u64>,
}

impl StartArgs {
    /// The body of `POST /api/workflows/{id}/threads`.
    fn body(&self, input: &Value, budgets: Option<&Value>) -> Value {
        let mut body = json!({"input": input});
        let fields = [
            ("id", self.id.clone().map(Value::from)),
            ("queue", self.queue.clone().map(Value::from)),
            ("key", self.key.clone().map(Value::from)),
            ("priority", self.priority.map(Value::from)),
            ("dedup", self.dedup.clone().map(Value::from)),
            ("deadline_ms", self.deadline_ms.map(Value::from)),
            ("start_at_ms", self.start_at_ms.map(Value::from)),
            ("delay_ms", self.delay_ms.map(Value::from)),
            ("budgets", budgets.cloned()),
            ("permissions", (!self.permissions.is_empty()).then(|| json!(self.permissions))),
        ];
        for (name, value) in fields {
            if let Some(value) = value {
                body[name] = value;
            }
        }
        if !self.labels.is_empty() {
            body["labels"] = json!(self.labels.iter().cloned().collect::<BTreeMap<_, _>>());
        }
        body
    }

    /// The engine's start options (`now_ms`: the clock a `--delay-ms` counts from).
    fn options(&self, budgets: Option<cairn_dsl::Budgets>, now_ms: u64) -> StartOptions {
        let mut options = StartOptions {
            thread_id: self.id.clone(),
            deadline_ms: self.deadline_ms,
            budgets,
            permissions: (!self.permissions.is_empty())
                .then(|| self.permissions.iter().cloned().collect()),
            start_at_ms: self.start_at_ms.or(self.delay_ms.map(|d| now_ms.saturating_add(d))),
            ..StartOptions::default()
        };
        options.labels = self.labels.iter().cloned().collect();
        if let Some(queue) = &self.queue {
            options = options.on_queue(queue.clone()).priority(self.priority.unwrap_or(0));
            options.queue_key.clone_from(&self.key);
            options.dedup_key.clone_from(&self.dedup);
        }
        options
    }
}

/// `--budgets` as the engine's budgets: the fields given over the defaults (none unlimited).
fn budgets_of(json: &Value) -> anyhow::Result<cairn_dsl::Budgets> {
    let mut merged = serde_json::to_value(cairn_dsl::Budgets::default())?;
    let (Some(given), Some(all)) = (json.as_object(), merged.as_object_mut()) else {
        return Err(usage("--budgets takes a JSON object".to_owned()));
    };
    for (key, value) in given {
        if !all.contains_key(key) {
            return Err(usage(format!("--budgets: no budget {key:?}")));
        }
        all.insert(key.clone(), value.clone());
    }
    serde_json::from_value(merged).map_err(|e| usage(format!("--budgets: {e}")))
}

pub(super) async fn start(args: StartArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let input = json_arg(&args.input, "--input")?;
    let budgets_json = args.budgets.as_deref().map(|b| json_arg(b, "--budgets")).transpose()?;
    let budgets = budgets_json.as_ref().map(budgets_of).transpose()?;
    let db = args.common.db.clone();
    let wait = args.wait.map(Duration::from_secs);
    if !is_postgres_url(&db) {
        let started = Instant::now();
        let ms = wait.map(|w| u64::try_from(w.as_millis()).unwrap_or(u64::MAX));
        let query = ms.map(|ms| format!("?wait_ms={}", ms.min(RESULT_WAIT_MS_MAX)));
        let path = format!(
            "/api/workflows/{}/threads{}",
            endpoint::segment(&args.workflow),
            query.unwrap_or_default()
        );
        let (db2, body) = (db.clone(), args.body(&input, budgets_json.as_ref()));
        let posted =
            tokio::task::spawn_blocking(move || remote::post_to(&db2, &path, &body)).await??;
        if let Some(answer) = posted {
            return through_endpoint(&args, answer, wait.map(|w| (w, started))).await;
        }
        if wait.is_some() {
            return Err(nothing_runs_it(&db));
        }
    }
    let engine = open_writable(&db, wfs).await?;
    let now_ms = engine.clock().now_ms();
    let created = engine.create_json(&args.workflow, &input, args.options(budgets, now_ms)).await;
    let answer = match created {
        Ok(creation) => {
            let thread = creation.thread.id().as_str().to_owned();
            let status = creation.thread.status().await;
            let waited = match (wait, status.is_ok()) {
                (Some(wait), true) => {
                    let outcome = engine.await_result(&thread, wait).await;
                    Some(result::answer_of(&engine, &thread, outcome).await)
                }
                _ => None,
            };
            (creation.created, thread, status, waited)
        }
        Err(e) => {
            engine.shutdown().await;
            // The workflow, the queue and the input are what the command was given.
            return Err(match e {
                Error::UnknownWorkflow { .. }
                | Error::Codec(_)
                | Error::Storage(cairn_storage::Error::UnknownQueue(_)) => usage(e.to_string()),
                other => argument_error(other),
            });
        }
    };
    engine.shutdown().await;
    let (created, thread, status, waited) = answer;
    let status = status?;
    let mut out = json!({
        "thread": thread,
        "created": created,
        "status": status.as_str(),
        "through": "database",
    });
    if let (Some(Ok(answer)), Some(out)) = (&waited, out.as_object_mut())
        && let Value::Object(result) = serde_json::to_value(&answer.result)?
    {
        out.extend(result);
    }
    if args.common.json {
        print_json(&out)?;
    } else {
        say_written(&args, &thread, created, status);
        if let Some(Ok(result)) = &waited {
            print_text(&result::text_of(result));
        }
    }
    match waited {
        Some(answer) => result::verdict(&answer?.result, &thread),
        None => Ok(()),
    }
}

/// The refusal of a start told to wait on a file no engine serves: nothing would run the
/// thread meanwhile.
fn nothing_runs_it(db: &std::path::Path) -> anyhow::Error {
    fail(
        EXIT_FAILED,
        format!(
            "no engine serves {d}, so none would run the thread while this waits: start \
             one (`cairn serve --db {d}`) and start the thread through it, or start it \
             without --wait (it runs when an engine opens the file)",
            d = db.display()
        ),
    )
}

/// Says that thread `thread` was written to the file (`created`, or it existed) in `status`,
/// and what runs it.
fn say_written(args: &StartArgs, thread: &str, created: bool, status: cairn::ThreadStatus) {
    let d = args.common.db.display();
    let (line, next) = match (&args.queue, status) {
        (Some(queue), cairn::ThreadStatus::Queued) => {
            (format!(" (in line on queue {queue})"), "admits it as the queue's limits allow")
        }
        _ => (String::new(), "runs it"),
    };
    print_text(&if created {
        format!(
            "{thread}: written {}{line} in {d}, not run by this command: the next engine \
             that opens it {next} (`cairn serve --db {d}`, `cairn worker --db {d}`, an \
             application)",
            status.as_str()
        )
    } else {
        format!("{thread}: exists in {d} ({}), not started again", status.as_str())
    });
}

/// Reports a start the engine serving the file made, after waiting (`wait`: how long in all,
/// from when) for the thread's result beyond the start's own long poll.
async fn through_endpoint(
    args: &StartArgs,
    answer: Value,
    wait: Option<(Duration, Instant)>,
) -> anyhow::Result<()> {
    let mut started: Started = wire::read(answer, "start")?;
    let thread = started.thread.clone();
    if let Some((wait, since)) = wait {
        let left = wait.saturating_sub(since.elapsed());
        if !started.result.as_ref().is_some_and(|r| r.finished) && !left.is_zero() {
            let (db, id) = (args.common.db.clone(), thread.clone());
            let polled = tokio::task::spawn_blocking(move || {
                endpoint::through(&db, |ep| result::poll(ep, &id, left))
            })
            .await??;
            if let Some(polled) = polled {
                started.result = Some(polled.result);
            }
        }
    }
    if args.common.json {
        let mut out = serde_json::to_value(&started)?;
        out["through"] = json!("endpoint");
        print_json(&out)?;
    } else {
        let what = if started.created { "started" } else { "exists" };
        print_text(&format!(
            "{thread}: {what}, run by the engine serving {}",
            args.common.db.display()
        ));
    }
    match (wait, started.result) {
        (Some(_), Some(result)) => {
            let answer = ThreadResult { thread: thread.clone(), result };
            if !args.common.json {
                print_text(&result::text_of(&answer));
            }
            result::verdict(&answer.result, &thread)
        }
        (Some(_), None) => Err(fail(EXIT_PENDING, format!("{thread} has not finished"))),
        (None, _) => Ok(()),
    }
}
