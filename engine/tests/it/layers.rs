//! The library crates keep their layers: arrows between the engine's folders go down its table
//! of layers ([`ENGINE_LAYERS`], the one place that ranks them), no import circle spans more than
//! two files in any library crate, and the pure core
//! (`cairn-core`, below the engine: it cannot name it) depends on no runtime and no I/O crate. Read from the source
//! with `syn` (grouped `use` trees expanded, `crate::`, `self::` and `super::` paths in code and
//! types too), so a new path that breaks a rule fails here.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use syn::visit::Visit;

/// The engine's folders and top-level files, bottom first; a file may name only what sits on a
/// lower line (or in its own folder). A layer may reach past the one below it: `api/` reads
/// through `exec/fetch.rs`. The operator tooling is another crate ([`TOOLS_LAYERS`]).
const ENGINE_LAYERS: &[&[&str]] = &[
    &["limits"],
    &["error", "clock", "config", "tasks"],
    &["telemetry", "sealing"],
    &["coord", "replay"],
    &["exec"],
    &["api"],
];

/// The operator tooling's (`cairn-tools`) folders and top-level files, bottom first, as
/// [`ENGINE_LAYERS`]: operations on a thread (`debug/`, on `operator.rs`'s type) under the
/// endpoint and the demo, and the command line over everything.
const TOOLS_LAYERS: &[&[&str]] = &[
    &["limits"],
    &["model", "operator", "prometheus"],
    &["debug"],
    &["demo", "demo_signoff", "serve"],
    &["cli"],
];

/// The storage crate's modules, bottom first, as [`ENGINE_LAYERS`]; its files import by module
/// (`use crate::event::Event`), not through the crate root's re-exports, so that these arrows
/// are seen. Unlike the engine's, a line here may hold modules that name one another (a pair the
/// circle test bounds): the vocabulary (an `Error` holds ids and statuses, ids and limits
/// make errors), the codec and the correlation index, the planner and its queue part, the store
/// and its subscriptions. Arrows between lines go down only.
const STORAGE_LAYERS: &[&[&str]] = &[
    &["os_error", "bytes_serde", "clock", "lock", "intent"],
    &["error", "ids", "limits", "thread", "wire_enum", "queue_fair"],
    &["signal", "event", "queue", "checkpoint", "frame", "lsns", "delete"],
    &["event_batch", "queue_wire"],
    &["batch", "codec", "correlation"],
    &["telemetry", "pending", "plan", "plan_queue"],
    &["reading"],
    &["store", "subscription"],
    &["copy", "request", "queue_verify"],
    &["redb"],
    &["pg"],
];

/// Import circles of more than two files known and named, with why they stand: storage's
/// vocabulary (an `Error` holds a `ThreadId` and a `ThreadStatus`; making either, or checking a
/// limit, answers an `Error`). Seen since storage imports by module (the crate root's
/// re-exports hid it).
const KNOWN_CIRCLES: &[&str] = &[r#"storage: ["error", "ids", "limits", "thread"]"#];

/// A module path: `core/event.rs` is `["core", "event"]`, `core/mod.rs` is `["core"]`.
type Module = Vec<String>;

/// A crate's source as files and the files (or folders, by their `mod.rs`) each names.
struct Graph {
    /// Each file's module, and whether it is a folder's `mod.rs` (or the crate root).
    files: BTreeMap<Module, bool>,
    edges: BTreeMap<Module, BTreeSet<Module>>,
}

fn module_of(rel: &Path) -> (Module, bool) {
    let mut parts: Module =
        rel.iter().map(|p| p.to_string_lossy().trim_end_matches(".rs").to_owned()).collect();
    let front = parts.last().is_some_and(|p| p == "mod" || p == "lib" || p == "main");
    if front {
        parts.pop();
    }
    (parts, front)
}

fn sources(dir: &Path, root: &Path, out: &mut Vec<(Module, bool, syn::File)>) {
    let mut entries: Vec<PathBuf> =
        std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()).collect();
    entries.sort();
    for path in entries {
        if path.is_dir() {
            sources(&path, root, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            let (module, front) = module_of(path.strip_prefix(root).unwrap());
            let text = std::fs::read_to_string(&path).unwrap();
            let file = syn::parse_file(&text)
                .unwrap_or_else(|e| panic!("{} does not parse: {e}", path.display()));
            out.push((module, front, file));
        }
    }
}

/// The `crate::`, `self::` and `super::` paths of one file, absolute; test modules left out.
struct Paths {
    /// The module the visitor is in (a file's, then an inline module's).
    here: Module,
    found: BTreeSet<Module>,
}

fn is_test(attrs: &[syn::Attribute]) -> bool {
    attrs.iter().any(|a| {
        a.path().is_ident("cfg") && a.parse_args::<syn::Ident>().is_ok_and(|i| i == "test")
    })
}

impl Paths {
    fn add(&mut self, segments: &[String]) {
        let mut target = match segments.first().map(String::as_str) {
            Some("crate") => Vec::new(),
            Some("self" | "super") => self.here.clone(),
            _ => return,
        };
        let mut rest = if segments[0] == "crate" { &segments[1..] } else { segments };
        if rest.first().is_some_and(|s| s == "self") {
            rest = &rest[1..];
        }
        while rest.first().is_some_and(|s| s == "super") {
            target.pop();
            rest = &rest[1..];
        }
        target.extend(rest.iter().filter(|s| *s != "self").cloned());
        self.found.insert(target);
    }

    fn use_tree(&mut self, prefix: &mut Vec<String>, tree: &syn::UseTree) {
        match tree {
            syn::UseTree::Path(p) => {
                prefix.push(p.ident.to_string());
                self.use_tree(prefix, &p.tree);
                prefix.pop();
            }
            syn::UseTree::Name(n) => self.use_leaf(prefix, n.ident.to_string()),
            syn::UseTree::Rename(r) => self.use_leaf(prefix, r.ident.to_string()),
            syn::UseTree::Glob(_) => self.add(prefix),
            syn::UseTree::Group(g) => g.items.iter().for_each(|t| self.use_tree(prefix, t)),
        }
    }

    fn use_leaf(&mut self, prefix: &mut Vec<String>, name: String) {
        prefix.push(name);
        self.add(prefix);
        prefix.pop();
    }
}

impl<'ast> Visit<'ast> for Paths {
    fn visit_item_use(&mut self, u: &'ast syn::ItemUse) {
        self.use_tree(&mut Vec::new(), &u.tree);
    }

    fn visit_item_mod(&mut self, m: &'ast syn::ItemMod) {
        if is_test(&m.attrs) || m.content.is_none() {
            return;
        }
        self.here.push(m.ident.to_string());
        syn::visit::visit_item_mod(self, m);
        self.here.pop();
    }

    fn visit_item_fn(&mut self, f: &'ast syn::ItemFn) {
        if !is_test(&f.attrs) {
            syn::visit::visit_item_fn(self, f);
        }
    }

    fn visit_path(&mut self, p: &'ast syn::Path) {
        let segments: Vec<String> = p.segments.iter().map(|s| s.ident.to_string()).collect();
        self.add(&segments);
        syn::visit::visit_path(self, p);
    }

    // `pub(in crate::x)` and `pub(super)` say who may see an item, not what it uses.
    fn visit_visibility(&mut self, _: &'ast syn::Visibility) {}
}

/// Reads the crate under `src`. A path names the file that is its longest prefix; one through
/// a folder's `mod.rs` names the folder (an arrow between folders, not in a file circle), and
/// one through the crate root names nothing.
fn graph(src: &Path) -> Graph {
    let mut parsed = Vec::new();
    sources(src, src, &mut parsed);
    let files: BTreeMap<Module, bool> = parsed.iter().map(|(m, f, _)| (m.clone(), *f)).collect();
    let mut edges = BTreeMap::new();
    for (module, _, file) in &parsed {
        let mut paths = Paths { here: module.clone(), found: BTreeSet::new() };
        paths.visit_file(file);
        let targets = paths
            .found
            .iter()
            .filter_map(|p| {
                (1..=p.len()).rev().map(|n| p[..n].to_vec()).find(|m| files.contains_key(m))
            })
            .filter(|t| t != module)
            .collect();
        edges.insert(module.clone(), targets);
    }
    Graph { files, edges }
}

/// The import circles of more than two files (through no `mod.rs`), each sorted.
fn circles(graph: &Graph) -> Vec<Vec<String>> {
    let nodes: Vec<&Module> = graph.edges.keys().collect();
    let index_of: BTreeMap<&Module, usize> =
        nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let succ: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| {
            graph.edges[*n]
                .iter()
                .filter(|t| !graph.files[*t])
                .filter_map(|t| index_of.get(t).copied())
                .collect()
        })
        .collect();
    // Tarjan's strongly connected components, iteratively.
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
                component.sort();
                if component.len() > 2 {
                    big.push(component);
                }
            }
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[v]);
            }
        }
    }
    big
}

/// The arrows between the top folders and files of `graph` that do not go down `layers` (with
/// `within_a_line`, arrows between two modules of one line are let through).
fn upward_arrows(graph: &Graph, layers: &[&[&str]], within_a_line: bool) -> Vec<String> {
    let rank = |top: &str| {
        layers
            .iter()
            .position(|l| l.contains(&top))
            .unwrap_or_else(|| panic!("`{top}` has no line in the table of layers"))
    };
    let mut wrong = BTreeSet::new();
    for (from, targets) in &graph.edges {
        for to in targets {
            let (Some(a), Some(b)) = (from.first(), to.first()) else { continue };
            let up = rank(b) > rank(a) || (rank(b) == rank(a) && !within_a_line);
            if a != b && up {
                wrong.insert(format!("{} -> {}", from.join("/"), to.join("/")));
            }
        }
    }
    wrong.into_iter().collect()
}

fn crate_src(dir: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..").join(dir).join("src")
}

#[test]
fn arrows_between_the_layers_go_one_way() {
    let graph = graph(&crate_src("engine"));
    assert!(graph.edges.len() > 60, "the source was read: {} files", graph.edges.len());
    let wrong = upward_arrows(&graph, ENGINE_LAYERS, false);
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn arrows_between_the_storage_layers_go_one_way() {
    let graph = graph(&crate_src("storage"));
    assert!(graph.edges.len() > 60, "the source was read: {} files", graph.edges.len());
    let wrong = upward_arrows(&graph, STORAGE_LAYERS, true);
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn arrows_between_the_tooling_layers_go_one_way() {
    let graph = graph(&crate_src("engine/tools"));
    assert!(graph.edges.len() > 60, "the source was read: {} files", graph.edges.len());
    let wrong = upward_arrows(&graph, TOOLS_LAYERS, false);
    assert!(wrong.is_empty(), "imports against the layers:\n{}", wrong.join("\n"));
}

#[test]
fn no_import_circle_spans_more_than_two_files() {
    let mut found = Vec::new();
    for dir in ["engine", "engine/core", "engine/tools", "storage", "graph-dsl"] {
        let graph = graph(&crate_src(dir));
        assert!(graph.edges.len() > 10, "{dir} was read: {} files", graph.edges.len());
        found.extend(circles(&graph).into_iter().map(|c| format!("{dir}: {c:?}")));
    }
    for known in KNOWN_CIRCLES {
        assert!(found.iter().any(|c| c == known), "{known} is gone: drop it from KNOWN_CIRCLES");
    }
    found.retain(|c| !KNOWN_CIRCLES.contains(&c.as_str()));
    assert!(found.is_empty(), "import circles of more than two files:\n{}", found.join("\n"));
}

#[test]
fn the_checks_find_a_planted_circle_and_an_upward_arrow() {
    let dir = tempfile::tempdir().unwrap();
    let write = |path: &str, text: &str| {
        let path = dir.path().join(path);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    };
    write("lib.rs", "mod a; mod b; mod c; mod core; mod error;");
    write("a.rs", "use crate::{b::B, error};");
    write("b.rs", "pub struct B(super::c::C);");
    write(
        "c.rs",
        "pub struct C; fn f() { crate::a::g(); }\n#[cfg(test)] mod tests { use crate::core::X; }",
    );
    write("core/mod.rs", "pub mod status;");
    write("core/status.rs", "pub struct X;");
    write("error.rs", "pub struct E(crate::core::status::X);");
    let graph = graph(dir.path());
    assert_eq!(circles(&graph), [["a", "b", "c"]]);
    let layers: &[&[&str]] = &[&["error"], &["core"], &["c"], &["b"], &["a"]];
    assert_eq!(upward_arrows(&graph, layers, false), ["c -> a", "error -> core/status"]);
    let lines: &[&[&str]] = &[&["error"], &["core"], &["a", "b", "c"]];
    assert_eq!(upward_arrows(&graph, lines, true), ["error -> core/status"]);
}

/// What `cairn-core` may depend on: its data (serde, JSON, hashes, errors, logs), the DSL and the
/// store's plain types. Not the engine (Cargo refuses the circle), and no async runtime, no
/// backend, no I/O crate: the compiler then refuses `tokio::` in the core, and its
/// `clippy.toml` refuses the store's traits and backends and `std::fs`/`std::net`.
const CORE_DEPENDENCIES: &[&str] =
    &["blake3", "cairn-dsl", "cairn-storage", "serde", "serde_json", "thiserror", "tracing"];

/// The names in the `[dependencies]` table of a `Cargo.toml` text (`name = ...` and
/// `name.workspace = true` alike).
fn dependencies(manifest: &str) -> Vec<String> {
    let mut inside = false;
    let mut names = Vec::new();
    for line in manifest.lines().map(str::trim) {
        if line.starts_with('[') {
            inside = line == "[dependencies]";
        } else if inside && !line.is_empty() && !line.starts_with('#') {
            let name = line.split(['=', '.']).next().unwrap_or_default().trim();
            names.push(name.trim_matches('"').to_owned());
        }
    }
    names
}

#[test]
fn the_core_crate_depends_on_no_runtime_and_no_io() {
    let manifest = crate_src("engine/core").with_file_name("Cargo.toml");
    let names = dependencies(&std::fs::read_to_string(&manifest).unwrap());
    assert!(names.iter().any(|n| n == "cairn-dsl"), "the dependencies were read: {names:?}");
    let extra: Vec<&String> =
        names.iter().filter(|n| !CORE_DEPENDENCIES.contains(&n.as_str())).collect();
    assert!(extra.is_empty(), "cairn-core depends on {extra:?}, which it may not");
}

#[test]
fn the_dependency_check_finds_a_runtime() {
    let manifest = "[package]\nname = \"x\"\n\n[dependencies]\n# a comment\nserde.workspace = \
                    true\ntokio = { workspace = true }\n\n[dev-dependencies]\nproptest = \"1\"\n";
    assert_eq!(dependencies(manifest), ["serde", "tokio"]);
}
