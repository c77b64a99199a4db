//! Reset (`Engine::reset_as`, issue 43 item 1): a thread forked at a point of its history into
//! a new thread, the original cancelled naming it; a retry under the same key makes no second
//! fork (also when a crash left the fork made and the original running); the three points
//! start, latest checkpoint and seq; a reset batch resets each matching thread once and never
//! the threads it made.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, NodePolicy, Workflow};
use cairn::event::{Body, ForkOrigin};
use cairn::storage::{Page, Seq, ThreadFilter};
use cairn::{
    BatchFilter, BatchOp, END, Engine, ResetPoint, START, StartOptions, ThreadId, ThreadStatus,
    reset_thread_id,
};

use crate::batch::{finished, waiter, waiting};
use crate::common::{Tally, db, open};

/// `first` (counted in `runs`, a checkpoint after it), then `wait` for a `go` signal.
pub(crate) fn stages(runs: Arc<AtomicU64>) -> Workflow<Tally> {
    Workflow::<Tally>::builder("stages", 1)
        .node_with(
            "first",
            move |_s: Arc<Tally>, _ctx: Ctx| {
                let runs = runs.clone();
                async move {
                    runs.fetch_add(1, Ordering::SeqCst);
                    Ok(NodeOutput::update((1, "first".to_owned())))
                }
            },
            NodePolicy::default().checkpoint_after(true),
        )
        .node("wait", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.recv("go").await?;
            Ok(NodeOutput::update((n, format!("go {n}"))))
        })
        .edge(START, "first")
        .edge("first", "wait")
        .edge("wait", END)
        .build()
        .unwrap()
}

async fn status(engine: &Engine, id: &str) -> ThreadStatus {
    engine.thread(id).await.unwrap().status().await.unwrap()
}

/// Waits until `id` waits for input, no runner holding it.
pub(crate) async fn parked(engine: &Engine, id: &str) {
    let thread = ThreadId::new(id).unwrap();
    let wait = async {
        while status(engine, id).await != ThreadStatus::WaitingInput || engine.is_driven(&thread) {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    };
    tokio::time::timeout(Duration::from_secs(10), wait).await.expect("parked");
}

pub(crate) async fn thread_count(engine: &Engine) -> usize {
    engine.store().list_threads(&ThreadFilter::default(), Page::default()).await.unwrap().len()
}

/// The reasons of `id`'s status changes to Cancelled.
pub(crate) fn cancel_reasons(engine: &Engine, id: &str) -> Vec<String> {
    let store = engine.store();
    let events = store.read_since(&ThreadId::new(id).unwrap(), Seq(0), 10_000).wait().unwrap();
    let bodies = events.into_iter().map(|e| cairn::blocking::decode(store.as_ref(), e).unwrap());
    bodies
        .filter_map(|e| match e.body {
            Body::StatusChanged { to: ThreadStatus::Cancelled, reason, .. } => Some(reason),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_forks_at_its_point_cancels_the_original_and_a_retry_makes_no_second_fork() {
    let (_d, path) = db();
    let runs = Arc::new(AtomicU64::new(0));
    let wf = stages(runs.clone());
    let engine = open(&path, &[&wf], |b| b.completion_checkpoint_after(0)).await;
    for id in ["s1", "s2", "s3"] {
        engine.start_json("stages", Tally::default(), StartOptions::id(id)).await.unwrap();
        parked(&engine, id).await;
    }
    assert_eq!(runs.load(Ordering::SeqCst), 3);
    // To the start: `first` runs again in the new thread.
    let fork = engine.reset_as("s1", ResetPoint::Start, "k1").await.unwrap();
    assert_eq!(fork.id().as_str(), "s1.reset.k1");
    assert_eq!(status(&engine, "s1").await, ThreadStatus::Cancelled);
    assert_eq!(cancel_reasons(&engine, "s1"), ["reset to s1.reset.k1"]);
    parked(&engine, "s1.reset.k1").await;
    assert_eq!(runs.load(Ordering::SeqCst), 4, "the start re-runs first");
    let record = engine.store().thread(fork.id()).await.unwrap().unwrap();
    assert_eq!(record.parent, Some((ThreadId::new("s1").unwrap(), Seq(1))));
    // The same key again: the same thread, nothing new, no error on the cancelled original.
    let threads = thread_count(&engine).await;
    let again = engine.reset_as("s1", ResetPoint::Start, "k1").await.unwrap();
    assert_eq!(again.id(), fork.id());
    assert_eq!(thread_count(&engine).await, threads, "no second fork");
    // To the latest checkpoint (after `first`): `first` does not run again; the state has it.
    engine.reset_as("s2", ResetPoint::LatestCheckpoint, "k1").await.unwrap();
    parked(&engine, "s2.reset.k1").await;
    assert_eq!(runs.load(Ordering::SeqCst), 4, "the checkpoint is after first");
    engine.signal("s2.reset.k1", "go", 5).await.unwrap();
    finished(&engine, "s2.reset.k1").await;
    let out: Tally = engine.thread("s2.reset.k1").await.unwrap().output().await.unwrap();
    assert_eq!(out.log, ["first", "go 5"]);
    // A completed thread's latest checkpoint is its completion's, which does not count: this
    // one (begun after `first`) has no other, and is refused, writing nothing.
    let none = engine.reset_as("s2.reset.k1", ResetPoint::LatestCheckpoint, "k5").await;
    assert!(matches!(none, Err(cairn::Error::Invalid(_))), "{none:?}");
    // s1's new thread ran `first` (a checkpoint after it): completed, it is reset to that
    // checkpoint (it waits for `go` again, `first` not run again) and left completed.
    engine.signal("s1.reset.k1", "go", 6).await.unwrap();
    finished(&engine, "s1.reset.k1").await;
    let again = engine.reset_as("s1.reset.k1", ResetPoint::LatestCheckpoint, "k5").await.unwrap();
    parked(&engine, again.id().as_str()).await;
    assert_eq!(status(&engine, "s1.reset.k1").await, ThreadStatus::Completed);
    assert_eq!(runs.load(Ordering::SeqCst), 4);
    // A seq outside the log is refused and writes nothing; seq 1 is the start.
    let far = engine.reset_as("s3", ResetPoint::Seq(10_000), "k1").await;
    assert!(matches!(far, Err(cairn::Error::SeqUnavailable { .. })), "{far:?}");
    assert_eq!(status(&engine, "s3").await, ThreadStatus::WaitingInput);
    // A crash between the two writes left the fork made and the original waiting: the retry
    // finds the fork (no second one) and only cancels.
    let (origin, made) = (ThreadId::new("s3").unwrap(), reset_thread_id("s3", "k2"));
    let wf3 = cairn::admin::workflow_at(&engine, &origin, 1).await.unwrap();
    let ctx = cairn::admin::restore_at(&engine, &origin, 1).await.unwrap();
    let crashed = cairn::admin::Fork {
        id: ThreadId::new(made.clone()).unwrap(),
        workflow: &wf3,
        origin: ForkOrigin { thread: "s3".into(), seq: 1 },
        ctx: &ctx,
        labels: Default::default(),
        update: None,
        start: false,
    };
    cairn::admin::start_fork(&engine, crashed).await.unwrap();
    assert_eq!(status(&engine, "s3").await, ThreadStatus::WaitingInput);
    let threads = thread_count(&engine).await;
    let retried = engine.reset_as("s3", ResetPoint::Seq(1), "k2").await.unwrap();
    assert_eq!((retried.id().as_str(), thread_count(&engine).await), (made.as_str(), threads));
    assert_eq!(status(&engine, "s3").await, ThreadStatus::Cancelled);
    assert_eq!(cancel_reasons(&engine, "s3"), [format!("reset to {made}")]);
    // Control: an id held by a thread that is no reset of this one is refused.
    let squatter = StartOptions::id(reset_thread_id("s2", "k9"));
    engine.start_json("stages", Tally::default(), squatter).await.unwrap();
    let refused = engine.reset_as("s2", ResetPoint::Start, "k9").await;
    assert!(matches!(refused, Err(cairn::Error::Invalid(_))), "{refused:?}");
    // An ended thread is reset too: forked again under another key, left as it is.
    let before = thread_count(&engine).await;
    engine.reset_as("s1", ResetPoint::Start, "k3").await.unwrap();
    assert_eq!(thread_count(&engine).await, before + 1);
    assert_eq!(cancel_reasons(&engine, "s1"), ["reset to s1.reset.k1"], "not ended twice");
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_batch_resets_each_matching_thread_once_and_not_the_threads_it_made() {
    let (_d, path) = db();
    let wf = waiter();
    let engine = open(&path, &[&wf], |b| b).await;
    // Five: the last one read (w-04) is of team a, so its new thread sorts after the cursor and
    // is on the batch's next page.
    waiting(&engine, 5).await;
    let team_a = BatchFilter {
        workflow: Some("waiter".into()),
        labels: vec![("team".into(), "a".into())],
        ..BatchFilter::default()
    };
    assert_eq!(engine.batch_count(&team_a).await.unwrap(), 3, "the dry run");
    let reset = BatchOp::Reset { point: ResetPoint::Start };
    engine.batch_as("r1", reset.clone(), team_a.clone()).await.unwrap();
    finished(&engine, "r1").await;
    let info = engine.batch_info("r1").await.unwrap();
    assert_eq!((info.state.applied, info.state.skipped), (3, 0), "{info:?}");
    for i in 0..5 {
        let id = format!("w-{i:02}");
        let fork = reset_thread_id(&id, "r1");
        let made = engine.store().thread(&ThreadId::new(fork.as_str()).unwrap()).await.unwrap();
        if i % 2 == 0 {
            assert_eq!(status(&engine, &id).await, ThreadStatus::Cancelled, "{id}");
            assert_eq!(cancel_reasons(&engine, &id), [format!("reset to {fork}")]);
            // The new thread matches the filter too (same workflow, same labels): the batch
            // that made it left it alone.
            let made = made.expect("forked");
            assert!(team_a.matches(&made), "{made:?}");
            parked(&engine, &fork).await;
        } else {
            assert_eq!(status(&engine, &id).await, ThreadStatus::WaitingInput, "{id} untouched");
            assert!(made.is_none(), "{id} not forked");
        }
    }
    assert_eq!(thread_count(&engine).await, 5 + 3 + 1, "one fork each, and the batch");
    // Control: another batch over the same filter (the waiting ones) resets those new threads.
    let waiting_a = BatchFilter { status: Some(ThreadStatus::WaitingInput), ..team_a };
    engine.batch_as("r2", reset, waiting_a).await.unwrap();
    finished(&engine, "r2").await;
    let info = engine.batch_info("r2").await.unwrap();
    assert_eq!(info.state.applied, 3, "{info:?}");
    let twice = reset_thread_id(&reset_thread_id("w-00", "r1"), "r2");
    parked(&engine, &twice).await;
    engine.signal(&twice, "go", 4).await.unwrap();
    finished(&engine, &twice).await;
    engine.shutdown().await;
}

/// A batch's page is full (`BATCH_PAGE_THREADS`, 100), so it reads a next page after the last
/// id: there it finds `w-99.reset.r1`, which it made, matching its filter.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reset_batch_over_a_full_page_leaves_the_new_threads_of_the_next_alone() {
    let (_d, path) = db();
    let wf = waiter();
    let engine = open(&path, &[&wf], |b| b).await;
    waiting(&engine, 100).await;
    let all = BatchFilter { workflow: Some("waiter".into()), ..BatchFilter::default() };
    engine.batch_as("r1", BatchOp::Reset { point: ResetPoint::Start }, all.clone()).await.unwrap();
    finished(&engine, "r1").await;
    let info = engine.batch_info("r1").await.unwrap();
    assert_eq!((info.state.applied, info.state.skipped), (100, 0), "{info:?}");
    assert_eq!(engine.batch_count(&all).await.unwrap(), 100 + 100, "one new thread each");
    let again = reset_thread_id(&reset_thread_id("w-99", "r1"), "r1");
    assert!(engine.store().thread(&ThreadId::new(again).unwrap()).await.unwrap().is_none());
    assert_eq!(status(&engine, "w-99.reset.r1").await, ThreadStatus::WaitingInput);
    engine.shutdown().await;
}
