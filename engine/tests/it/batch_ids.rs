//! The ids part of a batch filter (`BatchFilter::ids`, the web view's selected rows): a batch
//! acts on exactly the named threads that exist and pass the rest of the filter; an id of no
//! thread is skipped and counted so; more than `BATCH_IDS_MAX` ids are refused.

use cairn::{BatchFilter, BatchOp, ThreadStatus};

use crate::batch::{finished, waiter, waiting};
use crate::common::{db, open};

fn ids(list: &[&str]) -> Vec<String> {
    list.iter().map(|s| (*s).to_owned()).collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_by_ids_acts_on_exactly_the_named_threads_and_counts_an_unknown_id_skipped() {
    let (_d, path) = db();
    let wf = waiter();
    let engine = open(&path, &[&wf], |b| b).await;
    // w-00, w-02, w-04 are team a; w-01, w-03, w-05 team b.
    waiting(&engine, 6).await;
    let named = ids(&["w-04", "w-01", "w-02", "nobody", "w-01"]);
    let by_ids = BatchFilter { ids: named.clone(), ..BatchFilter::default() };
    // The dry run counts the named threads that exist (a repeated id once).
    assert_eq!(engine.batch_count(&by_ids).await.unwrap(), 3);
    // The rest of the filter still applies: of those, team a is w-02 and w-04.
    let team_a = BatchFilter { labels: vec![("team".into(), "a".into())], ..by_ids.clone() };
    assert_eq!(engine.batch_count(&team_a).await.unwrap(), 2);
    // Control: without ids, team a is three threads.
    let all_a = BatchFilter { ids: Vec::new(), ..team_a.clone() };
    assert_eq!(engine.batch_count(&all_a).await.unwrap(), 3);

    engine.batch_as("sel", BatchOp::Pause, team_a).await.unwrap();
    finished(&engine, "sel").await;
    let state = engine.batch_info("sel").await.unwrap().state;
    assert_eq!((state.total, state.applied, state.skipped), (2, 2, 1), "{state:?}");
    assert_eq!(state.skips, vec![("nobody".to_owned(), "no such thread".to_owned())]);
    for i in 0..6 {
        let id = format!("w-{i:02}");
        let status = engine.thread(&id).await.unwrap().status().await.unwrap();
        let paused = id == "w-02" || id == "w-04";
        let expected = if paused { ThreadStatus::Paused } else { ThreadStatus::WaitingInput };
        assert_eq!(status, expected, "{id}");
    }
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_filter_of_too_many_ids_or_a_bad_id_is_refused() {
    let (_d, path) = db();
    let wf = waiter();
    let engine = open(&path, &[&wf], |b| b).await;
    let max = 1_000; // BATCH_IDS_MAX
    let of = |n: usize| BatchFilter {
        ids: (0..n).map(|i| format!("t-{i}")).collect(),
        ..BatchFilter::default()
    };
    // Control: the limit itself passes (none of them exists).
    assert_eq!(engine.batch_count(&of(max)).await.unwrap(), 0);
    let over = engine.batch(BatchOp::Pause, of(max + 1)).await;
    assert!(matches!(over, Err(cairn::Error::LimitExceeded { .. })), "{over:?}");
    let bad = BatchFilter { ids: ids(&[""]), ..BatchFilter::default() };
    assert!(engine.batch(BatchOp::Pause, bad).await.is_err());
    engine.shutdown().await;
}
