//! `build()`: resolve names into a [`Shape`], check every rule, fingerprint, assemble.
//!
//! Resolution problems (unknown names, reserved names, bad policies) and structural problems
//! (reachability, cycles, joins) are all collected; a workflow is returned only when there are
//! none, so a [`DynWorkflow`] is valid by construction.

use std::collections::{BTreeSet, HashMap};

use crate::builder::{Decls, NodeDecl};
use crate::erased::{
    DynNode, DynNodeKind, DynRoute, DynStateCodec, DynWorkflow, NextTarget, NodeId,
};
use crate::fingerprint::{self, Fingerprint};
use crate::graph::{Links, Shape};
use crate::limits::{
    FAN_OUT_MAX, JOIN_SOURCES_MAX, NAME_BYTES_MAX, NODES_MAX, PERMISSIONS_MAX, SUBGRAPH_DEPTH_MAX,
};
use crate::{BuildError, END, Problem, START};

/// Where an edge may start.
#[derive(Clone, Copy)]
enum From {
    Start,
    Node(NodeId),
}

struct Resolver {
    index: HashMap<String, NodeId>,
    problems: Vec<Problem>,
}

impl Resolver {
    fn from(&mut self, name: &str, to: &str, context: &str) -> Option<From> {
        if name == START {
            Some(From::Start)
        } else if name == END {
            self.problems.push(Problem::InvalidEdge {
                from: name.to_owned(),
                to: to.to_owned(),
                detail: "nothing leaves END".to_owned(),
            });
            None
        } else if let Some(&id) = self.index.get(name) {
            Some(From::Node(id))
        } else {
            self.problems
                .push(Problem::UnknownNode { name: name.to_owned(), context: context.to_owned() });
            None
        }
    }

    fn to(&mut self, from: &str, name: &str) -> Option<NextTarget> {
        if name == END {
            Some(NextTarget::End)
        } else if name == START {
            self.problems.push(Problem::InvalidEdge {
                from: from.to_owned(),
                to: name.to_owned(),
                detail: "nothing may lead into START".to_owned(),
            });
            None
        } else if let Some(&id) = self.index.get(name) {
            Some(NextTarget::Node(id))
        } else {
            self.problems
                .push(Problem::UnknownTarget { from: from.to_owned(), to: name.to_owned() });
            None
        }
    }

    fn node(&mut self, name: &str, context: &str) -> Option<NodeId> {
        let found = self.index.get(name).copied();
        if found.is_none() {
            self.problems
                .push(Problem::UnknownNode { name: name.to_owned(), context: context.to_owned() });
        }
        found
    }
}

/// Builds the erased workflow from `decls`, or every problem found.
pub(crate) fn assemble(
    decls: Decls,
    state_codec: DynStateCodec,
) -> Result<DynWorkflow, BuildError> {
    let Decls {
        id,
        version,
        nodes,
        edges,
        routes,
        gotos,
        joins,
        loop_bounds,
        budgets,
        permissions,
        checkpoint,
    } = decls;
    let mut problems = Vec::new();
    check_name(&id, &mut problems);
    if nodes.is_empty() {
        problems.push(Problem::Empty);
    }
    if nodes.len() > NODES_MAX {
        problems.push(Problem::LimitExceeded {
            limit: "NODES_MAX",
            subject: id.clone(),
            value: nodes.len() as u64,
            max: NODES_MAX as u64,
        });
    }

    let mut r = Resolver { index: HashMap::new(), problems };
    let mut duplicates = BTreeSet::new();
    // Nodes that cannot take part in the graph (a reserved name, or a second node of a name):
    // nothing can lead to them, so the structural checks skip them rather than report noise.
    let mut outside = vec![false; nodes.len()];
    for (i, node) in nodes.iter().enumerate() {
        let name = node.name.as_str();
        if name == START || name == END || name.starts_with("__") {
            r.problems.push(Problem::ReservedName(name.to_owned()));
            outside[i] = true;
        } else {
            check_name(name, &mut r.problems);
        }
        if r.index.contains_key(name) {
            outside[i] = true;
            if duplicates.insert(name) {
                r.problems.push(Problem::DuplicateNode(name.to_owned()));
            }
        } else if !outside[i] {
            r.index.insert(name.to_owned(), i);
        }
    }

    let n = nodes.len();
    let mut start = Links::default();
    let mut links = vec![Links::default(); n];
    let mut start_route: Option<DynRoute> = None;
    let mut node_routes: Vec<Option<DynRoute>> = vec![None; n];

    for (from, to) in &edges {
        let (Some(source), Some(target)) = (r.from(from, to, "edge"), r.to(from, to)) else {
            continue;
        };
        point(&mut start, &mut links, source).edges.push(target);
    }

    for route in routes {
        let first = route.targets.first().map_or("", String::as_str);
        let Some(source) = r.from(&route.from, first, "route") else {
            continue;
        };
        if route.targets.is_empty() {
            r.problems.push(Problem::NoTargets(route.from.clone()));
        }
        let targets: Vec<NextTarget> =
            route.targets.iter().filter_map(|t| r.to(&route.from, t)).collect();
        let slot = match source {
            From::Start => &mut start_route,
            From::Node(id) => &mut node_routes[id],
        };
        if slot.is_some() {
            r.problems.push(Problem::DuplicateRoute(route.from.clone()));
            continue;
        }
        *slot = Some(route.f);
        point(&mut start, &mut links, source).route = Some(targets);
    }

    for (from, targets) in &gotos {
        let first = targets.first().map_or("", String::as_str);
        let source = match r.from(from, first, "gotos") {
            Some(From::Node(id)) => id,
            Some(From::Start) => {
                r.problems.push(Problem::InvalidEdge {
                    from: START.to_owned(),
                    to: first.to_owned(),
                    detail: "START runs no code, so it cannot choose gotos".to_owned(),
                });
                continue;
            }
            None => continue,
        };
        if targets.is_empty() {
            r.problems.push(Problem::NoTargets(from.clone()));
        }
        for t in targets {
            if let Some(target) = r.to(from, t) {
                links[source].gotos.push(target);
            }
        }
    }

    let mut join_sources: Vec<Option<Vec<NodeId>>> = vec![None; n];
    for (sources, to) in &joins {
        let Some(join) = resolve_join(&mut r, sources, to, &join_sources) else {
            continue;
        };
        let mut resolved = Vec::new();
        let mut complete = true;
        for source in sources {
            if source == START || source == END {
                complete = false;
                r.problems.push(Problem::InvalidJoin {
                    join: to.clone(),
                    detail: format!("{source} cannot be a branch"),
                });
            } else if source == to {
                complete = false;
                r.problems.push(Problem::InvalidJoin {
                    join: to.clone(),
                    detail: "a join cannot wait for itself".to_owned(),
                });
            } else if let Some(id) = r.node(source, "join") {
                resolved.push(id);
                links[id].edges.push(NextTarget::Node(join));
            } else {
                complete = false;
            }
        }
        // A join with a broken branch is already reported; checking what is left of it would
        // only add noise.
        if !complete {
            continue;
        }
        resolved.sort_unstable();
        resolved.dedup();
        if resolved.len() > JOIN_SOURCES_MAX {
            r.problems.push(Problem::LimitExceeded {
                limit: "JOIN_SOURCES_MAX",
                subject: to.clone(),
                value: resolved.len() as u64,
                max: JOIN_SOURCES_MAX as u64,
            });
        }
        join_sources[join] = Some(resolved);
    }

    let mut nodes = nodes;
    for (name, bound) in &loop_bounds {
        if let Some(id) = r.node(name, "loop_bound") {
            nodes[id].policy.max_visits = Some(*bound);
        }
    }

    let Resolver { index, mut problems } = r;

    for node in &nodes {
        for detail in node.policy.problems() {
            problems.push(Problem::PolicyOutOfRange { node: node.name.clone(), detail });
        }
    }
    for detail in budgets.problems().into_iter().chain(checkpoint.problems()) {
        problems.push(Problem::SettingOutOfRange { detail });
    }
    if permissions.len() > PERMISSIONS_MAX {
        problems.push(Problem::LimitExceeded {
            limit: "PERMISSIONS_MAX",
            subject: id.clone(),
            value: permissions.len() as u64,
            max: PERMISSIONS_MAX as u64,
        });
    }
    for permission in &permissions {
        check_name(permission, &mut problems);
    }

    for l in std::iter::once(&mut start).chain(links.iter_mut()) {
        normalise(l);
    }
    for (name, l) in std::iter::once(START)
        .chain(nodes.iter().map(|n| n.name.as_str()))
        .zip(std::iter::once(&start).chain(&links))
    {
        let fan_out = l.successors().len();
        if fan_out > FAN_OUT_MAX {
            problems.push(Problem::LimitExceeded {
                limit: "FAN_OUT_MAX",
                subject: name.to_owned(),
                value: fan_out as u64,
                max: FAN_OUT_MAX as u64,
            });
        }
    }

    let mut depth = 0;
    for node in &nodes {
        if let DynNodeKind::Subgraph { child, .. } = &node.kind {
            let d = child.depth() + 1;
            if d > SUBGRAPH_DEPTH_MAX {
                problems.push(Problem::LimitExceeded {
                    limit: "SUBGRAPH_DEPTH_MAX",
                    subject: node.name.clone(),
                    value: d as u64,
                    max: SUBGRAPH_DEPTH_MAX as u64,
                });
            }
            depth = depth.max(d);
        }
    }

    let entry = start
        .edges
        .iter()
        .filter_map(|t| match t {
            NextTarget::Node(id) => Some(*id),
            NextTarget::End => None,
        })
        .collect();
    let shape = Shape { start, entry, nodes: links, joins: join_sources };
    if n > 0 {
        let names: Vec<&str> = nodes.iter().map(|d| d.name.as_str()).collect();
        let bounded: Vec<bool> = nodes.iter().map(|d| d.policy.max_visits.is_some()).collect();
        problems.extend(crate::validate::structure(&shape, &names, &bounded, &outside));
    }
    if !problems.is_empty() {
        return Err(BuildError { workflow: id, problems });
    }

    let nodes = nodes
        .into_iter()
        .map(|NodeDecl { name, policy, kind }| DynNode { name, policy, kind })
        .collect();
    let mut workflow = DynWorkflow {
        id,
        version,
        fingerprint: Fingerprint([0; 32]),
        budgets,
        permissions,
        checkpoint,
        nodes,
        index,
        shape,
        start_route,
        routes: node_routes,
        state_codec,
        depth,
    };
    workflow.fingerprint = fingerprint::compute(&workflow);
    Ok(workflow)
}

fn resolve_join(
    r: &mut Resolver,
    sources: &[String],
    to: &str,
    existing: &[Option<Vec<NodeId>>],
) -> Option<NodeId> {
    if to == START || to == END {
        r.problems.push(Problem::InvalidJoin {
            join: to.to_owned(),
            detail: "START and END cannot be joins".to_owned(),
        });
        return None;
    }
    let join = r.node(to, "join")?;
    if sources.is_empty() {
        r.problems.push(Problem::InvalidJoin {
            join: to.to_owned(),
            detail: "a join needs at least one branch".to_owned(),
        });
        return None;
    }
    if existing[join].is_some() {
        r.problems.push(Problem::InvalidJoin {
            join: to.to_owned(),
            detail: "declared twice; list all its branches in one join".to_owned(),
        });
        return None;
    }
    Some(join)
}

fn point<'a>(start: &'a mut Links, links: &'a mut [Links], from: From) -> &'a mut Links {
    match from {
        From::Start => start,
        From::Node(id) => &mut links[id],
    }
}

fn normalise(l: &mut Links) {
    l.edges.sort_unstable();
    l.edges.dedup();
    if let Some(route) = &mut l.route {
        route.sort_unstable();
        route.dedup();
    }
    l.gotos.sort_unstable();
    l.gotos.dedup();
}

/// Names are labels shown in events and pictures: non-empty, bounded, printable.
fn check_name(name: &str, problems: &mut Vec<Problem>) {
    let detail = if name.is_empty() {
        "empty".to_owned()
    } else if name.len() > NAME_BYTES_MAX {
        format!("{} bytes exceed NAME_BYTES_MAX ({NAME_BYTES_MAX})", name.len())
    } else if name.chars().any(char::is_control) {
        "contains control characters".to_owned()
    } else {
        return;
    };
    problems.push(Problem::InvalidName { name: name.to_owned(), detail });
}
