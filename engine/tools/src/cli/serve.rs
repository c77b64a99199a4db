//! `cairn serve --db FILE [--addr 127.0.0.1:0] [--public] [--allow-host NAME]`: opens the file
//! for writing (so no other engine may hold it), serves the HTTP endpoint (`crate::serve`, with
//! the Prometheus text of the process's metrics at `/metrics`) until interrupted, and prints
//! where (the address, the token and its file). With `--public` every read needs the token too
//! and every answer is redacted; `--allow-host` names the endpoint is reached by (any other
//! `Host` is refused). It runs the file's work as `cairn worker` does: at open it resumes every
//! unfinished thread (created by `cairn start` while no engine held the file, queued, or left
//! running by a stopped process), and from then on it admits queued threads as their queue's
//! limits allow, runs schedules' ticks and fires timers; whatever it accepts (a start, a
//! signal, a control) it runs. `--retention AGE` has it delete finished threads that ended at
//! least that long ago, once a minute. `--stuck-action`, `--expired-locks`, `--stuck-after-ms`
//! and `--health-every-ms` set what its health passes do (`super::health_policy`).

use std::net::SocketAddr;
use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::json;

use super::common::{Common, open_running, print_json, print_text, usage};
use crate::serve::{ServeOptions, serve};

/// Arguments of `cairn serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    common: Common,
    /// Where to listen (port 0: a free port, printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: SocketAddr,
    #[command(flatten)]
    endpoint: EndpointFlags,
    /// Delete finished threads this long after they ended (`30d`, `12h`, `90m`; a retention
    /// pass every minute while it serves): `cairn::RetentionPolicy::after_ms`.
    #[arg(long, value_name = "AGE", value_parser = super::control::parse_age_ms)]
    retention: Option<u64>,
    #[command(flatten)]
    health: super::health_policy::HealthPolicyFlags,
    #[cfg(feature = "otel")]
    #[command(flatten)]
    pub(super) otlp: super::otlp::OtlpFlag,
}

/// The endpoint's flags `cairn serve` and `cairn worker --addr` share.
#[derive(Debug, Clone, clap::Args)]
pub struct EndpointFlags {
    /// Allow an address other than loopback. Every read then needs the token too, and every
    /// answer is redacted (as `redact=1`).
    #[arg(long)]
    public: bool,
    /// A name (`host` or `host:port`) the endpoint is reached by, besides its address (and for
    /// a loopback one `localhost`): requests with another `Host` are refused. Repeatable.
    #[arg(long = "allow-host", value_name = "HOST")]
    allow_host: Vec<String>,
}

impl EndpointFlags {
    /// The options to serve `addr` with, the process's Prometheus recorder installed (before the
    /// engine opens, so that its handles record into it).
    ///
    /// # Errors
    /// A usage error (exit 2) for a non-loopback address without `--public`.
    pub(super) fn options(&self, addr: SocketAddr) -> anyhow::Result<ServeOptions> {
        if !addr.ip().is_loopback() && !self.public {
            return Err(usage(format!(
                "--addr {addr} is not a loopback address: add --public to serve it to the network \
                 (reads then need the token)"
            )));
        }
        let mut options = ServeOptions::new(addr);
        options.public = self.public;
        options.allow_hosts.clone_from(&self.allow_host);
        options.prometheus = prometheus();
        Ok(options)
    }
}

/// The process's Prometheus handle, once a recorder is installed (by [`prometheus`], or beside
/// the OTLP one by `--otlp`).
pub(super) static PROMETHEUS: std::sync::OnceLock<Option<crate::prometheus::Handle>> =
    std::sync::OnceLock::new();

/// The process's Prometheus handle: the recorder is installed by the first caller (a process
/// has one global recorder; `None` if something else installed one first).
pub(super) fn prometheus() -> Option<crate::prometheus::Handle> {
    PROMETHEUS
        .get_or_init(|| match crate::prometheus::install() {
            Ok(handle) => Some(handle),
            Err(e) => {
                tracing::warn!(error = %e, "no Prometheus text at /metrics");
                None
            }
        })
        .clone()
}

pub(super) async fn run(args: ServeArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    let options = args.endpoint.options(args.addr)?;
    let db = &args.common.db;
    let retention = args.retention.map(cairn::RetentionPolicy::after_ms);
    let engine = open_running(db, wfs, |builder| {
        let builder = args.health.apply(builder);
        match retention {
            Some(policy) => builder.retention(policy),
            None => builder,
        }
    })
    .await?;
    let server = serve(&engine, Some(db), options).await?;
    let token_file = server.token_file().map(|p| p.display().to_string()).unwrap_or_default();
    // Before the address is printed: a signal sent as soon as it is read stops the server
    // gracefully.
    let (mut interrupt, mut terminate) = super::common::stop_signals()?;
    if args.common.json {
        // One line, so a script can read it before the server stops.
        print_text(
            &json!({
                "address": server.addr().to_string(),
                "web_view": format!("http://{}/ui/threads", server.addr()),
                "token": server.token(),
                "token_file": token_file,
                "endpoint_file": server.endpoint_file().map(|p| p.display().to_string()),
                "pid": std::process::id(),
            })
            .to_string(),
        );
    } else {
        print_text(&format!(
            "serving {} at http://{addr}/api/threads\nweb view: http://{addr}/ui/threads\n\
             token (for controls{}: Authorization: Bearer ...): {}\n\
             token file: {token_file}\nCtrl-C stops it",
            db.display(),
            if args.endpoint.public { ", and for reads on this public address" } else { "" },
            server.token(),
            addr = server.addr(),
        ));
    }
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
        () = server.stopped() => {}
    }
    server.shutdown().await;
    engine.shutdown().await;
    if args.common.json {
        return print_json(&json!({"stopped": true}));
    }
    print_text("stopped");
    Ok(())
}
