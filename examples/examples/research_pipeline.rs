//! `cargo run --example research_pipeline -- run --db research.db`: runs the research
//! pipeline (see `cairn_examples::research_pipeline` and `examples/research_pipeline/README.md`).
//!
//! Any other arguments are the `cairn` command line with this pipeline compiled in, so that
//! `state`, `fork` and `replay` can decode its state:
//! `cargo run --example research_pipeline -- state session_001 --at 12 --db research.db`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

use std::process::ExitCode;

/// What `--help` says about `run` before the `cairn` commands.
const RUN_HELP: &str = "\
research_pipeline: the research pipeline example, and the cairn command line with it compiled in

Usage: research_pipeline run [--db FILE]
  run    run a research session to its failure and its recovery (default --db research.db),
         leaving the database for the commands below

The cairn commands:
";

fn main() -> anyhow::Result<ExitCode> {
    let args: Vec<String> = std::env::args().collect();
    match args.get(1).map(String::as_str) {
        Some("run") => {
            let db = match (args.get(2).map(String::as_str), args.get(3)) {
                (Some("--db"), Some(path)) => std::path::PathBuf::from(path),
                _ => std::path::PathBuf::from("research.db"),
            };
            let runtime = tokio::runtime::Runtime::new()?;
            let r = runtime.block_on(cairn_examples::research_pipeline::run(&db))?;
            println!("session {}: {}", r.original, r.original_status);
            println!(
                "  the code phase made {} attempts on the gpu sandbox, then failed",
                r.code_attempts
            );
            println!(
                "recovered as {} (forked from the phase checkpoint at seq {}): phases {}",
                r.recovered,
                r.forked_at,
                r.session.completed_phases.join(", ")
            );
            println!("  sandbox {}", r.session.sandbox);
            println!("  artifact: {}", r.session.artifact.as_deref().unwrap_or("none"));
            println!("  analysis: {}", r.session.analysis.as_deref().unwrap_or("none"));
            let kinds: Vec<String> =
                r.checkpoint_kinds.iter().map(|(kind, n)| format!("{kind} {n}")).collect();
            println!("checkpoints written: {}", kinds.join(", "));
            println!("database: {}", db.display());
            return Ok(ExitCode::SUCCESS);
        }
        Some("--help" | "-h" | "help") if args.len() == 2 => print!("{RUN_HELP}"),
        _ => {}
    }
    let wf = cairn_examples::research_pipeline::workflow()?;
    Ok(cairn_tools::cli::run(vec![wf.erase()]))
}
