//! Recovery pages through the unfinished threads by cursor: the threads it resumes leave the
//! status it lists while it reads the next page, and paging by offset then skipped as many
//! others, which nobody drove again (100,000 unfinished threads never all finished in the
//! engine bench; here, with a slow listing, 1,500 threads over three pages).

use std::sync::Arc;

use cairn::dsl::{END, NodeOutput, START, Workflow};
use cairn::storage::{Options, RedbStore, Store};
use cairn::{Durability, Engine, StartOptions, ThreadStatus};

use crate::common::{Tally, db};
use crate::crash::Dying;

const THREADS: usize = 1_500;

fn quick() -> Workflow<Tally> {
    Workflow::<Tally>::builder("quick", 1)
        .node("n", |_s, _ctx| async move { Ok(NodeOutput::update((1, "n".to_owned()))) })
        .edge(START, "n")
        .edge("n", END)
        .build()
        .unwrap()
}

fn hold() -> Workflow<Tally> {
    Workflow::<Tally>::builder("hold", 1)
        .node("wait", |_s, _ctx| async move {
            std::future::pending::<()>().await;
            Ok(NodeOutput::update((0, String::new())))
        })
        .edge(START, "wait")
        .edge("wait", END)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn recovery_resumes_every_unfinished_thread_while_the_ones_it_resumed_move_on() {
    let (_dir, path) = db();
    let file = |path: &std::path::Path| -> Arc<dyn Store> {
        let options = Options { durability: Durability::None, ..Options::default() };
        Arc::new(RedbStore::open(path, options).unwrap())
    };
    {
        // One thread holds the only permit: the others stay created until the crash.
        let engine = Engine::with_store(file(&path))
            .concurrency(1)
            .workflow(&hold())
            .workflow(&quick())
            .open()
            .await
            .unwrap();
        engine.start_json("hold", Tally::default(), StartOptions::id("holder")).await.unwrap();
        let starts =
            (0..THREADS).map(|n| (Tally::default(), StartOptions::id(format!("q-{n:05}"))));
        engine.start_many_json("quick", starts).await.unwrap();
        engine.crash().await;
    }
    // Each listing after the first waits, so the first page's threads finish meanwhile.
    let mut slow = Dying::new(file(&path), None);
    slow.list_delay = Some(std::time::Duration::from_millis(300));
    let engine = Engine::with_store(Arc::new(slow))
        .workflow(&hold())
        .workflow(&quick())
        .open()
        .await
        .unwrap();
    for n in 0..THREADS {
        let handle = engine.thread(&format!("q-{n:05}")).await.unwrap();
        let outcome = tokio::time::timeout(std::time::Duration::from_secs(30), handle.finished())
            .await
            .unwrap_or_else(|_| panic!("q-{n:05} was never resumed"))
            .unwrap();
        assert_eq!(outcome.status, ThreadStatus::Completed);
    }
    engine.crash().await;
}
