//! The `cairn` command line. A user's own binary gets the same commands, with its own workflows
//! compiled in, by calling [`run`].
//!
//! Exit codes scripts can rely on: 0 success, 1 failure of the operation, 2 bad usage,
//! 3 damage found (verify), 4 the database file cannot be opened (missing, locked, not Cairn,
//! newer format).

use std::process::ExitCode;
use std::sync::Arc;

use cairn_dsl::DynWorkflow;
use clap::{Parser, Subcommand};

mod demo;

/// Exit code: the operation failed.
pub const EXIT_FAILED: u8 = 1;
/// Exit code: the database file could not be opened.
pub const EXIT_OPEN: u8 = 4;

#[derive(Debug, Parser)]
#[command(
    name = "cairn",
    version,
    about = "Cairn: a durable workflow engine with embedded storage"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run the demo: several threads of an agent-like workflow on a database file.
    Demo(demo::DemoArgs),
}

/// Parses the command line and runs it, with `workflows` available to the commands that run
/// threads. Returns the process exit code.
pub fn run(workflows: Vec<Arc<DynWorkflow>>) -> ExitCode {
    let cli = Cli::parse();
    let _ = tracing_subscriber::fmt()
        .with_env_filter(tracing_subscriber::EnvFilter::from_env("CAIRN_LOG"))
        .with_writer(std::io::stderr)
        .try_init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(EXIT_FAILED);
        }
    };
    let result = runtime.block_on(async move {
        match cli.command {
            Command::Demo(args) => demo::run(args, workflows).await,
        }
    });
    match result {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            let code = match e.downcast_ref::<crate::Error>() {
                Some(crate::Error::Storage(
                    cairn_storage::Error::NotFound(_)
                    | cairn_storage::Error::NotCairn { .. }
                    | cairn_storage::Error::NewerFormat { .. }
                    | cairn_storage::Error::Locked,
                )) => EXIT_OPEN,
                _ => EXIT_FAILED,
            };
            ExitCode::from(code)
        }
    }
}
