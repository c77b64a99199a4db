//! The resolved structure of a workflow, as plain data: what validation, the fingerprint and the
//! pictures read. Route functions and handlers live beside it in [`DynWorkflow`].
//!
//! [`DynWorkflow`]: crate::DynWorkflow

/// A node's index in declaration order; stable for a given fingerprint.
pub type NodeId = usize;

/// A workflow's node ids by name. Its keys are the workflow's own (its code's): a fast
/// hasher, not one that resists chosen keys; a lookup with any name still costs one hash.
pub type NameIndex = std::collections::HashMap<String, NodeId, foldhash::fast::RandomState>;

/// Where a thread goes next.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum NextTarget {
    /// The node with this id.
    Node(NodeId),
    /// The end of the workflow. Sorts after every node.
    End,
}

/// The ways out of one point (`START` or a node).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Links {
    /// Static edges: all are taken. Sorted, de-duplicated.
    pub edges: Vec<NextTarget>,
    /// A route's declared targets: exactly one is taken. Sorted, de-duplicated.
    pub route: Option<Vec<NextTarget>>,
    /// Targets the node may choose at run time, replacing edges and route. Sorted, de-duplicated.
    pub gotos: Vec<NextTarget>,
}

impl Links {
    /// Every target this point may lead to, sorted and de-duplicated.
    pub fn successors(&self) -> Vec<NextTarget> {
        let mut all: Vec<NextTarget> = self
            .edges
            .iter()
            .chain(self.route.iter().flatten())
            .chain(&self.gotos)
            .copied()
            .collect();
        all.sort_unstable();
        all.dedup();
        all
    }
}

/// The resolved graph.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Shape {
    /// Ways out of `START` (never has gotos).
    pub start: Links,
    /// Static node targets of `START`, for [`crate::DynWorkflow::entry`].
    pub entry: Vec<NodeId>,
    /// Ways out of each node, by [`NodeId`].
    pub nodes: Vec<Links>,
    /// The branches of each join node, by [`NodeId`]; sorted.
    pub joins: Vec<Option<Vec<NodeId>>>,
}

impl Shape {
    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.nodes.len()
    }
}
