//! Fuzz check `bundle_import`: arbitrary bytes to the debug-bundle reader
//! (`Bundle::from_bytes`, what `import_bundle` and `cairn bundle import` run first).
//!
//! - Never a panic: a refusal is an `Error::Bundle` naming a JSON path (`$...`).
//! - A bundle it accepts is written again, plain and gzip, to bytes that read back to an equal
//!   bundle (export after import loses nothing).
//!
//! Shared by the fuzz target (`fuzz/fuzz_targets/bundle_import.rs`) and the corpus replay in
//! the reliability suite, which also imports every accepted input into a database.

use std::sync::Arc;

use cairn::dsl::Message;
use cairn::storage::ThreadId;
use cairn::{Ctx, END, NodeOutput, Replace, START, StartOptions, Workflow};
use cairn_testkit::{deterministic_engine, runner_released};
use cairn_tools::debug::{Bundle, ExportOptions, Redaction};

/// A secret the seed thread writes into its conversation (redacted in one seed bundle).
#[allow(dead_code, reason = "used by the corpus writer, not by the fuzz target")]
const SECRET: &str = "sk-live-0123456789abcdef";

/// The check: `Some(bundle)` when the bytes are a bundle.
pub fn check(data: &[u8]) -> Option<Bundle> {
    match Bundle::from_bytes(data) {
        Ok(bundle) => {
            for gzip in [false, true] {
                let bytes = bundle.to_bytes(gzip).expect("an accepted bundle serialises");
                let again = Bundle::from_bytes(&bytes).expect("its own bytes are accepted again");
                assert_eq!(again, bundle, "bundle round trip (gzip={gzip})");
            }
            Some(bundle)
        }
        Err(cairn::Error::Bundle { path, .. }) => {
            assert!(path.starts_with('$'), "a bundle error names a JSON path: {path}");
            None
        }
        Err(other) => panic!("not a bundle error: {other}"),
    }
}

/// The workflow of the seed bundles: a tool call, a message, usage, a human input.
#[allow(dead_code, reason = "used by the corpus writer and replay, not by the fuzz target")]
pub fn workflow() -> Workflow<Replace<Vec<u64>>> {
    Workflow::<Replace<Vec<u64>>>::builder("fuzz-bundle", 1)
        .node("fetch", |s: Arc<Replace<Vec<u64>>>, ctx: Ctx| async move {
            let v: u64 =
                ctx.tool("lookup", s.0.len() as u64, |n: u64, _| async move { Ok(n + 40) }).await?;
            let mut out = s.0.clone();
            out.push(v ^ (ctx.random_u64() % 7));
            ctx.message(Message::new("assistant", format!("used key {SECRET} for {v}")));
            ctx.usage(120, 300);
            Ok(NodeOutput::update(out))
        })
        .node("ask", |s: Arc<Replace<Vec<u64>>>, ctx: Ctx| async move {
            let answer: u64 = ctx.interrupt("how many?")?;
            let mut out = s.0.clone();
            out.push(answer);
            Ok(NodeOutput::update(out))
        })
        .edge(START, "fetch")
        .edge("fetch", "ask")
        .edge("ask", END)
        .build()
        .expect("fuzz workflow")
}

/// Real bundles as bytes (seed corpus): a thread waiting for input and the same thread ended,
/// whole, with checkpoints, only its last events, redacted, gzip.
#[allow(dead_code, reason = "used by the corpus writer, not by the fuzz target")]
pub fn seed_bundles() -> Vec<Vec<u8>> {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let wf = workflow();
        let (builder, _clock) = deterministic_engine(5).expect("engine");
        let engine = builder.workflow(&wf).open().await.expect("open");
        let thread = ThreadId::new("seed").expect("id");
        let handle = engine
            .start_json("fuzz-bundle", vec![1u64], StartOptions::id("seed"))
            .await
            .expect("start");
        handle.wait().await.expect("parks for input");
        runner_released(&engine, &thread).await;
        let export = async |options: ExportOptions| {
            let bundle = cairn_tools::Operator::new(&engine)
                .export_bundle("seed", &options)
                .await
                .expect("export");
            bundle.to_bytes(options.gzip).expect("bytes")
        };
        let mut out = vec![export(ExportOptions::default()).await];
        engine.send_input("seed", 5u64).await.expect("input");
        handle.finished().await.expect("ends");
        out.push(export(ExportOptions::default()).await);
        out.push(
            export(ExportOptions { include_checkpoints: true, ..ExportOptions::default() }).await,
        );
        out.push(export(ExportOptions { last_events: Some(3), ..ExportOptions::default() }).await);
        out.push(
            export(ExportOptions {
                redaction: Redaction::default().secret(SECRET),
                gzip: true,
                ..ExportOptions::default()
            })
            .await,
        );
        engine.shutdown().await;
        out
    })
}
