//! What `build()` can find wrong with a definition. All problems are reported at once.

/// A definition `build()` refused, with every problem found (never only the first).
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[error("workflow {workflow:?} is invalid: {}", list(problems))]
pub struct BuildError {
    /// The workflow's id.
    pub workflow: String,
    /// Every problem, in a deterministic order (check by check, declaration order within).
    pub problems: Vec<Problem>,
}

impl BuildError {
    /// Whether `problem` is among the problems.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Problem, Workflow, Replace};
    /// let err = Workflow::<Replace<u8>>::builder("w", 1).build().unwrap_err();
    /// assert!(err.has(&Problem::Empty));
    /// ```
    pub fn has(&self, problem: &Problem) -> bool {
        self.problems.contains(problem)
    }
}

fn list(problems: &[Problem]) -> String {
    problems.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

/// One problem in a workflow definition. Every variant names the nodes involved.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, thiserror::Error)]
#[non_exhaustive]
pub enum Problem {
    /// The workflow declares no node.
    #[error("the workflow has no nodes")]
    Empty,
    /// Two nodes share a name.
    #[error("node {0:?} is declared more than once")]
    DuplicateNode(String),
    /// Two queries share a name.
    #[error("query {0:?} is declared more than once")]
    DuplicateQuery(String),
    /// Two compensations share a name.
    #[error("compensation {0:?} is declared more than once")]
    DuplicateCompensation(String),
    /// Two signal declarations share a name.
    #[error("signal {0:?} is declared more than once")]
    DuplicateSignal(String),
    /// Two update declarations share a name.
    #[error("update {0:?} is declared more than once")]
    DuplicateUpdate(String),
    /// A node uses `START`, `END` or another name beginning with `__`, which are reserved.
    #[error("node name {0:?} is reserved")]
    ReservedName(String),
    /// A name (node, workflow id, tag, permission) is empty, too long or has control characters.
    #[error("name {name:?} is invalid: {detail}")]
    InvalidName {
        /// The name.
        name: String,
        /// Why.
        detail: String,
    },
    /// An edge, route or goto leads to a node that is not declared.
    #[error("{from:?} leads to undeclared node {to:?}")]
    UnknownTarget {
        /// Where the edge starts.
        from: String,
        /// The undeclared target.
        to: String,
    },
    /// An edge, route, goto list, join or loop bound is declared for an undeclared node.
    #[error("{context} refers to undeclared node {name:?}")]
    UnknownNode {
        /// The undeclared name.
        name: String,
        /// What refers to it: `"edge"`, `"route"`, `"gotos"`, `"join"`, `"loop_bound"`.
        context: String,
    },
    /// An edge that cannot exist: into `START`, out of `END`, or a goto from `START`.
    #[error("edge {from:?} -> {to:?} is invalid: {detail}")]
    InvalidEdge {
        /// Where it starts.
        from: String,
        /// Where it ends.
        to: String,
        /// Why it cannot exist.
        detail: String,
    },
    /// A node (or `START`) has more than one route.
    #[error("{0:?} has more than one route")]
    DuplicateRoute(String),
    /// A route or goto list declares no targets.
    #[error("{0:?} declares a route or gotos with no targets")]
    NoTargets(String),
    /// Nothing leaves `START`.
    #[error("no edge or route leaves START")]
    NoEntry,
    /// The node cannot be reached from `START`.
    #[error("node {0:?} is unreachable from START")]
    Unreachable(String),
    /// No path leads from the node to `END`.
    #[error("node {0:?} has no path to END")]
    NoPathToEnd(String),
    /// These nodes form a cycle and none of them has a loop bound.
    #[error("cycle through {0:?} has no loop bound (use loop_bound on one of its nodes)")]
    UnboundedCycle(Vec<String>),
    /// A join's branches cannot all arrive: no reachable node is sure to lead to all of them
    /// (they are alternatives of a route, say) without passing through the join itself.
    #[error("join {join:?} waits for {branches:?}, which cannot all arrive")]
    UnsatisfiableJoin {
        /// The join node.
        join: String,
        /// The branches it waits for.
        branches: Vec<String>,
    },
    /// A join is malformed: no branches, itself as a branch, declared twice, or entered from a
    /// node that is not one of its branches.
    #[error("join {join:?} is invalid: {detail}")]
    InvalidJoin {
        /// The join node.
        join: String,
        /// Why.
        detail: String,
    },
    /// A node's policy has a value out of range.
    #[error("policy of node {node:?}: {detail}")]
    PolicyOutOfRange {
        /// The node.
        node: String,
        /// Which value and its allowed range.
        detail: String,
    },
    /// A workflow-level setting (id, budgets, checkpoint policy, permissions) is out of range.
    #[error("workflow setting: {detail}")]
    SettingOutOfRange {
        /// Which value and its allowed range.
        detail: String,
    },
    /// A limit in [`crate::limits`] is exceeded.
    #[error("{subject:?}: {} is {value}, over the limit of {max}", crate::limits::in_words(limit))]
    LimitExceeded {
        /// The limit's name in [`crate::limits`].
        limit: &'static str,
        /// What exceeds it (a node name, or the workflow id).
        subject: String,
        /// The value found.
        value: u64,
        /// The limit.
        max: u64,
    },
}
