//! The storage contract, one test body for every backend: each check below runs on a redb file
//! and, with the `postgres` feature, on a throwaway PostgreSQL cluster. Round trip of events and
//! records, guards, leases, locks, a subscription that never skips, prune, verify, the
//! correlation index, and whole-thread deletion. (The
//! random model test runs on both too: `model.rs`, `pg.rs`; damage is backend-specific: the
//! bitflip test for a file, `pg::damage_in_bytea_is_found_by_reads_and_verify` for `bytea`.)
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use cairn_storage::{
    Batch, CheckpointKind, Error, Guard, LeaseOp, LockOp, Lsn, RunnerOps, Scope, Seq, Store,
    ThreadStatus,
};

use crate::common::*;

fn now_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
}

fn try_append<S: Store>(store: &S, batch: Batch) -> Result<cairn_storage::Appended, Error> {
    store.append(batch)?.wait_blocking()
}

/// Events, records and the global feed read back as written.
fn roundtrip<S: Store>(store: &S) {
    let created = create_thread(store, "rt", 5);
    assert_eq!(created.bookmarks.iter().map(|b| b.seq.0).collect::<Vec<_>>(), [1, 2, 3, 4, 5]);
    let read = store.read_since(&tid("rt"), Seq(0), 100).wait().unwrap();
    assert_eq!(read.len(), 5);
    for (n, e) in (1..=5).zip(&read) {
        assert_eq!(e.bookmark.seq, Seq(n));
        assert_eq!(e.data, event("rt", n).data, "the bytes written come back");
        assert_eq!(e.summary, event("rt", n).summary);
    }
    let range = store.read_range(&tid("rt"), Seq(2), Seq(4)).wait().unwrap();
    assert_eq!(range.iter().map(|e| e.bookmark.seq.0).collect::<Vec<_>>(), [2, 3, 4]);
    assert_eq!(store.last_bookmark(&tid("rt")).wait().unwrap().unwrap().seq, Seq(5));
    let first = read[0].bookmark.lsn.0;
    let feed = store.read_all_since(Lsn(first - 1), 100).wait().unwrap();
    let lsns: Vec<u64> = feed.iter().map(|e| e.bookmark.lsn.0).collect();
    assert!(lsns.windows(2).all(|w| w[0] < w[1]), "the feed is in lsn order: {lsns:?}");
    assert_eq!(store.thread(&tid("rt")).wait().unwrap().unwrap().last.unwrap().seq, Seq(5));
}

/// A batch whose guard fails writes nothing, and the next seq does not move.
fn guards<S: Store>(store: &S) {
    create_thread(store, "g", 2);
    let refused = |guard: Guard| {
        let batch = Batch { events: vec![event("g", 3)], guards: vec![guard], ..Batch::default() };
        matches!(try_append(store, batch), Err(Error::GuardFailed { .. }))
    };
    assert!(refused(Guard::LastSeq { thread: tid("g"), seq: Seq(1) }));
    assert!(refused(Guard::Status { thread: tid("g"), expected: ThreadStatus::Completed }));
    assert!(refused(Guard::Absent { thread: tid("g") }));
    // A signal stored: a guard that it is absent fails; one for another value passes below.
    let signal = cairn_storage::NewSignal::new(tid("g"), "s", b"1".to_vec(), 0).unwrap();
    try_append(store, Batch { signals: vec![signal], ..Batch::default() }).unwrap();
    let no_signal =
        |data: &[u8]| Guard::NoSignal { thread: tid("g"), name: "s".into(), data: data.to_vec() };
    assert!(refused(no_signal(b"1")));
    assert_eq!(
        store.last_bookmark(&tid("g")).wait().unwrap().unwrap().seq,
        Seq(2),
        "nothing written"
    );
    let kept = Batch {
        events: vec![event("g", 3)],
        guards: vec![Guard::LastSeq { thread: tid("g"), seq: Seq(2) }, no_signal(b"2")],
        ..Batch::default()
    };
    assert_eq!(try_append(store, kept).unwrap().bookmarks[0].seq, Seq(3));
}

/// One lease owner at a time; an expired lease is taken over and its owner fenced.
fn leases<S: Store>(store: &S) {
    create_thread(store, "l", 1);
    let op = |op: LeaseOp| try_append(store, Batch { leases: vec![op], ..Batch::default() });
    let acquire = |owner: &str, ttl_ms| LeaseOp::Acquire {
        thread: tid("l"),
        owner: owner.into(),
        now_ms: now_ms(),
        ttl_ms,
    };
    op(acquire("a", 60_000)).expect("a free lease");
    assert!(matches!(op(acquire("b", 60_000)), Err(Error::LeaseHeld { .. })));
    let renew = |owner: &str| LeaseOp::Renew {
        thread: tid("l"),
        owner: owner.into(),
        now_ms: now_ms(),
        ttl_ms: 300,
    };
    assert!(matches!(op(renew("b")), Err(Error::LeaseNotHeld { .. })));
    op(renew("a")).expect("the owner renews (now for 300 ms)");
    std::thread::sleep(Duration::from_millis(450));
    op(acquire("b", 60_000)).expect("an expired lease is taken over");
    assert!(matches!(op(renew("a")), Err(Error::LeaseNotHeld { .. })), "the old owner is fenced");
    op(LeaseOp::Release { thread: tid("l"), owner: "b".into() }).expect("the owner releases");
    assert!(store.thread(&tid("l")).wait().unwrap().unwrap().lease.is_none());
}

/// A runner's operations ([`RunnerOps`]) take their places among the batch's: its guard is
/// checked with the others, its renewal comes before the batch's own lease operations, and
/// either failing refuses the whole batch.
fn runner_ops<S: Store>(store: &S) {
    create_thread(store, "r", 2);
    let lease = |op: LeaseOp| try_append(store, Batch { leases: vec![op], ..Batch::default() });
    let (owner, now) = ("runner-a", now_ms());
    let take =
        LeaseOp::Acquire { thread: tid("r"), owner: owner.into(), now_ms: now, ttl_ms: 60_000 };
    lease(take).expect("a free lease");
    let renew = |owner: &str| LeaseOp::Renew {
        thread: tid("r"),
        owner: owner.into(),
        now_ms: now_ms(),
        ttl_ms: 60_000,
    };
    let step = |seq: u64, last: u64, owner: &str, leases: Vec<LeaseOp>| Batch {
        events: vec![event("r", seq)],
        leases,
        runner: Some(Box::new(RunnerOps {
            guard: Guard::LastSeq { thread: tid("r"), seq: Seq(last) },
            lease: Some(renew(owner)),
        })),
        ..Batch::default()
    };
    let last = || store.last_bookmark(&tid("r")).wait().unwrap().unwrap().seq;
    assert_eq!(try_append(store, step(3, 2, owner, vec![])).unwrap().bookmarks[0].seq, Seq(3));
    let stale = try_append(store, step(4, 2, owner, vec![]));
    assert!(matches!(stale, Err(Error::GuardFailed { .. })), "the runner's guard: {stale:?}");
    let other = try_append(store, step(4, 3, "runner-b", vec![]));
    assert!(matches!(other, Err(Error::LeaseNotHeld { .. })), "the renewal fences: {other:?}");
    assert_eq!(last(), Seq(3), "a refused batch writes nothing");
    // The renewal comes first: renewed, then released (released first, the renewal would fail).
    let release = LeaseOp::Release { thread: tid("r"), owner: owner.into() };
    try_append(store, step(4, 3, owner, vec![release])).expect("renewed, then released");
    assert!(store.thread(&tid("r")).wait().unwrap().unwrap().lease.is_none());
    assert_eq!(last(), Seq(4));
}

/// One lock owner at a time; releasing all of an owner's locks frees them.
fn locks<S: Store>(store: &S) {
    let op = |op: LockOp| try_append(store, Batch { locks: vec![op], ..Batch::default() });
    let take = |name: &str, owner: &str| LockOp::Acquire {
        name: name.into(),
        owner: owner.into(),
        now_ms: now_ms(),
        ttl_ms: 60_000,
    };
    op(take("file-a", "x")).expect("free");
    op(take("file-b", "x")).expect("free");
    assert!(matches!(op(take("file-a", "y")), Err(Error::LockHeld { .. })));
    assert!(matches!(
        op(LockOp::Release { name: "file-a".into(), owner: "y".into() }),
        Err(Error::LockNotHeld { .. })
    ));
    op(LockOp::ReleaseAll { owner: "x".into() }).expect("release all");
    op(take("file-a", "y")).expect("released, so free");
    let held: Vec<_> =
        store.locks().wait().unwrap().into_iter().map(|l| (l.name, l.owner)).collect();
    assert_eq!(held, [("file-a".to_string(), "y".to_string())]);
}

/// A subscription from the start sees every event, in lsn order, while another thread writes.
fn subscribe_without_gap<S: Store + Clone>(store: &S) {
    create_thread(store, "s", 0);
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
    let after =
        store.read_all_since(Lsn(0), 10_000).wait().unwrap().last().map_or(0, |e| e.bookmark.lsn.0);
    let mut sub = store.subscribe(Scope::All, after).unwrap();
    let writer = store.clone();
    let feeder = std::thread::spawn(move || {
        for k in 0..4 {
            let batch = Batch {
                events: (1..=5).map(|n| event("s", k * 5 + n)).collect(),
                ..Batch::default()
            };
            writer.append(batch).unwrap().wait_blocking().unwrap();
        }
    });
    rt.block_on(async {
        let mut last = after;
        for n in 1..=20u64 {
            let next = tokio::time::timeout(Duration::from_secs(10), sub.next());
            let e = next.await.expect("in time").unwrap();
            assert_eq!(e.bookmark.seq, Seq(n), "no event skipped");
            assert!(e.bookmark.lsn.0 > last);
            last = e.bookmark.lsn.0;
        }
    });
    feeder.join().unwrap();
}

/// Prune keeps the chosen checkpoint and what follows; verify stays clean.
fn prune_and_verify<S: Store>(store: &S) {
    create_thread(store, "p", 3);
    let save = || {
        let batch = Batch {
            checkpoints: vec![checkpoint("p", CheckpointKind::Periodic, &["p"])],
            ..Batch::default()
        };
        append(store, batch).checkpoints[0]
    };
    let old = save();
    events(store, "p", 3);
    let keep = save();
    events(store, "p", 2);
    let pruned = store.prune(&tid("p"), keep).unwrap().wait_blocking().unwrap();
    assert_eq!((pruned.events, pruned.checkpoints, pruned.first_seq), (6, 1, Seq(7)));
    assert!(matches!(store.read_since(&tid("p"), Seq(0), 10).wait(), Err(Error::Pruned { .. })));
    let rest = store.read_since(&tid("p"), Seq(6), 10).wait().unwrap();
    assert_eq!(rest.iter().map(|e| e.bookmark.seq.0).collect::<Vec<_>>(), [7, 8]);
    assert!(!store.checkpoint_exists(old).wait().unwrap());
    assert!(store.checkpoint_exists(keep).wait().unwrap());
    assert_eq!(events(store, "p", 1).bookmarks[0].seq, Seq(9));
    let report = store.verify().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

/// A message of `thread` at `at_ms`, carrying `correlation`.
fn correlated(thread: &str, n: u64, correlation: Option<&str>) -> cairn_storage::NewEvent {
    let mut e = event(thread, n);
    e.kind = cairn_storage::EventKind::Message;
    e.correlation = correlation.map(String::from);
    e
}

/// The correlation index: written with its events, read by id with thread and time filters
/// and paged by lsn, pruned with its events, checked by verify.
fn correlation_index<S: Store>(store: &S) {
    use cairn_storage::CorrelationQuery;
    for t in ["ca", "cb"] {
        append(store, Batch { threads: vec![thread_record(t)], ..Batch::default() });
    }
    let mut written = Vec::new();
    for n in 1..=6 {
        let batch = Batch {
            events: vec![
                correlated("ca", n, Some("order-1")),
                correlated(
                    "cb",
                    n,
                    if n.is_multiple_of(2) { Some("order-1") } else { Some("order-2") },
                ),
                correlated("ca", 100 + n, None),
            ],
            ..Batch::default()
        };
        written.extend(append(store, batch).bookmarks);
    }
    let query = CorrelationQuery::new("order-1");
    let all = store.read_correlated(&query, Lsn(0), 100).wait().unwrap();
    let keys: Vec<(String, u64)> =
        all.iter().map(|e| (e.thread.to_string(), e.bookmark.seq.0)).collect();
    assert_eq!(keys.len(), 9, "6 of ca, 3 of cb: {keys:?}");
    assert!(all.windows(2).all(|w| w[0].bookmark.lsn < w[1].bookmark.lsn), "lsn order");
    assert!(all.iter().all(|e| e.correlation.as_deref() == Some("order-1")));
    // Paged: two pages of 5 and 4, nothing repeated.
    let first = store.read_correlated(&query, Lsn(0), 5).wait().unwrap();
    let rest = store.read_correlated(&query, first[4].bookmark.lsn, 5).wait().unwrap();
    assert_eq!((first.len(), rest.len()), (5, 4));
    assert_eq!([first, rest].concat(), all);
    // Filters: a thread, a time range (at_ms is 1_000 + n).
    let only_cb = CorrelationQuery { thread: Some(tid("cb")), ..query.clone() };
    let cb = store.read_correlated(&only_cb, Lsn(0), 100).wait().unwrap();
    assert_eq!(cb.iter().map(|e| e.bookmark.at_ms).collect::<Vec<_>>(), [1_002, 1_004, 1_006]);
    let window = CorrelationQuery { from_ms: Some(1_002), to_ms: Some(1_003), ..query.clone() };
    assert_eq!(store.read_correlated(&window, Lsn(0), 100).wait().unwrap().len(), 3);
    assert!(
        store
            .read_correlated(&CorrelationQuery::new("nobody"), Lsn(0), 9)
            .wait()
            .unwrap()
            .is_empty()
    );
    // Prune drops the entries of pruned events only.
    let batch = Batch {
        checkpoints: vec![checkpoint("ca", CheckpointKind::Periodic, &[])],
        ..Batch::default()
    };
    let keep = append(store, batch).checkpoints[0];
    append(store, Batch { events: vec![correlated("ca", 7, Some("order-1"))], ..Batch::default() });
    store.prune(&tid("ca"), keep).unwrap().wait_blocking().unwrap();
    let after = store.read_correlated(&query, Lsn(0), 100).wait().unwrap();
    let left: Vec<(String, u64)> =
        after.iter().map(|e| (e.thread.to_string(), e.bookmark.seq.0)).collect();
    assert_eq!(left, [("cb".into(), 2), ("cb".into(), 4), ("cb".into(), 6), ("ca".into(), 13)]);
    let report = store.verify().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    // A correlation id is checked like any bounded field.
    let bad = Batch { events: vec![correlated("ca", 8, Some(""))], ..Batch::default() };
    assert!(matches!(try_append(store, bad), Err(Error::Invalid { .. })));
}

/// A cursor walk over the threads (`list_threads_after`) sees each matching thread once, in the
/// order `list_threads` lists, a page at a time, with a label filter too.
fn thread_cursor<S: Store>(store: &S) {
    use cairn_storage::{Page, ThreadFilter, ThreadId};
    for i in 0..7 {
        let mut record = thread_record(&format!("cur-{i}"));
        if i % 2 == 0 {
            record.labels.insert("even".into(), "yes".into());
        }
        append(store, Batch { threads: vec![record], ..Batch::default() });
    }
    let walk = |filter: &ThreadFilter, limit: usize| {
        let mut seen = Vec::new();
        let mut after: Option<ThreadId> = None;
        loop {
            let page = store.list_threads_after(filter, after.as_ref(), limit).wait().unwrap();
            assert!(page.len() <= limit);
            seen.extend(page.iter().map(|r| r.id.to_string()));
            match page.last() {
                Some(last) if page.len() == limit => after = Some(last.id.clone()),
                _ => return seen,
            }
        }
    };
    let listed = |filter: &ThreadFilter| -> Vec<String> {
        let all = store.list_threads(filter, Page { limit: 1_000, offset: 0 }).wait().unwrap();
        all.iter().map(|r| r.id.to_string()).collect()
    };
    let all = ThreadFilter::default();
    assert_eq!(walk(&all, 2), listed(&all));
    assert_eq!(walk(&all, 1_000), listed(&all));
    let even =
        ThreadFilter { labels: vec![("even".into(), "yes".into())], ..ThreadFilter::default() };
    let evens = walk(&even, 3);
    assert_eq!(evens, ["cur-0", "cur-2", "cur-4", "cur-6"]);
    assert_eq!(evens, listed(&even));
    let from = store.list_threads_after(&all, Some(&tid("cur-4")), 10).wait().unwrap();
    assert!(from.iter().all(|r| r.id.as_str() > "cur-4"), "the cursor is exclusive");
    assert!(store.list_threads_after(&all, None, 0).wait().unwrap().is_empty());
}

/// A whole-thread delete removes the thread's record, log, checkpoints (with their tag
/// index), correlation entries, locks, signal inbox and the payloads nobody else references; it refuses an
/// unfinished thread unless forced, leaves every other thread as it was, verify stays clean,
/// and the id can be used again.
fn delete_thread<S: Store>(store: &S) {
    use cairn_storage::{
        CheckpointFilter, CorrelationQuery, DeleteOptions, Page, PayloadRef, ThreadStatus,
    };
    let own = b"a body only thread dl refers to".to_vec();
    let shared = b"a body both threads refer to".to_vec();
    let with_payload = |thread: &str, n: u64, bytes: &[u8]| {
        let mut e = correlated(thread, n, Some("del-1"));
        e.payload = Some(PayloadRef::of(bytes));
        e
    };
    for t in ["dl", "dk"] {
        append(store, Batch { threads: vec![thread_record(t)], ..Batch::default() });
    }
    let batch = Batch {
        events: vec![
            with_payload("dl", 1, &own),
            with_payload("dl", 2, &shared),
            with_payload("dk", 1, &shared),
            event("dl", 3),
        ],
        payloads: vec![own.clone(), shared.clone()],
        checkpoints: vec![checkpoint("dl", CheckpointKind::Manual, &["del-tag"])],
        locks: vec![LockOp::Acquire {
            name: "del-lock".into(),
            owner: "dl".into(),
            now_ms: now_ms(),
            ttl_ms: 60_000,
        }],
        signals: vec![signal("dl", "go", 1), signal("dk", "go", 2)],
        ..Batch::default()
    };
    let written = append(store, batch);
    let dl_checkpoint = written.checkpoints[0];
    // 40 more events, so the log spans a seq-index chunk as well as the tail.
    events(store, "dl", 40);
    let second = append(
        store,
        Batch {
            checkpoints: vec![checkpoint("dl", CheckpointKind::Periodic, &[])],
            ..Batch::default()
        },
    );
    let delete = |force| store.delete_thread(&tid("dl"), DeleteOptions { force });
    let refused = delete(false).unwrap().wait_blocking();
    assert!(
        matches!(&refused, Err(Error::Unfinished { status: ThreadStatus::Created, .. })),
        "an unfinished thread is refused: {refused:?}"
    );
    assert_eq!(
        store.last_bookmark(&tid("dl")).wait().unwrap().unwrap().seq,
        Seq(43),
        "nothing removed"
    );
    let mut done = store.thread(&tid("dl")).wait().unwrap().unwrap();
    done.status = ThreadStatus::Completed;
    append(store, Batch { threads: vec![done], ..Batch::default() });
    let deleted = delete(false).unwrap().wait_blocking().unwrap().expect("it existed");
    assert_eq!(deleted.status, ThreadStatus::Completed);
    assert_eq!(
        (deleted.events, deleted.checkpoints, deleted.locks, deleted.payloads),
        (43, 2, 1, 1),
        "the shared payload stays"
    );
    assert!(store.thread(&tid("dl")).wait().unwrap().is_none());
    assert!(matches!(
        store.read_since(&tid("dl"), Seq(0), 10).wait(),
        Err(Error::UnknownThread(_))
    ));
    assert!(!store.checkpoint_exists(dl_checkpoint).wait().unwrap());
    assert!(!store.checkpoint_exists(second.checkpoints[0]).wait().unwrap());
    let tagged =
        CheckpointFilter { any_tags: vec!["del-tag".into()], ..CheckpointFilter::default() };
    assert!(store.list_checkpoints(&tagged, Page::default()).wait().unwrap().is_empty());
    let traced =
        store.read_correlated(&CorrelationQuery::new("del-1"), Lsn(0), 100).wait().unwrap();
    assert_eq!(
        traced.iter().map(|e| e.thread.to_string()).collect::<Vec<_>>(),
        ["dk"],
        "only the other thread's entry is left"
    );
    assert!(store.locks().wait().unwrap().iter().all(|l| l.owner != "dl"));
    assert!(matches!(store.payload(&PayloadRef::of(&own)).wait(), Err(Error::MissingPayload(_))));
    assert_eq!(store.payload(&PayloadRef::of(&shared)).wait().unwrap(), shared);
    assert_eq!(
        store.read_since(&tid("dk"), Seq(0), 10).wait().unwrap().len(),
        1,
        "dk is untouched"
    );
    let report = store.verify().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    // The id is free again: a new thread starts at seq 1; a second delete finds nothing.
    assert!(delete(false).unwrap().wait_blocking().unwrap().is_none());
    let again = create_thread(store, "dl", 2);
    assert_eq!(again.bookmarks[0].seq, Seq(1));
    assert!(again.bookmarks[0].lsn > written.bookmarks[3].lsn, "lsns are never reused");
    // Forced: an unfinished thread goes too, and its runner's next guarded batch is refused.
    let forced = delete(true).unwrap().wait_blocking().unwrap().expect("it existed");
    assert_eq!((forced.status, forced.events), (ThreadStatus::Created, 2));
    let fenced = Batch {
        events: vec![event("dl", 3)],
        guards: vec![Guard::LastSeq { thread: tid("dl"), seq: Seq(2) }],
        ..Batch::default()
    };
    assert!(try_append(store, fenced).is_err(), "a runner of the deleted thread is fenced");
    assert!(store.thread(&tid("dl")).wait().unwrap().is_none());
    assert!(store.signals(&tid("dl"), 0, 10).wait().unwrap().is_empty(), "its inbox goes with it");
    assert_eq!(store.signals(&tid("dk"), 0, 10).wait().unwrap().len(), 1, "another's inbox stays");
    let report = store.verify().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

fn signal(thread: &str, name: &str, value: u64) -> cairn_storage::NewSignal {
    cairn_storage::NewSignal::new(tid(thread), name, value.to_string().into_bytes(), now_ms())
        .unwrap()
}

/// The signal inbox: numbered per thread from 1 across batches (and within one), read back in
/// order from any point, refused for an unknown or finished thread (nothing stored), never
/// touching the thread's log, and sound for verify.
fn signal_inbox<S: Store>(store: &S) {
    create_thread(store, "sig", 2);
    let sent = |signals| try_append(store, Batch { signals, ..Batch::default() });
    assert_eq!(sent(vec![signal("sig", "a", 1)]).unwrap().signals, [1]);
    let two = sent(vec![signal("sig", "b", 2), signal("sig", "a", 3)]).unwrap();
    assert_eq!(two.signals, [2, 3], "numbered within a batch too");
    let all = store.signals(&tid("sig"), 0, 100).wait().unwrap();
    let got: Vec<(u64, &str, &[u8])> =
        all.iter().map(|s| (s.n, s.name.as_str(), s.data.as_slice())).collect();
    assert_eq!(got, [(1, "a", &b"1"[..]), (2, "b", &b"2"[..]), (3, "a", &b"3"[..])]);
    assert_eq!(store.signals(&tid("sig"), 2, 100).wait().unwrap().len(), 1, "after is exclusive");
    assert_eq!(store.signals(&tid("sig"), 0, 2).wait().unwrap().len(), 2, "limit holds");
    assert_eq!(
        store.last_bookmark(&tid("sig")).wait().unwrap().unwrap().seq,
        Seq(2),
        "log untouched"
    );
    assert!(matches!(sent(vec![signal("nobody", "a", 1)]), Err(Error::UnknownThread(_))));
    // Ended by a batch before it in the same batch order: refused, with its batch.
    let mut done = store.thread(&tid("sig")).wait().unwrap().unwrap();
    done.status = ThreadStatus::Completed;
    let ended =
        Batch { threads: vec![done], signals: vec![signal("sig", "a", 4)], ..Batch::default() };
    assert!(matches!(try_append(store, ended), Err(Error::Finished { .. })));
    assert_eq!(store.thread(&tid("sig")).wait().unwrap().unwrap().status, ThreadStatus::Created);
    assert_eq!(store.signals(&tid("sig"), 0, 100).wait().unwrap().len(), 3, "nothing stored");
    let report = store.verify().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    assert!(report.signals >= 3);
}

/// Every check, on one store.
fn contract<S: Store + Clone>(store: &S) {
    correlation_index(store);
    signal_inbox(store);
    roundtrip(store);
    guards(store);
    leases(store);
    runner_ops(store);
    locks(store);
    subscribe_without_gap(store);
    prune_and_verify(store);
    thread_cursor(store);
    delete_thread(store);
}

#[test]
fn the_redb_store_keeps_the_contract() {
    let (_dir, path) = temp_db();
    let store = cairn_storage::RedbStore::open(&path, fast()).expect("open");
    contract(&store);
}

#[cfg(feature = "postgres")]
#[test]
fn the_postgres_store_keeps_the_contract() {
    use cairn_storage_testkit::pg_cluster::Cluster;
    let Some(cluster) = Cluster::start("the_postgres_store_keeps_the_contract") else { return };
    let store = cairn_storage::PgStore::connect(
        &cluster.new_database(),
        cairn_storage::Durability::Immediate,
    )
    .expect("connect");
    contract(&store);
}
