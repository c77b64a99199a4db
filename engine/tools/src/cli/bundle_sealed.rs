//! `cairn bundle export|import|show` of a sealed bundle (`debug/sealed_bundle.rs`): exported
//! when the thread is sealed with a key `CAIRN_KEYS` does not hold, its bodies as stored;
//! imported as stored; shown and checked (every checksum) without any key.

use std::path::PathBuf;
use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::json;

use super::EXIT_FAILED;
use super::bundle::{ExportArgs, FileArgs};
use super::common::{fail, open_writable, print_json, print_text, usage};
use super::table::{Table, cut, time};
use crate::debug::SealedBundle;

/// `cairn bundle export` without the key of a sealed thread: a sealed bundle (its bodies as
/// stored, `debug/sealed_bundle.rs`). The flags that change bodies need the key.
pub(super) async fn export(args: &ExportArgs, operator: &crate::Operator) -> anyhow::Result<()> {
    let flags = [
        (!args.secret.is_empty(), "--secret"),
        (!args.redact_key.is_empty(), "--redact-key"),
        (args.last_events.is_some(), "--last-events"),
        (args.max_payload_bytes.is_some(), "--max-payload-bytes"),
        (args.no_checkpoints, "--no-checkpoints"),
        (!args.meta.is_empty(), "--meta"),
    ];
    if let Some((_, flag)) = flags.iter().find(|(given, _)| *given) {
        return Err(usage(format!(
            "{} is sealed and CAIRN_KEYS holds no key for it: it is exported sealed, as              stored, and {flag} needs the key",
            args.thread
        )));
    }
    let bundle = operator.export_sealed_bundle(&args.thread).await?;
    write(args, &bundle)
}

/// Writes `bundle` where `args` say and reports it.
pub(super) fn write(args: &ExportArgs, bundle: &SealedBundle) -> anyhow::Result<()> {
    let bytes = bundle.to_bytes(args.gzip)?;
    std::fs::write(&args.output, &bytes)
        .map_err(|e| fail(EXIT_FAILED, format!("cannot write {}: {e}", args.output.display())))?;
    let summary = json!({
        "thread": args.thread,
        "file": args.output.display().to_string(),
        "bytes": bytes.len(),
        "gzip": args.gzip,
        "events": bundle.events.len(),
        "checkpoints": bundle.checkpoints.len(),
        "sealed": bundle.sealed,
    });
    if args.common.json {
        return print_json(&summary);
    }
    print_text(&format!(
        "exported {} sealed with key {} ({} events, {} checkpoints, as stored: import it and \
         read it with the key) to {} ({} bytes{})",
        args.thread,
        bundle.sealed.keys.join(", "),
        bundle.events.len(),
        bundle.checkpoints.len(),
        args.output.display(),
        bytes.len(),
        if args.gzip { ", gzip" } else { "" }
    ));
    Ok(())
}

/// The sealed bundle in `file`, if it holds one (`None` for a decoded bundle).
pub(super) fn read(file: &PathBuf) -> anyhow::Result<Option<SealedBundle>> {
    let bytes =
        std::fs::read(file).map_err(|e| usage(format!("cannot read {}: {e}", file.display())))?;
    SealedBundle::from_bytes(&bytes)
        .map_err(|e| fail(EXIT_FAILED, format!("{} is not a sealed bundle: {e}", file.display())))
}

/// `cairn bundle import` of a sealed bundle.
pub(super) async fn import(
    args: &FileArgs,
    bundle: &SealedBundle,
    wfs: &[Arc<DynWorkflow>],
) -> anyhow::Result<()> {
    let engine = open_writable(&args.common.db, wfs).await?;
    let result = crate::Operator::new(&engine).import_sealed_bundle(bundle).await;
    engine.shutdown().await;
    let id = result?;
    let (events, keys) = (bundle.events.len(), bundle.sealed.keys.join(", "));
    if args.common.json {
        let db = args.common.db.display().to_string();
        return print_json(&json!({"thread": id.as_str(), "events": events, "db": db,
            "sealed": bundle.sealed}));
    }
    let db = args.common.db.display();
    print_text(&format!(
        "imported thread {id} ({events} events, sealed with key {keys}) into {db}"
    ));
    Ok(())
}

/// `cairn bundle show` of a sealed bundle: checked (checksums, seqs) without any key.
pub(super) fn show(args: &FileArgs, bundle: &SealedBundle) -> anyhow::Result<()> {
    let t = &bundle.thread;
    if args.common.json {
        return print_json(&json!({
            "version": bundle.version,
            "timestamp": bundle.timestamp,
            "sealed": bundle.sealed,
            "thread": t,
            "events": bundle.events.len(),
            "payloads": bundle.payloads.len(),
            "checkpoints": bundle.checkpoints.len(),
            "checksums": "ok",
        }));
    }
    let mut table = Table::new(&["", ""]);
    table.pair(
        "bundle",
        format!("sealed, version {}, exported {}", bundle.version, time(bundle.timestamp)),
    );
    table.pair(
        "sealed",
        format!("codec {}, key {}", bundle.sealed.codecs.join(", "), bundle.sealed.keys.join(", ")),
    );
    table.pair("thread", format!("{} ({})", t.id, t.status));
    table.pair(
        "workflow",
        format!("{} v{} ({})", t.workflow.id, t.workflow.version, cut(&t.workflow.fingerprint, 16)),
    );
    table.pair(
        "events",
        format!("{}, {} offloaded bodies", bundle.events.len(), bundle.payloads.len()),
    );
    table.pair("checkpoints", bundle.checkpoints.len().to_string());
    table.pair("checksums", "ok (blake3 of every sealed body)".to_owned());
    print_text(&table.render());
    Ok(())
}
