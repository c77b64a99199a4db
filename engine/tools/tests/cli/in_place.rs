//! Reading a file no engine holds opens it where it is (redb's read-only database), not a copy
//! in memory: the peak memory of `cairn threads --limit 1` does not grow with the file. A file an
//! engine holds without serving an endpoint is refused up front (exit 4), saying what to do.
//! Prints `RSS threads_limit_1 file_kb=... max_rss_kb=...`.

use std::sync::Arc;

use cairn::{Ctx, END, Engine, NodeOutput, Replace, START, StartOptions, Workflow};

use crate::harness::{on, tempdir};
use crate::load::call;

/// Threads written, and the bytes of each one's input (kept in its log twice: as the input and
/// in the update; a one-step thread ends without a completion checkpoint). About 400 KiB each.
const THREADS: usize = 300;
const INPUT_BYTES: usize = 200 * 1024;

/// The peak a listing may reach, in KiB: a runtime and a page of records, far below the file.
const RSS_BOUND_KB: u64 = 48 * 1024;

fn bulky() -> Workflow<Replace<String>> {
    Workflow::<Replace<String>>::builder("bulky", 1)
        .node("keep", |s: Arc<Replace<String>>, _ctx: Ctx| async move {
            Ok(NodeOutput::update(format!("{}!", s.0)))
        })
        .edge(START, "keep")
        .edge("keep", END)
        .build()
        .expect("valid workflow")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_listing_of_a_large_file_no_engine_holds_reads_it_in_place() {
    if !cfg!(target_os = "linux") {
        return; // The peak is read from /proc.
    }
    let dir = tempdir();
    let db = dir.path().join("large.db");
    let wf = bulky();
    let engine = Engine::builder(&db).workflow(&wf).open().await.expect("open");
    for i in 0..THREADS {
        let input: String =
            std::iter::repeat_n(char::from(b'a' + (i % 26) as u8), INPUT_BYTES).collect();
        let handle = engine
            .start_json("bulky", input, StartOptions::id(format!("t-{i:04}")))
            .await
            .expect("start");
        handle.finished().await.expect("finished");
    }
    // A copy taken while the engine holds the file is one not shut down cleanly (as after a
    // crash): redb cannot read it in place, and the command says it reads a copy instead.
    let unclean = dir.path().join("unclean.db");
    std::fs::copy(&db, &unclean).expect("copy");
    engine.shutdown().await;
    drop(engine);
    let from_copy = call(&unclean, &["threads", "--limit", "1", "--json"]);
    assert_eq!(from_copy.code, 0, "{}", from_copy.stderr);
    assert!(from_copy.stderr.contains("reading a snapshot copy"), "{}", from_copy.stderr);
    let file_kb = std::fs::metadata(&db).expect("the file").len() / 1024;
    assert!(file_kb > 2 * RSS_BOUND_KB, "the file is larger than the bound: {file_kb} KiB");

    let listed = call(&db, &["threads", "--limit", "1", "--json"]);
    assert_eq!(listed.code, 0, "{}", listed.stderr);
    assert!(!listed.stderr.contains("snapshot copy"), "read in place: {}", listed.stderr);
    let rows: serde_json::Value = serde_json::from_str(&listed.stdout).expect("JSON");
    assert_eq!(rows[0]["thread"], "t-0000", "{rows}");
    eprintln!("RSS threads_limit_1 file_kb={file_kb} max_rss_kb={}", listed.peak_kb);
    assert!(
        listed.peak_kb < RSS_BOUND_KB,
        "`threads --limit 1` peaked at {} KiB on a {file_kb} KiB file",
        listed.peak_kb
    );
    // Read in place, nothing was written.
    assert_eq!(std::fs::metadata(&db).expect("the file").len() / 1024, file_kb);
    on(&db, &["show", "t-0001"]).expect(0);
}
