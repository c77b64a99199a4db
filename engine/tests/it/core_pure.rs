//! `core/` does no I/O: no file of it names the store, a file system, a socket or the async
//! runtime. Restore, decoding and child lookups say what they need and are given it
//! (`exec/fetch.rs`, `exec/blocking.rs`), so the engine, the test kit and the reliability suites
//! run the same code.

use std::path::Path;

/// What a file doing I/O would name (the storage trait and its reads, files, sockets, tasks).
const IO_WORDS: &[&str] = &[
    "Store",
    "StoreExt",
    "ThreadLog",
    "Catalog",
    ".read_since(",
    ".read_range(",
    ".payload(",
    ".checkpoint(",
    ".list_threads(",
    ".thread(",
    ".wait(",
    "std::fs",
    "std::net",
    "tokio::",
    ".await",
];

/// The lines of `text` (comments left out) that name one of [`IO_WORDS`].
fn io_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.starts_with("//"))
        .filter(|l| IO_WORDS.iter().any(|w| l.contains(w)))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_core_folder_names_no_store_and_no_io() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut found = Vec::new();
    let mut files = 0;
    let mut dirs = vec![core];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                dirs.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                files += 1;
                let text = std::fs::read_to_string(&path).unwrap();
                found.extend(
                    io_lines(&text).into_iter().map(|l| format!("{}: {l}", path.display())),
                );
            }
        }
    }
    assert!(files > 10, "the core folder was read ({files} files)");
    assert!(found.is_empty(), "core/ does I/O:\n{}", found.join("\n"));
}

#[test]
fn the_check_finds_a_store_read() {
    assert_eq!(io_lines("let e = store.read_since(t, s, 10)?;").len(), 1);
    assert_eq!(io_lines("fn f(store: &dyn Store) {}").len(), 1);
    assert!(io_lines("// a comment naming Store").is_empty());
}
