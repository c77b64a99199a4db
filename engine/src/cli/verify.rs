//! `cairn verify`: every CRC, seq continuity and index consistency; exit code 3 and the location
//! of every damaged record when anything is wrong.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::json;

use super::EXIT_DAMAGE;
use super::common::{Common, fail, open_read_only, print_json, print_text, progress};
use super::table::Table;

/// Arguments of `cairn verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    common: Common,
}

pub(super) async fn verify(args: VerifyArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let bar = progress(0, "verify");
    bar.set_message(format!("reading {}", args.common.db.display()));
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    let engine = match open_read_only(&args.common.db, wfs).await {
        Ok(engine) => engine,
        // Damage that keeps the file from opening at all is still verify's finding: the same
        // document, with the one problem it could see.
        Err(e) if args.common.json && super::common::exit_code(&e) == EXIT_DAMAGE => {
            bar.finish_and_clear();
            print_json(&json!({
                "clean": false,
                "opened": false,
                "problems": [{ "table": "redb", "thread": null, "seq": null, "detail": e.to_string() }],
            }))?;
            return Err(e);
        }
        Err(e) => return Err(e),
    };
    bar.set_message("checking every record");
    let store = engine.store().clone();
    let report = tokio::task::spawn_blocking(move || store.verify()).await??;
    bar.finish_and_clear();
    let problems: Vec<_> = report
        .problems
        .iter()
        .map(|p| {
            json!({
                "table": p.table,
                "thread": p.thread.as_ref().map(|t| t.as_str()),
                "seq": p.seq.map(|s| s.0),
                "detail": p.detail,
            })
        })
        .collect();
    let counts = format!(
        "{} threads, {} events, {} checkpoints, {} payloads, {} locks",
        report.threads, report.events, report.checkpoints, report.payloads, report.locks
    );
    if args.common.json {
        print_json(&json!({
            "clean": report.is_clean(),
            "opened": true,
            "threads": report.threads,
            "events": report.events,
            "checkpoints": report.checkpoints,
            "payloads": report.payloads,
            "locks": report.locks,
            "problems": problems,
        }))?;
    } else if report.is_clean() {
        print_text(&format!("ok: {counts} checked; no damage"));
    } else {
        let mut table = Table::new(&["TABLE", "THREAD", "SEQ/ID", "PROBLEM"]);
        for p in &report.problems {
            table.row(vec![
                p.table.to_owned(),
                p.thread.as_ref().map(ToString::to_string).unwrap_or_else(|| "-".into()),
                p.seq.map(|s| s.to_string()).unwrap_or_else(|| "-".into()),
                p.detail.clone(),
            ]);
        }
        print_text(&table.render());
    }
    if report.is_clean() {
        Ok(())
    } else {
        Err(fail(
            EXIT_DAMAGE,
            format!("{} problems found ({counts} checked)", report.problems.len()),
        ))
    }
}
