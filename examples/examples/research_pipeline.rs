//! `cargo run --example research_pipeline -- run --db research.db`: runs the research
//! pipeline (see `cairn_examples::research_pipeline` and `examples/research_pipeline/README.md`).
//!
//! Any other arguments are the `cairn` command line with this pipeline compiled in, so that
//! `state`, `fork` and `replay` can decode its state:
//! `cargo run --example research_pipeline -- state session_001 --at 12 --db research.db`.
#![allow(clippy::print_stdout, reason = "an example prints its result")]

use std::process::ExitCode;

fn main() -> anyhow::Result<ExitCode> {
    let args: Vec<String> = std::env::args().collect();
    if args.get(1).map(String::as_str) == Some("run") {
        let db = match (args.get(2).map(String::as_str), args.get(3)) {
            (Some("--db"), Some(path)) => std::path::PathBuf::from(path),
            _ => std::path::PathBuf::from("research.db"),
        };
        let runtime = tokio::runtime::Runtime::new()?;
        let report = runtime.block_on(cairn_examples::research_pipeline::run(&db))?;
        println!("{report:#?}");
        println!("database: {}", db.display());
        return Ok(ExitCode::SUCCESS);
    }
    let wf = cairn_examples::research_pipeline::workflow()?;
    Ok(cairn::cli::run(vec![wf.erase()]))
}
