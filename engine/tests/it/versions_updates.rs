//! Updates to a thread pinned to another worker build (docs/patching.md, "Worker build ids"):
//! the pinned build's handler applies them, never the receiving engine's. On a shared
//! PostgreSQL database the request goes through the thread's inbox to an engine of its build,
//! which applies it to the parked thread; on a file (one process) it is refused, and nothing
//! is written.

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, UpdateDef, Workflow};
use cairn::{END, Engine, START, StartOptions, ThreadStatus, UpdateOptions};
use cairn_storage_testkit::pg_cluster::Cluster;

use crate::common::{Tally, db, open};

/// Names the build whose handler ran.
const WHO: UpdateDef<u64, String> = UpdateDef::new("who");

/// Waits for one `go` signal; the update `who` notes and answers `build`: the code of one
/// build (the same graph and version in every build, as a deployment of a changed body is).
fn gate(build: &'static str) -> Workflow<Tally> {
    Workflow::<Tally>::builder("gate", 1)
        .node("wait", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.recv("go").await?;
            Ok(NodeOutput::update((n, "went".to_owned())))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .update(
            WHO,
            |_s: &Tally, _n: &u64| Ok(()),
            move |s: &mut Tally, _n: u64| {
                s.log.push(format!("update by {build}"));
                Ok(build.to_owned())
            },
        )
        .build()
        .unwrap()
}

async fn waiting(engine: &Engine, id: &str) {
    let t = engine.thread(id).await.unwrap();
    while t.status().await.unwrap() != ThreadStatus::WaitingInput {
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

async fn pg_engine(url: &str, wf: &Workflow<Tally>, build: &str) -> Engine {
    Engine::builder(url)
        .lease_ttl_ms(400)
        .poll_ms(50)
        .workflow(wf)
        .build_id(build)
        .open()
        .await
        .unwrap()
}

async fn who(engine: &Engine, thread: &str, id: &str) -> Result<cairn::Updated, cairn::Error> {
    let options = UpdateOptions { id: Some(id.into()), wait_ms: Some(20_000) };
    engine.update(thread, "who", 1u64, options).await
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_update_to_a_parked_thread_pinned_to_another_build_runs_that_builds_handler() {
    let Some(cluster) = Cluster::start("versions_update_pinned") else { return };
    let url = cluster.new_database();
    let (wf_a, wf_b) = (gate("build-a"), gate("build-b"));
    let a = pg_engine(&url, &wf_a, "build-a").await;
    let b = pg_engine(&url, &wf_b, "build-b").await;
    a.start_json("gate", Tally::default(), StartOptions::id("of-a")).await.unwrap();
    b.start_json("gate", Tally::default(), StartOptions::id("of-b")).await.unwrap();
    waiting(&a, "of-a").await;
    waiting(&b, "of-b").await;

    // Control: b's own parked thread takes b's handler, at once.
    assert_eq!(who(&b, "of-b", "u-b").await.unwrap().reply, "build-b");
    // Sent to b, the thread pinned to a is updated by a's handler (through its inbox).
    let done = who(&b, "of-a", "u-a").await.unwrap();
    assert_eq!((done.reply.as_str(), done.duplicate), (Some("build-a"), false));
    // The same id again, through either engine: the recorded reply, nothing applied twice.
    assert!(who(&a, "of-a", "u-a").await.unwrap().duplicate);
    assert!(who(&b, "of-a", "u-a").await.unwrap().duplicate);
    assert_eq!(a.thread("of-a").await.unwrap().status().await.unwrap(), ThreadStatus::WaitingInput);

    a.signal("of-a", "go", 1u64).await.unwrap();
    let end = tokio::time::timeout(Duration::from_secs(20), async {
        a.thread("of-a").await.unwrap().finished().await.unwrap()
    });
    let state: Tally = serde_json::from_value(end.await.unwrap().output.unwrap()).unwrap();
    assert_eq!(state.log, ["update by build-a", "went"], "a's handler only, once");
    a.shutdown().await;
    b.shutdown().await;
}

#[tokio::test]
async fn an_update_to_a_thread_pinned_to_another_build_on_a_file_is_refused() {
    let (_d, path) = db();
    let (wf_a, wf_b) = (gate("build-a"), gate("build-b"));
    let a = open(&path, &[&wf_a], |b| b.build_id("build-a")).await;
    a.start_json("gate", Tally::default(), StartOptions::id("pinned")).await.unwrap();
    let free = StartOptions::id("free").auto_upgrade();
    a.start_json("gate", Tally::default(), free).await.unwrap();
    waiting(&a, "pinned").await;
    waiting(&a, "free").await;
    a.shutdown().await;
    drop(a);

    let b = open(&path, &[&wf_b], |b| b.build_id("build-b")).await;
    let id = cairn::storage::ThreadId::new("pinned").unwrap();
    let last = |e: &Engine| e.store().last_bookmark(&id).wait().unwrap().map(|b| b.seq);
    let before = last(&b);
    let err = who(&b, "pinned", "u-1").await.unwrap_err();
    assert!(
        matches!(&err, cairn::Error::WrongStatus { detail, .. } if detail.contains("pinned to worker build \"build-a\"")),
        "{err}"
    );
    assert_eq!(last(&b), before, "nothing written");
    // Control: the unpinned thread on the same file takes this build's handler.
    assert_eq!(who(&b, "free", "u-2").await.unwrap().reply, "build-b");
    // Repinned to this build, its handler applies it.
    b.repin("pinned", Some("build-b")).await.unwrap();
    assert_eq!(who(&b, "pinned", "u-1").await.unwrap().reply, "build-b");
    b.shutdown().await;
}
