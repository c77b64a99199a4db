//! Every command line in README.md and docs/ works as written: the `sh` blocks' `cairn` lines
//! run, in order, in a directory where `cairn demo` has just made its default database, each
//! giving exit code 0 or the one its comment documents (`(exit N)`);
//! `cargo run --release --example NAME` names an example that exists. The other `cargo` lines
//! (the demo, the test command, the install line) are left to CI and to a reader: CI runs the
//! first two.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::harness::bin;

/// The repository's root.
fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// The lines of the ```sh blocks of a Markdown file.
fn sh_lines(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in text.lines() {
        let trimmed = line.trim_start();
        if trimmed.starts_with("```") {
            inside = !inside && trimmed.trim_start_matches('`').trim() == "sh";
            continue;
        }
        if inside && !trimmed.is_empty() && !trimmed.starts_with('#') {
            out.push(trimmed.to_owned());
        }
    }
    out
}

/// A line without its trailing comment (a ` #` outside quotes), and the exit code the comment
/// documents (`(exit N)`; 0 when it says none).
fn split_comment(line: &str) -> (String, i32) {
    let (mut single, mut double) = (false, false);
    let bytes = line.as_bytes();
    for (i, &b) in bytes.iter().enumerate() {
        match b {
            b'\'' if !double => single = !single,
            b'"' if !single => double = !double,
            b'#' if !single && !double && i > 0 && bytes[i - 1] == b' ' => {
                let comment = &line[i..];
                let code = comment
                    .split("(exit ")
                    .nth(1)
                    .and_then(|rest| rest.split(')').next())
                    .and_then(|n| n.trim().parse().ok())
                    .unwrap_or(0);
                return (line[..i].trim().to_owned(), code);
            }
            _ => {}
        }
    }
    (line.trim().to_owned(), 0)
}

#[test]
fn every_command_line_of_the_readme_and_docs_runs_as_written() {
    let mut files = vec![root().join("README.md")];
    let docs = std::fs::read_dir(root().join("docs")).expect("docs/");
    let mut docs: Vec<PathBuf> = docs
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    files.extend(docs);

    let dir = tempfile::tempdir().expect("temp dir");
    let bin_dir = Path::new(bin()).parent().expect("the binary's directory");
    let path = format!("{}:{}", bin_dir.display(), std::env::var("PATH").unwrap_or_default());
    let shell = |command: &str| {
        Command::new("sh")
            .args(["-c", command])
            .current_dir(dir.path())
            // A newcomer's shell: no variable of this test's environment (an `$API_KEY` the
            // README used to name was set here and unset for a reader, whose line failed).
            .env_clear()
            .env("PATH", &path)
            .env("HOME", dir.path())
            .stdin(std::process::Stdio::null())
            .output()
            .expect("sh runs")
    };
    // "After the demo": the README's commands refer to what it makes.
    let demo = shell("cairn demo --quiet");
    assert!(demo.status.success(), "cairn demo: {}", String::from_utf8_lossy(&demo.stderr));

    let (mut ran, mut examples, mut setup) = (0, 0, 0);
    let mut ran_in = std::collections::BTreeMap::new();
    for file in &files {
        let text = std::fs::read_to_string(file).expect("read");
        let ran_before = ran;
        for line in sh_lines(&text) {
            let (commands, code) = split_comment(&line);
            for command in commands.split("; ").map(str::trim).filter(|c| !c.is_empty()) {
                if command.starts_with("cairn ") {
                    let out = shell(command);
                    let got = out.status.code().unwrap_or(-1);
                    assert_eq!(
                        got,
                        code,
                        "{}: `{command}` exited {got}:\n{}{}",
                        file.display(),
                        String::from_utf8_lossy(&out.stdout),
                        String::from_utf8_lossy(&out.stderr)
                    );
                    ran += 1;
                } else if let Some(rest) = command.strip_prefix("cargo run --release --example ") {
                    let name = rest.split_whitespace().next().expect("an example name");
                    let source = root().join("examples/examples").join(format!("{name}.rs"));
                    assert!(source.exists(), "{}: no example {name}", file.display());
                    examples += 1;
                } else if command.starts_with("cargo ") {
                    setup += 1;
                } else {
                    panic!(
                        "{}: a command this test does not know how to check: {command}",
                        file.display()
                    );
                }
            }
        }
        let name = file.strip_prefix(root()).unwrap_or(file).display().to_string();
        ran_in.insert(name, ran - ran_before);
    }
    eprintln!(
        "README commands: {ran} cairn commands run, {examples} examples found, {setup} set-up \
         commands left to CI"
    );
    // The README's few lines and the command line's page, where the README's reference moved.
    let ran_of = |name: &str| ran_in.get(name).copied().unwrap_or(0);
    assert!(ran_of("README.md") >= 3, "the README's commands were found: {ran_in:?}");
    assert!(ran_of("docs/cli.md") >= 25, "docs/cli.md's commands were found: {ran_in:?}");
    // `cargo run --example NAME` (README's layout table) from the root finds the examples only
    // if their package is a default member (it used to say "no example target named ...").
    let manifest = std::fs::read_to_string(root().join("Cargo.toml")).expect("Cargo.toml");
    let members =
        manifest.lines().find(|l| l.starts_with("default-members")).expect("default-members");
    assert!(members.contains("\"examples\""), "{members}");
    // `cargo run --release -- demo` runs the one binary of the default members: the command
    // line's package must be one (the engine's crate has no binary).
    assert!(members.contains("\"engine/tools\""), "{members}");
}
