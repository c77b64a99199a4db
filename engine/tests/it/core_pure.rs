//! `cairn-core` does no I/O. Most of that the compiler now keeps: the crate depends on no async
//! runtime (`it::layers` pins its dependencies), so it cannot name `tokio::`, and its
//! `clippy.toml` refuses the store's traits and backends, files, sockets and threads. What is
//! left here is what neither refuses: the core awaits nothing. Restore, decoding and child
//! lookups say what they need and are given it (`exec/fetch.rs`, `exec/blocking.rs`), so the
//! engine, the test kit and the reliability suites run the same code.

use std::path::Path;

/// What a file that awaits would name.
const ASYNC_WORDS: &[&str] = &[".await", "async fn"];

/// The lines of `text` (comments and its test module left out) that name one of [`ASYNC_WORDS`]
/// (a test may build a workflow, whose nodes are async).
fn async_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .take_while(|l| *l != "#[cfg(test)]")
        .filter(|l| !l.starts_with("//"))
        .filter(|l| ASYNC_WORDS.iter().any(|w| l.contains(w)))
        .map(str::to_owned)
        .collect()
}

#[test]
fn the_core_crate_awaits_nothing() {
    let core = Path::new(env!("CARGO_MANIFEST_DIR")).join("core/src");
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
                    async_lines(&text).into_iter().map(|l| format!("{}: {l}", path.display())),
                );
            }
        }
    }
    assert!(files > 10, "the core crate was read ({files} files)");
    assert!(found.is_empty(), "cairn-core awaits:\n{}", found.join("\n"));
}

#[test]
fn the_check_finds_an_await() {
    assert_eq!(async_lines("let e = read.await?;").len(), 1);
    assert_eq!(async_lines("pub async fn f() {}").len(), 1);
    assert!(async_lines("// a comment saying .await").is_empty());
    assert!(async_lines("#[cfg(test)]\nmod tests { async fn node() {} }").is_empty());
}
