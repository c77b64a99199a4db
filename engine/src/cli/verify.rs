//! `cairn verify`: every CRC, seq continuity and index consistency; exit code 3 and the location
//! of every damaged record when anything is wrong. With a running engine serving the file, the
//! engine checks its live store (`GET /api/verify`): no copy of the file.

use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::{Value, json};

use super::EXIT_DAMAGE;
use super::common::{Common, fail, open_read_only, print_json, print_text, progress};
use super::endpoint;
use super::table::Table;

/// Arguments of `cairn verify`.
#[derive(Debug, clap::Args)]
pub struct VerifyArgs {
    #[command(flatten)]
    common: Common,
}

pub(super) async fn verify(args: VerifyArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    // A running engine checks its own live store (a consistent snapshot of it): no copy.
    let found = endpoint::through(&args.common.db, |ep| ep.get("/api/verify", &[]))?;
    let doc = match found {
        Some(doc) => doc,
        None => local(&args, wfs).await?,
    };
    show(&doc, args.common.json)
}

/// Verifies the file itself: the report's JSON document (damage that keeps the file from
/// opening is printed as verify's finding with `--json`, and returned as the error).
async fn local(args: &VerifyArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<Value> {
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
    Ok(crate::debug::views::verify_json(&report))
}

/// Prints a verify document (as the file path or the endpoint made it); exit 3 when it names
/// problems.
fn show(doc: &Value, json: bool) -> anyhow::Result<()> {
    let n = |key: &str| doc[key].as_u64().unwrap_or(0);
    let counts = format!(
        "{} threads, {} events, {} checkpoints, {} payloads, {} locks",
        n("threads"),
        n("events"),
        n("checkpoints"),
        n("payloads"),
        n("locks")
    );
    let problems = doc["problems"].as_array().map(Vec::as_slice).unwrap_or_default();
    if json {
        print_json(doc)?;
    } else if problems.is_empty() {
        print_text(&format!("ok: {counts} checked; no damage"));
    } else {
        let mut table = Table::new(&["TABLE", "THREAD", "SEQ/ID", "PROBLEM"]);
        let cell = |v: &Value| match v {
            Value::Null => "-".to_owned(),
            Value::String(s) => s.clone(),
            other => other.to_string(),
        };
        for p in problems {
            table.row(vec![
                cell(&p["table"]),
                cell(&p["thread"]),
                cell(&p["seq"]),
                cell(&p["detail"]),
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
