//! Labels the engine reserves (`cairn::admin::RESERVED_LABELS`: a sub-workflow's `parent`, a
//! started child's `started_by` and `parent_close`, `closes_children`, a queued start's
//! `superseded_by` and `batched_into`) given by a user: a start,
//! a signal-with-start and a fork are refused with an error naming the label, and nothing is
//! written; other labels start as ever.

use cairn::admin::RESERVED_LABELS;
use cairn::{Engine, Error, StartOptions};
use cairn_tools::Operator;
use cairn_tools::debug::{ForkFrom, ForkOptions};

use crate::common::{Effects, Tally, db, linear, open};

/// Whether `err` is the refusal naming `label`.
fn names(err: &Error, label: &str) -> bool {
    matches!(err, Error::Invalid(m) if m.contains(&format!("{label:?} is reserved")))
}

/// Whether thread `id` exists.
async fn exists(engine: &Engine, id: &str) -> bool {
    engine.thread(id).await.is_ok()
}

#[tokio::test]
async fn a_reserved_label_given_at_start_signal_with_start_or_fork_is_refused_and_writes_nothing() {
    let (_d, path) = db();
    let wf = linear(2, Effects::default());
    let engine = open(&path, &[&wf], |b| b).await;
    assert_eq!(
        RESERVED_LABELS,
        [
            "parent",
            "started_by",
            "parent_close",
            "closes_children",
            "superseded_by",
            "batched_into",
            "cairn.build"
        ]
    );
    for (i, label) in RESERVED_LABELS.iter().enumerate() {
        let id = format!("r-{i}");
        let options = StartOptions::id(&id).label("team", "a").label(*label, "order-1");
        let err = engine.start_json("linear", Tally::default(), options.clone()).await.unwrap_err();
        assert!(names(&err, label), "{err}");
        let err = engine
            .signal_with_start("linear", Tally::default(), options, "go", 1u64, Some("k"))
            .await
            .unwrap_err();
        assert!(names(&err, label), "{err}");
        assert!(!exists(&engine, &id).await, "nothing written for {label}");
    }

    // Other labels start as ever; a fork given a reserved one is refused before it writes.
    let options = StartOptions::id("ok").label("team", "a");
    let t = engine.start_json("linear", Tally::default(), options).await.unwrap();
    t.wait().await.unwrap();
    let operator = Operator::new(&engine);
    for label in RESERVED_LABELS {
        let mut fork = ForkOptions { thread_id: Some("fork-1".into()), ..ForkOptions::default() };
        fork.labels.insert((*label).to_owned(), "ok".into());
        let err = operator.fork("ok", ForkFrom::Seq(1), fork).await.unwrap_err();
        assert!(names(&err, label), "{err}");
        assert!(!exists(&engine, "fork-1").await, "no fork written for {label}");
    }
    let fork = ForkOptions { thread_id: Some("fork-1".into()), ..ForkOptions::default() };
    operator.fork("ok", ForkFrom::Seq(1), fork).await.unwrap().wait().await.unwrap();
    engine.shutdown().await;
}
