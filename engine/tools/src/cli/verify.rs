//! `cairn verify`: every CRC, seq continuity and index consistency; exit code 3 and the location
//! of every damaged record when anything is wrong. With a running engine serving the file, the
//! engine checks its live store (`GET /api/verify`): no copy of the file.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::json;

use super::EXIT_DAMAGE;
use super::common::{Common, fail, open_read_only, print_json, print_text, progress};
use super::endpoint;
use super::table::Table;
use crate::debug::rows::VerifyRow;
use crate::serve::wire;

pub(super) async fn verify(args: Common, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    // A running engine checks its own live store (a consistent snapshot of it): no copy.
    let found = endpoint::through(&args.db, |ep| {
        Ok(wire::read(ep.get("/api/verify", &[])?, "verify report")?)
    })?;
    let doc = match found {
        Some(doc) => doc,
        None => local(&args, wfs).await?,
    };
    show(&doc, args.json)
}

/// Verifies the file itself: the report's JSON document (damage that keeps the file from
/// opening is printed as verify's finding with `--json`, and returned as the error).
async fn local(args: &Common, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<VerifyRow> {
    let bar = progress(0, "verify");
    bar.set_message(format!("reading {}", args.db.display()));
    bar.enable_steady_tick(std::time::Duration::from_millis(120));
    let engine = match open_read_only(&args.db, wfs).await {
        Ok(engine) => engine,
        // Damage that keeps the file from opening at all is still verify's finding: the same
        // document, with the one problem it could see.
        Err(e) if args.json && super::common::exit_code(&e) == EXIT_DAMAGE => {
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
    Ok(crate::debug::views::verify_row(&report))
}

/// Prints a verify document (as the file path or the endpoint made it); exit 3 when it names
/// problems.
fn show(doc: &VerifyRow, json: bool) -> anyhow::Result<()> {
    let counts = format!(
        "{} threads, {} events, {} checkpoints, {} payloads, {} locks",
        doc.threads, doc.events, doc.checkpoints, doc.payloads, doc.locks
    );
    let problems = &doc.problems;
    if json {
        print_json(doc)?;
    } else if problems.is_empty() {
        print_text(&format!("ok: {counts} checked; no damage"));
    } else {
        let mut table = Table::new(&["TABLE", "THREAD", "SEQ/ID", "PROBLEM"]);
        for p in problems {
            table.row(vec![
                p.table.clone(),
                p.thread.clone().unwrap_or_else(|| "-".into()),
                p.seq.map_or_else(|| "-".into(), |s| s.to_string()),
                p.detail.clone(),
            ]);
        }
        print_text(&table.render());
    }
    if problems.is_empty() {
        Ok(())
    } else {
        Err(fail(EXIT_DAMAGE, format!("{} problems found ({counts} checked)", problems.len())))
    }
}
