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

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn research_pipeline_fails_in_code_and_recovers_from_the_phase_checkpoint() {
    use cairn::storage::CheckpointKind;
    let (_d, p) = db("research.db");
    let report = cairn_examples::research_pipeline::run(&p).await.unwrap();
    assert_eq!(report.original_status, cairn::ThreadStatus::Failed);
    assert_eq!(report.code_attempts, 3, "retried before the recovery policy stepped in");
    let s = &report.session;
    assert_eq!(s.sandbox, "cpu", "the fork took the fallback sandbox");
    assert_eq!(s.completed_phases, ["idea", "planning", "code", "analysis"]);
    assert!(s.artifact.as_deref().unwrap().ends_with("on cpu"), "{s:?}");
    assert!(s.analysis.as_deref().unwrap().starts_with("analysis: ran 3 experiments"));
    let kinds: Vec<CheckpointKind> = report.checkpoint_kinds.iter().map(|(k, _)| *k).collect();
    for kind in [
        CheckpointKind::Periodic,
        CheckpointKind::Phase,
        CheckpointKind::Manual,
        CheckpointKind::Failure,
    ] {
        assert!(kinds.contains(&kind), "{kind} missing from {kinds:?}");
    }

    // The database tells the story: the fork names its parent and fork point, and the
    // messages of one correlation id span the module threads.
    let engine = cairn::Engine::builder(&p).read_only().open().await.unwrap();
    let fork = engine.store().thread(&cairn::ThreadId::new(&report.recovered).unwrap());
    let fork = fork.unwrap().unwrap();
    assert_eq!(
        fork.parent,
        Some((cairn::ThreadId::new("session_001").unwrap(), cairn::Seq(report.forked_at)))
    );
    let corr = cairn_examples::research_pipeline::correlation("session_001", "idea_normalization");
    let mut tagged = 0;
    let mut after = cairn::Lsn(0);
    loop {
        let events = engine.store().read_all_since(after, 1_000).unwrap();
        let Some(last) = events.last() else { break };
        after = last.bookmark.lsn;
        for e in events {
            let rec = cairn::log::decode(engine.store().as_ref(), e).unwrap();
            if let cairn::record::Body::Message { message, .. } = rec.body {
                tagged += usize::from(message.correlation_id.as_deref() == Some(corr.as_str()));
            }
        }
    }
    assert!(tagged >= 2, "the module's output and the user's reply: {tagged}");
    // A bundle of the failed session reads back.
    let bundle = engine.export_bundle("session_001", &Default::default()).unwrap();
    cairn::debug::Bundle::from_bytes(&bundle.to_bytes(true).unwrap()).unwrap();
}
