//! The `cairn` command line. A user's own binary gets the same commands, with its own workflows
//! compiled in, by calling [`run`].
//!
//! Every command works on a database file (`--db`, default `cairn-demo.db`), offline. While a
//! running engine serves the file's endpoint (announced in `<db>.endpoint`, live: `endpoint.rs`),
//! `threads`, `show`, `events`, `state`, `checkpoints`, `checkpoint show`, `health`, `trace`,
//! `verify`, `bundle export`, `replay` and `resumable` read through it (page by page; `verify`,
//! `bundle export`, `replay` and `resumable` have the engine compute the answer on its live
//! store) and print what they print from the file (`bundle show` reads only a bundle file).
//! Otherwise read-only commands open the file read-only where it is, without copying it
//! (`RedbStore::open_read_only_in_place`: memory does not grow with the file); an engine process
//! holding it without an endpoint is refused up front (exit 4, naming what to do). `query` and
//! `prune --dry-run`, which no endpoint answers, read a snapshot (a copy in memory) then.
//! Commands that write (`checkpoint delete`, `prune`, `delete`, `bundle import`, `resume`,
//! `abandon`, `cancel`, `pause`, `input`, `signal`, `update`, `fork`, `serve`), and `resumable` without an endpoint (its open
//! proves that no runner holds the threads it lists), open it for writing and fail with exit
//! code 4 while another process holds it.
//! `start` and `emit` post to an endpoint that serves the file, and otherwise write the threads
//! `created` for the next engine that opens it (never run them here).
//! `delete`, `signal` and `update`, like the controls, go through an endpoint that serves the file. `result --wait`
//! long-polls an endpoint that serves the file, and otherwise reads the file again until the
//! wait ends; on PostgreSQL it waits through the database.
//! `cairn serve` keeps it open and serves the HTTP endpoint (`crate::serve`) until interrupted,
//! running the file's schedules meanwhile; `cairn worker` runs all of a database's work. The other
//! commands never resume threads by themselves: only `resume`, `input`, `signal`, `fork` and
//! `schedule trigger` run a thread, in this process, until it ends or parks; a schedule created or
//! resumed here waits (durably) for `serve` or `worker`. `--json` prints one JSON document (with `events --follow`,
//! one JSON object per line); the default is aligned tables.
//!
//! Exit codes scripts can rely on:
//!
//! | code | meaning |
//! |---|---|
//! | 0 | success |
//! | 1 | the operation failed (unknown thread or schedule, refused transition, a resumed thread failed, ...) |
//! | 2 | bad usage: an unknown command or flag, or any invalid argument value, whether clap, the command or the engine finds it (checked before the database is opened where it can be; an unknown workflow or query, a seq the thread has no state at), a file named as an argument that cannot be read (a bundle, the `@FILE` of a JSON argument) |
//! | 3 | damage found (`verify`, a damaged record met by any command, a file too damaged to open) |
//! | 4 | the database file cannot be opened: missing (or its directory), locked by another process, not a Cairn file, a newer format, permission denied, or not a regular file (directory, FIFO, socket, device, link to nothing) |
//! | 5 | `cairn health`: something needs attention |
//! | 6 | `cairn result`: the thread has not finished (by the end of `--wait`) |
//!
//! Only a regular file is opened (links are followed); a database is created only where nothing
//! exists (`demo`, `bundle import`), or by `init`, which also initialises a zero-length file.
//! With `--json`, an error is one JSON object on stderr.
//!
//! `cairn __hold --db FILE` is internal (hidden): it holds the file open for writing until its
//! stdin closes; the CLI's tests use it as "another process".

use std::process::ExitCode;
use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use clap::{Parser, Subcommand};

mod batch;
mod bundle;
mod bundle_sealed;
mod checkpoint_ask;
mod checkpoint_create;
mod checkpoints;
mod common;
mod control;
mod copy;
mod delete;
mod demo;
mod emit;
mod endpoint;
mod events;
mod fork;
mod graph;
mod health;
mod health_policy;
mod hold;
mod init;
mod interactions;
#[cfg(feature = "otel")]
mod otlp;
mod patches;
mod promise;
mod query;
mod queue;
mod remote;
mod repin;
mod replay;
mod reset;
mod result;
mod schedule;
mod serve;
mod signal;
mod start;
mod state;
mod stream;
mod table;
mod threads;
mod update;
mod verify;
mod versions;
mod worker;
mod workflows;

/// Exit code: the operation failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit code: bad usage (also what clap exits with for parse errors).
pub const EXIT_USAGE: u8 = 2;
/// Exit code: damage was found in the database.
pub const EXIT_DAMAGE: u8 = 3;
/// Exit code: the database file could not be opened.
pub const EXIT_OPEN: u8 = 4;
/// Exit code: `cairn health` found something that needs attention.
pub const EXIT_UNHEALTHY: u8 = 5;
/// Exit code: `cairn result` found the thread not finished by the end of its wait.
pub const EXIT_PENDING: u8 = 6;

#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version,
    about = "Cairn: a durable workflow engine with embedded storage",
    after_help = "Exit codes: 0 ok, 1 operation failed, 2 usage, 3 damage found, 4 cannot open the database file (missing, locked, not Cairn, newer format, permission denied, not a regular file), 5 health needs attention, 6 the thread has not finished (result). Logs: CAIRN_LOG (a tracing filter, e.g. CAIRN_LOG=cairn=debug)."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the demo: several threads of an agent-like workflow on a database file.
    Demo(demo::DemoArgs),
    /// Make an empty database (where nothing is, or in a zero-length file, which other commands
    /// refuse to touch).
    Init(common::Common),
    /// List threads (filters: status, workflow, label; paged).
    Threads(threads::ThreadsArgs),
    /// One thread: status, frontier, progress, telemetry, budgets, locks, last error.
    Show(control::ThreadArgs),
    /// A thread's events, optionally followed live.
    Events(events::EventsArgs),
    /// A thread's state after any seq, or the diff between two seqs.
    State(state::StateArgs),
    /// Messages carrying a correlation id, across threads.
    Trace(events::TraceArgs),
    /// List checkpoints (filters: thread, workflow, kind, tag; paged).
    Checkpoints(checkpoints::CheckpointsArgs),
    /// Create (a manual checkpoint of a thread), show or delete one checkpoint; ask for
    /// checkpoints at run time (every, cancel, at-node).
    #[command(subcommand)]
    Checkpoint(checkpoints::CheckpointCommand),
    /// Remove what no restore needs: each thread keeps its latest checkpoint and what follows.
    Prune(checkpoints::PruneArgs),
    /// Delete a finished thread whole: its log, checkpoints, locks and unshared payloads
    /// (`--force`: an unfinished one too). Its id can then be started again.
    Delete(delete::DeleteArgs),
    /// How a thread ended (status, output, last error), waiting up to `--wait SECS` for it to
    /// finish; exit 6 if it has not.
    Result(result::ResultArgs),
    /// Debug bundles: export a thread (redacted), import one, or show one.
    #[command(subcommand)]
    Bundle(bundle::BundleCommand),
    /// Check every record's CRC, seq continuity and the indexes; exit 3 on damage.
    Verify(common::Common),
    /// Health: threads by status, running threads with no step past the watchdog, locks held
    /// past their ttl; exit 5 when something needs attention.
    Health(health::HealthArgs),
    /// A workflow's graph (compiled into this binary) as DOT or Mermaid.
    Graph(graph::GraphArgs),
    /// Who talks to whom in a session's (or every thread's) messages: an HTML page with a
    /// drawing, DOT or Mermaid (`--output FILE`).
    Interactions(interactions::InteractionsArgs),
    /// The drain view: per workflow version, the threads that have not finished, and whether
    /// this binary carries it; then per worker build (the `cairn.build` pin).
    Versions(versions::VersionsArgs),
    /// Move an unfinished thread to worker build BUILD (`--unpin`: any engine takes it), e.g.
    /// one whose build is gone (docs/patching.md); `cairn batch repin` moves many.
    Repin(repin::RepinArgs),
    /// Reset a thread: fork it at `--to start|checkpoint|seq:N` into a new thread
    /// (`<THREAD>.reset.<KEY>`) and cancel it; prints the new thread's id. The same `--key`
    /// again makes no second fork (docs/batches.md); `cairn batch reset` resets many.
    Reset(reset::ResetArgs),
    /// The workflows compiled into this binary: id, version, node count, fingerprint.
    Workflows(workflows::WorkflowsArgs),
    /// Threads that can be resumed (paused, blocked, or left unfinished by a stopped engine).
    Resumable(control::ResumableArgs),
    /// Resume a thread and run it here until it ends or parks.
    Resume(control::ThreadArgs),
    /// Give up a resumable thread for good (it ends cancelled).
    Abandon(control::ThreadArgs),
    /// Cancel a thread.
    Cancel(control::CancelArgs),
    /// Pause a thread (it resumes with `cairn resume`).
    Pause(control::ThreadArgs),
    /// Send human input to a thread waiting for it, and run it here until it ends or parks.
    Input(control::InputArgs),
    /// Send a signal (a named JSON value) to a running or waiting thread: `ctx.recv(name)`
    /// receives it; a thread waiting for it runs here until it ends or parks. A signal the
    /// thread's workflow does not declare, or of the wrong type, is refused (exit 2).
    Signal(signal::SignalArgs),
    /// Apply an update the thread's workflow declares (a validated call that changes its state)
    /// and print its reply once durable; the same `--id` again prints the recorded reply. An
    /// unknown update or a refusal exits 2 (docs/updates.md).
    Update(update::UpdateArgs),
    /// Roll a parked thread back in place to one of its checkpoints; it is left paused.
    Rollback(checkpoint_create::RollbackArgs),
    /// Fork a thread from a seq or checkpoint (optionally with a state update) and run the fork
    /// here until it ends or parks.
    Fork(fork::ForkArgs),
    /// Unfinished threads that ran without the marker of patch ID (`ctx.patched(ID)`): they may
    /// still need its old branch (docs/patching.md).
    Patches(patches::PatchesArgs),
    /// Replay a thread against the compiled-in code with its recorded results and report the
    /// first divergence (`--verify`: exit 1 on a divergence).
    Replay(replay::ReplayArgs),
    /// Copy threads (logs, checkpoints, payloads) between databases: a file and a PostgreSQL
    /// URL, either way.
    Copy(copy::CopyArgs),
    /// Run a database's work, a file or a shared PostgreSQL one: drive its runnable threads,
    /// take over those of stopped workers, fire due timers, run schedules, until interrupted.
    Worker(worker::WorkerArgs),
    /// Serve the HTTP endpoint of a file no engine holds (JSON reads, live events, controls
    /// with the printed token), until interrupted.
    Serve(serve::ServeArgs),
    /// Answers a workflow's read-only query from a thread's stored state.
    Query(query::QueryArgs),
    /// Start a thread: through the engine serving the file (`--wait SECS`: and wait for its
    /// result), or, with none, written `created` for the next engine that opens the file.
    Start(start::StartArgs),
    /// Emit an event: each workflow subscribed to its name starts a thread on the payload,
    /// once per event id (through the engine serving the file, or written `created`).
    Emit(emit::EmitArgs),
    /// Apply an operation (cancel, pause, resume, signal, delete, migrate) to every thread a
    /// filter matches, as a durable job (`--dry-run`: count them first); `show ID`: its progress.
    Batch(batch::BatchArgs),
    /// Durable schedules: create, list, pause, resume, trigger, delete.
    Schedule(schedule::ScheduleCommand),
    /// Named queues with concurrency, per-key and rate limits: list, define.
    Queue(queue::QueueCommand),
    /// What a thread published under a key (`ctx.set_event`), waiting up to `--wait-ms` for
    /// it; exit 6 if it is not set by then, 1 if the thread ended without it.
    GetEvent(promise::GetEventArgs),
    /// A thread's live stream (what its nodes write with `ctx.stream`) as it comes, through the
    /// engine serving the file (connecting again after a cut), then its final value.
    Stream(stream::StreamArgs),
    /// Promises a thread handed out (`ctx.promise`): complete one with a value or an error.
    Promise(promise::PromiseCommand),
    /// Internal: hold the database open for writing until stdin closes (tests).
    #[command(name = "__hold", hide = true)]
    Hold(common::Common),
}

/// Parses the command line and runs it, with `workflows` available to the commands that run
/// threads or decode their state. Returns the process exit code (see the module docs).
pub fn run(workflows: Vec<Arc<DynWorkflow>>) -> ExitCode {
    use tracing_subscriber::Layer as _;
    use tracing_subscriber::layer::SubscriberExt as _;
    use tracing_subscriber::util::SubscriberInitExt as _;
    let cli = Cli::parse();
    // `CAIRN_LOG` is a tracing filter (`CAIRN_LOG=cairn=debug`); unset, only errors are logged.
    // Colours only on a terminal: a log file or a pipe gets plain text.
    let log = tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(std::io::IsTerminal::is_terminal(&std::io::stderr()))
        .with_filter(tracing_subscriber::EnvFilter::from_env("CAIRN_LOG"));
    let registry = tracing_subscriber::registry().with(log);
    #[cfg(feature = "otel")]
    let otel = otlp::endpoint(&cli.command).and_then(|url| otlp::start(&url));
    #[cfg(feature = "otel")]
    let registry = registry.with(otel.as_ref().map(|o| o.layer()));
    let _ = registry.try_init();
    // A `--json` command reports its errors as JSON too (on stderr, stdout being its output).
    let json = std::env::args().skip(1).any(|a| a == "--json");
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            report(
                &anyhow::anyhow!("cannot start the async runtime: {e}"),
                json.then_some(EXIT_FAILED),
            );
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let result = runtime.block_on(dispatch(cli.command, workflows));
    // Outside the runtime: the last spans and metrics, each export within its deadline.
    #[cfg(feature = "otel")]
    if let Some(otel) = otel {
        otel.shutdown();
    }
    match result {
        Ok(code) => code,
        Err(e) => {
            let code = common::exit_code(&e);
            report(&e, json.then_some(code));
            ExitCode::from(code)
        }
    }
}

#[allow(clippy::print_stderr, reason = "the CLI reports its errors on stderr")]
fn report(e: &anyhow::Error, json_code: Option<u8>) {
    // Each cause once: many errors already quote their source in their own message.
    let mut message = e.to_string();
    for cause in e.chain().skip(1) {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str(": ");
            message.push_str(&text);
        }
    }
    if let Some(code) = json_code {
        eprintln!("{}", serde_json::json!({ "error": message, "exit_code": code }));
        return;
    }
    eprintln!("error: {message}");
    let needs_workflow = e.chain().any(|c| {
        matches!(
            c.downcast_ref::<cairn::Error>(),
            Some(cairn::Error::UnknownWorkflow { .. } | cairn::Error::FingerprintChanged { .. })
        )
    });
    if needs_workflow {
        eprintln!(
            "hint: this needs the thread's workflow (its reducer and nodes) compiled into the \
             binary: build one that calls cairn_tools::cli::run with it"
        );
    }
}

async fn dispatch(command: Command, wfs: Vec<Arc<DynWorkflow>>) -> anyhow::Result<ExitCode> {
    use control::Control;
    let wfs = &wfs[..];
    match command {
        Command::Demo(args) => return demo::run(args, wfs.to_vec()).await,
        Command::Init(args) => init::init(args).await?,
        Command::Threads(args) => threads::threads(args, wfs).await?,
        Command::Show(args) => threads::show(args, wfs).await?,
        Command::Events(args) => events::events(args, wfs).await?,
        Command::State(args) => state::state(args, wfs).await?,
        Command::Trace(args) => events::trace(args, wfs).await?,
        Command::Checkpoints(args) => checkpoints::list(args, wfs).await?,
        Command::Checkpoint(cmd) => checkpoints::command(cmd, wfs).await?,
        Command::Prune(args) => checkpoints::prune(args, wfs).await?,
        Command::Delete(args) => delete::delete(args, wfs).await?,
        Command::Result(args) => result::result(args, wfs).await?,
        Command::Bundle(cmd) => bundle::command(cmd, wfs).await?,
        Command::Verify(args) => verify::verify(args, wfs).await?,
        Command::Health(args) => health::health(args, wfs).await?,
        Command::Graph(args) => graph::graph(&args, wfs)?,
        Command::Interactions(args) => interactions::interactions(args, wfs).await?,
        Command::Versions(args) => versions::versions(args, wfs).await?,
        Command::Repin(args) => repin::repin(args, wfs).await?,
        Command::Reset(args) => reset::reset(args, wfs).await?,
        Command::Workflows(args) => workflows::workflows(&args, wfs)?,
        Command::Resumable(args) => control::resumable(args, wfs).await?,
        Command::Resume(args) => control::resume(args, wfs).await?,
        Command::Abandon(args) => control::control(Control::Abandon, &args, wfs).await?,
        Command::Cancel(a) => control::control(Control::Cancel(&a.reason), &a.target, wfs).await?,
        Command::Pause(args) => control::control(Control::Pause, &args, wfs).await?,
        Command::Input(args) => control::input(args, wfs).await?,
        Command::Signal(args) => signal::signal(args, wfs).await?,
        Command::Update(args) => update::update(args, wfs).await?,
        Command::Rollback(args) => checkpoint_create::rollback(args, wfs).await?,
        Command::Fork(args) => fork::fork(args, wfs).await?,
        Command::Replay(args) => replay::replay(args, wfs).await?,
        Command::Patches(args) => patches::patches(args, wfs).await?,
        Command::Start(args) => start::start(args, wfs).await?,
        Command::Emit(args) => emit::emit(args, wfs).await?,
        Command::Batch(args) => batch::batch(args, wfs).await?,
        Command::Schedule(cmd) => schedule::command(cmd, wfs).await?,
        Command::Queue(cmd) => queue::command(cmd, wfs).await?,
        Command::Query(args) => query::query(args, wfs).await?,
        Command::GetEvent(args) => promise::get_event(args, wfs).await?,
        Command::Stream(args) => stream::stream(args, wfs).await?,
        Command::Promise(cmd) => promise::command(cmd, wfs).await?,
        Command::Hold(args) => hold::hold(args).await?,
        Command::Worker(args) => worker::worker(args, wfs).await?,
        Command::Copy(args) => copy::copy(args).await?,
        Command::Serve(args) => serve::run(args, wfs).await?,
    }
    Ok(ExitCode::SUCCESS)
}
