//! Fuzz check `snapshot_decode`: arbitrary bytes as a checkpoint snapshot and as an event body.
//!
//! - As a snapshot: `restore::decode_snapshot` then `ThreadCtx::from_snapshot` either refuse
//!   with an error or give a context whose own snapshot restores to the same snapshot.
//! - As an event body: `codec::decode_body` (binary or JSON) never panics; a body it accepts
//!   re-encodes to a binary body that decodes to the same body; applying it to real contexts
//!   (taken at every seq of a real thread: open steps, a tool call in flight, waiting for input,
//!   ended) returns `Ok` or an error, never panics, and never moves a context whose apply failed
//!   past the seq.
//!
//! Shared by the fuzz target (`fuzz/fuzz_targets/snapshot_decode.rs`) and the corpus replay in
//! the reliability suite.

use std::sync::{Arc, OnceLock};

use cairn::storage::ThreadId;
use cairn::thread_ctx::{Snapshot, ThreadCtx};
use cairn::{Ctx, END, NodeOutput, Replace, START, StartOptions, Workflow};
use cairn_testkit::{deterministic_engine, runner_released};

fn workflow() -> Workflow<Replace<Vec<u64>>> {
    Workflow::<Replace<Vec<u64>>>::builder("fuzz-snapshot", 1)
        .node("fetch", |s: Arc<Replace<Vec<u64>>>, ctx: Ctx| async move {
            let v: u64 =
                ctx.tool("lookup", s.0.len() as u64, |n: u64, _| async move { Ok(n + 40) }).await?;
            let mut out = s.0.clone();
            out.push(v ^ (ctx.random_u64() % 7));
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

/// The seed thread's snapshots as JSON (seed corpus).
#[allow(dead_code, reason = "used by the corpus writer, not by the fuzz target")]
pub fn seed_snapshots() -> Vec<Vec<u8>> {
    seeds().0.iter().map(|s| serde_json::to_vec(s).expect("json")).collect()
}

/// The seed thread's event bodies as stored (binary) and as JSON (seed corpus).
#[allow(dead_code, reason = "used by the corpus writer, not by the fuzz target")]
pub fn seed_bodies() -> Vec<Vec<u8>> {
    seeds().1.clone()
}

/// Contexts of a real thread at every seq and its event bodies, made once.
fn seeds() -> &'static (Vec<Snapshot>, Vec<Vec<u8>>) {
    static SEEDS: OnceLock<(Vec<Snapshot>, Vec<Vec<u8>>)> = OnceLock::new();
    SEEDS.get_or_init(|| {
        let runtime =
            tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
        runtime.block_on(async {
            let wf = workflow();
            let (builder, _clock) = deterministic_engine(3).expect("engine");
            let engine = builder.workflow(&wf).open().await.expect("open");
            let thread = ThreadId::new("seed").expect("id");
            let handle = engine
                .start_json("fuzz-snapshot", vec![1u64], StartOptions::id("seed"))
                .await
                .expect("start");
            handle.wait().await.expect("parks for input");
            runner_released(&engine, &thread).await;
            engine.send_input("seed", 5u64).await.expect("input");
            handle.finished().await.expect("ends");
            let erased = wf.erase();
            let last =
                engine.store().last_bookmark(&thread).wait().expect("read").expect("events").seq.0;
            let snapshots = (1..=last)
                .map(|seq| {
                    cairn::blocking::restore(engine.store().as_ref(), &erased, &thread, Some(seq))
                        .and_then(|ctx| ctx.snapshot().map_err(Into::into))
                        .expect("a real thread restores at every seq")
                })
                .collect();
            let bodies = engine
                .store()
                .read_since(&thread, cairn::storage::Seq(0), 1_000)
                .wait()
                .expect("events")
                .into_iter()
                .flat_map(|e| {
                    let stored = e.data.clone();
                    let body =
                        cairn::blocking::decode(engine.store().as_ref(), e).expect("decode").body;
                    [stored, serde_json::to_vec(&body).expect("json")]
                })
                .collect();
            engine.shutdown().await;
            (snapshots, bodies)
        })
    })
}

/// The check.
pub fn check(data: &[u8]) {
    let wf = workflow().erase();
    let thread = ThreadId::new("fuzz").expect("id");
    if let Ok(snapshot) = cairn_core::restore::decode_snapshot(&thread, 1, data)
        && let Ok(ctx) = ThreadCtx::from_snapshot(&wf, snapshot)
    {
        let own = ctx.snapshot().expect("a restored context snapshots");
        let again = ThreadCtx::from_snapshot(&wf, own.clone()).expect("its own snapshot restores");
        assert_eq!(again.snapshot().expect("snapshots"), own, "snapshot round trip");
    }
    if let Ok(body) = cairn_core::codec::decode_body(&mut data.to_vec()) {
        let mut binary = cairn_core::codec::encode_body(&body).expect("a decoded body encodes");
        let again = cairn_core::codec::decode_body(&mut binary).expect("its binary form decodes");
        assert_eq!(again, body, "binary round trip");
        for seed in &seeds().0 {
            let mut ctx = ThreadCtx::from_snapshot(&wf, seed.clone()).expect("seed restores");
            let seq = ctx.meta.seq;
            if ctx.apply(seq + 1, 0, &body).is_err() {
                // A refused event must not count as applied.
                assert!(ctx.meta.seq == seq || ctx.meta.seq == seq + 1);
            }
            let _ = ctx.snapshot();
        }
    }
}
