//! `build()`: resolve names, check every rule, fingerprint, assemble.
//!
//! Resolution problems (unknown or reserved names, impossible links), range problems (policies,
//! settings, limits) and structural problems (reachability, cycles, joins) are all collected; a
//! workflow is returned only when there are none, so a [`DynWorkflow`] is valid by construction.

use std::collections::BTreeSet;

use crate::erased::{DynNode, DynNodeKind, DynQuery, DynStateCodec, DynWorkflow};
use crate::fingerprint::{self, Fingerprint};
use crate::graph::Shape;
use crate::limits::{
    FAN_OUT_MAX, JOIN_SOURCES_MAX, NODES_MAX, PERMISSIONS_MAX, SUBGRAPH_DEPTH_MAX,
};
use crate::policy::{Budgets, CheckpointPolicy};
use crate::resolve::{NodeDecl, Resolver, RouteDecl, check_name};
use crate::{BuildError, NextTarget, Problem, Recovery, START};

/// Everything declared, before resolution.
pub(crate) struct Decls {
    pub id: String,
    pub version: u32,
    pub nodes: Vec<NodeDecl>,
    pub edges: Vec<(String, String)>,
    pub routes: Vec<RouteDecl>,
    pub gotos: Vec<(String, Vec<String>)>,
    pub joins: Vec<(Vec<String>, String)>,
    pub loop_bounds: Vec<(String, u32)>,
    pub budgets: Budgets,
    pub permissions: BTreeSet<String>,
    pub checkpoint: CheckpointPolicy,
    pub on_failure: Recovery,
    /// The workflow's recovery per failure kind, for nodes that name none for the kind.
    pub on_failure_by_kind: std::collections::BTreeMap<crate::FailureKind, Recovery>,
    pub queries: Vec<(String, DynQuery)>,
    pub compensations: Vec<(String, crate::long_lived::DynCompensation)>,
    pub signals: Vec<(String, crate::signals::DynSignal)>,
    pub updates: Vec<(String, crate::updates::DynUpdate)>,
    /// The event names it subscribes to (`triggers.rs`).
    pub events: BTreeSet<String>,
}

/// Builds the erased workflow from `decls`, or every problem found.
pub(crate) fn assemble(
    decls: Decls,
    state_codec: DynStateCodec,
) -> Result<DynWorkflow, BuildError> {
    let Decls {
        id,
        version,
        mut nodes,
        edges,
        routes,
        gotos,
        joins,
        loop_bounds,
        budgets,
        permissions,
        checkpoint,
        on_failure,
        on_failure_by_kind,
        queries,
        compensations,
        signals,
        updates,
        events,
    } = decls;
    default_recoveries(&mut nodes, &on_failure, &on_failure_by_kind);

    let mut resolver = Resolver::new(&nodes);
    resolver.edges(&edges);
    resolver.routes(routes);
    resolver.gotos(&gotos);
    resolver.joins(&joins);
    let bounds: Vec<_> = loop_bounds
        .iter()
        .filter_map(|(name, bound)| Some((resolver.node(name, "loop_bound")?, *bound)))
        .collect();
    let resolved = resolver.finish();
    for (node, bound) in bounds {
        nodes[node].policy.max_visits = Some(bound);
    }

    let mut problems = Vec::new();
    check_name(&id, &mut problems);
    if nodes.is_empty() {
        problems.push(Problem::Empty);
    }
    problems.extend(resolved.problems);
    problems.extend(fallback_problems(&nodes, &resolved.index, &resolved.shape));
    problems.extend(range_problems(&nodes, &budgets, &checkpoint, &permissions));
    let depth = subgraph_depth(&nodes, &mut problems);
    problems.extend(limit_problems(&id, &nodes, &resolved.shape, &permissions));
    problems.extend(structure_problems(&nodes, &resolved.shape, &resolved.outside));
    problems.extend(named_problems(&queries, &compensations, &signals));
    problems.extend(update_problems(&updates));
    problems.extend(crate::triggers::trigger_problems(&events));
    if !problems.is_empty() {
        return Err(BuildError { workflow: id, problems });
    }

    let nodes: Vec<DynNode> = nodes
        .into_iter()
        .map(|NodeDecl { name, policy, kind }| DynNode { name, policy, kind })
        .collect();
    let names = nodes.iter().map(|n| std::sync::Arc::from(n.name.as_str())).collect();
    let mut workflow = DynWorkflow {
        id,
        version,
        fingerprint: Fingerprint([0; 32]),
        budgets,
        permissions,
        checkpoint,
        nodes,
        index: resolved.index,
        names,
        shape: resolved.shape,
        start_route: resolved.start_route,
        routes: resolved.routes,
        state_codec,
        depth,
        queries: queries.into_iter().collect(),
        compensations: compensations.into_iter().collect(),
        signals: signals.into_iter().collect(),
        updates: updates.into_iter().collect(),
        events,
    };
    workflow.fingerprint = fingerprint::compute(&workflow);
    Ok(workflow)
}

/// The structure problems of the resolved graph `shape` (`outside`: the nodes outside it); none
/// for a workflow without nodes, which is reported as empty.
fn structure_problems(nodes: &[NodeDecl], shape: &Shape, outside: &[bool]) -> Vec<Problem> {
    if nodes.is_empty() {
        return Vec::new();
    }
    let names: Vec<&str> = nodes.iter().map(|d| d.name.as_str()).collect();
    let bounded: Vec<bool> = nodes.iter().map(|d| d.policy.max_visits.is_some()).collect();
    crate::validate::structure(shape, &names, &bounded, outside)
}

/// Updates declared twice under one name, and update names that are not names.
fn update_problems(updates: &[(String, crate::updates::DynUpdate)]) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (name, _) in updates {
        check_name(name, &mut problems);
        if !seen.insert(name.clone()) {
            problems.push(Problem::DuplicateUpdate(name.clone()));
        }
    }
    problems
}

/// Queries, compensations and signals declared twice under one name, and signal names that are
/// not names.
fn named_problems(
    queries: &[(String, DynQuery)],
    compensations: &[(String, crate::long_lived::DynCompensation)],
    signals: &[(String, crate::signals::DynSignal)],
) -> Vec<Problem> {
    let mut problems = Vec::new();
    let mut seen = std::collections::BTreeSet::new();
    for (name, _) in queries {
        if !seen.insert(name.clone()) {
            problems.push(Problem::DuplicateQuery(name.clone()));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for (name, _) in compensations {
        if !seen.insert(name.clone()) {
            problems.push(Problem::DuplicateCompensation(name.clone()));
        }
    }
    let mut seen = std::collections::BTreeSet::new();
    for (name, _) in signals {
        check_name(name, &mut problems);
        if !seen.insert(name.clone()) {
            problems.push(Problem::DuplicateSignal(name.clone()));
        }
    }
    problems
}

/// Gives every node the workflow's recoveries it names none of (`on_failure`, per kind).
fn default_recoveries(
    nodes: &mut [NodeDecl],
    on_failure: &Recovery,
    by_kind: &std::collections::BTreeMap<crate::FailureKind, Recovery>,
) {
    for node in nodes {
        if node.policy.on_failure.is_fail() {
            node.policy.on_failure = on_failure.clone();
        }
        for (kind, recovery) in by_kind {
            node.policy.on_failure_by_kind.entry(*kind).or_insert_with(|| recovery.clone());
        }
    }
}

/// Fallback nodes that are not among their node's declared gotos (or do not exist).
fn fallback_problems(
    nodes: &[NodeDecl],
    index: &crate::graph::NameIndex,
    shape: &Shape,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    for (id, node) in nodes.iter().enumerate() {
        let policy = &node.policy;
        for recovery in
            std::iter::once(&policy.on_failure).chain(policy.on_failure_by_kind.values())
        {
            let Recovery::Fallback(target) = recovery else { continue };
            let declared = index.get(target).is_some_and(|&to| {
                shape.nodes.get(id).is_some_and(|l| l.gotos.contains(&NextTarget::Node(to)))
            });
            if !declared {
                problems.push(Problem::PolicyOutOfRange {
                    node: node.name.clone(),
                    detail: format!(
                        "on_failure falls back to {target:?}, which is not one of its gotos \
                     (declare it with .gotos({:?}, [{target:?}]))",
                        node.name
                    ),
                });
            }
        }
    }
    problems
}

/// Node policies and workflow settings out of range.
fn range_problems(
    nodes: &[NodeDecl],
    budgets: &Budgets,
    checkpoint: &CheckpointPolicy,
    permissions: &BTreeSet<String>,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    for node in nodes {
        for detail in node.policy.problems() {
            problems.push(Problem::PolicyOutOfRange { node: node.name.clone(), detail });
        }
    }
    for detail in budgets.problems().into_iter().chain(checkpoint.problems()) {
        problems.push(Problem::SettingOutOfRange { detail });
    }
    for permission in permissions {
        check_name(permission, &mut problems);
    }
    problems
}

/// The nesting depth of sub-workflows, reporting nodes that nest too deep.
fn subgraph_depth(nodes: &[NodeDecl], problems: &mut Vec<Problem>) -> usize {
    let mut depth = 0;
    for node in nodes {
        if let DynNodeKind::Subgraph { child, .. } = &node.kind {
            let d = child.depth() + 1;
            if d > SUBGRAPH_DEPTH_MAX {
                problems.push(limit("SUBGRAPH_DEPTH_MAX", &node.name, d, SUBGRAPH_DEPTH_MAX));
            }
            depth = depth.max(d);
        }
    }
    depth
}

/// Sizes past [`crate::limits`]: nodes, fan-out, join branches, permissions.
fn limit_problems(
    id: &str,
    nodes: &[NodeDecl],
    shape: &Shape,
    permissions: &BTreeSet<String>,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    if nodes.len() > NODES_MAX {
        problems.push(limit("NODES_MAX", id, nodes.len(), NODES_MAX));
    }
    if permissions.len() > PERMISSIONS_MAX {
        problems.push(limit("PERMISSIONS_MAX", id, permissions.len(), PERMISSIONS_MAX));
    }
    let points = std::iter::once(START).chain(nodes.iter().map(|n| n.name.as_str()));
    let links = std::iter::once(&shape.start).chain(&shape.nodes);
    for (name, l) in points.zip(links) {
        let fan_out = l.successors().len();
        if fan_out > FAN_OUT_MAX {
            problems.push(limit("FAN_OUT_MAX", name, fan_out, FAN_OUT_MAX));
        }
    }
    for (node, sources) in nodes.iter().zip(&shape.joins) {
        let branches = sources.as_ref().map_or(0, Vec::len);
        if branches > JOIN_SOURCES_MAX {
            problems.push(limit("JOIN_SOURCES_MAX", &node.name, branches, JOIN_SOURCES_MAX));
        }
    }
    problems
}

fn limit(limit: &'static str, subject: &str, value: usize, max: usize) -> Problem {
    Problem::LimitExceeded {
        limit,
        subject: subject.to_owned(),
        value: value as u64,
        max: max as u64,
    }
}
