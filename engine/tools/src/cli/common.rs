//! What every command shares: the `--db`/`--json` arguments, opening the database (read-only or
//! writable), the errors that carry an exit code, and output helpers.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use indicatif::{ProgressBar, ProgressStyle};
use serde::Serialize;

use super::{EXIT_DAMAGE, EXIT_FAILED, EXIT_OPEN, EXIT_USAGE};
use cairn::{Engine, RecoveryPolicy};

/// Arguments every database command takes.
#[derive(Debug, Clone, clap::Args)]
pub struct Common {
    /// The database file.
    #[arg(long, default_value = "cairn-demo.db")]
    pub db: PathBuf,
    /// Machine output: one JSON document on stdout.
    #[arg(long)]
    pub json: bool,
}

/// An error that decides the exit code and carries the message to print.
#[derive(Debug, thiserror::Error)]
#[error("{message}")]
pub struct Failure {
    /// The exit code.
    pub code: u8,
    /// What to tell the user.
    pub message: String,
}

/// A failure with exit code `code`.
pub fn fail(code: u8, message: impl Into<String>) -> anyhow::Error {
    anyhow::Error::new(Failure { code, message: message.into() })
}

/// A usage error (exit code 2) that clap could not catch (a malformed `k=v`, bad JSON).
pub fn usage(message: impl Into<String>) -> anyhow::Error {
    fail(EXIT_USAGE, message)
}

/// The exit code for an error: a [`Failure`]'s own, 4 for a file that cannot be opened, 3 for
/// damaged records, 2 for a seq the thread has no state at, 1 for everything else.
pub fn exit_code(error: &anyhow::Error) -> u8 {
    for cause in error.chain() {
        if let Some(f) = cause.downcast_ref::<Failure>() {
            return f.code;
        }
        // A seq given to `state` or `fork` that the thread has no state at.
        if let Some(cairn::Error::SeqUnavailable { .. }) = cause.downcast_ref::<cairn::Error>() {
            return EXIT_USAGE;
        }
        let storage = match cause.downcast_ref::<cairn::Error>() {
            Some(cairn::Error::Storage(e)) => Some(e),
            _ => cause.downcast_ref::<cairn_storage::Error>(),
        };
        if let Some(e) = storage {
            return match e {
                cairn_storage::Error::NotFound(_)
                | cairn_storage::Error::NotAFile { .. }
                | cairn_storage::Error::PermissionDenied { .. }
                | cairn_storage::Error::NotCairn { .. }
                | cairn_storage::Error::NewerFormat { .. }
                | cairn_storage::Error::Locked
                | cairn_storage::Error::SnapshotUnstable { .. } => EXIT_OPEN,
                cairn_storage::Error::Corrupted { .. } => EXIT_DAMAGE,
                _ => EXIT_FAILED,
            };
        }
    }
    EXIT_FAILED
}

/// Turns an error from opening `path` into the message a user needs (exit code 4 where the file
/// itself is the problem).
pub(super) fn open_error(path: &Path, error: cairn::Error) -> anyhow::Error {
    let shown = path.display();
    let message = match &error {
        cairn::Error::Storage(cairn_storage::Error::NotFound(missing)) if missing != path => {
            format!("no directory {} (for the database {shown})", missing.display())
        }
        cairn::Error::Storage(cairn_storage::Error::NotFound(_)) => {
            format!("no database at {shown} (run `cairn demo --db {shown}` to make one)")
        }
        cairn::Error::Storage(e @ cairn_storage::Error::NotAFile { .. }) => {
            format!("{e}; it was not opened")
        }
        cairn::Error::Storage(e @ cairn_storage::Error::Corrupted { .. }) => {
            let message = format!(
                "{shown} is damaged: {e}; `cairn verify --db {shown}` lists what it can find"
            );
            return fail(EXIT_DAMAGE, message);
        }
        cairn::Error::Storage(cairn_storage::Error::PermissionDenied { op }) => {
            format!("cannot open {shown} ({op}): permission denied")
        }
        cairn::Error::Storage(cairn_storage::Error::NotCairn { detail }) => {
            format!("{shown} is not a Cairn database ({detail}); it was left untouched")
        }
        cairn::Error::Storage(cairn_storage::Error::NewerFormat { found, supported }) => format!(
            "{shown} has format version {found}, newer than this cairn reads ({supported}): use a newer cairn"
        ),
        cairn::Error::Storage(cairn_storage::Error::Locked) => format!(
            "{shown} is held by another process (an engine is running on it): stop it first; \
             while it serves an endpoint, read commands (threads, show, events, state, \
             checkpoints, verify, trace, bundle export, replay, resumable) and pause, resume, \
             cancel, input, signal, start, emit, batch, repin, checkpoint every|cancel|at-node \
             and schedule backfill go through it"
        ),
        cairn::Error::Storage(cairn_storage::Error::SnapshotUnstable { attempts, detail }) => {
            format!(
                "cannot read a consistent snapshot of {shown} after {attempts} attempts ({detail}): \
                 an engine is writing it faster than a copy can be read, and serves no endpoint to \
                 read through; serve one (`cairn demo` does by default, an application with \
                 `cairn_tools::serve::ServingBuilder`) and this command reads \
                 through it, or stop the engine"
            )
        }
        other => return anyhow::anyhow!("opening {shown}: {other}"),
    };
    fail(EXIT_OPEN, message)
}

/// How long a read command waits for a file held by an engine without an endpoint to be let go
/// (an engine stopping withdraws its endpoint, then closes the file) before saying it is held.
const HELD_GRACE: std::time::Duration = std::time::Duration::from_millis(1_500);

/// How often it looks again meanwhile.
const HELD_RETRY: std::time::Duration = std::time::Duration::from_millis(50);

/// Opens the database read-only where it is, without copying it (memory does not grow with
/// the file), with `workflows` registered, so that states can be decoded. The read commands
/// call this only when no live endpoint serves the file: an engine holding it then serves none,
/// which is said (exit 4) instead of reading a copy of a file being written, once the file has
/// stayed held for [`HELD_GRACE`] (an engine that is stopping lets it go within it).
///
/// # Errors
/// A [`Failure`] with exit code 4 when the file cannot be opened or an engine holds it.
pub async fn open_read_only(db: &Path, workflows: &[Arc<DynWorkflow>]) -> anyhow::Result<Engine> {
    let started = std::time::Instant::now();
    let opened = loop {
        match with_workflows(keyed(Engine::builder(db).read_only_in_place())?, workflows)
            .open()
            .await
        {
            // An engine stopping withdraws its endpoint just before it closes the file: a
            // moment later the file is free.
            Err(cairn::Error::Storage(cairn_storage::Error::Locked))
                if started.elapsed() < HELD_GRACE =>
            {
                tokio::time::sleep(HELD_RETRY).await;
            }
            other => break other,
        }
    };
    opened.map_err(|e| match e {
        cairn::Error::Storage(cairn_storage::Error::Locked) => fail(
            EXIT_OPEN,
            format!(
                "{} is held by an engine that serves no endpoint to read through: serve one \
                 (`cairn demo` does by default, an application with \
                 `cairn_tools::serve::ServingBuilder`) and read commands go through it, or stop \
                 the engine",
                db.display()
            ),
        ),
        other => open_error(db, other),
    })
}

/// As [`open_read_only`], for the commands no endpoint answers (`query`, `prune --dry-run`):
/// while an engine holds the file they read a snapshot of it (a copy in memory, as large as the
/// file) rather than refuse.
///
/// # Errors
/// A [`Failure`] with exit code 4 when the file cannot be opened.
pub async fn open_read_only_or_copy(
    db: &Path,
    workflows: &[Arc<DynWorkflow>],
) -> anyhow::Result<Engine> {
    match with_workflows(keyed(Engine::builder(db).read_only_in_place())?, workflows).open().await {
        Ok(engine) => Ok(engine),
        Err(cairn::Error::Storage(cairn_storage::Error::Locked)) => {
            let copy = with_workflows(keyed(Engine::builder(db).read_only())?, workflows);
            copy.open().await.map_err(|e| open_error(db, e))
        }
        Err(e) => Err(open_error(db, e)),
    }
}

/// `builder` with the keys of `CAIRN_KEYS` / `CAIRN_KEYS_FILE` (docs/encryption.md): bodies
/// sealed at rest open with them; without them, reading a sealed body is an error naming its
/// key (`Error::Sealed`), never bytes that do not decode.
///
/// # Errors
/// Keys that do not parse, or a key file that does not read (exit 2).
pub fn keyed(builder: cairn::EngineBuilder) -> anyhow::Result<cairn::EngineBuilder> {
    let codec =
        cairn::sealing::AesGcmCodec::from_env().map_err(|e| fail(EXIT_USAGE, e.to_string()))?;
    Ok(match codec {
        Some(codec) => builder.payload_codec(Arc::new(codec)),
        None => builder.sealed_without_key(),
    })
}

/// `builder` with `workflows` registered.
pub(super) fn with_workflows(
    builder: cairn::EngineBuilder,
    workflows: &[Arc<DynWorkflow>],
) -> cairn::EngineBuilder {
    workflows.iter().fold(builder, |builder, wf| builder.workflow_dyn(wf.clone()))
}

/// Opens the database for writing, without creating it and without running anything: recovery
/// at open runs before `workflows` are registered, so it finds no runnable thread and writes
/// nothing (threads are resumed only by an explicit `cairn resume`).
///
/// # Errors
/// A [`Failure`] with exit code 4 when the file is missing, not Cairn, newer, or held by another
/// process.
pub async fn open_writable(db: &Path, workflows: &[Arc<DynWorkflow>]) -> anyhow::Result<Engine> {
    refuse_missing(db)?;
    let opened = keyed(Engine::builder(db).recovery(RecoveryPolicy::Park))?.open().await;
    let engine = opened.map_err(|e| open_error(db, e))?;
    register(&engine, workflows)?;
    Ok(engine)
}

/// Opens the database for writing, as the one engine that runs its work until interrupted
/// (`cairn serve`): `workflows` registered before recovery, so every unfinished thread is
/// resumed (created ones started, sleeping ones' timers armed), schedules run and queues are
/// admitted from, as by `cairn worker` or an application's engine; `configure` changes the
/// builder first (`--retention`).
///
/// # Errors
/// As [`open_writable`].
pub async fn open_running(
    db: &Path,
    workflows: &[Arc<DynWorkflow>],
    configure: impl FnOnce(cairn::EngineBuilder) -> cairn::EngineBuilder,
) -> anyhow::Result<Engine> {
    refuse_missing(db)?;
    let builder = keyed(Engine::builder(db).recovery(RecoveryPolicy::Resume))?;
    let builder = with_workflows(builder, workflows);
    configure(builder).open().await.map_err(|e| open_error(db, e))
}

/// Registers `workflows` on `engine` (after its open: recovery found none of their threads
/// runnable, so it wrote nothing).
pub(super) fn register(engine: &Engine, workflows: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    for wf in workflows {
        engine.register_dyn(wf.clone())?;
    }
    Ok(())
}

/// Prints `value` as one pretty JSON document.
///
/// # Errors
/// If the value does not serialise (a bug).
pub fn print_json(value: &impl Serialize) -> anyhow::Result<()> {
    print_text(&serde_json::to_string_pretty(value)?);
    Ok(())
}

/// Prints text as it is, with a final newline. A closed stdout (`cairn events | head`) ends the
/// process quietly: whatever it was doing is done or read-only.
pub fn print_text(text: &str) {
    let mut out = std::io::stdout().lock();
    let result =
        if text.ends_with('\n') { out.write_all(text.as_bytes()) } else { writeln!(out, "{text}") };
    if let Err(e) = result.and_then(|()| out.flush()) {
        if e.kind() == std::io::ErrorKind::BrokenPipe {
            std::process::exit(0);
        }
        tracing::warn!(error = %e, "cannot write to stdout");
    }
}

/// A JSON argument (`what` names it in errors), read by every command that takes one: `@FILE`
/// reads it from a file and `@-` (or `-`) from stdin, for a value too large for a command line;
/// text that does not start as JSON does (a bare word) is taken as a string. A string that
/// starts with `@` is given as JSON (`'"@name"'`).
///
/// # Errors
/// A usage error for a file or stdin that cannot be read, and for text that starts as JSON and
/// is not valid JSON.
pub fn json_arg(given: &str, what: &str) -> anyhow::Result<serde_json::Value> {
    let text = if given == "-" || given == "@-" {
        let mut text = String::new();
        std::io::Read::read_to_string(&mut std::io::stdin(), &mut text)
            .map_err(|e| usage(format!("{what} {given}: cannot read stdin: {e}")))?;
        text
    } else if let Some(file) = given.strip_prefix('@') {
        std::fs::read_to_string(file)
            .map_err(|e| usage(format!("{what} {given}: cannot read the file: {e}")))?
    } else {
        given.to_owned()
    };
    match serde_json::from_str(&text) {
        Ok(value) => Ok(value),
        Err(_) if !text.trim_start().starts_with(['{', '[', '"']) => Ok(text.into()),
        Err(e) => Err(usage(format!("{what} is not JSON: {e}"))),
    }
}

/// An engine error about what a command was given: [`cairn::Error::Invalid`], the engine's
/// word for a caller's bad argument, is a usage error (exit 2, said as the engine says it, as
/// through an endpoint); any other error is as it is.
pub fn argument_error(error: cairn::Error) -> anyhow::Error {
    match error {
        e @ cairn::Error::Invalid(_) => usage(e.to_string()),
        other => other.into(),
    }
}

/// Parses `k=v`.
///
/// # Errors
/// A usage error without `=`.
pub fn parse_label(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.to_owned(), v.to_owned())),
        _ => Err(format!("expected KEY=VALUE, got {s:?}")),
    }
}

/// Parses a count that must be at least 1 (a `--limit`).
///
/// # Errors
/// A usage error for 0 or a non-number.
pub fn parse_positive(s: &str) -> Result<usize, String> {
    match s.parse::<usize>() {
        Ok(0) => Err("0 would list nothing: give at least 1".into()),
        Ok(n) => Ok(n),
        Err(_) => Err(format!("{s:?} is not a count")),
    }
}

/// A progress bar on stderr, hidden when stderr is not a terminal. `len` 0 gives a spinner.
pub fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = if len == 0 { ProgressBar::new_spinner() } else { ProgressBar::new(len) };
    let template = if len == 0 {
        "{spinner} {prefix} {msg}"
    } else {
        "{prefix:>10} [{bar:30}] {pos}/{len} {msg}"
    };
    bar.set_style(
        ProgressStyle::with_template(template)
            .unwrap_or_else(|_| ProgressStyle::default_bar())
            .progress_chars("=> "),
    );
    // Drawn on stderr (indicatif's default target), which hides it off a terminal.
    bar.set_prefix(what.to_owned());
    bar
}

/// A thread id argument, checked as clap parses it (`value_parser`): an empty, oversized or
/// control-character id is a usage error in every command, before anything is opened.
///
/// # Errors
/// What is wrong with the id.
pub fn parse_thread_id(s: &str) -> Result<String, String> {
    cairn_storage::ThreadId::new(s)
        .map(|id| id.to_string())
        .map_err(|e| format!("thread id {s:?}: {e}"))
}

/// The thread id, checked.
///
/// # Errors
/// A usage error for an empty or oversized id.
pub fn thread_id(s: &str) -> anyhow::Result<cairn_storage::ThreadId> {
    cairn_storage::ThreadId::new(s).map_err(|e| usage(format!("thread id {s:?}: {e}")))
}

/// The record of `thread`, or exit 1 naming it.
///
/// # Errors
/// "no thread" when it does not exist; storage errors.
pub async fn record_of(
    engine: &Engine,
    thread: &str,
) -> anyhow::Result<cairn_storage::ThreadRecord> {
    let id = thread_id(thread)?;
    engine
        .store()
        .thread(&id)
        .await?
        .ok_or_else(|| fail(EXIT_FAILED, format!("no thread {thread} in this database")))
}

/// The SIGINT and SIGTERM streams a serving command stops on, registered now (a signal that
/// arrives before registration kills the process instead of stopping it gracefully).
///
/// # Errors
/// The operating system refused the handlers.
pub(super) fn stop_signals()
-> std::io::Result<(tokio::signal::unix::Signal, tokio::signal::unix::Signal)> {
    use tokio::signal::unix::{SignalKind, signal};
    Ok((signal(SignalKind::interrupt())?, signal(SignalKind::terminate())?))
}

/// Refuses a path with nothing at all there (not even a link): the store would create a
/// database, which only `demo` and `init` may do. Anything else there is judged by the store.
fn refuse_missing(db: &Path) -> anyhow::Result<()> {
    if cairn::admin::is_postgres_url(db) || std::fs::symlink_metadata(db).is_ok() {
        return Ok(());
    }
    let missing = match db.parent() {
        Some(dir) if !dir.as_os_str().is_empty() && !dir.is_dir() => dir.to_path_buf(),
        _ => db.to_path_buf(),
    };
    Err(open_error(db, cairn_storage::Error::NotFound(missing).into()))
}
