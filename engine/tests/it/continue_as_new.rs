//! Continue-as-new (`ctx.continue_as_new`): a thread ends and its successor starts in the same
//! commit, linked both ways; results follow the chain; a crash at any append leaves exactly one
//! successor per link.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::event::Body;
use cairn::storage::{Page, RedbStore, Seq, Store, ThreadFilter, ThreadId};
use cairn::{Durability, END, Engine, START, StartOptions, ThreadStatus, ToolError};

use crate::common::{Effects, Tally, db};
use crate::crash::Dying;

/// Ticks per thread of the chain.
const TICKS: u64 = 3;
/// Threads continued before the last one ends: the chain is `t`, `t~1`, ..., `t~GENERATIONS`.
const GENERATIONS: usize = 2;

/// START -> tick (loops TICKS times) -> END. The generation is the length of the state's log;
/// the last tick of a thread of generation below GENERATIONS continues as new, on generation + 1.
pub(crate) fn chain(fx: Effects) -> Workflow<Tally> {
    Workflow::<Tally>::builder("chain", 1)
        .node("tick", move |s: Arc<Tally>, ctx: Ctx| {
            let fx = fx.clone();
            async move {
                let key = format!("{}:{}", ctx.thread_id(), s.total);
                let _: String = ctx
                    .tool("beat", key, move |k: String, _| async move {
                        fx.0.fetch_add(1, Ordering::SeqCst);
                        Ok::<_, ToolError>(k)
                    })
                    .await?;
                let generation = s.log.len();
                if s.total + 1 == TICKS && generation < GENERATIONS {
                    let next = Tally { total: 0, log: vec!["gen".into(); generation + 1] };
                    ctx.continue_as_new(&next)?;
                }
                Ok(NodeOutput::update((1, String::new())))
            }
        })
        .edge(START, "tick")
        .route("tick", |s: &Tally| if s.total >= TICKS { END } else { "tick" }, ["tick", END])
        .loop_bound("tick", TICKS as u32)
        .build()
        .unwrap()
}

fn chain_ids() -> Vec<String> {
    let mut ids = vec!["t".to_owned()];
    ids.extend((1..=GENERATIONS).map(|g| format!("t~{g}")));
    ids
}

async fn open(store: Arc<dyn Store>, wf: &Workflow<Tally>) -> Engine {
    // A completion checkpoint at every end: `restore_equals_live` compares it with the fold.
    let b = Engine::with_store(store).workflow(wf).seed(3).completion_checkpoint_after(0);
    b.open().await.unwrap()
}

fn redb(path: &std::path::Path) -> Arc<RedbStore> {
    let options = cairn::storage::Options { durability: Durability::None, ..Default::default() };
    Arc::new(RedbStore::open(path, options).unwrap())
}

#[tokio::test]
async fn a_thread_continues_as_new_and_the_result_follows_the_chain() {
    let (_d, path) = db();
    let wf = chain(Effects::default());
    let engine = open(redb(&path), &wf).await;
    let options = StartOptions::id("t").label("customer", "c-9");
    engine.start_json("chain", Tally::default(), options).await.unwrap();
    let (last, outcome) = engine.result_following("t", Duration::from_secs(30)).await.unwrap();
    assert_eq!(last, format!("t~{GENERATIONS}"));
    let outcome = outcome.expect("the chain ended");
    assert_eq!(outcome.status, ThreadStatus::Completed);
    let expected = Tally { total: TICKS, log: vec!["gen".into(); GENERATIONS] };
    assert_eq!(serde_json::from_value::<Tally>(outcome.output.unwrap()).unwrap(), expected);
    // The first thread completed with its own state; the links go both ways.
    let first = engine.result("t").await.unwrap().unwrap();
    assert_eq!(first.status, ThreadStatus::Completed);
    let ids = chain_ids();
    for pair in ids.windows(2) {
        assert_eq!(engine.continued_as(&pair[0]).await.unwrap().as_deref(), Some(&*pair[1]));
        let bodies = bodies(&engine, &pair[1]).await;
        assert!(
            matches!(&bodies[1], Body::ContinuedFrom { thread } if thread == &pair[0]),
            "{:?}",
            bodies[1]
        );
        let record =
            engine.store().thread(&ThreadId::new(&*pair[1]).unwrap()).wait().unwrap().unwrap();
        assert_eq!(
            record.labels.get("customer").map(String::as_str),
            Some("c-9"),
            "labels carried"
        );
    }
    assert_eq!(engine.continued_as(ids.last().unwrap()).await.unwrap(), None);
    for id in &ids {
        crate::compensation::restore_equals_live(engine.store().as_ref(), wf.as_dyn(), id);
    }
    // Each thread's log is its own: replay is clean, with the continue-as-new request.
    for id in &ids {
        let report = engine.replay(id, &Default::default()).await.unwrap();
        assert_eq!((report.tasks_replayed, report.divergence), (TICKS, None), "{id}");
    }
    engine.shutdown().await;
}

/// A thread on a queue puts its successor in line on the same queue: with one thread at a time,
/// a thread that waited meanwhile runs before the successor, and never two run at once.
#[tokio::test]
async fn the_successor_of_a_thread_on_a_queue_waits_in_line_on_it() {
    let (_d, path) = db();
    let wf = chain(Effects::default());
    let engine = open(redb(&path), &wf).await;
    let one = cairn::storage::QueueLimits { concurrency_max: Some(1), ..Default::default() };
    engine.define_queue("q", one).await.unwrap();
    engine
        .start_json("chain", Tally::default(), StartOptions::id("a-1").on_queue("q"))
        .await
        .unwrap();
    // The last generation already: it does not continue.
    let last = Tally { total: 0, log: vec!["gen".into(); GENERATIONS] };
    engine.start_json("chain", last, StartOptions::id("b-1").on_queue("q")).await.unwrap();
    let (end, outcome) = engine.result_following("a-1", Duration::from_secs(30)).await.unwrap();
    assert_eq!(end, format!("a-1~{GENERATIONS}"));
    assert_eq!(outcome.expect("the chain ended").status, ThreadStatus::Completed);
    let b = engine.thread("b-1").await.unwrap().output::<Tally>().await.unwrap();
    assert_eq!(b.total, TICKS);
    let runs = crate::queues::runs_from_log(engine.store().as_ref());
    assert_eq!(runs.order, ["a-1", "b-1", "a-1~1", "a-1~2"], "b-1 waited before a-1's successor");
    assert_eq!(runs.max_global, 1, "one at a time across the chain");
    let member = engine.store().queue_member(&ThreadId::new("a-1~2").unwrap()).wait().unwrap();
    assert!(member.is_none(), "the last successor left the queue when it ended: {member:?}");
    engine.shutdown().await;
}

async fn bodies(engine: &Engine, id: &str) -> Vec<Body> {
    let store = engine.store();
    let events = store.read_since(&ThreadId::new(id).unwrap(), Seq(0), 10_000).wait().unwrap();
    events.into_iter().map(|e| cairn::blocking::decode(store.as_ref(), e).unwrap().body).collect()
}

/// What the store holds of the chain after a run: for each thread, its status, how many
/// `continued_as_new` and `continued_from` events its log has.
fn links(store: &dyn Store) -> Vec<(String, ThreadStatus, usize, usize)> {
    let all = store
        .list_threads(&ThreadFilter::default(), Page { limit: 100, offset: 0 })
        .wait()
        .unwrap();
    let mut out: Vec<_> = all
        .into_iter()
        .map(|r| {
            let events = store.read_since(&r.id, Seq(0), 10_000).wait().unwrap();
            let (mut as_new, mut from) = (0, 0);
            for e in events {
                match cairn::blocking::decode(store, e).unwrap().body {
                    Body::ContinuedAsNew { .. } => as_new += 1,
                    Body::ContinuedFrom { .. } => from += 1,
                    _ => {}
                }
            }
            (r.id.to_string(), r.status, as_new, from)
        })
        .collect();
    out.sort();
    out
}

#[test]
fn a_crash_at_any_append_leaves_exactly_one_successor() {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let fx = Effects::default();
        let wf = chain(fx.clone());
        // A clean run: how many appends the whole chain takes.
        let (_d, path) = db();
        let dying = Arc::new(Dying::new(redb(&path), None));
        let engine = open(dying.clone(), &wf).await;
        engine.start_json("chain", Tally::default(), StartOptions::id("t")).await.unwrap();
        engine.result_following("t", Duration::from_secs(30)).await.unwrap();
        engine.shutdown().await;
        let appends = dying.appends.load(Ordering::SeqCst) as i64;
        let expected = links(dying.inner.as_ref());
        assert_eq!(expected.len(), GENERATIONS + 1);
        let (mut cases, mut missing, mut doubled) = (0u64, 0u64, 0u64);
        for crash_after in 1..=appends {
            let (_d, path) = db();
            let dying = Arc::new(Dying::new(redb(&path), Some(crash_after)));
            let engine = open(dying.clone(), &wf).await;
            if engine.start_json("chain", Tally::default(), StartOptions::id("t")).await.is_ok() {
                tokio::select! {
                    () = dying.died.notified() => {}
                    _ = engine.result_following("t", Duration::from_secs(30)) => {}
                }
            }
            engine.crash().await;
            drop(engine);
            let inner = dying.inner.clone();
            drop(dying);
            // Reopen on the same file: recovery resumes whatever was left.
            let engine = open(inner.clone(), &wf).await;
            let _ = engine.start_json("chain", Tally::default(), StartOptions::id("t")).await;
            // An error here is a link to a successor that does not exist: counted as missing.
            let ended = engine.result_following("t", Duration::from_secs(30)).await;
            engine.shutdown().await;
            let got = links(inner.as_ref());
            cases += 1;
            let successors = got.iter().filter(|l| l.3 == 1).count();
            missing += (GENERATIONS.saturating_sub(successors)) as u64;
            doubled += got.iter().filter(|l| l.2 > 1 || l.3 > 1).count() as u64
                + (got.len().saturating_sub(GENERATIONS + 1)) as u64;
            let Ok((last, outcome)) = ended else { continue };
            assert_eq!(got, expected, "crash after append {crash_after} of {appends}");
            assert_eq!(last, format!("t~{GENERATIONS}"));
            assert_eq!(outcome.map(|o| o.status), Some(ThreadStatus::Completed));
        }
        crate::common::report(&format!(
            "RELIABILITY continue_as_new cases={cases} successors_missing={missing} \
             successors_doubled={doubled}"
        ));
        assert_eq!((missing, doubled), (0, 0));
        assert!(cases > 10, "{cases} crash points");
    });
}
