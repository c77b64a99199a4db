//! `cairn serve --db FILE [--addr 127.0.0.1:0] [--public]`: opens the file for writing (so no
//! other engine may hold it), serves the HTTP endpoint (`crate::serve`) until interrupted, and
//! prints where (the address, the token and its file). Threads are not resumed by opening: only
//! a control (`resume`, `input`, `fork`) runs one, in this process. `--retention AGE` has it
//! delete finished threads that ended at least that long ago, once a minute.

use std::net::SocketAddr;
use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use serde_json::json;

use super::common::{Common, open_writable_with, print_json, print_text, usage};
use crate::serve::{ServeOptions, serve};

/// Arguments of `cairn serve`.
#[derive(Debug, clap::Args)]
pub struct ServeArgs {
    #[command(flatten)]
    common: Common,
    /// Where to listen (port 0: a free port, printed).
    #[arg(long, default_value = "127.0.0.1:0")]
    addr: SocketAddr,
    /// Allow an address other than loopback: anyone who reaches it reads every thread.
    #[arg(long)]
    public: bool,
    /// Delete finished threads this long after they ended (`30d`, `12h`, `90m`; a retention
    /// pass every minute while it serves): `cairn::RetentionPolicy::after_ms`.
    #[arg(long, value_name = "AGE", value_parser = super::control::parse_age_ms)]
    retention: Option<u64>,
}

pub(super) async fn run(args: ServeArgs, wfs: &[Arc<DynWorkflow>]) -> anyhow::Result<()> {
    if !args.addr.ip().is_loopback() && !args.public {
        return Err(usage(format!(
            "--addr {} is not a loopback address: add --public to serve it to the network",
            args.addr
        )));
    }
    let mut options = ServeOptions::new(args.addr);
    options.public = args.public;
    #[cfg(feature = "prometheus")]
    {
        // Installed before the engine opens, so its handles record here.
        options.prometheus = crate::telemetry::prometheus::install().ok();
    }
    let db = &args.common.db;
    let retention = args.retention.map(crate::RetentionPolicy::after_ms);
    let engine = open_writable_with(db, wfs, |builder| match retention {
        Some(policy) => builder.retention(policy),
        None => builder,
    })
    .await?;
    let server = serve(&engine, Some(db), options).await?;
    let token_file = server.token_file().map(|p| p.display().to_string()).unwrap_or_default();
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
             token (for controls: Authorization: Bearer ...): {}\n\
             token file: {token_file}\nCtrl-C stops it",
            db.display(),
            server.token(),
            addr = server.addr(),
        ));
    }
    let mut terminate = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
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
