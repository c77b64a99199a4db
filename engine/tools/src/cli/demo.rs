//! `cairn demo`: runs threads of the research-agent workflow with progress bars, then a summary.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;

use cairn_dsl::DynWorkflow;
use cairn_storage::ThreadStatus;
use indicatif::{MultiProgress, ProgressBar, ProgressStyle};

use super::common::print_text;
use super::table::Table;
use crate::demo::{DEMO_THREADS_MAX, QUESTIONS, Research, research_workflow};
use crate::model::ScriptedModel;
use cairn::{Engine, StartOptions};

/// Arguments of `cairn demo`.
#[derive(Debug, clap::Args)]
pub struct DemoArgs {
    /// The database file (created if missing).
    #[arg(long, default_value = "cairn-demo.db")]
    db: PathBuf,
    /// How many threads to run (1 to 10,000).
    #[arg(long, default_value_t = 8, value_parser = parse_threads)]
    threads: usize,
    /// Abort the process abruptly after this many acknowledged steps (to show recovery).
    #[arg(long)]
    crash_after_steps: Option<u64>,
    /// Print one JSON line per thread instead of a table.
    #[arg(long)]
    json: bool,
    /// No progress bars.
    #[arg(long)]
    quiet: bool,
    /// How long a lease lasts without renewal (on a shared database, a crashed demo's threads
    /// are taken over by `cairn worker` after it).
    #[arg(long, default_value_t = cairn::Config::default().lease_ttl_ms)]
    lease_ttl_ms: u64,
    /// Serve no HTTP endpoint while the demo runs. By default a demo on a file serves one on a
    /// free loopback port and announces it in `<db>.endpoint`, so that `cairn threads`, `show`,
    /// `events`... read through it while the demo writes. Its address is not printed: it ends
    /// with the demo; the demo ends by printing the `cairn serve` command that serves the file
    /// (the web view) after it.
    #[arg(long)]
    no_serve: bool,
    #[cfg(feature = "otel")]
    #[command(flatten)]
    pub(super) otlp: super::otlp::OtlpFlag,
}

/// `--threads`: 1 to [`DEMO_THREADS_MAX`].
fn parse_threads(text: &str) -> Result<usize, String> {
    let n: usize = text.parse().map_err(|_| format!("{text:?} is not a number of threads"))?;
    if n == 0 || n > DEMO_THREADS_MAX {
        return Err(format!("{n} threads: a demo runs 1 to {DEMO_THREADS_MAX} (DEMO_THREADS_MAX)"));
    }
    Ok(n)
}

pub(super) async fn run(args: DemoArgs, extra: Vec<Arc<DynWorkflow>>) -> anyhow::Result<ExitCode> {
    let wf = research_workflow(Arc::new(ScriptedModel::demo()))?;
    // The workflows are registered after the open, so that its recovery finds nothing to
    // resume; the explicit recovery below then resumes what an earlier run left unfinished and
    // reports it (the open's own report is not kept).
    let (engine, server) = open(&args).await?;
    if let Some(k) = args.crash_after_steps {
        abort_after_steps(&engine, k, &args.db);
    }
    engine.register(&wf)?;
    super::common::register(&engine, &extra)?;
    let recovered = engine.recover().await?;
    say_recovered(&recovered, args.json);
    let bars = MultiProgress::new();
    if args.quiet {
        bars.set_draw_target(indicatif::ProgressDrawTarget::hidden());
    }
    let style = ProgressStyle::with_template("{prefix:>8} [{bar:20}] {pos}/{len} {msg}")
        .unwrap_or_else(|_| ProgressStyle::default_bar())
        .progress_chars("=> ");
    let mut handles = Vec::new();
    for i in 0..args.threads {
        let question = QUESTIONS[i % QUESTIONS.len()];
        let id = format!("demo-{i}");
        let input = Research { question: question.to_owned(), ..Research::default() };
        // Two tenants, so that listings can be filtered by label (`--label tenant=acme`).
        let tenant = if i % 2 == 0 { "acme" } else { "globex" };
        let options = StartOptions::id(&id).label("demo", "1").label("tenant", tenant);
        let handle = engine.start_json("research-agent", input, options).await?;
        let bar = bars.add(ProgressBar::new(5));
        bar.set_style(style.clone());
        bar.set_prefix(id.clone());
        handles.push((handle, bar));
    }
    let mut rows = Vec::new();
    for (handle, bar) in handles {
        // A pruned thread's stored log starts after its checkpoint: follow it from there.
        let first_kept = engine.store().thread(handle.id()).await?;
        let first_kept = first_kept.map_or(0, |r| r.first_seq.0 - 1);
        let mut events = handle.events(first_kept)?;
        loop {
            let outcome = handle.outcome().await?;
            while let Some(rec) = events.try_next().await? {
                if let cairn::event::Body::Progress { progress, .. } = &rec.body {
                    bar.set_position(u64::from(progress.step));
                    bar.set_message(progress.message.clone());
                }
            }
            if !matches!(outcome.status, ThreadStatus::Running | ThreadStatus::Created) {
                if outcome.status == ThreadStatus::Completed {
                    // A short route ends before the last reported step: done all the same.
                    bar.set_position(bar.length().unwrap_or_default());
                }
                bar.finish_with_message(outcome.status.to_string());
                rows.push((handle.id().to_string(), outcome));
                break;
            }
            tokio::select! {
                r = handle.wait() => { r?; }
                () = tokio::time::sleep(Duration::from_millis(50)) => {}
            }
        }
    }
    // The endpoint first: its announcement goes before the file is released.
    if let Some(server) = server {
        server.shutdown().await;
    }
    engine.shutdown().await;
    print_summary(&rows, args.json);
    if !args.json {
        print_next(&args.db, rows.first().map(|(id, _)| id.as_str()));
    }
    let all_done = rows.iter().all(|(_, o)| o.status == ThreadStatus::Completed);
    Ok(if all_done { ExitCode::SUCCESS } else { ExitCode::from(super::EXIT_FAILED) })
}

/// The demo's engine on `args.db`, serving its endpoint on a loopback port unless told not to
/// (or on a PostgreSQL database).
async fn open(args: &DemoArgs) -> anyhow::Result<(Engine, Option<crate::serve::Server>)> {
    let builder = super::common::keyed(Engine::builder(&args.db))?
        .seed(7)
        .concurrency(4)
        // Every finished demo thread keeps a snapshot of its final state, for `cairn
        // checkpoints` to show (by default a short thread's end writes none: its log is read).
        .completion_checkpoint_after(0)
        .lease_ttl_ms(args.lease_ttl_ms);
    let is_url = cairn::admin::is_postgres_url(&args.db);
    Ok(if args.no_serve || is_url {
        (builder.open().await.map_err(|e| super::common::open_error(&args.db, e))?, None)
    } else {
        let loopback = std::net::SocketAddr::from(([127, 0, 0, 1], 0));
        let mut options = crate::serve::ServeOptions::new(loopback);
        // Installed before the engine opens, so that its handles record into it: `/metrics`.
        options.prometheus = super::serve::prometheus();
        let (engine, server) = crate::serve::ServingBuilder::new(builder, loopback)
            .options(options)
            .open()
            .await
            .map_err(|e| super::common::open_error(&args.db, e))?;
        (engine, Some(server))
    })
}

/// Makes the process abort once `engine` has run `k` steps in all, as a power cut would.
fn abort_after_steps(engine: &Engine, k: u64, db: &std::path::Path) {
    let db = db.display().to_string();
    let said = std::sync::Once::new();
    engine.on_step(Arc::new(move |_thread, _step, total| {
        if total >= k {
            said.call_once(|| say_abort(total, &db));
            // An abrupt end, as a power cut or kill -9 would be: no destructors, no flush
            // beyond what each acknowledged commit already made durable.
            std::process::abort();
        }
    }));
}

/// The line `--crash-after-steps` prints before it aborts (on stderr: unbuffered, and apart
/// from `--json`'s output).
#[allow(clippy::print_stderr, reason = "the demo's output is the CLI's")]
fn say_abort(steps: u64, db: &str) {
    eprintln!(
        "aborting after {steps} acknowledged steps, as asked (--crash-after-steps): \
         `cairn demo --db {db}` again recovers the unfinished threads"
    );
}

/// What recovery took on from an earlier run (nothing said when there was nothing).
fn say_recovered(report: &cairn::RecoveryReport, json: bool) {
    let resumed = &report.resumed;
    if resumed.is_empty() && report.parked.is_empty() {
        return;
    }
    let names: Vec<&str> = resumed.iter().take(5).map(cairn_storage::ThreadId::as_str).collect();
    let more = if resumed.len() > names.len() { ", ..." } else { "" };
    let mut line = format!(
        "recovered: {} unfinished thread{} of an earlier run resumed ({}{more})",
        resumed.len(),
        if resumed.len() == 1 { "" } else { "s" },
        names.join(", ")
    );
    if !report.parked.is_empty() {
        line.push_str(&format!(
            "; {} left as they are (their workflow is not in this binary)",
            report.parked.len()
        ));
    }
    say(&line, json);
}

/// A line about the run: on stdout, or with `--json` (whose stdout is one JSON line per thread)
/// on stderr.
#[allow(clippy::print_stderr, reason = "the demo's output is the CLI's")]
fn say(line: &str, json: bool) {
    if json {
        eprintln!("{line}");
    } else {
        print_text(line);
    }
}

/// Where to look next: the database, a thread's details and log, and the HTTP endpoint, as
/// commands that run as printed: `cairn` when one is on the PATH, this binary's own path
/// otherwise (`cargo run --release -- demo` puts none there), with the line that installs one.
fn print_next(db: &std::path::Path, thread: Option<&str>) {
    let shown = db.to_string_lossy();
    let is_url = cairn::admin::is_postgres_url(db);
    let path = if is_url {
        shown.into_owned()
    } else {
        std::path::absolute(db).map_or_else(|_| shown.into_owned(), |p| p.display().to_string())
    };
    let cairn = program();
    let mut lines = vec![String::new(), format!("database: {path}")];
    if let Some(thread) = thread {
        lines.push(format!(
            "look next: {cairn} show {thread} --db {path}      # status, progress, telemetry"
        ));
        lines.push(format!(
            "           {cairn} events {thread} --db {path}    # its log; --follow to watch one run"
        ));
    }
    if !is_url {
        lines.push(format!(
            "           {cairn} serve --db {path}            # the web view (it prints the address) and the HTTP API; Ctrl-C stops it"
        ));
    }
    if cairn != "cairn" {
        lines.push(
            "           (no `cairn` on your PATH: `cargo install --locked --path engine --features \
             cli`, run in the clone, puts one in ~/.cargo/bin)"
                .to_owned(),
        );
    }
    // `print_text` ends the process quietly on a closed stdout (`cairn demo | head`).
    print_text(&lines.join("\n"));
}

/// How a shell runs this binary: `cairn` when the PATH finds an executable of that name, else
/// this executable's path (`./target/release/cairn` when it lies under the working directory).
fn program() -> String {
    let on_path = std::env::var_os("PATH").is_some_and(|paths| {
        std::env::split_paths(&paths).any(|d| is_executable(&d.join("cairn")))
    });
    let exe = std::env::current_exe().ok().filter(|_| !on_path);
    let Some(exe) = exe else { return "cairn".to_owned() };
    let cwd = std::env::current_dir().unwrap_or_default();
    match exe.strip_prefix(&cwd) {
        Ok(under) => std::path::Path::new(".").join(under).display().to_string(),
        Err(_) => exe.display().to_string(),
    }
}

/// Whether `file` is a file its owner, group or others may run.
fn is_executable(file: &std::path::Path) -> bool {
    let Ok(meta) = std::fs::metadata(file) else { return false };
    #[cfg(unix)]
    let runnable = std::os::unix::fs::PermissionsExt::mode(&meta.permissions()) & 0o111 != 0;
    #[cfg(not(unix))]
    let runnable = true;
    meta.is_file() && runnable
}

/// What the summary's columns hold, under it: the digest and the id ending an answer are
/// not self-explanatory.
const SUMMARY_LEGEND: &str = "\
OUTPUT DIGEST: the first 16 hex digits of the BLAKE3 hash of the thread's output; a run
interrupted by a crash and resumed prints the same ones. [8 hex digits] ending an ANSWER: an id
the workflow drew (ctx.new_id(), recorded in the log: the same one after a crash).";

/// One line per thread: labelled columns and a legend, or with `--json` one JSON object each.
fn print_summary(rows: &[(String, cairn::Outcome)], json: bool) {
    let mut table = Table::new(&["THREAD", "STATUS", "OUTPUT DIGEST", "ANSWER"]);
    for (id, outcome) in rows {
        let answer = outcome.output.as_ref().and_then(|o| o["answer"].as_str()).unwrap_or_default();
        let digest = outcome
            .output
            .as_ref()
            .map(|o| blake3::hash(o.to_string().as_bytes()).to_hex()[..16].to_owned());
        if json {
            let line = serde_json::json!({ "thread": id, "status": outcome.status.as_str(), "answer": answer, "digest": digest });
            print_text(&line.to_string());
        } else {
            let status = outcome.status.as_str().to_owned();
            table.row(vec![id.clone(), status, digest.unwrap_or_default(), answer.to_owned()]);
        }
    }
    if !json && !table.is_empty() {
        print_text(&format!("{}\n{SUMMARY_LEGEND}", table.render()));
    }
}
