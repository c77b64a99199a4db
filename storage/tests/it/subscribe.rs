//! Subscriptions: history first, then live events, each once, in order, no gap at the switch.

use cairn_storage::{Append, ThreadLog};
use cairn_storage::{Error, Scope, Seq};

use crate::common::*;

#[tokio::test]
async fn a_thread_subscription_returns_history_then_live_events() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "t", 3);
    create_thread(&store, "other", 1);
    let mut sub = store.subscribe(Scope::Thread(tid("t")), 1).expect("subscribe");
    assert_eq!(sub.next().await.expect("history").bookmark.seq, Seq(2));
    assert_eq!(sub.next().await.expect("history").bookmark.seq, Seq(3));
    assert!(sub.try_next().await.expect("try").is_none());
    let waiter = tokio::spawn(async move {
        let event = sub.next().await.expect("live");
        (event, sub)
    });
    let pending = store.append(cairn_storage::Batch {
        events: vec![event("other", 2), event("t", 4)],
        ..Default::default()
    });
    pending.expect("queued").wait().await.expect("commit");
    let (event, mut sub) = waiter.await.expect("task");
    assert_eq!((event.thread, event.bookmark.seq), (tid("t"), Seq(4)));
    assert!(sub.try_next().await.expect("try").is_none());
    assert_eq!(sub.cursor(), 4);
}

#[tokio::test]
async fn a_subscription_to_a_thread_not_created_yet_waits_for_it() {
    let (_dir, _path, store) = open_fast();
    let mut sub = store.subscribe(Scope::Thread(tid("later")), 0).expect("subscribe");
    assert!(sub.try_next().await.expect("try").is_none());
    let waiter = tokio::spawn(async move { sub.next().await });
    let pending = store.append(cairn_storage::Batch {
        threads: vec![thread_record("later")],
        events: vec![event("later", 1)],
        ..Default::default()
    });
    pending.expect("queued").wait().await.expect("commit");
    assert_eq!(waiter.await.expect("task").expect("event").bookmark.seq, Seq(1));
}

#[tokio::test]
async fn closing_the_store_ends_subscriptions_after_the_committed_events() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "t", 2);
    let mut sub = store.subscribe(Scope::All, 0).expect("subscribe");
    store.close().expect("close");
    // The store's file is released by close; reads through the subscription fail as Closed.
    assert!(matches!(sub.next().await, Err(Error::Closed)));
}

#[tokio::test]
async fn an_all_subscription_follows_the_lsn_order() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "a", 2);
    create_thread(&store, "b", 2);
    let mut sub = store.subscribe(Scope::All, 1).expect("subscribe");
    let mut lsns = Vec::new();
    for _ in 0..3 {
        lsns.push(sub.next().await.expect("event").bookmark.lsn.0);
    }
    assert_eq!(lsns, vec![2, 3, 4]);
    events(&store, "a", 1);
    assert_eq!(sub.next().await.expect("live").bookmark.lsn.0, 5);
}
