//! Writing a debug bundle of every thread that fails, as an engine policy
//! ([`FailureExport::hook`], given to [`cairn::EngineBuilder::on_failure`]).
//!
//! The policy is the engine's failure hook, so the runner knows
//! nothing of bundles. The runner calls it once it has durably recorded a thread's failure (a node
//! failed with no retry left, a budget or step limit stopped it), before anyone waiting on the
//! thread is told, so the file exists by the time `ThreadHandle::finished` returns. A thread
//! failed from outside a runner (`abandon`) is not exported: export it with
//! [`crate::Operator::export_bundle`]. Writing the bundle never changes the thread's outcome: a
//! failure to write is logged (`warn`) and the engine goes on.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_storage::ThreadId;

use super::ExportOptions;
use cairn::Engine;
use cairn::error::Error;
use futures::future::BoxFuture;

/// Where and how the engine writes the debug bundle of a thread that fails.
///
/// # Examples
/// ```
/// use cairn_tools::debug::{ExportOptions, FailureExport};
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
    /// What [`Operator::export_bundle`](crate::Operator::export_bundle) returns; [`Error::Invalid`] when the directory or the file
    /// cannot be written.
    ///
    /// # Examples
    /// ```no_run
    /// use cairn_tools::debug::{ExportOptions, FailureExport};
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// let policy = FailureExport::new("bundles", ExportOptions::default());
    /// let file = policy.write(&engine, "t1").await?;
    /// println!("wrote {}", file.display());
    /// # Ok(()) }
    /// ```
    pub async fn write(&self, engine: &Engine, thread: &str) -> Result<PathBuf, Error> {
        let bundle = crate::Operator::new(engine).export_bundle(thread, &self.options).await?;
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

impl FailureExport {
    /// The hook that writes a debug bundle of every thread that fails while an engine runs it,
    /// with this policy: give it to [`cairn::EngineBuilder::on_failure`]. See [`FailureExport`] for
    /// the file names and when it happens.
    ///
    /// # Examples
    /// ```no_run
    /// use cairn_tools::debug::{ExportOptions, FailureExport, Redaction};
    /// # async fn run() -> Result<(), cairn::Error> {
    /// let options = ExportOptions { redaction: Redaction::default(), ..ExportOptions::default() };
    /// let engine = cairn::Engine::builder("app.db")
    ///     .on_failure(FailureExport::new("failed-bundles", options).hook())
    ///     .open()
    ///     .await?;
    /// # Ok(()) }
    /// ```
    pub fn hook(self) -> impl Fn(Engine, ThreadId) -> BoxFuture<'static, ()> + Send + Sync {
        let policy = Arc::new(self);
        move |engine, thread| Box::pin(export_failed(policy.clone(), engine, thread))
    }
}

/// Writes the bundle of `thread`, which has just failed.
async fn export_failed(policy: Arc<FailureExport>, engine: Engine, thread: ThreadId) {
    match policy.write(&engine, thread.as_str()).await {
        Ok(path) => {
            tracing::info!(thread = %thread, file = %path.display(), "failed thread exported");
        }
        Err(e) => {
            tracing::warn!(thread = %thread, error = %e, "cannot export the failed thread");
        }
    }
}
