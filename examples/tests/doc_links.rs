//! Every relative link of README.md, ARCHITECTURE.md and docs/ leads somewhere: its file exists
//! and, for a `#fragment` into a Markdown file, that file has the heading (as GitHub makes an
//! anchor of it). Pages move (the README's reference sections moved to docs/); links must follow.
#![allow(missing_docs, reason = "test code")]

use std::path::{Path, PathBuf};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).parent().expect("the workspace").to_path_buf()
}

/// The Markdown files a reader follows links through.
fn pages() -> Vec<PathBuf> {
    let mut pages = vec![root().join("README.md"), root().join("ARCHITECTURE.md")];
    let mut docs: Vec<PathBuf> = std::fs::read_dir(root().join("docs"))
        .expect("docs/")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "md"))
        .collect();
    docs.sort();
    pages.extend(docs);
    pages
}

/// The text outside fenced code blocks and inline code spans.
fn prose(text: &str) -> String {
    let mut out = String::new();
    let mut fenced = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
            continue;
        }
        if !fenced {
            // Code spans: drop what lies between backticks.
            out.extend(line.split('`').step_by(2).flat_map(|part| [part, " "]));
            out.push('\n');
        }
    }
    out
}

/// The targets of `[text](target)` and `![alt](target)` links.
fn targets(text: &str) -> Vec<String> {
    let prose = prose(text);
    prose
        .split("](")
        .skip(1)
        .filter_map(|rest| rest.split(')').next())
        .map(|t| t.split_whitespace().next().unwrap_or_default().to_owned())
        .collect()
}

/// GitHub's anchor of a heading: lower case, punctuation but `-` and `_` dropped, spaces as `-`.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

fn anchors(text: &str) -> Vec<String> {
    let mut fenced = false;
    let mut out = Vec::new();
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced && line.starts_with('#') {
            out.push(anchor(line.trim_start_matches('#')));
        }
    }
    out
}

#[test]
fn every_relative_link_of_the_readme_and_docs_resolves() {
    let mut broken = Vec::new();
    let mut checked = 0;
    for page in pages() {
        let text = std::fs::read_to_string(&page).expect("read");
        for target in targets(&text) {
            if target.contains("://") || target.starts_with("mailto:") {
                continue;
            }
            let (path, fragment) = target.split_once('#').unwrap_or((&target, ""));
            let file = if path.is_empty() {
                page.clone()
            } else {
                page.parent().expect("a directory").join(path)
            };
            checked += 1;
            if !file.exists() {
                broken.push(format!("{}: {target}: no such file", page.display()));
                continue;
            }
            let is_markdown = file.extension().is_some_and(|e| e == "md");
            if !fragment.is_empty() && is_markdown {
                let linked = std::fs::read_to_string(&file).expect("read");
                if !anchors(&linked).iter().any(|a| a == fragment) {
                    broken.push(format!("{}: {target}: no such heading", page.display()));
                }
            }
        }
    }
    assert!(broken.is_empty(), "broken links:\n{}", broken.join("\n"));
    assert!(checked >= 20, "the links were found ({checked})");
}

#[test]
fn an_anchor_is_made_as_github_makes_it() {
    assert_eq!(anchor(" The `cairn` command line"), "the-cairn-command-line");
    assert_eq!(anchor(" Crash-test your own workflows"), "crash-test-your-own-workflows");
    assert_eq!(
        targets("see [a](docs/a.md#x) and `[b](no)` and ![c](c.png)"),
        ["docs/a.md#x", "c.png"]
    );
}
