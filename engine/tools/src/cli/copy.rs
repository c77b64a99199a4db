//! `cairn copy --from DB --to DB`: copies every thread (or `--thread` ones) from one database to
//! another, a file or a PostgreSQL URL either side: each thread's record, whole log, checkpoints,
//! payloads and signal inbox (`cairn_storage::copy`). A thread the destination has already, or whose log was
//! pruned, is skipped and reported. The destination file is created if nothing is there.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn_storage::copy::{CopyReport, copy_thread};
use cairn_storage::{Options, RedbStore, Store};
use serde_json::json;

use super::common::{open_error, print_json, print_text, thread_id};
use cairn::admin::is_postgres_url;

/// Arguments of `cairn copy`.
#[derive(Debug, clap::Args)]
pub struct CopyArgs {
    /// The database to copy from (a file, read as a snapshot, or a PostgreSQL URL).
    #[arg(long)]
    from: PathBuf,
    /// The database to copy into (a file, created if missing, or a PostgreSQL URL).
    #[arg(long)]
    to: PathBuf,
    /// Copy only this thread (repeatable); every thread when absent.
    #[arg(long = "thread", value_parser = super::common::parse_thread_id)]
    threads: Vec<String>,
    /// Machine output: one JSON document on stdout.
    #[arg(long)]
    json: bool,
}

pub(super) async fn copy(args: CopyArgs) -> anyhow::Result<()> {
    let from = open(&args.from, false).await?;
    let to = open(&args.to, true).await?;
    let report = if args.threads.is_empty() {
        cairn_storage::copy::copy_all(from.as_ref(), to.as_ref()).await?
    } else {
        let mut report = CopyReport::default();
        for t in &args.threads {
            copy_thread(from.as_ref(), to.as_ref(), &thread_id(t)?, &mut report).await?;
        }
        report
    };
    if args.json {
        let skipped: Vec<_> = report
            .skipped
            .iter()
            .map(|(id, why)| json!({ "thread": id.as_str(), "why": why }))
            .collect();
        return print_json(&json!({
            "copied": report.copied.len(),
            "skipped": skipped,
            "events": report.events,
            "checkpoints": report.checkpoints,
            "payloads": report.payloads,
            "signals": report.signals,
        }));
    }
    let mut text = format!(
        "copied {} threads ({} events, {} checkpoints, {} payloads, {} signals) from {} to {}",
        report.copied.len(),
        report.events,
        report.checkpoints,
        report.payloads,
        report.signals,
        args.from.display(),
        args.to.display()
    );
    for (id, why) in &report.skipped {
        text.push_str(&format!("\nskipped {id}: {why}"));
    }
    print_text(&text);
    Ok(())
}

/// The store at `db`: a PostgreSQL URL, or a file (read-only unless `write`; created if missing
/// when written).
async fn open(db: &Path, write: bool) -> anyhow::Result<Arc<dyn Store>> {
    let owned = db.to_path_buf();
    let opened =
        tokio::task::spawn_blocking(move || -> Result<Arc<dyn Store>, cairn_storage::Error> {
            if is_postgres_url(&owned) {
                #[cfg(feature = "postgres")]
                {
                    let url = owned.to_string_lossy();
                    return Ok(Arc::new(cairn_storage::PgStore::connect(
                        &url,
                        cairn_storage::Durability::Immediate,
                    )?));
                }
                #[cfg(not(feature = "postgres"))]
                return Err(cairn_storage::Error::Invalid {
                    detail: "this build of cairn has no `postgres` feature".into(),
                });
            }
            Ok(if write {
                Arc::new(RedbStore::open(&owned, Options::default())?)
            } else {
                Arc::new(RedbStore::open_read_only(&owned)?)
            })
        })
        .await?;
    opened.map_err(|e| open_error(db, e.into()))
}
