//! Every example runs, with its outcome asserted.
#![allow(missing_docs, reason = "test code")]

fn db(name: &str) -> (tempfile::TempDir, std::path::PathBuf) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(name);
    (dir, path)
}

#[tokio::test]
async fn quickstart() {
    let (_d, p) = db("q.db");
    let out = cairn_examples::quickstart::run(&p).await.unwrap();
    assert_eq!(out.words, 3);
    assert_eq!(out.shout, "HELLO DURABLE WORLD");
}

#[tokio::test]
async fn routing_with_a_bounded_loop() {
    let (_d, p) = db("r.db");
    let (easy, hard) = cairn_examples::routing::run(&p).await.unwrap();
    assert_eq!(easy.drafts, vec![3, 6, 9]);
    assert!(easy.approved);
    assert_eq!(hard.drafts, vec![3, 6, 9, 12], "stops at the loop bound");
    assert!(!hard.approved);
}

#[tokio::test]
async fn map_reduce_in_item_order() {
    let (_d, p) = db("m.db");
    let out = cairn_examples::map_reduce::run(&p).await.unwrap();
    assert_eq!(out.summaries, vec!["alpha", "beta", "gamma", "delta", "epsilon"]);
    assert_eq!(out.total, 5 + 4 + 5 + 5 + 7);
}

#[tokio::test]
async fn subworkflow_as_a_child_thread() {
    let (_d, p) = db("s.db");
    let (order, children) = cairn_examples::subworkflow::run(&p).await.unwrap();
    assert_eq!(order.total, 2_200);
    assert!(order.shipped);
    assert_eq!(children.len(), 1, "{children:?}");
}

#[tokio::test]
async fn bookmarks_resume_and_read_since() {
    let (_d, p) = db("b.db");
    let seen = cairn_examples::bookmarks::run(&p).await.unwrap();
    assert_eq!(seen.value, 5);
    let expected: Vec<u64> = (seen.bookmark_seq + 1..=*seen.since.last().unwrap()).collect();
    assert_eq!(seen.since, expected, "every event after the bookmark, once, in order");
}
