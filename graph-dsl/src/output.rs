//! What a node hands back: an optional state update and, optionally, where to go next.
//!
//! A node's return value is `NodeResult<U>`: `Ok(NodeOutput)` on success, or a
//! [`NodeError`] that is either a failure (maybe retried) or a suspension
//! (interrupt for human input, durable sleep, lock wait) the engine resumes later.

use serde::{Deserialize, Serialize};

use crate::NodeError;

/// Name of the virtual entry node. Edges from `START` say where a thread begins.
pub const START: &str = "__start__";
/// Name of the virtual exit node. A branch that reaches `END` is finished.
pub const END: &str = "__end__";

/// What a node handler returns: its output, or why it did not produce one.
pub type NodeResult<U> = Result<NodeOutput<U>, NodeError>;

/// The successful output of one node run.
///
/// If `goto` is empty, the next nodes are given by the node's static edges and route. If it is
/// not empty, the next nodes are exactly the listed targets, each of which must be among the
/// targets declared for the node with
/// [`WorkflowBuilder::gotos`](crate::WorkflowBuilder::gotos).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeOutput<U> {
    /// The update to apply to the state with [`State::apply`](crate::State::apply), if any.
    pub update: Option<U>,
    /// Targets chosen at run time (a command); empty means "follow the declared edges".
    pub goto: Vec<Target>,
}

impl<U> NodeOutput<U> {
    /// An output carrying `update` and following the declared edges.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::NodeOutput;
    /// let out = NodeOutput::update(3_u32);
    /// assert_eq!(out.update, Some(3));
    /// assert!(out.goto.is_empty());
    /// ```
    pub fn update(update: U) -> Self {
        Self { update: Some(update), goto: Vec::new() }
    }

    /// An output with no update, following the declared edges.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::NodeOutput;
    /// let out: NodeOutput<u32> = NodeOutput::none();
    /// assert_eq!(out.update, None);
    /// ```
    pub fn none() -> Self {
        Self { update: None, goto: Vec::new() }
    }

    /// Adds `target` to the targets chosen at run time.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{NodeOutput, Target, END};
    /// let out = NodeOutput::update(1_u8).goto("review").goto(END);
    /// assert_eq!(out.goto, vec![Target::Node("review".into()), Target::End]);
    /// ```
    #[must_use]
    pub fn goto(mut self, target: impl Into<Target>) -> Self {
        self.goto.push(target.into());
        self
    }

    /// Transforms the update, keeping the chosen targets.
    ///
    /// # Errors
    /// Returns the error `f` returns.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::NodeOutput;
    /// let out = NodeOutput::update(2_u8).try_map_update(|u| Ok::<_, ()>(u32::from(u) * 10));
    /// assert_eq!(out.unwrap().update, Some(20_u32));
    /// ```
    pub fn try_map_update<V, E>(
        self,
        f: impl FnOnce(U) -> Result<V, E>,
    ) -> Result<NodeOutput<V>, E> {
        Ok(NodeOutput { update: self.update.map(f).transpose()?, goto: self.goto })
    }
}

/// A place a node can send the thread next: a named node or the end.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub enum Target {
    /// The node with this name.
    Node(String),
    /// The end of the workflow ([`END`]).
    End,
}

impl Target {
    /// The target's name as used in declarations ([`END`] for the end).
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Target, END};
    /// assert_eq!(Target::from("a").name(), "a");
    /// assert_eq!(Target::End.name(), END);
    /// ```
    pub fn name(&self) -> &str {
        match self {
            Self::Node(name) => name,
            Self::End => END,
        }
    }
}

impl From<&str> for Target {
    fn from(name: &str) -> Self {
        if name == END { Self::End } else { Self::Node(name.to_owned()) }
    }
}

impl From<String> for Target {
    fn from(name: String) -> Self {
        if name == END { Self::End } else { Self::Node(name) }
    }
}

impl std::fmt::Display for Target {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}
