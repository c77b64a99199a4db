//! README.md as a newcomer reads it: its opening stays short, its dependency lines name this
//! workspace's version, and its program compiles and runs. The program is here between a
//! `// readme: src/main.rs` line and a `// readme: end` line (inside a module standing for the
//! reader's `src/main.rs`), and `the_readme_shows_this_program_verbatim` checks the README holds
//! it as written here: edit both together.
#![allow(missing_docs, reason = "test code")]
#![allow(clippy::print_stdout, reason = "the README's program prints its result")]

const README: &str = include_str!("../../README.md");

/// The words a reader meets before the README's first code block (its title and headings
/// included): what Cairn is, in a few plain lines, not an inventory (that is docs/features.md).
const OPENING_WORDS_MAX: usize = 120;

/// `src/main.rs` of the reader's crate.
mod main_rs {
    // readme: src/main.rs
    use std::sync::Arc;

    use cairn::{END, Engine, NodeOutput, Replace, START, StartOptions, Workflow};

    #[tokio::main]
    pub async fn main() -> Result<(), Box<dyn std::error::Error>> {
        // 42, on the first run and on every later one, which finds thread `t1` stored.
        println!("{}", double("app.db", 21).await?);
        Ok(())
    }

    /// Thread `t1` of a one-node workflow that doubles its input, run on the database `db`.
    pub async fn double(db: &str, n: u64) -> Result<u64, Box<dyn std::error::Error>> {
        let workflow = Workflow::<Replace<u64>>::builder("double", 1)
            .node(
                "double",
                |s: Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(s.0 * 2)) },
            )
            .edge(START, "double")
            .edge("double", END)
            .build()?;
        let engine = Engine::builder(db).workflow(&workflow).open().await?;
        let thread = engine.start(&workflow, Replace(n), StartOptions::id("t1")).await?;
        let Replace(output) = thread.output().await?;
        engine.shutdown().await;
        Ok(output)
    }
    // readme: end
}

/// The program between this file's markers, without the indentation of its module.
fn program() -> String {
    let this = include_str!("readme.rs");
    let start = this.find("    // readme: src/main.rs\n").expect("the start marker");
    let end = this.find("    // readme: end\n").expect("the end marker");
    let body = &this[start..end];
    let lines: Vec<&str> = body.lines().map(|l| l.strip_prefix("    ").unwrap_or(l)).collect();
    lines.join("\n").replacen("// readme: src/main.rs", "// src/main.rs", 1)
}

#[test]
fn the_readme_shows_this_program_verbatim() {
    let program = program();
    assert!(
        README.contains(&program),
        "README.md does not show this program as written:\n{program}"
    );
}

#[test]
fn the_readme_program_prints_42_and_a_second_run_finds_its_thread() {
    let dir = tempfile::tempdir().unwrap();
    // The program as a reader runs it: `app.db` in the working directory (this binary's other
    // tests read no file, so moving the directory disturbs none of them).
    std::env::set_current_dir(dir.path()).unwrap();
    main_rs::main().unwrap();
    assert!(dir.path().join("app.db").is_file());
    let runtime = tokio::runtime::Runtime::new().unwrap();
    let db = dir.path().join("app.db");
    let again = runtime.block_on(main_rs::double(db.to_str().unwrap(), 5)).unwrap();
    assert_eq!(again, 42, "a second run finds t1 stored (its input 21), it does not start anew");
}

#[test]
fn the_readme_adds_the_crate_at_this_version() {
    let version = env!("CARGO_PKG_VERSION");
    let minor = version.rsplit_once('.').map_or(version, |(m, _)| m);
    let line = format!("cairn = \"{minor}\"");
    assert!(README.contains(&line), "README.md's dependency line: {line}");
    assert!(README.contains("cargo install --locked --path engine/tools --features cli"));
}

#[test]
fn the_readme_opens_with_a_short_section() {
    let opening = README.split("\n```").next().unwrap_or_default();
    let words = opening.split_whitespace().filter(|w| w.chars().any(char::is_alphanumeric)).count();
    assert!(
        words < OPENING_WORDS_MAX,
        "README.md has {words} words before its first code block (under {OPENING_WORDS_MAX}: \
         what Cairn is in a few lines; the inventory belongs in docs/features.md):\n{opening}"
    );
}
