//! The analysis behind [`Problem::UnsatisfiableJoin`](crate::Problem::UnsatisfiableJoin).
//!
//! A join waits for all its branches. It can only ever run if some point of the graph is sure to
//! lead to every branch. For each point `p` we compute `must(p)`, the nodes that are certainly
//! entered once `p` completes (absent failures):
//!
//! ```text
//! must(p)  = {p} ∪ next(p)
//! next(p)  = static(p) ∩ goto(p)            (either part alone when the other is absent)
//! static   = ⋃ must(edge target) ∪ ⋂ must(route target)   (all edges run; one route target)
//! goto     = ⋂ must(goto target)                           (any non-empty subset may be chosen)
//! ```
//!
//! with `must(END) = ∅` and the join itself treated as a dead end (its branches must arrive
//! before it runs, so nothing after it counts). This is the least fixed point, computed by
//! iterating from empty sets until nothing changes: sets only grow, so at most `n²` rounds, and
//! `n <= NODES_MAX`. The join is satisfiable when `START`, or a node reachable from `START`
//! without passing through the join, has every branch in its `must` set.

use crate::graph::{Links, NextTarget, NodeId, Shape};

/// A fixed-size set of node ids.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct BitSet {
    words: Vec<u64>,
}

impl BitSet {
    pub fn new(n: usize) -> Self {
        Self { words: vec![0; n.div_ceil(64)] }
    }

    pub fn from_ids(n: usize, ids: &[NodeId]) -> Self {
        let mut set = Self::new(n);
        for &id in ids {
            set.insert(id);
        }
        set
    }

    /// Inserts `id`; whether it was absent.
    pub fn insert(&mut self, id: NodeId) -> bool {
        let (word, bit) = (id / 64, 1_u64 << (id % 64));
        let absent = self.words[word] & bit == 0;
        self.words[word] |= bit;
        absent
    }

    pub fn contains(&self, id: NodeId) -> bool {
        self.words.get(id / 64).is_some_and(|w| w & (1_u64 << (id % 64)) != 0)
    }

    pub fn is_superset(&self, other: &Self) -> bool {
        self.words.iter().zip(&other.words).all(|(a, b)| a & b == *b)
    }

    fn union_with(&mut self, other: &Self) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a |= b;
        }
    }

    fn intersect_with(&mut self, other: &Self) {
        for (a, b) in self.words.iter_mut().zip(&other.words) {
            *a &= b;
        }
    }
}

/// `must` sets of `START` and of every node, with `blocked` treated as a dead end.
pub(crate) struct Must {
    pub start: BitSet,
    pub nodes: Vec<BitSet>,
}

pub(crate) fn must_reach(shape: &Shape, blocked: NodeId) -> Must {
    let n = shape.len();
    let mut must = vec![BitSet::new(n); n];
    loop {
        let mut changed = false;
        // Reverse declaration order converges fastest on the usual forward-declared graphs.
        for id in (0..n).rev() {
            let mut next =
                if id == blocked { BitSet::new(n) } else { after(&shape.nodes[id], &must, n) };
            next.insert(id);
            if next != must[id] {
                must[id] = next;
                changed = true;
            }
        }
        if !changed {
            break;
        }
    }
    Must { start: after(&shape.start, &must, n), nodes: must }
}

fn after(links: &Links, must: &[BitSet], n: usize) -> BitSet {
    let of = |t: &NextTarget| match t {
        NextTarget::Node(id) => must[*id].clone(),
        NextTarget::End => BitSet::new(n),
    };
    let intersection = |targets: &[NextTarget]| {
        let mut it = targets.iter();
        let mut acc = it.next().map_or_else(|| BitSet::new(n), of);
        for t in it {
            acc.intersect_with(&of(t));
        }
        acc
    };
    let static_part = (!links.edges.is_empty() || links.route.is_some()).then(|| {
        let mut acc = BitSet::new(n);
        for t in &links.edges {
            acc.union_with(&of(t));
        }
        if let Some(route) = &links.route {
            acc.union_with(&intersection(route));
        }
        acc
    });
    let goto_part = (!links.gotos.is_empty()).then(|| intersection(&links.gotos));
    match (static_part, goto_part) {
        (Some(mut a), Some(b)) => {
            a.intersect_with(&b);
            a
        }
        (Some(a), None) => a,
        (None, Some(b)) => b,
        (None, None) => BitSet::new(n),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn node(id: NodeId) -> NextTarget {
        NextTarget::Node(id)
    }

    fn links(edges: &[NextTarget], route: Option<&[NextTarget]>, gotos: &[NextTarget]) -> Links {
        Links {
            edges: edges.to_vec(),
            route: route.map(<[NextTarget]>::to_vec),
            gotos: gotos.to_vec(),
        }
    }

    #[test]
    fn bitset_basics() {
        let mut s = BitSet::new(130);
        assert!(s.insert(129));
        assert!(!s.insert(129));
        assert!(s.contains(129) && !s.contains(0) && !s.contains(500));
        assert!(s.is_superset(&BitSet::from_ids(130, &[129])));
        assert!(!s.is_superset(&BitSet::from_ids(130, &[1, 129])));
    }

    #[test]
    fn static_fan_out_is_sure_but_route_alternatives_are_not() {
        // 0 fans out to 1 and 2 (static); 3 routes to 1 or 2; both lead to join 4.
        let shape = Shape {
            start: links(&[node(0), node(3)], None, &[]),
            entry: vec![0, 3],
            nodes: vec![
                links(&[node(1), node(2)], None, &[]),
                links(&[node(4)], None, &[]),
                links(&[node(4)], None, &[]),
                links(&[], Some(&[node(1), node(2)]), &[]),
                links(&[NextTarget::End], None, &[]),
            ],
            joins: vec![None, None, None, None, Some(vec![1, 2])],
        };
        let must = must_reach(&shape, 4);
        let branches = BitSet::from_ids(5, &[1, 2]);
        assert!(must.nodes[0].is_superset(&branches));
        assert!(!must.nodes[3].is_superset(&branches));
        assert!(must.nodes[3].contains(4), "both alternatives reach the join");
        assert!(!must.nodes[1].contains(2));
    }

    #[test]
    fn gotos_only_count_what_every_choice_reaches() {
        // 0 may goto 1 or 2; both lead to 3.
        let shape = Shape {
            start: links(&[node(0)], None, &[]),
            entry: vec![0],
            nodes: vec![
                links(&[], None, &[node(1), node(2)]),
                links(&[node(3)], None, &[]),
                links(&[node(3)], None, &[]),
                links(&[NextTarget::End], None, &[]),
            ],
            joins: vec![None; 4],
        };
        let must = must_reach(&shape, 3);
        assert_eq!(must.nodes[0], BitSet::from_ids(4, &[0, 3]));
        assert_eq!(must.start, BitSet::from_ids(4, &[0, 3]));
    }

    #[test]
    fn cycles_converge() {
        // 0 -> 1, 1 routes to 0 or END.
        let shape = Shape {
            start: links(&[node(0)], None, &[]),
            entry: vec![0],
            nodes: vec![
                links(&[node(1)], None, &[]),
                links(&[], Some(&[node(0), NextTarget::End]), &[]),
            ],
            joins: vec![None; 2],
        };
        let must = must_reach(&shape, usize::MAX);
        assert_eq!(must.nodes[0], BitSet::from_ids(2, &[0, 1]));
        assert_eq!(must.nodes[1], BitSet::from_ids(2, &[1]));
    }
}
