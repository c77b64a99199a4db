//! The workflow of the multi-worker chaos test (`pg_workers.rs`): everything that crosses
//! workers in one thread. Tool calls (each real execution appended to a ledger file shared by
//! every worker process), a durable lock on one of three shared resources, a durable timer, a
//! human answer (given by whichever worker sees the thread waiting), and a sub-workflow child
//! thread. Its final state is a function of its input and the answer only, so every run,
//! whatever crashed on the way, must end in the state a single-process run ends in.

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn::{Ctx, END, NodeError, NodeOutput, START, Workflow};

use crate::workflows::{Entry, Ledger};

/// The workflow's id.
pub const CHAOS: &str = "chaos";

/// How long the timer of the `nap` node sleeps, in ms.
const NAP_MS: u64 = 300;

/// How long a resource lock is held at most, in ms.
const LOCK_TTL_MS: u64 = 10_000;

/// The answer a worker gives a thread that waits for one.
pub fn answer_for(thread: &str) -> String {
    format!("ok-{thread}")
}

/// The input of thread `id`.
pub fn input_for(id: &str) -> Ledger {
    Ledger { entries: vec![format!("start:{id}")], sum: 0 }
}

/// A deterministic "external service".
fn service(tool: &str, input: &str) -> u64 {
    let hash = blake3::hash(format!("{tool}:{input}").as_bytes());
    u64::from_le_bytes(hash.as_bytes()[..8].try_into().expect("8 bytes")) % 10_000
}

/// Calls `tool` on `input`; its execution appends `tool TAB input` to `ledger` first.
async fn call(
    ledger: &Path,
    ctx: &Ctx,
    tool: &'static str,
    input: String,
) -> Result<u64, NodeError> {
    let ledger = ledger.to_path_buf();
    ctx.tool(tool, input, move |input: String, _| async move {
        let line = format!("{tool}\t{input}\n");
        let mut file = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&ledger)
            .map_err(|e| cairn::ToolError::retryable(format!("ledger: {e}")))?;
        // One write of a short line with O_APPEND: lines of concurrent processes do not mix.
        file.write_all(line.as_bytes())
            .map_err(|e| cairn::ToolError::retryable(format!("ledger: {e}")))?;
        Ok(service(tool, &input))
    })
    .await
}

/// The thread's own key for tool inputs (its first ledger entry names it).
fn key(s: &Ledger) -> String {
    s.entries.first().cloned().unwrap_or_default()
}

fn child(ledger: &Path) -> Workflow<Ledger> {
    let ledger = ledger.to_path_buf();
    Workflow::<Ledger>::builder("chaos-child", 1)
        .node("work", move |s: Arc<Ledger>, ctx: Ctx| {
            let ledger = ledger.clone();
            async move {
                let v = call(&ledger, &ctx, "child-work", format!("{}:child", key(&s))).await?;
                Ok(NodeOutput::update(Entry(format!("child:{v}"), v)))
            }
        })
        .edge(START, "work")
        .edge("work", END)
        .build()
        .expect("chaos child workflow")
}

/// The chaos workflow, its tools writing to `ledger`.
pub fn chaos(ledger: &Path) -> Workflow<Ledger> {
    let l = |p: &Path| -> PathBuf { p.to_path_buf() };
    let (fetch, guard, nap, finish) = (l(ledger), l(ledger), l(ledger), l(ledger));
    Workflow::<Ledger>::builder(CHAOS, 1)
        .node("fetch", move |s: Arc<Ledger>, ctx: Ctx| {
            let ledger = fetch.clone();
            async move {
                let a = call(&ledger, &ctx, "fetch", format!("{}:1", key(&s))).await?;
                let b = call(&ledger, &ctx, "fetch", format!("{}:2", key(&s))).await?;
                Ok(NodeOutput::update(Entry(format!("fetch:{a}+{b}"), a + b)))
            }
        })
        .node("guard", move |s: Arc<Ledger>, ctx: Ctx| {
            let ledger = guard.clone();
            async move {
                let resource = format!("resource-{}", s.sum % 3);
                ctx.lock(&resource, LOCK_TTL_MS).await?;
                let v = call(&ledger, &ctx, "use", format!("{}:{resource}", key(&s))).await?;
                ctx.unlock(&resource).await?;
                Ok(NodeOutput::update(Entry(format!("use:{resource}:{v}"), v)))
            }
        })
        .node("nap", move |s: Arc<Ledger>, ctx: Ctx| {
            let ledger = nap.clone();
            async move {
                ctx.sleep_ms(NAP_MS).await?;
                let v = call(&ledger, &ctx, "wake", format!("{}:wake", key(&s))).await?;
                Ok(NodeOutput::update(Entry(format!("wake:{v}"), v)))
            }
        })
        .node("ask", |_s: Arc<Ledger>, ctx: Ctx| async move {
            let answer: String = ctx.interrupt(serde_json::json!({ "question": "go on?" }))?;
            Ok(NodeOutput::update(Entry(format!("answer:{answer}"), 1)))
        })
        .subgraph(
            "sub",
            child(ledger),
            |s: &Ledger| Ledger { entries: vec![key(s)], sum: 0 },
            |c: &Ledger| Entry(format!("sub:{}", c.entries.join("+")), c.sum),
        )
        .node("finish", move |s: Arc<Ledger>, ctx: Ctx| {
            let ledger = finish.clone();
            async move {
                let v = call(&ledger, &ctx, "persist", format!("{}:{}", key(&s), s.sum)).await?;
                Ok(NodeOutput::update(Entry(format!("persist:{v}"), v)))
            }
        })
        .edge(START, "fetch")
        .edge("fetch", "guard")
        .edge("guard", "nap")
        .edge("nap", "ask")
        .edge("ask", "sub")
        .edge("sub", "finish")
        .edge("finish", END)
        .build()
        .expect("chaos workflow")
}
