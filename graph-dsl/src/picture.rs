//! Pictures of a workflow: Graphviz DOT and Mermaid.
//!
//! Both are deterministic: nodes in declaration order, then links point by point (`START` first)
//! in target order. Static edges are plain, edges into a join bold, route edges dashed and
//! labelled `route`, gotos dotted and labelled `goto`. Loop bounds, map nodes, phases and joins
//! are written in the node labels. A sub-workflow is drawn as a cluster: the sub-workflow node is
//! its entry, the child's nodes sit inside, and the parent's edges leave from the child's end.
//!
//! Drawing nests once per sub-workflow level; `build()` bounds the depth by
//! [`SUBGRAPH_DEPTH_MAX`](crate::limits::SUBGRAPH_DEPTH_MAX), so the recursion is bounded.

use std::fmt::Write as _;

use crate::erased::{DynNode, DynNodeKind, DynWorkflow};
use crate::graph::{Links, NextTarget, NodeId};

/// The kinds of link, as drawn: a static edge, an edge into a join, a route's target, a goto.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LinkKind {
    /// A static edge (drawn plain).
    Edge,
    /// A static edge into a join node (drawn bold).
    Join,
    /// A target a route may choose (dashed, labelled `route`).
    Route,
    /// A target a node may `goto` (dotted, labelled `goto`).
    Goto,
}

use LinkKind as Kind;

/// Every link of `wf`, in drawing order: (from point, to target, kind), where from `None` is
/// `START`.
pub(crate) fn links_in_order(wf: &DynWorkflow) -> Vec<(Option<usize>, NextTarget, Kind)> {
    let mut out = Vec::new();
    let points = std::iter::once((None, &wf.shape.start))
        .chain(wf.shape.nodes.iter().enumerate().map(|(i, l)| (Some(i), l)));
    for (from, links) in points {
        push_links(wf, from, links, &mut out);
    }
    out
}

fn push_links(
    wf: &DynWorkflow,
    from: Option<usize>,
    links: &Links,
    out: &mut Vec<(Option<usize>, NextTarget, Kind)>,
) {
    for &t in &links.edges {
        let into_join = matches!(t, NextTarget::Node(id) if wf.shape.joins[id].is_some());
        out.push((from, t, if into_join { Kind::Join } else { Kind::Edge }));
    }
    for &t in links.route.iter().flatten() {
        out.push((from, t, Kind::Route));
    }
    for &t in &links.gotos {
        out.push((from, t, Kind::Goto));
    }
}

/// The label lines of a node: its name, then its notes.
fn label_lines(wf: &DynWorkflow, id: usize, node: &DynNode) -> Vec<String> {
    let mut lines = vec![node.name.clone()];
    match &node.kind {
        DynNodeKind::Task(_) => {}
        DynNodeKind::Map { .. } => lines.push("(map)".to_owned()),
        DynNodeKind::Subgraph { .. } => lines.push("(sub-workflow)".to_owned()),
    }
    if let Some(sources) = &wf.shape.joins[id] {
        let names: Vec<&str> = sources.iter().map(|&s| wf.nodes[s].name.as_str()).collect();
        lines.push(format!("(join: {})", names.join(", ")));
    }
    if let Some(max) = node.policy.max_visits {
        lines.push(format!("(max {max} visits)"));
    }
    if node.policy.phase {
        lines.push("(phase)".to_owned());
    }
    lines
}

pub(crate) fn dot(wf: &DynWorkflow) -> String {
    let mut out = String::new();
    let _ = writeln!(out, "digraph {} {{", dq(wf.id()));
    let _ = writeln!(out, "  label={};", dq(&format!("{} v{}", wf.id(), wf.version())));
    out.push_str("  labelloc=t;\n");
    let _ = writeln!(out, "  {} [label=\"START\", shape=circle];", dq(crate::START));
    dot_body(wf, "", &dq(crate::START), "  ", &mut out);
    out.push_str("}\n");
    out
}

/// Writes the nodes and links of `wf` with ids prefixed by `prefix`; `start` is the id that
/// stands for `START` (already drawn by the caller).
fn dot_body(wf: &DynWorkflow, prefix: &str, start: &str, indent: &str, out: &mut String) {
    let end = dq(&format!("{prefix}{}", crate::END));
    let end_shape = if prefix.is_empty() { "doublecircle" } else { "point" };
    let _ = writeln!(out, "{indent}{end} [label=\"END\", shape={end_shape}];");
    let entry_id = |i: usize| dq(&format!("{prefix}{}", wf.nodes[i].name));
    let exit_id = |i: usize| match &wf.nodes[i].kind {
        DynNodeKind::Subgraph { .. } => dq(&format!("{prefix}{}/{}", wf.nodes[i].name, crate::END)),
        _ => entry_id(i),
    };
    for (i, node) in wf.nodes.iter().enumerate() {
        let label = dq_lines(&label_lines(wf, i, node));
        match &node.kind {
            DynNodeKind::Subgraph { child, .. } => {
                let cluster = dq(&format!("cluster_{prefix}{}", node.name));
                let _ = writeln!(out, "{indent}subgraph {cluster} {{");
                let inner = format!("{indent}  ");
                let _ = writeln!(
                    out,
                    "{inner}label={};",
                    dq(&format!("{} v{}", child.id(), child.version()))
                );
                out.push_str(&inner);
                out.push_str("style=dashed;\n");
                let _ = writeln!(out, "{inner}{} [label={label}, shape=component];", entry_id(i));
                let child_prefix = format!("{prefix}{}/", node.name);
                dot_body(child, &child_prefix, &entry_id(i), &inner, out);
                let _ = writeln!(out, "{indent}}}");
            }
            DynNodeKind::Map { .. } => {
                let _ = writeln!(out, "{indent}{} [label={label}, shape=box3d];", entry_id(i));
            }
            DynNodeKind::Task(_) => {
                let _ = writeln!(out, "{indent}{} [label={label}, shape=box];", entry_id(i));
            }
        }
    }
    for (from, to, kind) in links_in_order(wf) {
        let from = from.map_or_else(|| start.to_owned(), exit_id);
        let to = match to {
            NextTarget::Node(id) => entry_id(id),
            NextTarget::End => end.clone(),
        };
        let attrs = match kind {
            Kind::Edge => "",
            Kind::Join => " [style=bold]",
            Kind::Route => " [style=dashed, label=\"route\"]",
            Kind::Goto => " [style=dotted, label=\"goto\"]",
        };
        let _ = writeln!(out, "{indent}{from} -> {to}{attrs};");
    }
}

/// A DOT double-quoted string.
fn dq(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        if c == '"' || c == '\\' {
            out.push('\\');
        }
        out.push(c);
    }
    out.push('"');
    out
}

fn dq_lines(lines: &[String]) -> String {
    let quoted: Vec<String> = lines.iter().map(|l| dq(l)).collect();
    let inner: Vec<&str> = quoted.iter().map(|q| &q[1..q.len() - 1]).collect();
    format!("\"{}\"", inner.join("\\n"))
}

pub(crate) fn mermaid(wf: &DynWorkflow) -> String {
    let mut out = String::from("flowchart TD\n");
    let _ = writeln!(out, "  %% {} v{}", mq_comment(wf.id()), wf.version());
    out.push_str("  begin((\"START\"))\n");
    mermaid_body(wf, "", "begin", "  ", &mut out);
    out
}

fn mermaid_body(wf: &DynWorkflow, prefix: &str, start: &str, indent: &str, out: &mut String) {
    let end = format!("{prefix}done");
    if prefix.is_empty() {
        let _ = writeln!(out, "{indent}{end}(((\"END\")))");
    } else {
        let _ = writeln!(out, "{indent}{end}((\"END\"))");
    }
    let entry_id = |i: usize| format!("{prefix}n{i}");
    let exit_id = |i: usize| match &wf.nodes[i].kind {
        DynNodeKind::Subgraph { .. } => format!("{prefix}n{i}_done"),
        _ => entry_id(i),
    };
    for (i, node) in wf.nodes.iter().enumerate() {
        let label = mq(&label_lines(wf, i, node));
        match &node.kind {
            DynNodeKind::Subgraph { child, .. } => {
                let title = mq(&[format!("{} v{}", child.id(), child.version())]);
                let _ = writeln!(out, "{indent}subgraph {}_box [{title}]", entry_id(i));
                let inner = format!("{indent}  ");
                let _ = writeln!(out, "{inner}{}[[{label}]]", entry_id(i));
                mermaid_body(child, &format!("{}_", entry_id(i)), &entry_id(i), &inner, out);
                let _ = writeln!(out, "{indent}end");
            }
            DynNodeKind::Map { .. } => {
                let _ = writeln!(out, "{indent}{}[/{label}/]", entry_id(i));
            }
            DynNodeKind::Task(_) => {
                let _ = writeln!(out, "{indent}{}[{label}]", entry_id(i));
            }
        }
    }
    for (from, to, kind) in links_in_order(wf) {
        let from = from.map_or_else(|| start.to_owned(), exit_id);
        let to = match to {
            NextTarget::Node(id) => entry_id(id),
            NextTarget::End => end.clone(),
        };
        let arrow = match kind {
            Kind::Edge => "-->",
            Kind::Join => "==>",
            Kind::Route => "-. route .->",
            Kind::Goto => "-. goto .->",
        };
        let _ = writeln!(out, "{indent}{from} {arrow} {to}");
    }
}

/// A Mermaid quoted label: lines joined by `<br/>`, quotes and markup characters as entities.
fn mq(lines: &[String]) -> String {
    let escaped: Vec<String> = lines
        .iter()
        .map(|l| {
            let mut s = String::with_capacity(l.len());
            for c in l.chars() {
                match c {
                    '"' => s.push_str("#quot;"),
                    '<' => s.push_str("#lt;"),
                    '>' => s.push_str("#gt;"),
                    c => s.push(c),
                }
            }
            s
        })
        .collect();
    format!("\"{}\"", escaped.join("<br/>"))
}

/// A comment cannot span lines; names have no control characters, but be safe.
fn mq_comment(s: &str) -> String {
    s.replace(['\n', '\r'], " ")
}

impl DynWorkflow {
    /// Every link of the workflow's picture, in drawing order: (from, to, kind), where from
    /// `None` is `START` (its route's targets included). Sub-workflows are not entered: a
    /// sub-workflow node is one node here. For drawing it another way than DOT or Mermaid.
    pub fn links(&self) -> Vec<(Option<NodeId>, NextTarget, LinkKind)> {
        links_in_order(self)
    }

    /// Draws the workflow as Graphviz DOT (deterministic).
    pub fn to_dot(&self) -> String {
        dot(self)
    }

    /// Draws the workflow as a Mermaid flowchart (deterministic).
    pub fn to_mermaid(&self) -> String {
        mermaid(self)
    }
}
