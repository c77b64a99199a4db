//! Replay: recorded threads replay with no divergence; mutated workflows are reported as
//! divergences at the right step; a what-if override changes the node's output.

use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::replay::ReplayOptions;
use cairn::{END, START, StartOptions, ToolError};

use crate::common::{Tally, db, engine_on};

const N: usize = 6;

/// The mutation applied to node `at` (or none).
#[derive(Debug, Clone, Copy, PartialEq)]
enum Mutation {
    None,
    /// The tool input of node `at` changes by `delta`.
    ToolInput {
        at: usize,
        delta: u64,
    },
    /// The update of node `at` changes by `delta`.
    Update {
        at: usize,
        delta: u64,
    },
    /// Node `at` is removed (its predecessor goes straight to its successor).
    Remove {
        at: usize,
    },
    /// Nodes `at` and `at + 1` swap their behaviour (changed node order).
    Swap {
        at: usize,
    },
    /// The route after node `at` goes to END early.
    Route {
        at: usize,
    },
}

/// START -> n0 -> ... -> n5 -> END; node i calls tool "t" with input (i + total) and adds the
/// result; the route after each node is "next node unless total is over a bound".
fn workflow(m: Mutation) -> Workflow<Tally> {
    let mut b = Workflow::<Tally>::builder("replayed", 1);
    let mut names = Vec::new();
    for i in 0..N {
        if m == (Mutation::Remove { at: i }) {
            continue;
        }
        let behaviour = match m {
            Mutation::Swap { at } if i == at => at + 1,
            Mutation::Swap { at } if i == at + 1 => at,
            _ => i,
        };
        let input_delta = match m {
            Mutation::ToolInput { at, delta } if at == i => delta,
            _ => 0,
        };
        let update_delta = match m {
            Mutation::Update { at, delta } if at == i => delta,
            _ => 0,
        };
        b = b.node(format!("n{i}"), move |s: Arc<Tally>, ctx: Ctx| async move {
            let input = behaviour as u64 * 7 + s.total + input_delta;
            let r: u64 =
                ctx.tool("t", input, |x: u64, _| async move { Ok::<_, ToolError>(x % 13) }).await?;
            let noise = ctx.random_u64() % 3;
            Ok(NodeOutput::update((
                r + noise + behaviour as u64 + update_delta,
                format!("n{behaviour}"),
            )))
        });
        names.push(format!("n{i}"));
    }
    b = b.edge(START, names[0].clone());
    for (k, name) in names.iter().enumerate() {
        let next = names.get(k + 1).cloned().unwrap_or_else(|| END.to_owned());
        let early = matches!(m, Mutation::Route { at } if format!("n{at}") == *name);
        if next == END {
            b = b.edge(name.clone(), END);
        } else {
            let next2 = next.clone();
            b = b.route(
                name.clone(),
                move |_s: &Tally| if early { END.to_owned() } else { next2.clone() },
                [next, END.to_owned()],
            );
        }
    }
    b.build().expect("replayed workflow")
}

/// The step at which a mutation must be detected (steps are 1-based, one node per step).
fn expected_step(m: Mutation) -> u64 {
    match m {
        Mutation::None => 0,
        // A removed node shows first in the routing of the step before it, which no longer
        // leads to it (or, for the first node, in step 1 itself).
        Mutation::Remove { at } => (at as u64).max(1),
        Mutation::ToolInput { at, .. }
        | Mutation::Update { at, .. }
        | Mutation::Swap { at }
        | Mutation::Route { at } => at as u64 + 1,
    }
}

#[tokio::test]
async fn replay_detects_every_mutant_at_its_step_and_never_flags_the_original() {
    let (_d, path) = db();
    let original = workflow(Mutation::None);
    let engine = engine_on(&path, &[&original], None).await;
    let mut threads = Vec::new();
    for t in 0..4 {
        let input = Tally { total: t * 5, log: vec![] };
        let h =
            engine.start_json("replayed", input, StartOptions::id(format!("r{t}"))).await.unwrap();
        h.finished().await.unwrap();
        threads.push(format!("r{t}"));
    }
    let mut false_positives = 0;
    for t in &threads {
        let report = engine.replay(t, &ReplayOptions::default()).await.unwrap();
        assert_eq!(report.tasks_replayed, N as u64);
        if !report.is_deterministic() {
            false_positives += 1;
            eprintln!("false positive: {report:?}");
        }
    }
    let mut mutants = Vec::new();
    for at in 0..N {
        for delta in 1..=4 {
            mutants.push(Mutation::ToolInput { at, delta });
            mutants.push(Mutation::Update { at, delta });
        }
        mutants.push(Mutation::Remove { at });
        if at + 1 < N {
            mutants.push(Mutation::Swap { at });
        }
        if at + 1 < N {
            mutants.push(Mutation::Route { at });
        }
    }
    let mut cases = 0;
    let mut detected = 0;
    for m in &mutants {
        let wf = workflow(*m).erase();
        for t in &threads {
            cases += 1;
            let options = ReplayOptions { workflow: Some(wf.clone()), ..ReplayOptions::default() };
            let report = engine.replay(t, &options).await.unwrap();
            match &report.divergence {
                Some(d) if d.step == expected_step(*m) => detected += 1,
                other => eprintln!("{m:?} on {t}: {other:?}"),
            }
        }
    }
    crate::common::report(&format!(
        "RELIABILITY nondeterminism mutants={cases} detected={detected} false_positives={false_positives}"
    ));
    assert!(cases >= 200);
    assert_eq!(detected, cases);
    assert_eq!(false_positives, 0);

    // What-if: another result for the first tool call changes what node 0 produces.
    let mut overrides = std::collections::BTreeMap::new();
    overrides.insert((1, "n0".to_owned(), 0), serde_json::json!(12));
    let report = engine
        .replay("r0", &ReplayOptions { overrides, ..ReplayOptions::default() })
        .await
        .unwrap();
    let d = report.divergence.expect("the override changes the outcome");
    assert_eq!((d.step, d.task.as_str(), d.what.as_str()), (1, "n0", "the update differs"));
    engine.shutdown().await;
}

/// A recorded clock reading, random number or id that the code now reads as another kind (it
/// draws them in another order) is a divergence, as the live run reports it, also where the two
/// kinds share a type (a clock reading and a random number are both numbers): recorded values
/// are tagged by kind. Replay used to read a mistyped value as 0 or "" and report nothing when
/// the node's update did not depend on it.
#[tokio::test]
async fn a_recorded_value_read_as_another_kind_is_a_divergence() {
    #[derive(Clone, Copy, PartialEq)]
    enum Order {
        ClockRandomId,
        RandomClockId,
        ClockIdRandom,
    }
    let drawing = |order: Order| {
        Workflow::<Tally>::builder("draws", 1)
            .node("n", move |_s: Arc<Tally>, ctx: Ctx| async move {
                match order {
                    Order::ClockRandomId => {
                        let _ = (ctx.now_ms(), ctx.random_u64(), ctx.new_id());
                    }
                    Order::RandomClockId => {
                        let _ = (ctx.random_u64(), ctx.now_ms(), ctx.new_id());
                    }
                    Order::ClockIdRandom => {
                        let _ = (ctx.now_ms(), ctx.new_id(), ctx.random_u64());
                    }
                }
                Ok(NodeOutput::update((1, "n".into())))
            })
            .edge(START, "n")
            .edge("n", END)
            .build()
            .unwrap()
    };
    let (_d, path) = db();
    let original = drawing(Order::ClockRandomId);
    let engine = engine_on(&path, &[&original], None).await;
    engine.start_json("draws", Tally::default(), StartOptions::id("d")).await.unwrap();
    engine.thread("d").await.unwrap().finished().await.unwrap();
    let same = engine.replay("d", &ReplayOptions::default()).await.unwrap();
    assert!(same.is_deterministic(), "{same:?}");
    for (order, expected) in [
        (Order::RandomClockId, "draws a random number where a clock value was recorded"),
        (Order::ClockIdRandom, "draws a id where a random value was recorded"),
    ] {
        let swapped =
            ReplayOptions { workflow: Some(drawing(order).erase()), ..Default::default() };
        let report = engine.replay("d", &swapped).await.unwrap();
        let d = report.divergence.clone().unwrap_or_else(|| panic!("not detected: {report:?}"));
        assert_eq!((d.step, d.task.as_str()), (1, "n"), "{d:?}");
        assert!(d.what.contains(expected), "{d:?}");
    }
    engine.shutdown().await;
}

/// Replaying a thread whose node drives a sub-workflow replays the child thread too (it used to
/// report "0 tasks replayed, no divergence" having checked nothing), and a change in the child's
/// code is reported with the child thread's id.
#[tokio::test]
async fn replay_of_a_parent_replays_its_child_threads() {
    let child = |bonus: u64| {
        Workflow::<Tally>::builder("child", 1)
            .node("work", move |s: Arc<Tally>, ctx: Ctx| async move {
                let r: u64 = ctx
                    .tool("t", s.total, |x: u64, _| async move { Ok::<_, ToolError>(x + 1) })
                    .await?;
                Ok(NodeOutput::update((r + bonus, "work".into())))
            })
            .edge(START, "work")
            .edge("work", END)
            .build()
            .unwrap()
    };
    let parent = |bonus: u64| {
        Workflow::<Tally>::builder("parent", 1)
            .subgraph(
                "sub",
                child(bonus),
                |s: &Tally| s.clone(),
                |c: &Tally| (c.total, "sub".into()),
            )
            .edge(START, "sub")
            .edge("sub", END)
            .build()
            .unwrap()
    };
    let (_d, path) = db();
    let original = parent(0);
    let engine = engine_on(&path, &[&original], None).await;
    let t =
        engine.start_json("parent", Tally { total: 5, log: vec![] }, StartOptions::id("p")).await;
    t.unwrap().finished().await.unwrap();
    let same = engine.replay("p", &ReplayOptions::default()).await.unwrap();
    assert!(same.is_deterministic(), "{same:?}");
    assert_eq!((same.children_replayed, same.tasks_replayed), (1, 1), "{same:?}");
    // The child's code changed (same structure, so the same fingerprints).
    let changed = ReplayOptions { workflow: Some(parent(3).erase()), ..Default::default() };
    let report = engine.replay("p", &changed).await.unwrap();
    let d = report.divergence.clone().unwrap_or_else(|| panic!("not detected: {report:?}"));
    assert!(d.child.as_deref().is_some_and(|c| c.starts_with("p/sub@")), "{d:?}");
    assert_eq!(d.task, "work", "{d:?}");
    assert!(d.to_string().starts_with("in child thread p/sub@"), "{d}");
    engine.shutdown().await;
}
