//! Property tests: random valid graphs are always accepted (with a stable fingerprint and
//! working routing), and one random mutation of a valid graph is rejected with the problem that
//! mutation must cause.
//!
//! Graphs are chains of blocks, each a shape users write: a task, a route with 2-3 arms, a
//! diamond (static fan-out and a join), a bounded loop, a map node, a gotos node with 1-3 arms;
//! plus random forward "skip" edges between blocks.

use std::sync::Arc;

use cairn_dsl::{
    BuildError, END, NextTarget, NodePolicy, Problem, RetryPolicy, RouteError, START, Target,
    Workflow,
};
use proptest::prelude::*;
use proptest::sample::Index;

use crate::common::{S, builder, noop};

#[derive(Debug, Clone)]
enum Block {
    Task(NodePolicy),
    Route(usize),
    Diamond,
    Loop(u32),
    Map,
    Goto(usize),
}

/// A workflow as plain data, so that a test can mutate it before building.
#[derive(Debug, Clone, Default)]
struct Graph {
    nodes: Vec<(String, bool, NodePolicy)>, // name, is map, policy
    edges: Vec<(String, String)>,
    routes: Vec<(String, Vec<String>)>,
    gotos: Vec<(String, Vec<String>)>,
    joins: Vec<(Vec<String>, String)>,
    bounds: Vec<(String, u32)>,
    /// Blocks' facts the mutations need.
    diamonds: Vec<(String, [String; 2], String)>, // fork, branches, join
    loops: Vec<(String, String)>, // bounded head, tail
}

impl Graph {
    fn build(&self) -> Result<Workflow<S>, BuildError> {
        let mut b = builder("prop");
        for (name, is_map, policy) in &self.nodes {
            b = if *is_map {
                b.map_with(name.as_str(), |s: &S| vec![s.0], noop, policy.clone())
            } else {
                b.node_with(name.as_str(), noop, policy.clone())
            };
        }
        for (from, to) in &self.edges {
            b = b.edge(from.as_str(), to.as_str());
        }
        for (from, targets) in &self.routes {
            let choices = Arc::new(targets.clone());
            b = b.route(
                from.as_str(),
                move |s: &S| choices[s.0 as usize % choices.len()].clone(),
                targets.iter().map(String::as_str),
            );
        }
        for (from, targets) in &self.gotos {
            b = b.gotos(from.as_str(), targets.iter().map(String::as_str));
        }
        for (sources, to) in &self.joins {
            b = b.join(sources.iter().map(String::as_str), to.as_str());
        }
        for (node, bound) in &self.bounds {
            b = b.loop_bound(node.as_str(), *bound);
        }
        b.build()
    }

    fn task(&mut self, name: &str) {
        self.nodes.push((name.to_owned(), false, NodePolicy::default()));
    }
}

fn entry_of(i: usize, block: &Block) -> String {
    match block {
        Block::Task(_) | Block::Map => format!("b{i}"),
        Block::Route(_) => format!("b{i}_route"),
        Block::Diamond => format!("b{i}_fork"),
        Block::Loop(_) => format!("b{i}_head"),
        Block::Goto(_) => format!("b{i}_goto"),
    }
}

fn materialise(blocks: &[Block], skips: &[(Index, Index)]) -> Graph {
    let entries: Vec<String> = blocks.iter().enumerate().map(|(i, b)| entry_of(i, b)).collect();
    let next_of = |i: usize| entries.get(i + 1).cloned().unwrap_or_else(|| END.to_owned());
    let mut g = Graph::default();
    g.edges.push((START.to_owned(), entries[0].clone()));
    let mut exits: Vec<Vec<String>> = Vec::new();
    for (i, block) in blocks.iter().enumerate() {
        let entry = entries[i].clone();
        let next = next_of(i);
        let mut out = Vec::new();
        match block {
            Block::Task(policy) => {
                g.nodes.push((entry.clone(), false, policy.clone()));
                out.push(entry);
            }
            Block::Map => {
                g.nodes.push((entry.clone(), true, NodePolicy::default()));
                out.push(entry);
            }
            Block::Route(arms) => {
                g.task(&entry);
                let targets: Vec<String> = (0..*arms).map(|k| format!("b{i}_arm{k}")).collect();
                for t in &targets {
                    g.task(t);
                    out.push(t.clone());
                }
                g.routes.push((entry, targets));
            }
            Block::Goto(arms) => {
                g.task(&entry);
                let targets: Vec<String> = (0..*arms).map(|k| format!("b{i}_to{k}")).collect();
                for t in &targets {
                    g.task(t);
                    out.push(t.clone());
                }
                g.gotos.push((entry, targets));
            }
            Block::Diamond => {
                let (left, right, join) =
                    (format!("b{i}_l"), format!("b{i}_r"), format!("b{i}_join"));
                for n in [&entry, &left, &right, &join] {
                    g.task(n);
                }
                g.edges.push((entry.clone(), left.clone()));
                g.edges.push((entry.clone(), right.clone()));
                g.joins.push((vec![left.clone(), right.clone()], join.clone()));
                g.diamonds.push((entry, [left, right], join.clone()));
                out.push(join);
            }
            Block::Loop(bound) => {
                let tail = format!("b{i}_tail");
                g.task(&entry);
                g.task(&tail);
                g.edges.push((entry.clone(), tail.clone()));
                g.routes.push((tail.clone(), vec![entry.clone(), next.clone()]));
                g.bounds.push((entry.clone(), *bound));
                g.loops.push((entry, tail));
            }
        }
        for exit in &out {
            g.edges.push((exit.clone(), next.clone()));
        }
        exits.push(out);
    }
    for (from, to) in skips {
        let i = from.index(blocks.len());
        let j = i + 1 + to.index(blocks.len() - i); // a later block, or END
        if let Some(exit) = exits[i].first() {
            let target = entries.get(j).cloned().unwrap_or_else(|| END.to_owned());
            g.edges.push((exit.clone(), target));
        }
    }
    g
}

fn policy() -> impl Strategy<Value = NodePolicy> {
    (1_u32..5, 1_u32..4, prop::option::of(1_u64..10_000), any::<bool>(), 0_usize..3).prop_map(
        |(version, attempts, timeout, phase, tags)| {
            let mut p = NodePolicy::default()
                .version(version)
                .retry(RetryPolicy::exponential(attempts, 10, 1_000))
                .phase(phase);
            p.timeout_ms = timeout;
            for t in 0..tags {
                p = p.tag(format!("tag{t}"));
            }
            p
        },
    )
}

fn block() -> impl Strategy<Value = Block> {
    prop_oneof![
        policy().prop_map(Block::Task),
        (2_usize..=3).prop_map(Block::Route),
        Just(Block::Diamond),
        (1_u32..=10).prop_map(Block::Loop),
        Just(Block::Map),
        (1_usize..=3).prop_map(Block::Goto),
    ]
}

fn graph() -> impl Strategy<Value = Graph> {
    (
        prop::collection::vec(block(), 1..8),
        prop::collection::vec((any::<Index>(), any::<Index>()), 0..4),
    )
        .prop_map(|(blocks, skips)| materialise(&blocks, &skips))
}

#[derive(Debug, Clone)]
enum Mutation {
    DropEntry,
    Duplicate(Index),
    UnknownTarget(Index),
    Orphan,
    DeadEnd(Index),
    SelfLoop(Index),
    Unbound(Index),
    ZeroAttempts(Index),
    SplitJoin(Index),
    Reserved,
}

fn mutation() -> impl Strategy<Value = Mutation> {
    prop_oneof![
        Just(Mutation::DropEntry),
        any::<Index>().prop_map(Mutation::Duplicate),
        any::<Index>().prop_map(Mutation::UnknownTarget),
        Just(Mutation::Orphan),
        any::<Index>().prop_map(Mutation::DeadEnd),
        any::<Index>().prop_map(Mutation::SelfLoop),
        any::<Index>().prop_map(Mutation::Unbound),
        any::<Index>().prop_map(Mutation::ZeroAttempts),
        any::<Index>().prop_map(Mutation::SplitJoin),
        Just(Mutation::Reserved),
    ]
}

/// Applies `m` and returns the problem it must cause, or `None` when the graph has nothing the
/// mutation applies to (no loop to unbind, no join to split).
fn mutate(g: &mut Graph, m: &Mutation) -> Option<Problem> {
    let name = |g: &Graph, i: &Index| g.nodes[i.index(g.nodes.len())].0.clone();
    Some(match m {
        Mutation::DropEntry => {
            g.edges.retain(|(from, _)| from != START);
            Problem::NoEntry
        }
        Mutation::Duplicate(i) => {
            let n = name(g, i);
            g.task(&n);
            Problem::DuplicateNode(n)
        }
        Mutation::UnknownTarget(i) => {
            let n = name(g, i);
            g.edges.push((n.clone(), "ghost".to_owned()));
            Problem::UnknownTarget { from: n, to: "ghost".to_owned() }
        }
        Mutation::Orphan => {
            g.task("orphan");
            g.edges.push(("orphan".to_owned(), END.to_owned()));
            Problem::Unreachable("orphan".to_owned())
        }
        Mutation::DeadEnd(i) => {
            let n = name(g, i);
            g.task("dead_end");
            g.edges.push((n, "dead_end".to_owned()));
            Problem::NoPathToEnd("dead_end".to_owned())
        }
        Mutation::SelfLoop(i) => {
            let bounded: Vec<&String> = g.bounds.iter().map(|(n, _)| n).collect();
            let joins: Vec<&String> = g.joins.iter().map(|(_, j)| j).collect();
            let candidates: Vec<String> = g
                .nodes
                .iter()
                .map(|(n, _, _)| n.clone())
                .filter(|n| !bounded.contains(&n) && !joins.contains(&n))
                .collect();
            let n = candidates.get(i.index(candidates.len().max(1)))?.clone();
            g.edges.push((n.clone(), n.clone()));
            Problem::UnboundedCycle(vec![n])
        }
        Mutation::Unbound(i) => {
            if g.loops.is_empty() {
                return None;
            }
            let (head, tail) = g.loops[i.index(g.loops.len())].clone();
            g.bounds.retain(|(n, _)| *n != head);
            Problem::UnboundedCycle(vec![head, tail])
        }
        Mutation::ZeroAttempts(i) => {
            let k = i.index(g.nodes.len());
            g.nodes[k].2.retry.max_attempts = 0;
            Problem::PolicyOutOfRange {
                node: g.nodes[k].0.clone(),
                detail: "retry.max_attempts is 0; it must be at least 1".to_owned(),
            }
        }
        Mutation::SplitJoin(i) => {
            if g.diamonds.is_empty() {
                return None;
            }
            let (fork, branches, join) = g.diamonds[i.index(g.diamonds.len())].clone();
            g.edges.retain(|(from, to)| !(*from == fork && branches.contains(to)));
            g.routes.push((fork, branches.to_vec()));
            Problem::UnsatisfiableJoin { join, branches: branches.to_vec() }
        }
        Mutation::Reserved => {
            g.task(END);
            Problem::ReservedName(END.to_owned())
        }
    })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn valid_graphs_are_accepted_with_a_stable_fingerprint(g in graph()) {
        let wf = g.build().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let again = g.build().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_eq!(wf.fingerprint(), again.fingerprint());
        prop_assert_eq!(wf.to_dot(), again.to_dot());
        prop_assert_eq!(wf.to_mermaid(), again.to_mermaid());

        // Routing works from every node for several states: the result is among the node's
        // declared successors; a gotos-only node must choose, and may choose any declared target.
        let dynwf = wf.erase();
        for value in 0_u32..3 {
            let state = dynwf.state_from_json(&serde_json::json!(value)).unwrap();
            let first = dynwf.start(&*state).unwrap();
            prop_assert!(!first.is_empty());
            for id in 0..dynwf.nodes().len() {
                let successors = dynwf.successors(id);
                match dynwf.next(id, &*state, &[]) {
                    Ok(next) => prop_assert!(next.iter().all(|t| successors.contains(t))),
                    Err(RouteError::MissingGoto { .. }) => {
                        for t in &successors {
                            let target = match t {
                                NextTarget::Node(n) => Target::Node(dynwf.nodes()[*n].name.clone()),
                                NextTarget::End => Target::End,
                            };
                            prop_assert_eq!(dynwf.next(id, &*state, &[target]).unwrap(), vec![*t]);
                        }
                    }
                    Err(e) => return Err(TestCaseError::fail(e.to_string())),
                }
            }
        }
    }

    #[test]
    fn a_single_mutation_is_rejected_with_its_problem(g in graph(), m in mutation()) {
        let mut mutated = g.clone();
        let Some(expected) = mutate(&mut mutated, &m) else {
            return Ok(());
        };
        match mutated.build() {
            Ok(_) => return Err(TestCaseError::fail(format!("{m:?} was accepted"))),
            Err(e) => prop_assert!(e.has(&expected), "{:?}: expected {:?} in {:?}", m, expected, e.problems),
        }
    }

    #[test]
    fn a_version_bump_changes_only_the_fingerprint(g in graph(), i in any::<Index>()) {
        let before = g.build().map_err(|e| TestCaseError::fail(e.to_string()))?;
        let mut bumped = g.clone();
        let k = i.index(bumped.nodes.len());
        bumped.nodes[k].2.version += 1;
        let after = bumped.build().map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert_ne!(before.fingerprint(), after.fingerprint());
        prop_assert_eq!(before.to_dot(), after.to_dot());
    }
}

#[test]
fn the_generator_covers_every_block_kind() {
    // The block strategies are exercised above; this pins the shapes they produce.
    let blocks = [
        Block::Task(NodePolicy::default()),
        Block::Route(2),
        Block::Diamond,
        Block::Loop(3),
        Block::Map,
        Block::Goto(2),
    ];
    let g = materialise(&blocks, &[]);
    let wf = g.build().expect("every block kind together is valid");
    assert_eq!(wf.as_dyn().nodes().len(), 1 + 3 + 4 + 2 + 1 + 3);
}
