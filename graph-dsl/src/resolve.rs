//! Name resolution: turns the declared names into a [`Shape`] of node ids, reporting every name
//! that does not resolve, every reserved or duplicate name and every impossible link.

use std::collections::BTreeSet;

use crate::erased::{DynNodeKind, DynRoute};
use crate::graph::{Links, NameIndex, NextTarget, NodeId, Shape};
use crate::policy::NodePolicy;
use crate::{END, Problem, START};

pub(crate) struct NodeDecl {
    pub name: String,
    pub policy: NodePolicy,
    pub kind: DynNodeKind,
}

pub(crate) struct RouteDecl {
    pub from: String,
    pub targets: Vec<String>,
    pub f: DynRoute,
}

/// The outcome of resolution; `problems` lists what did not resolve (the rest is kept).
pub(crate) struct Resolved {
    pub index: NameIndex,
    pub shape: Shape,
    pub start_route: Option<DynRoute>,
    pub routes: Vec<Option<DynRoute>>,
    /// Nodes outside the graph (a reserved name, or a second node of a name): nothing can lead
    /// to them, so the structural checks skip them instead of reporting noise about them.
    pub outside: Vec<bool>,
    pub problems: Vec<Problem>,
}

/// Where a link may start.
#[derive(Clone, Copy)]
enum Source {
    Start,
    Node(NodeId),
}

pub(crate) struct Resolver<'a> {
    nodes: &'a [NodeDecl],
    out: Resolved,
}

impl<'a> Resolver<'a> {
    /// Indexes the node names.
    pub fn new(nodes: &'a [NodeDecl]) -> Self {
        let n = nodes.len();
        let mut out = Resolved {
            index: NameIndex::default(),
            shape: Shape {
                start: Links::default(),
                entry: Vec::new(),
                nodes: vec![Links::default(); n],
                joins: vec![None; n],
            },
            start_route: None,
            routes: vec![None; n],
            outside: vec![false; n],
            problems: Vec::new(),
        };
        let mut duplicates = BTreeSet::new();
        for (i, node) in nodes.iter().enumerate() {
            let name = node.name.as_str();
            if name == START || name == END || name.starts_with("__") {
                out.problems.push(Problem::ReservedName(name.to_owned()));
                out.outside[i] = true;
            } else {
                check_name(name, &mut out.problems);
            }
            if out.index.contains_key(name) {
                out.outside[i] = true;
                if duplicates.insert(name) {
                    out.problems.push(Problem::DuplicateNode(name.to_owned()));
                }
            } else if !out.outside[i] {
                out.index.insert(name.to_owned(), i);
            }
        }
        Self { nodes, out }
    }

    pub fn edges(&mut self, edges: &[(String, String)]) {
        for (from, to) in edges {
            let (Some(source), Some(target)) =
                (self.source(from, to, "edge"), self.target(from, to))
            else {
                continue;
            };
            self.links(source).edges.push(target);
        }
    }

    pub fn routes(&mut self, routes: Vec<RouteDecl>) {
        for route in routes {
            let first = route.targets.first().map_or("", String::as_str);
            let Some(source) = self.source(&route.from, first, "route") else {
                continue;
            };
            if route.targets.is_empty() {
                self.out.problems.push(Problem::NoTargets(route.from.clone()));
            }
            let targets: Vec<NextTarget> =
                route.targets.iter().filter_map(|t| self.target(&route.from, t)).collect();
            let slot = match source {
                Source::Start => &mut self.out.start_route,
                Source::Node(id) => &mut self.out.routes[id],
            };
            if slot.is_some() {
                self.out.problems.push(Problem::DuplicateRoute(route.from.clone()));
                continue;
            }
            *slot = Some(route.f);
            self.links(source).route = Some(targets);
        }
    }

    pub fn gotos(&mut self, gotos: &[(String, Vec<String>)]) {
        for (from, targets) in gotos {
            let first = targets.first().map_or("", String::as_str);
            let refused = |detail: &str| Problem::InvalidEdge {
                from: from.clone(),
                to: first.to_owned(),
                detail: detail.to_owned(),
            };
            let source = match self.source(from, first, "gotos") {
                None => continue,
                Some(Source::Start) => {
                    let problem = refused("START runs no code, so it cannot choose gotos");
                    self.out.problems.push(problem);
                    continue;
                }
                Some(Source::Node(id)) => id,
            };
            // Only a task's single output can choose; a map's items would disagree, and a
            // sub-workflow runs no handler of its own.
            let detail = match self.nodes[source].kind {
                DynNodeKind::Task(_) => None,
                DynNodeKind::Map { .. } => Some("a map node cannot choose gotos"),
                DynNodeKind::Subgraph { .. } => Some("a sub-workflow node cannot choose gotos"),
            };
            if let Some(detail) = detail {
                self.out.problems.push(refused(detail));
                continue;
            }
            if targets.is_empty() {
                self.out.problems.push(Problem::NoTargets(from.clone()));
            }
            for t in targets {
                if let Some(target) = self.target(from, t) {
                    self.out.shape.nodes[source].gotos.push(target);
                }
            }
        }
    }

    /// Registers the joins and adds the edges from their branches. A join with a broken branch
    /// is reported and otherwise ignored: checking what is left of it would only add noise.
    pub fn joins(&mut self, joins: &[(Vec<String>, String)]) {
        for (sources, to) in joins {
            let Some(join) = self.join_node(sources, to) else {
                continue;
            };
            let mut resolved = Vec::new();
            let mut complete = true;
            for source in sources {
                let invalid = |detail: String| Problem::InvalidJoin { join: to.clone(), detail };
                if source == START || source == END {
                    complete = false;
                    let problem = invalid(format!("{source} cannot be a branch"));
                    self.out.problems.push(problem);
                } else if source == to {
                    complete = false;
                    let problem = invalid("a join cannot wait for itself".to_owned());
                    self.out.problems.push(problem);
                } else if let Some(id) = self.node(source, "join") {
                    resolved.push(id);
                } else {
                    complete = false;
                }
            }
            for &id in &resolved {
                self.out.shape.nodes[id].edges.push(NextTarget::Node(join));
            }
            if complete {
                resolved.sort_unstable();
                resolved.dedup();
                self.out.shape.joins[join] = Some(resolved);
            }
        }
    }

    /// The node called `name`, or a problem naming `context`.
    pub fn node(&mut self, name: &str, context: &str) -> Option<NodeId> {
        let found = self.out.index.get(name).copied();
        if found.is_none() {
            self.out
                .problems
                .push(Problem::UnknownNode { name: name.to_owned(), context: context.to_owned() });
        }
        found
    }

    /// Sorts and de-duplicates the links and fills in the entry.
    pub fn finish(mut self) -> Resolved {
        let shape = &mut self.out.shape;
        for links in std::iter::once(&mut shape.start).chain(shape.nodes.iter_mut()) {
            links.edges.sort_unstable();
            links.edges.dedup();
            if let Some(route) = &mut links.route {
                route.sort_unstable();
                route.dedup();
            }
            links.gotos.sort_unstable();
            links.gotos.dedup();
        }
        shape.entry = shape
            .start
            .edges
            .iter()
            .filter_map(|t| match t {
                NextTarget::Node(id) => Some(*id),
                NextTarget::End => None,
            })
            .collect();
        self.out
    }

    fn links(&mut self, source: Source) -> &mut Links {
        match source {
            Source::Start => &mut self.out.shape.start,
            Source::Node(id) => &mut self.out.shape.nodes[id],
        }
    }

    fn source(&mut self, name: &str, to: &str, context: &str) -> Option<Source> {
        if name == START {
            return Some(Source::Start);
        }
        if name == END {
            self.out.problems.push(Problem::InvalidEdge {
                from: name.to_owned(),
                to: to.to_owned(),
                detail: "nothing leaves END".to_owned(),
            });
            return None;
        }
        self.node(name, context).map(Source::Node)
    }

    fn target(&mut self, from: &str, name: &str) -> Option<NextTarget> {
        if name == END {
            return Some(NextTarget::End);
        }
        if name == START {
            self.out.problems.push(Problem::InvalidEdge {
                from: from.to_owned(),
                to: name.to_owned(),
                detail: "nothing may lead into START".to_owned(),
            });
            return None;
        }
        let found = self.out.index.get(name).copied();
        if found.is_none() {
            self.out
                .problems
                .push(Problem::UnknownTarget { from: from.to_owned(), to: name.to_owned() });
        }
        found.map(NextTarget::Node)
    }

    fn join_node(&mut self, sources: &[String], to: &str) -> Option<NodeId> {
        let invalid =
            |detail: &str| Problem::InvalidJoin { join: to.to_owned(), detail: detail.to_owned() };
        if to == START || to == END {
            self.out.problems.push(invalid("START and END cannot be joins"));
            return None;
        }
        let join = self.node(to, "join")?;
        if sources.is_empty() {
            self.out.problems.push(invalid("a join needs at least one branch"));
            return None;
        }
        if self.out.shape.joins[join].is_some() {
            let problem = invalid("declared twice; list all its branches in one join");
            self.out.problems.push(problem);
            return None;
        }
        Some(join)
    }
}

/// Names are labels shown in events and pictures: non-empty, bounded, printable.
pub(crate) fn check_name(name: &str, problems: &mut Vec<Problem>) {
    use crate::limits::NAME_BYTES_MAX;
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
