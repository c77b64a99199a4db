//! Who talks to whom (seed 004's `generate_interaction_graph` and `visualize interactions`): the
//! messages of a trace folded into one edge per sender and addressee, with how many messages
//! passed and when, drawn as Graphviz DOT, Mermaid, or a page with an SVG drawing that needs
//! nothing from the network. A message's sender is its role (the module that wrote it); one
//! without an addressee is a note to nobody in particular and is counted, not drawn.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use serde::Serialize;

use super::TracedMessage;
use crate::limits::INTERACTION_PARTIES_MAX;

/// The messages between two parties, one way.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct Interaction {
    /// The sender (a message's role).
    pub from: String,
    /// The addressee (a message's `to`).
    pub to: String,
    /// How many messages.
    pub messages: u64,
    /// The first one's time (engine clock, ms).
    pub first_ms: u64,
    /// The last one's.
    pub last_ms: u64,
}

/// The interactions of a set of messages.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct InteractionGraph {
    /// Every party drawn, sorted.
    pub parties: Vec<String>,
    /// One per sender and addressee, sorted by them.
    pub edges: Vec<Interaction>,
    /// Messages with no addressee (not drawn).
    pub unaddressed: u64,
    /// Messages between parties past [`INTERACTION_PARTIES_MAX`] (not drawn).
    pub left_out: u64,
}

impl InteractionGraph {
    /// Folds `messages` into one edge per sender and addressee.
    ///
    /// # Examples
    /// ```
    /// use cairn_tools::debug::InteractionGraph;
    /// let graph = InteractionGraph::of(&[]);
    /// assert!(graph.edges.is_empty());
    /// assert!(graph.to_dot().starts_with("digraph interactions"));
    /// ```
    pub fn of(messages: &[TracedMessage]) -> InteractionGraph {
        let mut edges: BTreeMap<(String, String), Interaction> = BTreeMap::new();
        let mut parties = std::collections::BTreeSet::new();
        let (mut unaddressed, mut left_out) = (0, 0);
        for m in messages {
            let Some(to) = &m.message.to else {
                unaddressed += 1;
                continue;
            };
            let from = &m.message.role;
            let known = |p: &String, parties: &std::collections::BTreeSet<String>| {
                parties.contains(p) || parties.len() < INTERACTION_PARTIES_MAX
            };
            if !known(from, &parties) || !known(to, &parties) {
                left_out += 1;
                continue;
            }
            parties.insert(from.clone());
            if !known(to, &parties) {
                left_out += 1;
                continue;
            }
            parties.insert(to.clone());
            let edge = edges.entry((from.clone(), to.clone())).or_insert_with(|| Interaction {
                from: from.clone(),
                to: to.clone(),
                messages: 0,
                first_ms: m.at_ms,
                last_ms: m.at_ms,
            });
            edge.messages += 1;
            edge.first_ms = edge.first_ms.min(m.at_ms);
            edge.last_ms = edge.last_ms.max(m.at_ms);
        }
        InteractionGraph {
            parties: parties.into_iter().collect(),
            edges: edges.into_values().collect(),
            unaddressed,
            left_out,
        }
    }

    /// Graphviz DOT, an edge labelled with its message count.
    pub fn to_dot(&self) -> String {
        let mut out = String::from("digraph interactions {\n  rankdir=LR;\n");
        for p in &self.parties {
            let _ = writeln!(out, "  {} [shape=box];", quoted(p));
        }
        for e in &self.edges {
            let (from, to) = (quoted(&e.from), quoted(&e.to));
            let _ = writeln!(out, "  {from} -> {to} [label=\"{}\"];", e.messages);
        }
        out.push_str("}\n");
        out
    }

    /// Mermaid (`flowchart LR`), the parties numbered (their names as labels).
    pub fn to_mermaid(&self) -> String {
        let mut out = String::from("flowchart LR\n");
        for (n, p) in self.parties.iter().enumerate() {
            let _ = writeln!(out, "  p{n}[\"{}\"]", p.replace('"', "#quot;"));
        }
        for e in &self.edges {
            let (a, b) = (self.index(&e.from), self.index(&e.to));
            let _ = writeln!(out, "  p{a} -->|{}| p{b}", e.messages);
        }
        out
    }

    /// A whole HTML page: the parties on a circle, an arrow per edge with its count, and the
    /// edges as a table (times in ms). Self-contained: no script, no font, no request.
    pub fn to_html(&self, title: &str) -> String {
        let mut out = String::from("<!doctype html>\n<html><head><meta charset=\"utf-8\">");
        let _ = write!(out, "<title>{}</title>", escape(title));
        out.push_str("<style>body{font-family:sans-serif;margin:2em}td,th{padding:2px 8px;");
        out.push_str("text-align:left}</style></head><body>\n");
        let _ = writeln!(out, "<h1>{}</h1>", escape(title));
        out.push_str(&self.svg());
        out.push_str("<table><tr><th>from</th><th>to</th><th>messages</th><th>first (ms)</th>");
        out.push_str("<th>last (ms)</th></tr>\n");
        for e in &self.edges {
            let (from, to) = (escape(&e.from), escape(&e.to));
            let _ = writeln!(
                out,
                "<tr><td>{from}</td><td>{to}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                e.messages, e.first_ms, e.last_ms
            );
        }
        let _ = writeln!(
            out,
            "</table><p>{} unaddressed, {} past the party limit (not drawn)</p></body></html>",
            self.unaddressed, self.left_out
        );
        out
    }

    /// The drawing: parties evenly on a circle, arrows between them.
    fn svg(&self) -> String {
        const SIZE: f64 = 640.0;
        let (centre, radius) = (SIZE / 2.0, SIZE / 2.0 - 90.0);
        let at = |i: usize| {
            let angle = std::f64::consts::TAU * i as f64 / self.parties.len().max(1) as f64;
            (centre + radius * angle.cos(), centre + radius * angle.sin())
        };
        let mut out = format!(
            "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{SIZE}\" height=\"{SIZE}\">\
             <defs><marker id=\"arrow\" viewBox=\"0 0 10 10\" refX=\"10\" refY=\"5\" \
             markerWidth=\"8\" markerHeight=\"8\" orient=\"auto\"><path d=\"M0,0L10,5L0,10z\"/>\
             </marker></defs>\n"
        );
        for e in &self.edges {
            let ((x1, y1), (x2, y2)) = (at(self.index(&e.from)), at(self.index(&e.to)));
            let _ = writeln!(
                out,
                "<line x1=\"{x1:.0}\" y1=\"{y1:.0}\" x2=\"{x2:.0}\" y2=\"{y2:.0}\" stroke=\"#555\" \
                 marker-end=\"url(#arrow)\"/><text x=\"{:.0}\" y=\"{:.0}\">{}</text>",
                (x1 + 2.0 * x2) / 3.0,
                (y1 + 2.0 * y2) / 3.0,
                e.messages
            );
        }
        for (i, p) in self.parties.iter().enumerate() {
            let (x, y) = at(i);
            let _ = writeln!(
                out,
                "<circle cx=\"{x:.0}\" cy=\"{y:.0}\" r=\"6\" fill=\"#36c\"/>\
                 <text x=\"{:.0}\" y=\"{:.0}\" font-weight=\"bold\">{}</text>",
                x + 8.0,
                y - 8.0,
                escape(p)
            );
        }
        out.push_str("</svg>\n");
        out
    }

    fn index(&self, party: &str) -> usize {
        self.parties.binary_search_by(|p| p.as_str().cmp(party)).unwrap_or(0)
    }
}

fn quoted(s: &str) -> String {
    format!("\"{}\"", s.replace('\\', "\\\\").replace('"', "\\\""))
}

fn escape(s: &str) -> String {
    s.replace('&', "&amp;").replace('<', "&lt;").replace('>', "&gt;").replace('"', "&quot;")
}

#[cfg(test)]
mod tests {
    use super::*;
    use cairn::event::TaskKey;
    use cairn_dsl::Message;

    fn sent(role: &str, to: Option<&str>, at_ms: u64) -> TracedMessage {
        let mut message = Message::new(role, "hi");
        message.to = to.map(str::to_owned);
        TracedMessage {
            thread: "t".into(),
            seq: 1,
            lsn: 1,
            at_ms,
            task: TaskKey::node("n"),
            message,
        }
    }

    #[test]
    fn messages_fold_into_one_edge_per_sender_and_addressee() {
        let graph = InteractionGraph::of(&[
            sent("planner", Some("coder"), 5),
            sent("coder", Some("planner"), 7),
            sent("planner", Some("coder"), 9),
            sent("planner", None, 11),
        ]);
        assert_eq!(graph.parties, ["coder", "planner"]);
        assert_eq!(graph.edges.len(), 2);
        let planner_to_coder = &graph.edges[1];
        assert_eq!((planner_to_coder.messages, planner_to_coder.first_ms), (2, 5));
        assert_eq!(planner_to_coder.last_ms, 9);
        assert_eq!(graph.unaddressed, 1);
        assert!(graph.to_dot().contains("\"planner\" -> \"coder\" [label=\"2\"]"));
        assert!(graph.to_mermaid().contains("p1 -->|2| p0"));
        let html = graph.to_html("<s>");
        assert!(html.contains("&lt;s&gt;") && html.contains("<svg") && !html.contains("<script"));
    }

    #[test]
    fn parties_past_the_limit_are_counted_not_drawn() {
        let many: Vec<_> = (0..INTERACTION_PARTIES_MAX + 10)
            .map(|n| sent("hub", Some(&format!("p{n:04}")), 1))
            .collect();
        let graph = InteractionGraph::of(&many);
        assert_eq!(graph.parties.len(), INTERACTION_PARTIES_MAX);
        assert_eq!(graph.left_out, 11, "the hub takes one place");
    }
}
