//! Concurrency: 64 tasks appending to 64 threads at once, with a subscriber watching.

use cairn_storage::{Maintenance, ThreadLog};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::Arc;

use cairn_storage::{Batch, Lsn, Options, RedbStore, Scope, Seq, StoreExt};

use crate::common::*;

const TASKS: u64 = 64;
const APPENDS: u64 = 20;
const EVENTS_PER_APPEND: u64 = 2;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn sixty_four_appenders_lose_nothing_and_duplicate_nothing() {
    let (_dir, path) = temp_db();
    // Immediate durability: group commit is what makes this fast enough.
    let store = Arc::new(RedbStore::open(&path, Options::default()).expect("open"));
    let total = TASKS * APPENDS * EVENTS_PER_APPEND;
    let mut sub = store.subscribe(Scope::All, 0).expect("subscribe");
    let watcher = tokio::spawn(async move {
        let mut seen = Vec::with_capacity(total as usize);
        while (seen.len() as u64) < total {
            seen.push(sub.next().await.expect("subscription"));
        }
        seen
    });
    let mut tasks = Vec::new();
    for task in 0..TASKS {
        let store = store.clone();
        tasks.push(tokio::spawn(async move {
            let name = format!("thread-{task}");
            let create = Batch { threads: vec![thread_record(&name)], ..Batch::default() };
            store.append_wait(create).await.expect("create");
            let mut bookmarks = Vec::new();
            for n in 0..APPENDS {
                let batch = Batch {
                    events: (0..EVENTS_PER_APPEND)
                        .map(|k| event(&name, n * EVENTS_PER_APPEND + k))
                        .collect(),
                    ..Batch::default()
                };
                bookmarks.extend(store.append_wait(batch).await.expect("append").bookmarks);
            }
            (name, bookmarks)
        }));
    }
    let mut acked = BTreeMap::new();
    for task in tasks {
        let (name, bookmarks) = task.await.expect("task");
        acked.insert(name, bookmarks);
    }
    // Each task saw seqs 1..=N in order; every lsn is unique.
    let mut lsns = Vec::new();
    for (name, bookmarks) in &acked {
        let seqs: Vec<u64> = bookmarks.iter().map(|b| b.seq.0).collect();
        assert_eq!(seqs, (1..=APPENDS * EVENTS_PER_APPEND).collect::<Vec<_>>(), "{name}");
        assert!(bookmarks.windows(2).all(|w| w[0].lsn < w[1].lsn), "{name}");
        lsns.extend(bookmarks.iter().map(|b| b.lsn.0));
        let stored = store.read_since(&tid(name), Seq(0), 1000).wait().expect("read");
        assert_eq!(stored.iter().map(|e| e.bookmark).collect::<Vec<_>>(), *bookmarks);
    }
    let acked_total = lsns.len() as u64;
    lsns.sort_unstable();
    lsns.dedup();
    let duplicates = acked_total - lsns.len() as u64;
    assert_eq!((acked_total, duplicates), (total, 0));
    // The global feed is strictly increasing and complete.
    let mut feed = Vec::new();
    let mut after = Lsn(0);
    loop {
        let page = store.read_all_since(after, 500).wait().expect("feed");
        let Some(last) = page.last() else { break };
        after = last.bookmark.lsn;
        feed.extend(page);
    }
    assert_eq!(feed.len() as u64, total);
    assert!(feed.windows(2).all(|w| w[0].bookmark.lsn < w[1].bookmark.lsn));
    // The subscriber saw exactly the feed: every event once, in order.
    let seen = watcher.await.expect("watcher");
    assert_eq!(seen, feed);
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!(report.events, total);
    let lost = total - report.events;
    // Written to the stderr handle directly: libtest captures `eprintln!` of passing tests,
    // and the line must reach the CI log.
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(
        stderr,
        "RELIABILITY concurrency appenders={TASKS} events={total} lost={lost} \
         duplicates={duplicates} subscriber_seen={}",
        seen.len()
    );
}
