//! `cairn bundle export|import|show`: debug bundles (one JSON document per thread), redacted on export and
//! validated on import. With a running engine serving the file, `export` has the engine export
//! from its live store (`GET /api/threads/{id}/bundle`): no copy of the file; the bundle written
//! is the one the file path writes. `show` reads only the bundle file.

use std::path::PathBuf;
use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::{Value, json};

use super::EXIT_FAILED;
use super::common::{Common, open_read_only, open_writable, print_json, print_text, progress};
use super::common::{argument_error, fail, parse_label, record_of, usage};
use super::endpoint;
use super::table::{Table, cut, time};
use crate::debug::{Bundle, ExportOptions, Redaction};
use cairn::storage::EventStatus;

/// `cairn bundle ...`.
#[derive(Debug, clap::Subcommand)]
pub enum BundleCommand {
    /// Write a thread's debug bundle to a file, redacted.
    Export(ExportArgs),
    /// Import a bundle into this database (a fresh one is made if the file is missing), to
    /// inspect or replay it here.
    Import(FileArgs),
    /// Validate a bundle file and summarise it (no database needed).
    Show(FileArgs),
}

/// Arguments of `cairn bundle export`.
#[derive(Debug, clap::Args)]
pub struct ExportArgs {
    #[command(flatten)]
    pub(super) common: Common,
    /// The thread to export.
    #[arg(value_parser = super::common::parse_thread_id)]
    pub(super) thread: String,
    /// The bundle file to write.
    #[arg(short = 'o', long = "output")]
    pub(super) output: PathBuf,
    /// Compress with gzip.
    #[arg(long)]
    pub(super) gzip: bool,
    /// Also redact values under keys matching this pattern (repeatable; the defaults, api key,
    /// token, secret, password and authorization, always apply).
    #[arg(long = "redact-key")]
    pub(super) redact_key: Vec<String>,
    /// A secret value that must not appear in the bundle in any form (repeatable).
    #[arg(long)]
    pub(super) secret: Vec<String>,
    /// Leave the thread's checkpoints out.
    #[arg(long)]
    pub(super) no_checkpoints: bool,
    /// Keep only the last N events.
    #[arg(long)]
    pub(super) last_events: Option<usize>,
    /// A field of your own for the bundle's metadata (KEY=VALUE, repeatable; kept as a string).
    #[arg(long = "meta", value_parser = parse_label)]
    pub(super) meta: Vec<(String, String)>,
    /// Leave out event bodies over N bytes (recorded with their size and hash; such a bundle
    /// can be shown, not imported).
    #[arg(long)]
    pub(super) max_payload_bytes: Option<usize>,
}

/// Arguments of `cairn bundle import` and `cairn bundle show`.
#[derive(Debug, clap::Args)]
pub struct FileArgs {
    #[command(flatten)]
    pub(super) common: Common,
    /// The bundle file.
    pub(super) file: PathBuf,
}

pub(super) async fn command(cmd: BundleCommand, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    match cmd {
        BundleCommand::Export(args) => export(args, wfs).await,
        BundleCommand::Import(args) => import(args, wfs).await,
        BundleCommand::Show(args) => match super::bundle_sealed::read(&args.file)? {
            Some(sealed) => super::bundle_sealed::show(&args, &sealed),
            None => show(&args),
        },
    }
}

async fn export(args: ExportArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    if args.last_events == Some(0) {
        return Err(usage("--last-events must keep at least one event"));
    }
    let mut redaction = Redaction::default();
    redaction.key_patterns.extend(args.redact_key.iter().cloned());
    redaction.secrets.clone_from(&args.secret);
    // Checked here, whether a running engine or this process exports: a bad --secret or
    // --redact-key is a usage error.
    crate::debug::Redactor::new(&redaction).map_err(argument_error)?;
    let bar = progress(3, "export");
    bar.set_message("reading the thread");
    // A running engine exports from its live store: no copy of the file.
    let found = endpoint::through(&args.common.db, |ep| {
        let path = format!("/api/threads/{}/bundle", endpoint::segment(&args.thread));
        let (url, bytes) = ep.get_bytes(&path, &export_query(&args))?;
        let not_one =
            |e| fail(EXIT_FAILED, format!("{url} answered something that is not a bundle: {e}"));
        // An endpoint without the key of a sealed thread answers it sealed.
        if let Some(sealed) = crate::debug::SealedBundle::from_bytes(&bytes).map_err(not_one)? {
            return Ok(Err(sealed));
        }
        Bundle::from_bytes(&bytes).map(Ok).map_err(not_one)
    })?;
    let bundle = match found {
        Some(Ok(bundle)) => bundle,
        Some(Err(sealed)) => {
            bar.finish_and_clear();
            return super::bundle_sealed::write(&args, &sealed);
        }
        None => {
            let engine = open_read_only(&args.common.db, wfs).await?;
            record_of(&engine, &args.thread).await?;
            let metadata = args.meta.iter().map(|(k, v)| (k.clone(), Value::String(v.clone())));
            let options = ExportOptions {
                include_checkpoints: !args.no_checkpoints,
                last_events: args.last_events,
                gzip: args.gzip,
                redaction,
                metadata: metadata.collect(),
                max_payload_bytes: args.max_payload_bytes,
            };
            let operator = crate::Operator::new(&engine);
            match operator.export_bundle(&args.thread, &options).await {
                Ok(bundle) => bundle,
                Err(e) => {
                    // Sealed with a key this process lacks: the bundle goes out sealed.
                    crate::debug::sealed::lacking(&engine, e)?;
                    bar.finish_and_clear();
                    return super::bundle_sealed::export(&args, &operator).await;
                }
            }
        }
    };
    bar.inc(1);
    bar.set_message("encoding");
    let bytes = bundle.to_bytes(args.gzip)?;
    bar.inc(1);
    bar.set_message(format!("writing {}", args.output.display()));
    std::fs::write(&args.output, &bytes)
        .map_err(|e| fail(EXIT_FAILED, format!("cannot write {}: {e}", args.output.display())))?;
    bar.inc(1);
    bar.finish_and_clear();
    report(&args, &bundle, bytes.len())
}

/// What `bundle export` says of the `bytes` long `bundle` it wrote.
fn report(args: &ExportArgs, bundle: &Bundle, bytes: usize) -> anyhow::Result<()> {
    let summary = json!({
        "thread": args.thread,
        "file": args.output.display().to_string(),
        "bytes": bytes,
        "gzip": args.gzip,
        "events": bundle.events.events.len(),
        "checkpoints": bundle.checkpoints.as_ref().map_or(0, Vec::len),
        "dropped": bundle.events.dropped.len(),
    });
    if args.common.json {
        return print_json(&summary);
    }
    print_text(&format!(
        "exported {} ({} events, {} checkpoints) to {} ({} bytes{})",
        args.thread,
        summary["events"],
        summary["checkpoints"],
        args.output.display(),
        bytes,
        if args.gzip { ", gzip" } else { "" }
    ));
    Ok(())
}

/// The query of `GET /api/threads/{id}/bundle` for these flags (`serve::params_ops`).
fn export_query(args: &ExportArgs) -> Vec<(&'static str, String)> {
    let mut query: Vec<(&'static str, String)> = Vec::new();
    query.extend(args.redact_key.iter().map(|k| ("redact_key", k.clone())));
    query.extend(args.secret.iter().map(|s| ("secret", s.clone())));
    query.extend(args.meta.iter().map(|(k, v)| ("meta", format!("{k}={v}"))));
    query.extend(args.no_checkpoints.then(|| ("checkpoints", "0".into())));
    query.extend(args.last_events.map(|n| ("last_events", n.to_string())));
    query.extend(args.max_payload_bytes.map(|n| ("max_payload_bytes", n.to_string())));
    query
}

fn read_bundle(file: &PathBuf) -> anyhow::Result<Bundle> {
    let bytes =
        std::fs::read(file).map_err(|e| usage(format!("cannot read {}: {e}", file.display())))?;
    // The error's path is a JSON path in the bundle ("$" its root): said after the file's name.
    // A file read whose content is refused fails the operation (1), as an import refused does.
    let refused =
        |what: String| fail(EXIT_FAILED, format!("{} is not a bundle: {what}", file.display()));
    Bundle::from_bytes(&bytes).map_err(|e| match e {
        cairn::Error::Bundle { path, detail } if path == "$" => refused(detail),
        cairn::Error::Bundle { path, detail } => refused(format!("{path}: {detail}")),
        other => other.into(),
    })
}

async fn import(args: FileArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let sealed = super::bundle_sealed::read(&args.file)?;
    // Importing into a new file is the usual case: create it (only here; other write commands
    // refuse a missing file).
    if !cairn::admin::is_postgres_url(&args.common.db) && !args.common.db.exists() {
        let engine = super::common::keyed(cairn::Engine::builder(&args.common.db))?.open().await?;
        engine.shutdown().await;
    }
    if let Some(sealed) = &sealed {
        return super::bundle_sealed::import(&args, sealed, wfs).await;
    }
    let bundle = read_bundle(&args.file)?;
    let engine = open_writable(&args.common.db, wfs).await?;
    let result = crate::Operator::new(&engine).import_bundle(&bundle).await;
    engine.shutdown().await;
    let id = result?;
    // A seed-format thread is imported for viewing: said here, exactly, since it looks like any
    // other thread in a listing.
    let seed = crate::debug::is_seed_workflow(&bundle.metadata.workflow);
    if args.common.json {
        let mut out = json!({
            "thread": id.as_str(),
            "events": bundle.events.events.len(),
            "db": args.common.db.display().to_string(),
        });
        if seed {
            out["seed_format"] = json!({
                "version": crate::debug::SEED_VERSION,
                "reads": crate::debug::SEED_THREAD_READS,
                "controls": crate::debug::SEED_THREAD_CONTROLS,
                "refused": crate::debug::SEED_THREAD_REFUSED,
            });
        }
        return print_json(&out);
    }
    print_text(&format!(
        "imported thread {id} ({} events) into {}",
        bundle.events.events.len(),
        args.common.db.display()
    ));
    if seed {
        print_text(&crate::debug::seed_thread_note(id.as_str()));
    }
    Ok(())
}

fn show(args: &FileArgs) -> anyhow::Result<()> {
    let bundle = read_bundle(&args.file)?;
    let m = &bundle.metadata;
    if args.common.json {
        return print_json(&json!({
            "version": bundle.version,
            "timestamp": bundle.timestamp,
            "metadata": m,
            "events": bundle.events.events.len(),
            "payloads": bundle.events.payloads.len(),
            "dropped": bundle.events.dropped,
            "checkpoints": bundle.checkpoints.as_ref().map(Vec::len),
            "telemetry": bundle.telemetry,
            "toolResultsSummary": bundle.tool_results_summary,
            "state_seq": bundle.state.meta.seq,
            "state": bundle.state.state,
        }));
    }
    let mut t = Table::new(&["", ""]);
    t.pair("bundle", format!("version {}, exported {}", bundle.version, time(bundle.timestamp)));
    t.pair("thread", format!("{} ({})", m.thread.id, m.thread.status));
    t.pair(
        "workflow",
        format!("{} v{} ({})", m.workflow.id, m.workflow.version, cut(&m.workflow.fingerprint, 16)),
    );
    let by = match &m.source_version {
        Some(v) => format!(
            "the seed framework (bundle {v}) on {}, converted by cairn {}",
            m.platform, m.cairn_version
        ),
        None => format!("cairn {} on {}", m.cairn_version, m.platform),
    };
    t.pair("exported by", by);
    t.pair(
        "events",
        format!(
            "{} (seq {}..={}), {} by reference, {} dropped ({} bytes)",
            bundle.events.events.len(),
            m.thread.first_seq,
            m.thread.last_seq,
            bundle.events.payloads.len(),
            bundle.events.dropped.len(),
            bundle.events.dropped.values().sum::<u64>()
        ),
    );
    if let Some(tm) = &bundle.telemetry {
        t.pair(
            "telemetry",
            format!(
                "{} ms in all, {} tool calls, {} errors, {} retries, {} tokens",
                tm.total_duration,
                tm.tool_call_count,
                tm.error_count,
                tm.retry_count,
                tm.token_count
            ),
        );
    }
    if let Some(tools) = &bundle.tool_results_summary {
        let failed = tools.iter().filter(|t| t.status == EventStatus::Failure).count();
        t.pair("tool results", format!("{} ({failed} failed)", tools.len()));
    }
    t.pair(
        "checkpoints",
        bundle.checkpoints.as_ref().map_or("not included".into(), |c| c.len().to_string()),
    );
    t.pair(
        "state",
        format!("after seq {} (step {})", bundle.state.meta.seq, bundle.state.meta.step),
    );
    t.pair(
        "redaction",
        format!("keys [{}], {} secrets", m.redaction.key_patterns.join(", "), m.redaction.secrets),
    );
    for (k, v) in &m.custom {
        let text = v.as_str().map_or_else(|| v.to_string(), str::to_owned);
        t.pair(&format!("meta {k}"), cut(&text, 60));
    }
    print_text(&t.render());
    Ok(())
}
