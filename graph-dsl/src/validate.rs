//! Structural checks on a resolved [`Shape`]: entry, reachability, path to `END`, bounded
//! cycles, satisfiable joins.
//!
//! Every traversal is iterative (work lists, petgraph's iterative Kosaraju), never recursive over
//! the user's graph, so a deep graph cannot overflow the stack.

use petgraph::algo::kosaraju_scc;
use petgraph::graph::{DiGraph, NodeIndex};

use crate::Problem;
use crate::graph::{Links, NextTarget, NodeId, Shape};
use crate::join::{BitSet, must_reach};

/// Every structural problem of `shape`, in a fixed order: entry, unreachable nodes, nodes with
/// no path to `END`, unbounded cycles, joins (declaration order within each). Nodes marked
/// `outside` (already reported as reserved or duplicate) are not reported again.
pub(crate) fn structure(
    shape: &Shape,
    names: &[&str],
    bounded: &[bool],
    outside: &[bool],
) -> Vec<Problem> {
    let n = shape.len();
    let mut problems = Vec::new();
    if shape.start.edges.is_empty() && shape.start.route.is_none() {
        problems.push(Problem::NoEntry);
    }

    let reached = reachable(shape, None);
    for id in (0..n).filter(|&id| !outside[id] && !reached.contains(id)) {
        problems.push(Problem::Unreachable(names[id].to_owned()));
    }

    let finishing = reaches_end(shape);
    for id in (0..n).filter(|&id| !outside[id] && !finishing.contains(id)) {
        problems.push(Problem::NoPathToEnd(names[id].to_owned()));
    }

    for cycle in unbounded_cycles(shape, bounded) {
        problems
            .push(Problem::UnboundedCycle(cycle.iter().map(|&id| names[id].to_owned()).collect()));
    }

    for (join, sources) in shape.joins.iter().enumerate() {
        let Some(sources) = sources else { continue };
        problems.extend(check_join(shape, names, join, sources));
    }
    problems
}

/// Nodes reachable from `START` over every kind of link, not passing through `avoid`.
pub(crate) fn reachable(shape: &Shape, avoid: Option<NodeId>) -> BitSet {
    let mut seen = BitSet::new(shape.len());
    let mut work: Vec<NodeId> = Vec::new();
    let visit = |links: &Links, seen: &mut BitSet, work: &mut Vec<NodeId>| {
        for t in links.successors() {
            if let NextTarget::Node(id) = t
                && Some(id) != avoid
                && seen.insert(id)
            {
                work.push(id);
            }
        }
    };
    visit(&shape.start, &mut seen, &mut work);
    while let Some(id) = work.pop() {
        visit(&shape.nodes[id], &mut seen, &mut work);
    }
    seen
}

/// Nodes from which some path leads to `END` (backwards search from `END`).
fn reaches_end(shape: &Shape) -> BitSet {
    let n = shape.len();
    let mut preds: Vec<Vec<NodeId>> = vec![Vec::new(); n];
    let mut seen = BitSet::new(n);
    let mut work = Vec::new();
    for (from, links) in shape.nodes.iter().enumerate() {
        for t in links.successors() {
            match t {
                NextTarget::Node(to) => preds[to].push(from),
                NextTarget::End => {
                    if seen.insert(from) {
                        work.push(from);
                    }
                }
            }
        }
    }
    while let Some(id) = work.pop() {
        for &p in &preds[id] {
            if seen.insert(p) {
                work.push(p);
            }
        }
    }
    seen
}

/// Cycles that avoid every bounded node: the strongly connected components (with more than one
/// node, or a self-loop) of the graph without bounded nodes. Each sorted, listed by first node.
fn unbounded_cycles(shape: &Shape, bounded: &[bool]) -> Vec<Vec<NodeId>> {
    let n = shape.len();
    let mut graph: DiGraph<(), ()> = DiGraph::with_capacity(n, 0);
    for _ in 0..n {
        graph.add_node(());
    }
    let mut self_loop = vec![false; n];
    for (from, links) in shape.nodes.iter().enumerate() {
        if bounded[from] {
            continue;
        }
        for t in links.successors() {
            if let NextTarget::Node(to) = t
                && !bounded[to]
            {
                graph.add_edge(NodeIndex::new(from), NodeIndex::new(to), ());
                self_loop[from] |= from == to;
            }
        }
    }
    let mut cycles: Vec<Vec<NodeId>> = kosaraju_scc(&graph)
        .into_iter()
        .map(|scc| {
            let mut ids: Vec<NodeId> = scc.into_iter().map(NodeIndex::index).collect();
            ids.sort_unstable();
            ids
        })
        .filter(|ids| ids.len() > 1 || ids.first().is_some_and(|&id| self_loop[id]))
        .collect();
    cycles.sort_unstable();
    cycles
}

fn check_join(shape: &Shape, names: &[&str], join: NodeId, sources: &[NodeId]) -> Vec<Problem> {
    let mut problems = Vec::new();
    let join_name = names[join];
    let entering = |links: &Links| links.successors().contains(&NextTarget::Node(join));
    if entering(&shape.start) {
        problems.push(Problem::InvalidJoin {
            join: join_name.to_owned(),
            detail: "entered from START, which is not one of its branches".to_owned(),
        });
    }
    for (from, links) in shape.nodes.iter().enumerate() {
        if entering(links) && !sources.contains(&from) {
            problems.push(Problem::InvalidJoin {
                join: join_name.to_owned(),
                detail: format!("entered from {:?}, which is not one of its branches", names[from]),
            });
        }
    }

    // Satisfiable when some point reachable without passing through the join is sure to lead to
    // every branch (see `join.rs`).
    let must = must_reach(shape, join);
    let reached = reachable(shape, Some(join));
    let wanted = BitSet::from_ids(shape.len(), sources);
    let from_start = must.start.is_superset(&wanted);
    let from_node = (0..shape.len())
        .filter(|&id| id != join && reached.contains(id))
        .any(|id| must.nodes[id].is_superset(&wanted));
    if !(from_start || from_node) {
        problems.push(Problem::UnsatisfiableJoin {
            join: join_name.to_owned(),
            branches: sources.iter().map(|&id| names[id].to_owned()).collect(),
        });
    }
    problems
}
