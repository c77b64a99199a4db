//! The engine's source keeps its layers: arrows between folders go one way (api -> exec ->
//! coord -> core), no import circle spans more than two files, and the exec layer's files stay
//! small. Read from the source files, so a new `use` that breaks a rule fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// A source file as a module path: `core/event.rs` is `["core", "event"]`, `core/mod.rs` is
/// `["core"]`.
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> =
        rel.iter().map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned()).collect();
    if parts.last().is_some_and(|p| p == "mod" || p == "lib" || p == "main") {
        parts.pop();
    }
    parts
}

fn sources(dir: &Path, root: &Path, out: &mut Vec<(Vec<String>, String)>) {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            sources(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let rel = path.strip_prefix(root).unwrap();
            out.push((module_of(rel), std::fs::read_to_string(&path).unwrap()));
        }
    }
}

/// The module paths a file's code names through `crate::` and `super::` (comments and the
/// tests module left out).
fn references(module: &[String], text: &str) -> BTreeSet<Vec<String>> {
    let code: String = text
        .split("#[cfg(test)]\nmod tests")
        .next()
        .unwrap_or(text)
        .lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n");
    let mut out = BTreeSet::new();
    for (i, _) in code.match_indices("crate::").chain(code.match_indices("super::")) {
        let before = code[..i].chars().last();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
            continue;
        }
        let path: Vec<&str> = code[i..]
            .split(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
            .next()
            .unwrap()
            .split("::")
            .filter(|s| !s.is_empty())
            .collect();
        let mut target: Vec<String> = Vec::new();
        if path[0] == "super" {
            // `super` of module `a::b` (`a/b.rs` or `a/b/mod.rs`) is `a`.
            target = module.to_vec();
            target.pop();
        }
        target.extend(path[1..].iter().map(|s| (*s).to_owned()));
        out.insert(target);
    }
    out
}

/// The file (module) a path names: its longest prefix that is a module.
fn resolve(path: &[String], modules: &BTreeSet<Vec<String>>) -> Option<Vec<String>> {
    (1..=path.len()).rev().map(|n| path[..n].to_vec()).find(|p| modules.contains(p))
}

fn rank(module: &[String]) -> u32 {
    match module.first().map(String::as_str) {
        None => 100, // the crate root re-exports everything
        Some("core" | "error" | "limits" | "clock" | "config" | "tasks" | "telemetry") => 0,
        Some("coord" | "replay") => 1,
        Some("exec") => 2,
        Some("api") => 3,
        Some("debug" | "model") => 4,
        Some("testkit") => 5,
        Some("demo" | "serve") => 6,
        Some(_) => 7, // cli
    }
}

fn graph() -> BTreeMap<Vec<String>, BTreeSet<Vec<String>>> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    sources(&root, &root, &mut files);
    let modules: BTreeSet<Vec<String>> = files.iter().map(|(m, _)| m.clone()).collect();
    let mut edges = BTreeMap::new();
    for (module, text) in &files {
        if module.is_empty() {
            continue;
        }
        let targets: BTreeSet<Vec<String>> = references(module, text)
            .iter()
            .filter_map(|p| resolve(p, &modules))
            .filter(|t| t != module && !t.is_empty())
            .collect();
        edges.insert(module.clone(), targets);
    }
    edges
}

#[test]
fn arrows_between_the_layers_go_one_way() {
    let edges = graph();
    assert!(edges.len() > 60, "the source was read: {} files", edges.len());
    let mut wrong = Vec::new();
    for (from, targets) in &edges {
        for to in targets {
            let same_folder = from.len() > 1 && to.first() == from.first();
            if !same_folder && rank(to) >= rank(from) && !(rank(to) == 0 && rank(from) == 0) {
                wrong.push(format!("{} -> {}", from.join("/"), to.join("/")));
            }
        }
    }
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn no_import_circle_spans_more_than_two_files() {
    let edges = graph();
    // Tarjan's strongly connected components, iteratively.
    let nodes: Vec<&Vec<String>> = edges.keys().collect();
    let index_of: BTreeMap<&Vec<String>, usize> =
        nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let succ: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| edges[*n].iter().filter_map(|t| index_of.get(t).copied()).collect())
        .collect();
    let n = nodes.len();
    let (mut index, mut low, mut on) = (vec![usize::MAX; n], vec![0; n], vec![false; n]);
    let (mut stack, mut next, mut big) = (Vec::new(), 0, Vec::new());
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        let mut work = vec![(start, 0usize)];
        while let Some((v, i)) = work.pop() {
            if i == 0 {
                index[v] = next;
                low[v] = next;
                next += 1;
                stack.push(v);
                on[v] = true;
            }
            if let Some(&w) = succ[v].get(i) {
                work.push((v, i + 1));
                if index[w] == usize::MAX {
                    work.push((w, 0));
                } else if on[w] {
                    low[v] = low[v].min(index[w]);
                }
                continue;
            }
            if low[v] == index[v] {
                let mut component = Vec::new();
                while let Some(w) = stack.pop() {
                    on[w] = false;
                    component.push(nodes[w].join("/"));
                    if w == v {
                        break;
                    }
                }
                if component.len() > 2 {
                    big.push(component);
                }
            }
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
        }
    }
    assert!(big.is_empty(), "import circles of more than two files: {big:?}");
}

#[test]
fn the_exec_layer_files_stay_small() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/exec");
    // A file's child modules (`exec/node_context/recorded.rs`) count as exec files too.
    let mut dirs = vec![root];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            let lines = std::fs::read_to_string(&path).unwrap().lines().count();
            assert!(lines <= 400, "{} has {lines} lines (400 at most)", path.display());
        }
    }
}
