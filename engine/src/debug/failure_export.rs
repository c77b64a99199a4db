//! Writing a debug bundle of every thread that fails, as an engine policy
//! ([`crate::EngineBuilder::export_on_failure`]).
//!
//! The policy is the exec layer's failure hook (`exec::shell::FailureHook`), so the runner knows
//! nothing of bundles. The runner calls it once it has durably recorded a thread's failure (a node
//! failed with no retry left, a budget or step limit stopped it), before anyone waiting on the
//! thread is told, so the file exists by the time `ThreadHandle::finished` returns. A thread
//! failed from outside a runner (`abandon`) is not exported: export it with
//! [`crate::Engine::export_bundle`]. Writing the bundle never changes the thread's outcome: a
//! failure to write is logged (`warn`) and the engine goes on.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_storage::ThreadId;

use super::ExportOptions;
use crate::api::builder::EngineBuilder;
use crate::api::engine::Engine;
use crate::error::Error;
use crate::exec::shell::Shell;

/// Where and how the engine writes the debug bundle of a thread that fails.
///
/// # Examples
/// ```
/// use cairn::debug::{ExportOptions, FailureExport};
/// let policy = FailureExport::new("/var/lib/app/bundles", ExportOptions::default());
/// assert_eq!(
///     policy.path_for("order/42"),
///     std::path::Path::new("/var/lib/app/bundles/order%2F42.bundle.json")
/// );
/// ```
#[derive(Debug, Clone, PartialEq)]
pub struct FailureExport {
    /// The directory the bundles go to (created when missing).
    pub dir: PathBuf,
    /// What goes in them: redaction, checkpoints, custom metadata, `max_payload_bytes`, gzip.
    pub options: ExportOptions,
}

impl FailureExport {
    /// A policy writing bundles made with `options` to `dir`.
    pub fn new(dir: impl Into<PathBuf>, options: ExportOptions) -> Self {
        Self { dir: dir.into(), options }
    }

    /// The file of `thread`'s bundle: `<dir>/<thread>.bundle.json` (`.json.gz` with gzip),
    /// every byte of the id but ASCII letters, digits, `-` and `_` written as `%XX`, so that
    /// two ids never share a file and none leaves the directory.
    pub fn path_for(&self, thread: &str) -> PathBuf {
        let mut name = String::with_capacity(thread.len() + 16);
        for &b in thread.as_bytes() {
            if b.is_ascii_alphanumeric() || b == b'-' || b == b'_' {
                name.push(char::from(b));
            } else {
                name.push_str(&format!("%{b:02X}"));
            }
        }
        name.push_str(if self.options.gzip { ".bundle.json.gz" } else { ".bundle.json" });
        self.dir.join(name)
    }

    /// Exports `thread` from `engine` and writes it (to a temporary file renamed into place, so
    /// a reader never sees half a bundle). Returns the file written. The export awaits the
    /// store's reads; the file is written on a blocking thread of the runtime, so neither
    /// holds up a runtime worker.
    ///
    /// # Errors
    /// What [`Engine::export_bundle`] returns; [`Error::Invalid`] when the directory or the file
    /// cannot be written.
    ///
    /// # Examples
    /// ```no_run
    /// use cairn::debug::{ExportOptions, FailureExport};
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// let policy = FailureExport::new("bundles", ExportOptions::default());
    /// let file = policy.write(&engine, "t1").await?;
    /// println!("wrote {}", file.display());
    /// # Ok(()) }
    /// ```
    pub async fn write(&self, engine: &Engine, thread: &str) -> Result<PathBuf, Error> {
        let bundle = engine.export_bundle(thread, &self.options).await?;
        let bytes = bundle.to_bytes(self.options.gzip)?;
        let path = self.path_for(thread);
        let dir = self.dir.clone();
        let written =
            tokio::task::spawn_blocking(move || write_file(&dir, &path, &bytes).map(|()| path));
        written.await.map_err(|e| Error::Invalid(format!("the bundle's writer stopped: {e}")))?
    }
}

/// Writes `bytes` to `path` in `dir` (created when missing) through a temporary file.
fn write_file(dir: &Path, path: &Path, bytes: &[u8]) -> Result<(), Error> {
    let io = |what: &str, p: &Path, e: std::io::Error| {
        Error::Invalid(format!("cannot {what} {}: {e}", p.display()))
    };
    std::fs::create_dir_all(dir).map_err(|e| io("create", dir, e))?;
    let tmp = path.with_extension("tmp");
    std::fs::write(&tmp, bytes).map_err(|e| io("write", &tmp, e))?;
    std::fs::rename(&tmp, path).map_err(|e| io("rename into", path, e))
}

impl EngineBuilder {
    /// Writes a debug bundle of every thread that fails while this engine runs it to `dir`,
    /// made with `options` (redaction, metadata, `max_payload_bytes`...); see [`FailureExport`]
    /// for the file names and when it happens.
    ///
    /// # Examples
    /// ```no_run
    /// use cairn::debug::{ExportOptions, Redaction};
    /// # async fn run() -> Result<(), cairn::Error> {
    /// let options = ExportOptions { redaction: Redaction::default(), ..ExportOptions::default() };
    /// let engine = cairn::Engine::builder("app.db")
    ///     .export_on_failure("failed-bundles", options)
    ///     .open()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn export_on_failure(self, dir: impl Into<PathBuf>, options: ExportOptions) -> Self {
        let policy = FailureExport::new(dir, options);
        let policy = Arc::new(policy);
        self.on_failure(Arc::new(move |shell, thread| {
            Box::pin(export_failed(policy.clone(), shell.clone(), thread.clone()))
        }))
    }
}

/// Writes the bundle of `thread`, which has just failed.
async fn export_failed(policy: Arc<FailureExport>, shell: Arc<Shell>, thread: ThreadId) {
    let engine = Engine { shell };
    match policy.write(&engine, thread.as_str()).await {
        Ok(path) => {
            tracing::info!(thread = %thread, file = %path.display(), "failed thread exported");
        }
        Err(e) => {
            tracing::warn!(thread = %thread, error = %e, "cannot export the failed thread");
        }
    }
}
