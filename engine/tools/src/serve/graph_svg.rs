//! A workflow's graph as SVG, its nodes coloured by where a thread stands: the web view's
//! picture of a thread (`GET /api/threads/{id}/graph.svg`).
//!
//! The layout is not ours: `layout-rs` (a layered, Sugiyama-style layout: ranks, crossing
//! reduction, coordinate assignment, edge routing as Bézier paths) places the nodes and routes
//! the edges. We only hand it the nodes and links ([`DynWorkflow::links`]) and draw what it
//! computed through a [`RenderBackend`] that records positions instead of writing its own SVG, so
//! that each node is one `<g class="node st-STATUS" data-node="NAME">` the page can style, count
//! and click. A sub-workflow is one node here (its child is a thread of its own, drawn on its
//! own page): once it ran, the node is a link (`<a href="/ui/threads/CHILD">`) to that page.
//! Two of its edges we draw ourselves: a node's edge to itself, a loop out of its box and back
//! (layout-rs goes out to a point beside the node and straight back, a sliver of a triangle),
//! and an edge back up that an edge down joins to the same two nodes, bowed beside it with its
//! head at its start (layout-rs lays it out reversed, over the other).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use cairn_dsl::{DynNodeKind, DynWorkflow, LinkKind, NextTarget};
use layout::core::base::Orientation;
use layout::core::color::Color;
use layout::core::format::{ClipHandle, RenderBackend};
use layout::core::geometry::Point;
use layout::core::style::{LineStyleKind, StyleAttr};
use layout::std_shapes::shapes::{Arrow, Element, LineEndKind, ShapeKind};
use layout::topo::layout::VisualGraph;

/// Where a node stands in a thread, as drawn (the CSS class `st-<status>`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum NodeStatus {
    /// Never ran (or not in this thread's run so far).
    Idle,
    /// Due in the thread's next step.
    Pending,
    /// Running now.
    Running,
    /// Parked: waiting for input or a timer.
    Waiting,
    /// Its latest run completed.
    Completed,
    /// Its latest run failed.
    Failed,
}

impl NodeStatus {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            NodeStatus::Idle => "idle",
            NodeStatus::Pending => "pending",
            NodeStatus::Running => "running",
            NodeStatus::Waiting => "waiting",
            NodeStatus::Completed => "completed",
            NodeStatus::Failed => "failed",
        }
    }
}

/// What the picture shows of one node: its status, a tooltip, and for a sub-workflow node that
/// ran, its child thread (the node links to that thread's page).
#[derive(Debug, Clone)]
pub(crate) struct Mark {
    pub status: NodeStatus,
    pub title: String,
    pub child: Option<String>,
}

/// What the layout drew, recorded: shapes by the `properties` we gave them, and edge paths.
#[derive(Default)]
struct Capture {
    /// (key, top-left, size, is a circle).
    shapes: Vec<(String, Point, Point, bool)>,
    /// Edges between two nodes.
    arrows: Vec<Edge>,
    /// Self-loops: (class, node key, the point layout-rs routed them through). Laid out as a
    /// node and a connector beside it (the room the loop needs), but drawn as a [`SelfLoop`]:
    /// layout-rs's own path goes out to the connector and straight back, a thin triangle.
    loops: Vec<(String, String, Point)>,
}

/// What separates a self-loop's class from its node's key in the properties its arrow carries.
const LOOP_MARK: char = '@';

/// An edge as layout-rs routed it.
struct Edge {
    /// Its CSS classes.
    class: String,
    /// Its path: (point, control point) pairs, from the upper node to the lower one.
    path: Vec<(Point, Point)>,
    /// An edge back up (layout-rs reverses those to lay the graph out): its head is at the
    /// path's start.
    back: bool,
}

/// How far (px) an edge back up between two nodes an edge down also joins bows out to the
/// side, so that the two are seen apart, not one drawn over the other.
const BOW: f64 = 36.;

impl RenderBackend for Capture {
    fn draw_rect(
        &mut self,
        xy: Point,
        size: Point,
        _look: &StyleAttr,
        properties: Option<String>,
        _clip: Option<ClipHandle>,
    ) {
        if let Some(key) = properties {
            self.shapes.push((key, xy, size, false));
        }
    }

    fn draw_line(&mut self, _: Point, _: Point, _: &StyleAttr, _: Option<String>) {}

    fn draw_circle(&mut self, xy: Point, size: Point, _: &StyleAttr, properties: Option<String>) {
        // The center is given; the second (outer) circle of END has no key.
        if let Some(key) = properties {
            let top_left = Point::new(xy.x - size.x / 2., xy.y - size.y / 2.);
            self.shapes.push((key, top_left, size, true));
        }
    }

    fn draw_text(&mut self, _: Point, _: &str, _: &StyleAttr) {}

    fn draw_arrow(
        &mut self,
        path: &[(Point, Point)],
        _dashed: bool,
        head: (bool, bool),
        _look: &StyleAttr,
        properties: Option<String>,
        _text: &str,
    ) {
        let key = properties.unwrap_or_default();
        match (key.split_once(LOOP_MARK), path.get(path.len() / 2)) {
            (Some((class, node)), Some((via, _))) => {
                self.loops.push((class.to_owned(), node.to_owned(), *via));
            }
            _ => {
                let back = head == (true, false);
                self.arrows.push(Edge { class: key, path: path.to_vec(), back });
            }
        }
    }

    fn create_clip(&mut self, _: Point, _: Point, _: usize) -> ClipHandle {
        0
    }
}

/// Node labels' font size (layout-rs sizes boxes from it).
const FONT: usize = 14;

/// The SVG of `wf` with each node marked as `marks` says (unmarked nodes are idle).
///
/// # Errors
/// When the layout fails (it panics on graphs it cannot handle; caught here, said as text).
pub(crate) fn workflow_svg(
    wf: &DynWorkflow,
    marks: &BTreeMap<String, Mark>,
) -> Result<String, String> {
    let capture = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| lay_out(wf)))
        .map_err(|_| format!("the layout of workflow {} failed", wf.id()))?;
    Ok(draw(wf, marks, &capture))
}

fn lay_out(wf: &DynWorkflow) -> Capture {
    let mut vg = VisualGraph::new(Orientation::TopToBottom);
    let look = StyleAttr::new(Color::fast("black"), 2, None, 6, FONT);
    let circle = |label: &str, key: &str| {
        let shape = ShapeKind::new_circle(label);
        Element::create_with_properties(
            shape,
            look.clone(),
            Orientation::TopToBottom,
            Point::splat(40.),
            key,
        )
    };
    let start = vg.add_node(circle("START", "start"));
    let end = vg.add_node(circle("END", "end"));
    let nodes: Vec<_> = (0..wf.nodes().len())
        .map(|i| {
            let text = label(wf, i);
            // As wide as its longest line at the picture's 14 px (a character is about 8.5 px
            // wide, 12 px of margin a side), so a long name is drawn whole, not cut by the box.
            let widest = text.lines().map(|l| l.chars().count()).max().unwrap_or(0);
            let size = Point::new((widest as f64 * 8.5 + 24.).max(100.), 40.);
            let shape = ShapeKind::new_box(&text);
            let e = Element::create_with_properties(
                shape,
                look.clone(),
                Orientation::TopToBottom,
                size,
                format!("n{i}"),
            );
            vg.add_node(e)
        })
        .collect();
    for (from, target, kind) in wf.links() {
        let key = match (from, target) {
            (Some(a), NextTarget::Node(b)) if a == b => {
                format!("{}{LOOP_MARK}n{a}", kind_class(kind))
            }
            _ => kind_class(kind).to_owned(),
        };
        let from = from.map_or(start, |i| nodes[i]);
        let to = match target {
            NextTarget::Node(i) => nodes[i],
            NextTarget::End => end,
        };
        let style = match kind {
            LinkKind::Edge | LinkKind::Join => LineStyleKind::Normal,
            LinkKind::Route => LineStyleKind::Dashed,
            LinkKind::Goto => LineStyleKind::Dotted,
        };
        let arrow = Arrow::with_properties(
            LineEndKind::None,
            LineEndKind::Arrow,
            style,
            "",
            &look,
            key,
            &None,
            &None,
        );
        vg.add_edge(arrow, from, to);
    }
    let mut capture = Capture::default();
    vg.do_it(false, false, false, &mut capture);
    capture
}

/// A node's label: its name, and a note of its kind when not a plain task.
fn label(wf: &DynWorkflow, i: usize) -> String {
    let node = &wf.nodes()[i];
    match node.kind {
        DynNodeKind::Task(_) => node.name.clone(),
        DynNodeKind::Map { .. } => format!("{}\n(map)", node.name),
        DynNodeKind::Subgraph { .. } => format!("{}\n(sub-workflow)", node.name),
    }
}

fn kind_class(kind: LinkKind) -> &'static str {
    match kind {
        LinkKind::Edge => "edge",
        LinkKind::Join => "edge join",
        LinkKind::Route => "edge route",
        LinkKind::Goto => "edge goto",
    }
}

/// The picture's own style: it stands alone when fetched directly, and the page may restyle it.
const STYLE: &str = "\
.edge{fill:none;stroke:#6b7280;stroke-width:1.5}\
.edge.join{stroke-width:2.5}.edge.route{stroke-dasharray:6 4}.edge.goto{stroke-dasharray:2 3}\
.node rect,.terminal circle{stroke:#374151;stroke-width:1.5;fill:#f3f4f6}\
.node text,.terminal text{font:14px sans-serif;fill:#111827;text-anchor:middle;dominant-baseline:central}\
.st-completed rect{fill:#bbf7d0;stroke:#15803d}\
.st-running rect{fill:#bfdbfe;stroke:#1d4ed8;stroke-width:3}\
.st-waiting rect{fill:#fde68a;stroke:#b45309;stroke-width:3}\
.st-failed rect{fill:#fecaca;stroke:#b91c1c;stroke-width:3}\
.st-pending rect{fill:#e0e7ff;stroke:#4338ca;stroke-dasharray:4 3}\
.st-idle rect{fill:#f9fafb;stroke:#9ca3af}\
[data-kind=subgraph] rect{stroke-width:3;stroke-dasharray:none}\
.child-link{cursor:pointer}.child-link text{text-decoration:underline}\
.terminal text{font-size:11px}";

fn draw(wf: &DynWorkflow, marks: &BTreeMap<String, Mark>, c: &Capture) -> String {
    // The bounding box of everything drawn, with a margin.
    let (mut lo, mut hi) = (Point::splat(f64::MAX), Point::splat(f64::MIN));
    let mut grow = |p: Point| {
        lo = Point::new(lo.x.min(p.x), lo.y.min(p.y));
        hi = Point::new(hi.x.max(p.x), hi.y.max(p.y));
    };
    for (_, xy, size, _) in &c.shapes {
        grow(*xy);
        grow(xy.add(*size));
    }
    for e in &c.arrows {
        for (p, q) in &e.path {
            grow(*p);
            grow(*q);
            if e.back {
                grow(Point::new(q.x + BOW, q.y));
            }
        }
    }
    let loops: Vec<(&str, SelfLoop)> = c
        .loops
        .iter()
        .filter_map(|(class, node, via)| {
            let (_, xy, size, _) = c.shapes.iter().find(|(key, ..)| key == node)?;
            Some((class.as_str(), SelfLoop::beside(*xy, *size, *via)))
        })
        .collect();
    for (_, l) in &loops {
        grow(l.reach.0);
        grow(l.reach.1);
    }
    if lo.x > hi.x {
        (lo, hi) = (Point::zero(), Point::splat(10.));
    }
    let m = 10.;
    let (x0, y0, w, h) = (lo.x - m, lo.y - m, hi.x - lo.x + 2. * m, hi.y - lo.y + 2. * m);
    let mut out = String::new();
    let _ = write!(
        out,
        "<svg xmlns=\"http://www.w3.org/2000/svg\" class=\"wf-graph\" data-workflow=\"{}\" \
         viewBox=\"{x0:.1} {y0:.1} {w:.1} {h:.1}\" width=\"{w:.0}\" height=\"{h:.0}\">",
        esc(wf.id())
    );
    let _ = write!(
        out,
        "<style>{STYLE}</style><defs><marker id=\"wf-arrow\" viewBox=\"0 0 10 10\" refX=\"9\" \
         refY=\"5\" markerWidth=\"8\" markerHeight=\"8\" orient=\"auto-start-reverse\">\
         <path d=\"M0 0L10 5L0 10z\" fill=\"#6b7280\"/></marker></defs>"
    );
    out.push_str("<g class=\"edges\">");
    for e in &c.arrows {
        let Some(d) = edge_path(e, &c.arrows) else { continue };
        let (class, head) = if e.back { (" back", "start") } else { ("", "end") };
        let _ = write!(
            out,
            "<path class=\"{}{class}\" d=\"{d}\" marker-{head}=\"url(#wf-arrow)\"/>",
            e.class
        );
    }
    for (class, l) in &loops {
        let _ = write!(
            out,
            "<path class=\"{class} self-loop\" d=\"{}\" marker-end=\"url(#wf-arrow)\"/>",
            l.d
        );
    }
    out.push_str("</g><g class=\"nodes\">");
    for (key, xy, size, _) in &c.shapes {
        match key.as_str() {
            "start" | "end" => draw_terminal(&mut out, key, *xy, *size),
            _ => draw_node(&mut out, wf, marks, key, *xy, *size),
        }
    }
    out.push_str("</g></svg>");
    out
}

/// Draws the start or end terminal (`key`) at `xy`, of `size`.
fn draw_terminal(out: &mut String, key: &str, xy: Point, size: Point) {
    let (cx, cy) = (xy.x + size.x / 2., xy.y + size.y / 2.);
    let r = size.x.min(size.y) / 2.;
    let label = if key == "start" { "START" } else { "END" };
    let _ = write!(
        out,
        "<g class=\"terminal {key}\"><circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"{r:.1}\"/>"
    );
    if key == "end" {
        let _ = write!(
            out,
            "<circle cx=\"{cx:.1}\" cy=\"{cy:.1}\" r=\"{:.1}\" fill=\"none\"/>",
            r + 4.
        );
    }
    let _ = write!(out, "<text x=\"{cx:.1}\" y=\"{cy:.1}\" font-size=\"9\">{label}</text></g>");
}

/// Draws the node of layout key `key` (`n<index>`) at `xy`, of `size`, with its mark (status,
/// title, a link to its child thread).
fn draw_node(
    out: &mut String,
    wf: &DynWorkflow,
    marks: &BTreeMap<String, Mark>,
    key: &str,
    xy: Point,
    size: Point,
) {
    let (cx, cy) = (xy.x + size.x / 2., xy.y + size.y / 2.);
    let Some(node) = key.strip_prefix('n').and_then(|i| i.parse::<usize>().ok()) else {
        return;
    };
    let Some(n) = wf.nodes().get(node) else { return };
    let mark = marks.get(&n.name);
    let status = mark.map_or(NodeStatus::Idle, |m| m.status).as_str();
    let title = mark.map_or_else(|| format!("{}: {status}", n.name), |m| m.title.clone());
    let child = mark.and_then(|m| m.child.as_deref());
    if let Some(child) = child {
        let _ = write!(
            out,
            "<a class=\"child-link\" href=\"/ui/threads/{}\" data-child=\"{}\">",
            esc(&super::wire::path_segment(child)),
            esc(child)
        );
    }
    let kind = n.kind.label();
    let _ = write!(
        out,
        "<g class=\"node st-{status}\" data-node=\"{}\" data-status=\"{status}\" \
         data-kind=\"{kind}\"><title>{}</title><rect x=\"{:.1}\" y=\"{:.1}\" \
         width=\"{:.1}\" height=\"{:.1}\" rx=\"6\"/>",
        esc(&n.name),
        esc(&title),
        xy.x,
        xy.y,
        size.x,
        size.y
    );
    let lines: Vec<String> = label(wf, node).lines().map(str::to_owned).collect();
    let first = cy - (lines.len() as f64 - 1.) * 9.;
    for (k, line) in lines.iter().enumerate() {
        let size = if k == 0 { "" } else { " font-size=\"11\"" };
        let _ = write!(
            out,
            "<text x=\"{cx:.1}\" y=\"{:.1}\"{size}>{}</text>",
            first + k as f64 * 18.,
            esc(line)
        );
    }
    out.push_str("</g>");
    if child.is_some() {
        out.push_str("</a>");
    }
}

/// The SVG path of edge `e` as layout-rs's own SVG backend writes it (an exit vector, then
/// entries); an edge back up that an edge down between the same nodes would hide bows out to
/// the side by [`BOW`]. `None` for a path of fewer than two points.
fn edge_path(e: &Edge, all: &[Edge]) -> Option<String> {
    let (first, last) = (e.path.first()?, e.path.last()?);
    if e.path.len() < 2 {
        return None;
    }
    let near = |a: Point, b: Point| (a.x - b.x).abs() < 1. && (a.y - b.y).abs() < 1.;
    let hidden = e.back
        && all.iter().any(|o| {
            !o.back
                && o.path.len() == e.path.len()
                && o.path.first().is_some_and(|p| near(p.0, first.0))
                && o.path.last().is_some_and(|p| near(p.1, last.1))
        });
    // Bowed, its ends move a third of the way too, along the boxes' edges (a node box is at
    // least 100 px wide): the two arrows do not meet at one point.
    let (dx, end_dx) = if hidden { (BOW, BOW / 3.) } else { (0., 0.) };
    let (p, q) = (e.path[0], e.path[1]);
    let last = e.path.len() - 1;
    let end = |i: usize, x: f64| if i == last { x + end_dx } else { x };
    let mut d = format!(
        "M{:.1} {:.1}C{:.1} {:.1},{:.1} {:.1},{:.1} {:.1}",
        p.0.x + end_dx,
        p.0.y,
        p.1.x + dx,
        p.1.y,
        q.0.x + dx,
        q.0.y,
        end(1, q.1.x),
        q.1.y
    );
    for (i, (p, q)) in e.path.iter().enumerate().skip(2) {
        let _ = write!(d, "S{:.1} {:.1},{:.1} {:.1}", p.x + dx, p.y, end(i, q.x), q.y);
    }
    Some(d)
}

/// A node's edge to itself, drawn as a loop out of one side of its box and back into it, the
/// arrowhead on the box.
struct SelfLoop {
    /// The SVG path.
    d: String,
    /// Two opposite corners of the box the loop fills (for the picture's bounds).
    reach: (Point, Point),
}

impl SelfLoop {
    /// How far the loop's control points stand off the box; the curve reaches 3/4 of it.
    const OUT: f64 = 44.;

    /// The loop of the box at `xy` of `size`, on the side of `via` (where layout-rs made room
    /// for it).
    fn beside(xy: Point, size: Point, via: Point) -> SelfLoop {
        let cy = xy.y + size.y / 2.;
        let right = via.x >= xy.x + size.x / 2.;
        let (edge, out) = if right { (xy.x + size.x, Self::OUT) } else { (xy.x, -Self::OUT) };
        // Leaves and enters a quarter of the box's height above and below its middle.
        let (q, lift) = (size.y / 4., 12.);
        let d = format!(
            "M{edge:.1} {:.1}C{:.1} {:.1},{:.1} {:.1},{edge:.1} {:.1}",
            cy - q,
            edge + out,
            cy - q - lift,
            edge + out,
            cy + q + lift,
            cy + q
        );
        let reach = (Point::new(edge, cy - q - lift), Point::new(edge + out * 0.75, cy + q + lift));
        SelfLoop { d, reach }
    }
}

/// Text escaped for XML content and attribute values.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for ch in s.chars() {
        match ch {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use cairn_dsl::{END, NodeOutput, Replace, START, Workflow};

    use super::*;

    #[test]
    fn every_node_is_one_group_with_its_status() {
        let wf = Workflow::<Replace<bool>>::builder("w", 1)
            .node("check", |_s: Arc<Replace<bool>>, _ctx| async { Ok(NodeOutput::none()) })
            .node("fix", |_s: Arc<Replace<bool>>, _ctx| async { Ok(NodeOutput::none()) })
            .edge(START, "check")
            .route("check", |s: &Replace<bool>| if s.0 { END } else { "fix" }, ["fix", END])
            .edge("fix", "check")
            .loop_bound("fix", 3)
            .build()
            .unwrap()
            .erase();
        let mut marks = BTreeMap::new();
        let failed = Mark { status: NodeStatus::Failed, title: "fix <failed>".into(), child: None };
        marks.insert("fix".to_owned(), failed);
        let svg = workflow_svg(&wf, &marks).unwrap();
        assert_eq!(svg.matches("<g class=\"node ").count(), 2, "{svg}");
        assert!(svg.contains("class=\"node st-failed\" data-node=\"fix\""), "{svg}");
        assert!(svg.contains("class=\"node st-idle\" data-node=\"check\""), "{svg}");
        assert!(svg.contains("fix &lt;failed&gt;"));
        // START -> check, check -> fix and END (route), fix -> check.
        assert_eq!(svg.matches("<path class=\"edge").count(), 4, "{svg}");
        assert!(svg.contains("edge route"));
        // fix -> check goes back up beside check -> fix: its head at its start, bowed out.
        let back = svg.split("<path class=\"edge back\" d=\"").nth(1).expect(&svg);
        let (d, rest) = back.split_once('"').unwrap();
        assert!(rest.starts_with(" marker-start="), "{svg}");
        let down = svg.split("<path class=\"edge route\" d=\"").nth(1).unwrap();
        let (down, _) = down.split_once('"').unwrap();
        assert_ne!(d, down, "drawn apart from the edge down");
    }

    #[test]
    fn a_self_loop_leaves_its_node_and_comes_back_to_it() {
        let wf = Workflow::<Replace<bool>>::builder("w", 1)
            .node("tick", |_s: Arc<Replace<bool>>, _ctx| async { Ok(NodeOutput::none()) })
            .edge(START, "tick")
            .route("tick", |s: &Replace<bool>| if s.0 { END } else { "tick" }, ["tick", END])
            .loop_bound("tick", 3)
            .build()
            .unwrap()
            .erase();
        let svg = workflow_svg(&wf, &BTreeMap::new()).unwrap();
        let looped = svg.split("<path class=\"edge route self-loop\" d=\"M").nth(1).expect(&svg);
        let (d, rest) = looped.split_once('"').unwrap();
        assert!(rest.starts_with(" marker-end="), "{svg}");
        // M x y C ..., ..., x y': out of one side of the box and back into the same side.
        let numbers: Vec<f64> = d.split(['C', ',', ' ']).filter_map(|n| n.parse().ok()).collect();
        let (x0, y0, x1, y1) = (numbers[0], numbers[1], numbers[6], numbers[7]);
        assert_eq!(x0, x1, "{d}");
        assert!(y1 - y0 >= 10., "{d}");
        let reach = (numbers[2] - x0).abs();
        assert!(reach >= 30., "a loop, not a sliver: {d}");
    }
}
