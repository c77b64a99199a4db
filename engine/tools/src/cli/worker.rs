//! `cairn worker --db FILE|postgresql://...`: runs a database's work with the workflows
//! compiled into this binary until interrupted (SIGINT, SIGTERM), or, with `--exit-when-idle`,
//! until no thread is left runnable.
//!
//! With `--addr 127.0.0.1:9464` it also serves the HTTP endpoint there (as `cairn serve`: reads,
//! controls, and the Prometheus text of its metrics at `/metrics`), printing its address and
//! token on stderr; `--public` and `--allow-host` as for `cairn serve`, and so are the health
//! policy flags (`--stuck-action`, `--expired-locks`, `--stuck-after-ms`, `--health-every-ms`).
//!
//! On a file it is the one process that holds it: at open it resumes every unfinished thread
//! (those left running or created by a stopped process, a created schedule), re-arms timers,
//! and runs schedules' ticks. On a shared (PostgreSQL) database it also takes over runnable
//! threads whose lease has lapsed (their engine died or stalled), fires due timers and
//! deadlines, and drives threads woken by input from any process; several workers on one
//! database share the work, a thread driven by one at a time, fenced by its lease.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cairn_dsl::DynWorkflow;
use cairn_storage::{Page, ThreadFilter, ThreadStatus};
use serde_json::json;

use super::common::{Common, open_error, print_json, print_text, with_workflows};
use cairn::{Engine, RecoveryPolicy};

/// Arguments of `cairn worker`.
#[derive(Debug, clap::Args)]
pub struct WorkerArgs {
    #[command(flatten)]
    common: Common,
    /// Threads driven at once by this worker.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// How long a lease lasts without renewal: a dead worker's threads are taken over after it.
    #[arg(long, default_value_t = cairn::Config::default().lease_ttl_ms)]
    lease_ttl_ms: u64,
    /// How often to look for work, in ms.
    #[arg(long, default_value_t = 500)]
    poll_ms: u64,
    /// Exit once no thread is runnable (none Running or Created), instead of serving on.
    #[arg(long)]
    exit_when_idle: bool,
    /// Serve the HTTP endpoint (and Prometheus text at `/metrics`) at this address while it
    /// works (port 0: a free port, printed on stderr).
    #[arg(long)]
    addr: Option<std::net::SocketAddr>,
    #[command(flatten)]
    endpoint: super::serve::EndpointFlags,
    #[command(flatten)]
    health: super::health_policy::HealthPolicyFlags,
    #[cfg(feature = "otel")]
    #[command(flatten)]
    pub(super) otlp: super::otlp::OtlpFlag,
}

pub(super) async fn worker(args: WorkerArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let db = &args.common.db;
    // Before anything is announced: a SIGTERM sent as soon as the endpoint answers stops the
    // worker gracefully (installed later, it killed the process before the handler was there).
    let (mut interrupt, mut terminate) = super::common::stop_signals()?;
    // Checked, and the recorder installed, before the engine opens.
    let options = args.addr.map(|addr| args.endpoint.options(addr)).transpose()?;
    let builder = super::common::keyed(Engine::builder(db))?
        .concurrency(args.concurrency)
        .lease_ttl_ms(args.lease_ttl_ms)
        .poll_ms(args.poll_ms)
        .recovery(RecoveryPolicy::Resume);
    let builder = args.health.apply(builder);
    let engine = with_workflows(builder, wfs).open().await.map_err(|e| open_error(db, e))?;
    let server = match options {
        Some(options) => match serve_endpoint(&engine, db, options).await {
            Ok(server) => Some(server),
            Err(e) => {
                engine.shutdown().await;
                return Err(e);
            }
        },
        None => None,
    };
    let steps = Arc::new(AtomicU64::new(0));
    let counted = steps.clone();
    engine.on_step(Arc::new(move |_, _, _| {
        counted.fetch_add(1, Ordering::Relaxed);
    }));
    loop {
        tokio::select! {
            _ = interrupt.recv() => break,
            _ = terminate.recv() => break,
            () = tokio::time::sleep(Duration::from_millis(args.poll_ms)) => {}
        }
        if args.exit_when_idle && idle(&engine).await? {
            break;
        }
    }
    if let Some(server) = server {
        server.shutdown().await;
    }
    engine.shutdown().await;
    let steps = steps.load(Ordering::Relaxed);
    let fenced = engine.fenced_runners();
    if args.common.json {
        print_json(&json!({ "steps": steps, "fenced": fenced }))
    } else {
        print_text(&format!(
            "worker stopped after {steps} acknowledged steps ({fenced} runners fenced off threads \
             other workers took over)"
        ));
        Ok(())
    }
}

/// Serves the endpoint of `engine` (on a file, announced beside it) and says where on stderr
/// (stdout is the worker's report).
#[allow(clippy::print_stderr, reason = "the worker's stdout is its report")]
async fn serve_endpoint(
    engine: &Engine,
    db: &std::path::Path,
    options: crate::serve::ServeOptions,
) -> anyhow::Result<crate::serve::Server> {
    let file = (!cairn::admin::is_postgres_url(db)).then_some(db);
    let server = crate::serve::serve(engine, file, options).await?;
    eprintln!(
        "serving http://{addr}/api/threads and Prometheus text at http://{addr}/metrics \
         (token: {token})",
        addr = server.addr(),
        token = server.token()
    );
    Ok(server)
}

/// No thread is Running or Created.
async fn idle(engine: &Engine) -> anyhow::Result<bool> {
    for status in [ThreadStatus::Running, ThreadStatus::Created] {
        let filter = ThreadFilter { status: Some(status), ..ThreadFilter::default() };
        let page = Page { limit: 1, offset: 0 };
        if !engine.store().list_threads(&filter, page).await?.is_empty() {
            return Ok(false);
        }
    }
    Ok(true)
}
