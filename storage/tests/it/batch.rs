//! Batches: all-or-nothing, guards, locks, leases, limits, and isolation inside a group commit.

use cairn_storage::limits::{BATCH_EVENTS_MAX, SUMMARY_BYTES_MAX, TAGS_PER_CHECKPOINT_MAX};
use cairn_storage::{Append, Catalog, Maintenance, ThreadLog};
use cairn_storage::{
    Batch, CheckpointKind, Error, Guard, LeaseOp, LockOp, Lsn, Options, RedbStore, Seq, StoreExt,
    ThreadStatus,
};

use crate::common::*;

#[test]
fn an_event_for_an_unknown_thread_rejects_the_whole_batch() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "a", 1);
    let batch = Batch {
        events: vec![event("a", 2), event("ghost", 1)],
        payloads: vec![b"p".to_vec()],
        ..Batch::default()
    };
    let result = store.append(batch).expect("queued").wait_blocking();
    assert!(matches!(result, Err(Error::UnknownThread(t)) if t == tid("ghost")));
    assert_eq!(store.read_since(&tid("a"), Seq(0), 10).wait().expect("read").len(), 1);
    assert!(store.payload(&cairn_storage::PayloadRef::of(b"p")).wait().is_err());
    // The lsn counter did not move either: the next event gets lsn 2.
    assert_eq!(events(&store, "a", 1).bookmarks[0].lsn, Lsn(2));
    assert!(store.verify().expect("verify").is_clean());
}

#[test]
fn guards_absent_status_and_lease() {
    let (_dir, _path, store) = open_fast();
    let create = |guard: Guard| Batch {
        threads: vec![thread_record("t")],
        guards: vec![guard],
        ..Batch::default()
    };
    append(&store, create(Guard::Absent { thread: tid("t") }));
    let again = store.append(create(Guard::Absent { thread: tid("t") })).expect("queued");
    assert!(matches!(again.wait_blocking(), Err(Error::GuardFailed { .. })));

    let status = |expected| Batch {
        events: vec![event("t", 1)],
        guards: vec![Guard::Status { thread: tid("t"), expected }],
        ..Batch::default()
    };
    let wrong = store.append(status(ThreadStatus::Running)).expect("queued").wait_blocking();
    assert!(matches!(wrong, Err(Error::GuardFailed { .. })));
    append(&store, status(ThreadStatus::Created));

    let lease_guard = |owner: &str, now_ms| Batch {
        events: vec![event("t", 9)],
        guards: vec![Guard::Lease { thread: tid("t"), owner: owner.into(), now_ms }],
        ..Batch::default()
    };
    let no_lease = store.append(lease_guard("w1", 0)).expect("queued").wait_blocking();
    assert!(matches!(no_lease, Err(Error::GuardFailed { .. })));
    let op = LeaseOp::Acquire { thread: tid("t"), owner: "w1".into(), now_ms: 100, ttl_ms: 50 };
    append(&store, Batch { leases: vec![op], ..Batch::default() });
    append(&store, lease_guard("w1", 120));
    let other = store.append(lease_guard("w2", 120)).expect("queued").wait_blocking();
    assert!(matches!(other, Err(Error::GuardFailed { .. })));
    let expired = store.append(lease_guard("w1", 150)).expect("queued").wait_blocking();
    assert!(matches!(expired, Err(Error::GuardFailed { .. })));
    assert_eq!(store.last_bookmark(&tid("t")).wait().expect("read").map(|b| b.seq), Some(Seq(2)));
}

/// Batches submitted back to back (so they share a commit group) each see the ones before them:
/// a rejected batch shifts nothing, and a batch that expected it is rejected in turn.
#[test]
fn last_seq_guard_chains_pipelined_batches() {
    let (_dir, _path, store) = open_fast();
    append(&store, Batch { threads: vec![thread_record("t")], ..Batch::default() });
    let after = |seq: u64, events: u64| Batch {
        events: (0..events).map(|k| event("t", seq + 1 + k)).collect(),
        guards: vec![Guard::LastSeq { thread: tid("t"), seq: Seq(seq) }],
        ..Batch::default()
    };
    let submitted: Vec<_> =
        [after(0, 2), after(2, 1), after(2, 1), after(3, 1), after(9, 1), after(10, 1)]
            .into_iter()
            .map(|b| store.append(b).expect("queued"))
            .collect();
    let results: Vec<_> = submitted.into_iter().map(|p| p.wait_blocking()).collect();
    let seqs: Vec<Option<Vec<u64>>> = results
        .iter()
        .map(|r| r.as_ref().ok().map(|a| a.bookmarks.iter().map(|b| b.seq.0).collect()))
        .collect();
    assert_eq!(seqs, vec![Some(vec![1, 2]), Some(vec![3]), None, Some(vec![4]), None, None]);
    assert!(matches!(results[2], Err(Error::GuardFailed { .. })));
    assert_eq!(store.last_bookmark(&tid("t")).wait().expect("read").map(|b| b.seq), Some(Seq(4)));
    let missing = Batch {
        events: vec![event("u", 1)],
        guards: vec![Guard::LastSeq { thread: tid("u"), seq: Seq(0) }],
        ..Batch::default()
    };
    let missing = store.append(missing).expect("queued").wait_blocking();
    assert!(matches!(missing, Err(Error::GuardFailed { .. })), "{missing:?}");
}

#[tokio::test]
async fn locks_acquire_hold_expire_renew_release() {
    let (_dir, _path, store) = open_fast();
    store
        .lock(LockOp::Acquire { name: "r".into(), owner: "w1".into(), now_ms: 0, ttl_ms: 100 })
        .await
        .expect("acquire");
    store
        .lock(LockOp::Acquire { name: "r".into(), owner: "w1".into(), now_ms: 10, ttl_ms: 100 })
        .await
        .expect("re-acquire by the owner");
    let held = store
        .lock(LockOp::Acquire { name: "r".into(), owner: "w2".into(), now_ms: 50, ttl_ms: 100 })
        .await;
    assert!(
        matches!(held, Err(Error::LockHeld { ref owner, expires_at_ms: 110, .. }) if owner == "w1")
    );
    store
        .lock(LockOp::Renew { name: "r".into(), owner: "w1".into(), now_ms: 100, ttl_ms: 100 })
        .await
        .expect("renew");
    assert!(matches!(
        store
            .lock(LockOp::Acquire {
                name: "r".into(),
                owner: "w2".into(),
                now_ms: 150,
                ttl_ms: 100
            })
            .await,
        Err(Error::LockHeld { .. })
    ));
    assert!(matches!(
        store
            .lock(LockOp::Renew { name: "r".into(), owner: "w2".into(), now_ms: 150, ttl_ms: 100 })
            .await,
        Err(Error::LockNotHeld { .. })
    ));
    assert!(matches!(
        store.lock(LockOp::Release { name: "r".into(), owner: "w2".into() }).await,
        Err(Error::LockNotHeld { .. })
    ));
    store
        .lock(LockOp::Acquire { name: "r".into(), owner: "w2".into(), now_ms: 200, ttl_ms: 100 })
        .await
        .expect("expired lock can be taken");
    assert_eq!(store.locks().wait().expect("locks")[0].owner, "w2");
    store.lock(LockOp::Release { name: "r".into(), owner: "w2".into() }).await.expect("release");
    store
        .lock(LockOp::Release { name: "r".into(), owner: "w2".into() })
        .await
        .expect("release is idempotent");
    assert!(store.locks().wait().expect("locks").is_empty());

    for name in ["a", "b", "c"] {
        store
            .lock(LockOp::Acquire {
                name: name.into(),
                owner: if name == "b" { "w9" } else { "w8" }.into(),
                now_ms: 0,
                ttl_ms: 1_000,
            })
            .await
            .expect("acquire");
    }
    store.lock(LockOp::ReleaseAll { owner: "w8".into() }).await.expect("release all");
    let left: Vec<_> = store.locks().wait().expect("locks").into_iter().map(|l| l.name).collect();
    assert_eq!(left, vec!["b".to_string()]);
}

#[test]
fn a_held_lock_rejects_the_whole_batch() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "t", 1);
    let take = |owner: &str| LockOp::Acquire {
        name: "x".into(),
        owner: owner.into(),
        now_ms: 0,
        ttl_ms: 10,
    };
    append(&store, Batch { locks: vec![take("w1")], ..Batch::default() });
    let batch = Batch { events: vec![event("t", 2)], locks: vec![take("w2")], ..Batch::default() };
    assert!(matches!(
        store.append(batch).expect("queued").wait_blocking(),
        Err(Error::LockHeld { .. })
    ));
    assert_eq!(store.last_bookmark(&tid("t")).wait().expect("read").map(|b| b.seq), Some(Seq(1)));
}

#[tokio::test]
async fn leases_acquire_hold_renew_release() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "t", 0);
    let t = tid("t");
    assert!(matches!(
        store
            .lease(LeaseOp::Acquire {
                thread: tid("nope"),
                owner: "w1".into(),
                now_ms: 0,
                ttl_ms: 10
            })
            .await,
        Err(Error::UnknownThread(_))
    ));
    store
        .lease(LeaseOp::Acquire { thread: t.clone(), owner: "w1".into(), now_ms: 0, ttl_ms: 100 })
        .await
        .expect("acquire");
    let held = store
        .lease(LeaseOp::Acquire { thread: t.clone(), owner: "w2".into(), now_ms: 50, ttl_ms: 100 })
        .await;
    assert!(
        matches!(held, Err(Error::LeaseHeld { ref owner, expires_at_ms: 100, .. }) if owner == "w1")
    );
    store
        .lease(LeaseOp::Renew { thread: t.clone(), owner: "w1".into(), now_ms: 90, ttl_ms: 100 })
        .await
        .expect("renew");
    assert_eq!(
        store.thread(&t).wait().expect("read").and_then(|r| r.lease).map(|l| l.expires_at_ms),
        Some(190)
    );
    assert!(matches!(
        store
            .lease(LeaseOp::Renew {
                thread: t.clone(),
                owner: "w2".into(),
                now_ms: 90,
                ttl_ms: 100
            })
            .await,
        Err(Error::LeaseNotHeld { .. })
    ));
    assert!(matches!(
        store.lease(LeaseOp::Release { thread: t.clone(), owner: "w2".into() }).await,
        Err(Error::LeaseNotHeld { .. })
    ));
    // An upsert of the record does not touch the lease.
    store
        .append_wait(Batch { threads: vec![thread_record("t")], ..Batch::default() })
        .await
        .expect("upsert");
    assert!(store.thread(&t).wait().expect("read").and_then(|r| r.lease).is_some());
    store.lease(LeaseOp::Release { thread: t.clone(), owner: "w1".into() }).await.expect("release");
    store
        .lease(LeaseOp::Release { thread: t.clone(), owner: "w1".into() })
        .await
        .expect("release is idempotent");
    store
        .lease(LeaseOp::Acquire { thread: t.clone(), owner: "w2".into(), now_ms: 100, ttl_ms: 100 })
        .await
        .expect("free lease can be taken");
}

#[tokio::test]
async fn set_status_cas_is_a_compare_and_set() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "t", 0);
    let t = tid("t");
    let record = store
        .set_status_cas(&t, ThreadStatus::Created, ThreadStatus::Running, 5)
        .await
        .expect("cas");
    assert_eq!(record.status, ThreadStatus::Running);
    assert_eq!(
        store.thread(&t).wait().expect("read").map(|r| (r.status, r.updated_at_ms)),
        Some((ThreadStatus::Running, 5))
    );
    let stale = store.set_status_cas(&t, ThreadStatus::Created, ThreadStatus::Paused, 6).await;
    assert!(matches!(stale, Err(Error::GuardFailed { .. })));
    assert!(matches!(
        store.set_status_cas(&tid("x"), ThreadStatus::Created, ThreadStatus::Running, 6).await,
        Err(Error::UnknownThread(_))
    ));
}

#[test]
fn limits_are_named_and_checked_before_queueing() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "t", 0);
    let mut big = event("t", 1);
    big.summary = "x".repeat(SUMMARY_BYTES_MAX + 1);
    let err = store.append(Batch { events: vec![big], ..Batch::default() }).expect_err("too big");
    assert!(matches!(err, Error::LimitExceeded { limit: "SUMMARY_BYTES_MAX", value, max }
        if value == SUMMARY_BYTES_MAX as u64 + 1 && max == SUMMARY_BYTES_MAX as u64));
    let many = Batch {
        events: (0..=BATCH_EVENTS_MAX as u64).map(|n| event("t", n)).collect(),
        ..Batch::default()
    };
    assert!(matches!(
        store.append(many),
        Err(Error::LimitExceeded { limit: "BATCH_EVENTS_MAX", .. })
    ));
    let tags: Vec<String> = (0..=TAGS_PER_CHECKPOINT_MAX).map(|n| n.to_string()).collect();
    let tag_refs: Vec<&str> = tags.iter().map(String::as_str).collect();
    let cp = checkpoint("t", CheckpointKind::Manual, &tag_refs);
    assert!(matches!(
        store.append(Batch { checkpoints: vec![cp], ..Batch::default() }),
        Err(Error::LimitExceeded { limit: "TAGS_PER_CHECKPOINT_MAX", .. })
    ));
    assert!(store.last_bookmark(&tid("t")).wait().expect("read").is_none());
}

#[test]
fn a_checkpoint_needs_an_event_to_cover() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "t", 0);
    let batch = Batch {
        checkpoints: vec![checkpoint("t", CheckpointKind::Manual, &[])],
        ..Batch::default()
    };
    assert!(matches!(
        store.append(batch).expect("queued").wait_blocking(),
        Err(Error::Invalid { .. })
    ));
    // In the same batch as the events, it covers the batch's last event.
    let batch = Batch {
        events: vec![event("t", 1), event("t", 2)],
        checkpoints: vec![checkpoint("t", CheckpointKind::Manual, &[])],
        ..Batch::default()
    };
    let appended = append(&store, batch);
    let cp = store.checkpoint(appended.checkpoints[0]).wait().expect("read").expect("present");
    assert_eq!(cp.covers, appended.bookmarks[1]);
}

/// Many batches queued at once share group commits; a rejected one changes nothing and the
/// others all commit.
#[test]
fn a_rejected_batch_does_not_affect_its_group() {
    let (_dir, path) = temp_db();
    let options = Options { group_max_batches: 64, ..fast() };
    let store = RedbStore::open(&path, options).expect("open");
    create_thread(&store, "t", 0);
    let mut pendings = Vec::new();
    for n in 0..200u64 {
        let batch = if n % 7 == 3 {
            Batch {
                events: vec![event("t", n)],
                guards: vec![Guard::Absent { thread: tid("t") }],
                ..Batch::default()
            }
        } else {
            Batch { events: vec![event("t", n)], ..Batch::default() }
        };
        pendings.push((n, store.append(batch).expect("queued")));
    }
    let mut committed = Vec::new();
    for (n, pending) in pendings {
        match pending.wait_blocking() {
            Ok(appended) => committed.push((n, appended.bookmarks[0].seq.0)),
            Err(Error::GuardFailed { .. }) => assert_eq!(n % 7, 3),
            Err(other) => panic!("batch {n}: {other}"),
        }
    }
    assert_eq!(committed.len(), 200 - (0..200).filter(|n| n % 7 == 3).count());
    // Seqs follow queue order with no holes where the rejected batches were.
    for (i, (_, seq)) in committed.iter().enumerate() {
        assert_eq!(*seq, i as u64 + 1);
    }
    let stored = store.read_since(&tid("t"), Seq(0), 1000).wait().expect("read");
    let summaries: Vec<_> = stored.iter().map(|e| e.summary.clone()).collect();
    let expected: Vec<_> = committed.iter().map(|(n, _)| format!("event {n} of t")).collect();
    assert_eq!(summaries, expected);
    assert!(store.verify().expect("verify").is_clean());
}
