//! Several locks taken at once: all or nothing, and a refusal that names each lock held
//! elsewhere.

use std::sync::Arc;

use cairn::dsl::{Ctx, NodeError, NodeOutput, Workflow};
use cairn::{END, START, StartOptions, ThreadStatus};

use crate::common::{Tally, db, engine_on};

const TTL_MS: u64 = 60_000;

/// `hold` takes `a` and `c` and waits for input while holding them; `grab` tries `a`, `b`
/// and `c` at once and notes what it was told.
fn workflows() -> (Workflow<Tally>, Workflow<Tally>) {
    let hold = Workflow::<Tally>::builder("hold", 1)
        .node("take", |_s, ctx: Ctx| async move {
            ctx.lock_all(&["a", "c"], TTL_MS).await?;
            Ok(NodeOutput::update((0, "took a, c".to_owned())))
        })
        .node("wait", |_s, ctx: Ctx| async move {
            let _: bool = ctx.interrupt("done?")?;
            Ok(NodeOutput::update((0, "done".to_owned())))
        })
        .edge(START, "take")
        .edge("take", "wait")
        .edge("wait", END)
        .build()
        .unwrap();
    let grab = Workflow::<Tally>::builder("grab", 1)
        .node("grab", |_s: Arc<Tally>, ctx: Ctx| async move {
            let note = match ctx.try_lock_all(&["a", "b", "c"], TTL_MS).await {
                Ok(()) => "took a, b, c".to_owned(),
                Err(NodeError::LocksHeld { held }) => {
                    let each: Vec<_> =
                        held.iter().map(|h| format!("{} by {}", h.name, h.owner)).collect();
                    format!("held: {}", each.join(", "))
                }
                Err(e) => return Err(e),
            };
            Ok(NodeOutput::update((1, note)))
        })
        .edge(START, "grab")
        .edge("grab", END)
        .build()
        .unwrap();
    (hold, grab)
}

#[tokio::test]
async fn several_locks_are_taken_all_or_nothing_and_a_refusal_names_each_one_held() {
    let (_d, path) = db();
    let (hold, grab) = workflows();
    let engine = engine_on(&path, &[&hold, &grab], None).await;
    let h = engine.start_json("hold", Tally::default(), StartOptions::id("holder")).await.unwrap();
    assert_eq!(h.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let names = |engine: &cairn::Engine| -> Vec<(String, String)> {
        let locks = engine.store().locks().wait().unwrap();
        locks.into_iter().map(|l| (l.name, l.owner)).collect()
    };
    let held_by_holder = vec![("a".to_owned(), "holder".to_owned()), ("c".into(), "holder".into())];
    assert_eq!(names(&engine), held_by_holder);

    let g = engine.start_json("grab", Tally::default(), StartOptions::id("g1")).await.unwrap();
    let out: Tally = g.output().await.unwrap();
    assert_eq!(out.log, ["held: a by holder, c by holder"]);
    // None was taken: `b` is free, the holder's are as they were.
    assert_eq!(names(&engine), held_by_holder);

    // Once the holder ends (its locks go with it), all three are taken in one write.
    engine.send_input("holder", true).await.unwrap();
    assert_eq!(h.finished().await.unwrap().status, ThreadStatus::Completed);
    let g = engine.start_json("grab", Tally::default(), StartOptions::id("g2")).await.unwrap();
    let out: Tally = g.output().await.unwrap();
    assert_eq!(out.log, ["took a, b, c"]);
    let lock_events: Vec<u64> = {
        let mut events = g.events(0).unwrap();
        let mut seqs = Vec::new();
        while let Some(e) = events.try_next().await.unwrap() {
            if matches!(e.body, cairn::event::Body::Lock { acquired: true, .. }) {
                seqs.push(e.bookmark.seq.0);
            }
        }
        seqs
    };
    assert_eq!(lock_events.len(), 3);
    assert!(lock_events.windows(2).all(|w| w[1] == w[0] + 1), "one batch: {lock_events:?}");
    engine.shutdown().await;
}
