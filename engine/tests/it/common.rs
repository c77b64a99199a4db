//! Shared helpers: small workflows and an engine on a temp file.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cairn::clock::ManualClock;
use cairn::dsl::{Ctx, NodeOutput, NodePolicy, RetryPolicy, State, Workflow};
use cairn::{Durability, END, Engine, EngineBuilder, START};
use cairn_tools::serve::Serve as _;
use cairn_tools::serve::Server;
use serde::{Deserialize, Serialize};

/// A counter state whose updates add.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Tally {
    pub total: u64,
    pub log: Vec<String>,
}

impl State for Tally {
    type Update = (u64, String);

    fn apply(&mut self, (add, note): (u64, String)) {
        self.total += add;
        // Counters send empty notes: keeping the state small keeps long threads cheap.
        if !note.is_empty() {
            self.log.push(note);
        }
    }
}

/// Counts real executions of tool bodies (side effects), to prove memoisation.
#[derive(Debug, Clone, Default)]
pub struct Effects(pub Arc<AtomicU64>);

impl Effects {
    pub fn count(&self) -> u64 {
        self.0.load(Ordering::SeqCst)
    }
}

/// START -> a -> b -> ... (n nodes) -> END, each adding its index via a tool call.
pub fn linear(n: usize, effects: Effects) -> Workflow<Tally> {
    let mut b = Workflow::<Tally>::builder("linear", 1);
    for i in 0..n {
        let fx = effects.clone();
        b = b.node(format!("n{i}"), move |_s: Arc<Tally>, ctx: Ctx| {
            let fx = fx.clone();
            async move {
                let v: u64 = ctx
                    .tool("add", i as u64, move |x: u64, _| async move {
                        fx.0.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, cairn::ToolError>(x + 1)
                    })
                    .await?;
                Ok(NodeOutput::update((v, format!("n{i}"))))
            }
        });
    }
    b = b.edge(START, "n0");
    for i in 1..n {
        b = b.edge(format!("n{}", i - 1), format!("n{i}"));
    }
    b.edge(format!("n{}", n - 1), END).build().expect("linear workflow")
}

/// A fan-out of `width` branches joined into `merge`, with a route and a bounded loop after it.
pub fn diamond(width: usize, effects: Effects) -> Workflow<Tally> {
    let branches: Vec<String> = (0..width).map(|i| format!("b{i}")).collect();
    let mut b = Workflow::<Tally>::builder("diamond", 1)
        .node("split", |_s, _ctx| async move { Ok(NodeOutput::update((1, "split".to_owned()))) });
    for (i, name) in branches.iter().enumerate() {
        let fx = effects.clone();
        let name2 = name.clone();
        b = b.node_with(
            name.clone(),
            move |_s: Arc<Tally>, ctx: Ctx| {
                let fx = fx.clone();
                let name = name2.clone();
                async move {
                    let r: u64 = ctx.random_u64() % 7;
                    let v: u64 = ctx
                        .tool("work", (i as u64, r), move |(i, r): (u64, u64), _| async move {
                            fx.0.fetch_add(1, Ordering::SeqCst);
                            Ok::<_, cairn::ToolError>(i * 10 + r)
                        })
                        .await?;
                    Ok(NodeOutput::update((v, name)))
                }
            },
            NodePolicy::default().retry(RetryPolicy::fixed(2, 1)),
        );
    }
    b.edge(START, "split")
        .fan_out("split", branches.clone())
        .join(branches, "merge")
        .node("merge", |s: Arc<Tally>, _ctx| async move {
            Ok(NodeOutput::update((s.log.len() as u64, "merge".to_owned())))
        })
        .node("again", |s: Arc<Tally>, _ctx| async move {
            Ok(NodeOutput::update((s.log.len() as u64, "again".to_owned())))
        })
        .edge("merge", "again")
        .route(
            "again",
            |s: &Tally| {
                if s.log.iter().filter(|l| *l == "again").count() < 3 { "again" } else { "done" }
            },
            ["again", "done"],
        )
        .loop_bound("again", 3)
        .node("done", |_s, _ctx| async move { Ok(NodeOutput::update((0, "done".to_owned()))) })
        .edge("done", END)
        .build()
        .expect("diamond workflow")
}

pub fn db() -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("cairn.db");
    (dir, path)
}

/// An engine on `path` without fsync (`Durability::None`), with the workflows `wfs` and what
/// `tune` sets besides (a seed, checkpoints, a clock): the setup the test files share.
pub async fn open<S: State>(
    path: &std::path::Path,
    wfs: &[&Workflow<S>],
    tune: impl FnOnce(EngineBuilder) -> EngineBuilder,
) -> Engine {
    let b =
        wfs.iter().fold(Engine::builder(path).durability(Durability::None), |b, wf| b.workflow(wf));
    tune(b).open().await.expect("open engine")
}

/// [`open`] with seed 11 and `clock` (the system's when `None`).
pub async fn engine_on(
    path: &std::path::Path,
    wfs: &[&Workflow<Tally>],
    clock: Option<ManualClock>,
) -> Engine {
    open(path, wfs, |b| match clock {
        Some(c) => b.seed(11).clock(Arc::new(c)),
        None => b.seed(11),
    })
    .await
}

/// An engine on `path` with the workflow `wf`, serving its endpoint on a free loopback port.
pub async fn serving<S: State>(path: &std::path::Path, wf: &Workflow<S>) -> (Engine, Server) {
    let builder = Engine::builder(path).workflow(wf).serve(([127, 0, 0, 1], 0).into());
    builder.open().await.expect("open a serving engine")
}

/// One node that asks for a number (an interrupt) and adds it.
pub fn asks_input() -> Workflow<Tally> {
    Workflow::<Tally>::builder("ask", 1)
        .node("ask", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt(serde_json::json!({"question": "how many?"}))?;
            Ok(NodeOutput::update((n, "answered".into())))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .build()
        .expect("the ask workflow")
}

/// An HTTP answer: the status, the `Location` header, and the body as JSON (a JSON string when
/// the body is not JSON).
pub struct Answer {
    pub status: u16,
    pub location: Option<String>,
    /// The `Retry-After` header (a 429's).
    pub retry_after: Option<String>,
    pub body: serde_json::Value,
}

/// `method url` (GET, POST or DELETE) with the bearer `token` (if any) and the JSON `body`, off
/// the async workers; a 4xx or 5xx is an answer, not an error.
pub async fn send(
    method: &'static str,
    url: String,
    token: Option<String>,
    body: String,
) -> Answer {
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent =
            ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let auth = token.map(|t| format!("Bearer {t}"));
        let with = |req: ureq::RequestBuilder<ureq::typestate::WithoutBody>| match &auth {
            Some(a) => req.header("authorization", a),
            None => req,
        };
        let resp = match method {
            "GET" => with(agent.get(&url)).call(),
            "DELETE" => with(agent.delete(&url)).call(),
            _ => {
                let req = agent.post(&url).header("content-type", "application/json");
                match &auth {
                    Some(a) => req.header("authorization", a),
                    None => req,
                }
                .send(body.as_str())
            }
        };
        let mut resp = resp.expect("an HTTP answer");
        let status = resp.status().as_u16();
        let location =
            resp.headers().get("location").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let retry_after =
            resp.headers().get("retry-after").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let text = resp.body_mut().read_to_string().expect("a UTF-8 body");
        let body = serde_json::from_str(&text).unwrap_or(serde_json::Value::String(text));
        Answer { status, location, retry_after, body }
    })
    .await
    .expect("the request's thread")
}

/// [`send`], as the status and the body.
pub async fn call(
    method: &'static str,
    url: String,
    token: Option<String>,
    body: String,
) -> (u16, serde_json::Value) {
    let answer = send(method, url, token, body).await;
    (answer.status, answer.body)
}

/// Prints a `RELIABILITY` summary line to the stderr handle directly: libtest captures
/// `println!`/`eprintln!` of passing tests, and these lines must reach the CI log.
pub fn report(line: &str) {
    use std::io::Write as _;
    let mut err = std::io::stderr().lock();
    let _ = writeln!(err, "{line}");
    let _ = err.flush();
}

/// Fires once `engine` has run `total` steps in all (its step hook): where a crash test stops the
/// first process.
pub fn after_steps(engine: &Engine, total: u64) -> tokio::sync::oneshot::Receiver<()> {
    let (tx, rx) = tokio::sync::oneshot::channel::<()>();
    let tx = std::sync::Mutex::new(Some(tx));
    engine.on_step(Arc::new(move |_t, _s, steps| {
        if steps == total
            && let Some(tx) = tx.lock().unwrap().take()
        {
            let _ = tx.send(());
        }
    }));
    rx
}
