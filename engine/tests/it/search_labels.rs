//! Search attributes (`ctx.set_label`, `ctx.remove_label`): a node's label changes are
//! `labels_changed` events that move the thread record's labels in the same commit, so a
//! filter on several labels and a status finds the thread; restore, replay and the record agree.

use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::event::Body;
use cairn::storage::{Page, Seq, ThreadFilter, ThreadId};
use cairn::{END, Engine, START, StartOptions, ThreadStatus};
use cairn_tools::debug::{ForkFrom, ForkOptions};

use crate::common::{Tally, db};

/// START -> tag (stage=payment, drops `fresh`) -> wait (a `paid` signal) -> done (stage=done,
/// and an empty key when the state asks, to show the bound) -> END.
fn order() -> Workflow<Tally> {
    Workflow::<Tally>::builder("order", 1)
        .node("tag", |_s: Arc<Tally>, ctx: Ctx| async move {
            ctx.set_label("stage", "payment")?;
            ctx.remove_label("fresh")?;
            Ok(NodeOutput::update((1, String::new())))
        })
        .node("wait", |_s: Arc<Tally>, ctx: Ctx| async move {
            let _: u64 = serde_json::from_value(ctx.inner().recv("paid").await?).unwrap_or(0);
            Ok(NodeOutput::update((1, String::new())))
        })
        .node("done", |s: Arc<Tally>, ctx: Ctx| async move {
            ctx.set_label("stage", "done")?;
            if s.log.iter().any(|l| l == "bad") {
                ctx.set_label("", "x")?;
            }
            Ok(NodeOutput::update((1, String::new())))
        })
        .edge(START, "tag")
        .edge("tag", "wait")
        .edge("wait", "done")
        .edge("done", END)
        .build()
        .unwrap()
}

fn listed(engine: &Engine, filter: &ThreadFilter) -> Vec<String> {
    let page = Page { limit: 1_000, offset: 0 };
    let records = engine.store().list_threads(filter, page).wait().unwrap();
    records.iter().map(|r| r.id.to_string()).collect()
}

#[tokio::test]
async fn a_node_sets_labels_that_filters_find_and_replay_agrees_with() {
    let (_d, path) = db();
    let wf = order();
    // A completion checkpoint at every end: `restore_equals_live` compares it with the fold.
    let b = Engine::builder(&path).workflow(&wf).seed(5).completion_checkpoint_after(0);
    let engine = b.open().await.unwrap();
    for (id, customer) in [("o1", "c-1"), ("o2", "c-2"), ("o3", "c-1")] {
        let options = StartOptions::id(id).label("customer", customer).label("fresh", "yes");
        let t = engine.start_json("order", Tally::default(), options).await.unwrap();
        assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    }
    let record = engine.store().thread(&ThreadId::new("o1").unwrap()).wait().unwrap().unwrap();
    let labels: Vec<_> = record.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    assert_eq!(labels, ["customer=c-1", "stage=payment"], "set and removed in the record");
    let waiting = ThreadFilter { status: Some(ThreadStatus::WaitingInput), ..Default::default() };
    let c1_paying = waiting.clone().label("customer", "c-1").label("stage", "payment");
    assert_eq!(listed(&engine, &c1_paying), ["o1", "o3"]);
    assert!(listed(&engine, &c1_paying.clone().label("fresh", "yes")).is_empty(), "removed");
    let walked =
        engine.store().list_threads_after(&c1_paying, Some(&ThreadId::new("o1").unwrap()), 10);
    assert_eq!(walked.wait().unwrap().len(), 1, "the cursor walk filters alike");

    engine.signal("o1", "paid", 1u64).await.unwrap();
    let t = engine.thread("o1").await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::Completed);
    assert_eq!(listed(&engine, &c1_paying), ["o3"], "o1 moved on");
    let done = ThreadFilter::default().label("stage", "done").label("customer", "c-1");
    let completed = ThreadFilter { status: Some(ThreadStatus::Completed), ..done.clone() };
    assert_eq!(
        (listed(&engine, &done), listed(&engine, &completed)),
        (vec!["o1".into()], vec!["o1".into()])
    );

    // The log holds the changes; restore equals live; replay is clean.
    let events =
        engine.store().read_since(&ThreadId::new("o1").unwrap(), Seq(0), 1_000).wait().unwrap();
    let changes: Vec<(Vec<String>, Vec<String>)> = events
        .clone()
        .into_iter()
        .filter_map(|e| match cairn::blocking::decode(engine.store().as_ref(), e).unwrap().body {
            Body::LabelsChanged { set, removed } => {
                Some((set.into_iter().map(|(k, v)| format!("{k}={v}")).collect(), removed))
            }
            _ => None,
        })
        .collect();
    assert_eq!(
        changes,
        [
            (vec!["stage=payment".to_owned()], vec!["fresh".to_owned()]),
            (vec!["stage=done".to_owned()], vec![])
        ]
    );
    // A fork from just after the first change carries the labels as they were there.
    let first_change = events
        .iter()
        .find(|e| e.kind == cairn::storage::EventKind::Custom)
        .map(|e| e.bookmark.seq.0)
        .unwrap();
    let fork = ForkOptions { start: false, ..ForkOptions::id("o1-fork") };
    cairn_tools::Operator::new(&engine)
        .fork("o1", ForkFrom::Seq(first_change), fork)
        .await
        .unwrap();
    let forked = engine.store().thread(&ThreadId::new("o1-fork").unwrap()).wait().unwrap().unwrap();
    let labels: Vec<_> = forked.labels.iter().map(|(k, v)| format!("{k}={v}")).collect();
    assert_eq!(labels, ["customer=c-1", "stage=payment"], "the fork sees the node's labels");
    crate::compensation::restore_equals_live(engine.store().as_ref(), wf.as_dyn(), "o1");
    let report = engine.replay("o1", &Default::default()).await.unwrap();
    assert_eq!(report.divergence, None);
    assert_eq!(report.tasks_replayed, 3);
    engine.shutdown().await;
}

#[tokio::test]
async fn a_label_past_its_bound_fails_the_node() {
    let (_d, path) = db();
    let wf = order();
    let engine = Engine::builder(&path).workflow(&wf).seed(5).open().await.unwrap();
    let state = Tally { total: 0, log: vec!["bad".into()] };
    let t = engine.start_json("order", state, StartOptions::id("b1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    engine.signal("b1", "paid", 1u64).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::Failed, "an empty key is refused");
    let record = engine.store().thread(&ThreadId::new("b1").unwrap()).wait().unwrap().unwrap();
    assert_eq!(record.labels.get("stage").map(String::as_str), Some("payment"), "nothing applied");
    engine.shutdown().await;
}
