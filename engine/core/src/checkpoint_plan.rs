//! What a checkpoint the engine writes says about itself: its kind, and for a node-level one
//! (kind `node` or `phase`) the node that asked for it and that node's tags.
//!
//! Pure. The step decision (`decide.rs`) builds a `CheckpointPlan`; the runner turns it into
//! the `checkpoint_created` event and the stored checkpoint's [`CheckpointMeta`].
//!
//! When several nodes of one step ask for a checkpoint, the checkpoint is named after the first
//! of them in task order (its name and tags): one node per checkpoint keeps the metadata within
//! the storage bounds the DSL already enforces per node (`TAGS_MAX` tags of at most
//! `NAME_BYTES_MAX` bytes, both within `TAGS_PER_CHECKPOINT_MAX` and `TAG_BYTES_MAX`), so a
//! wide step can never make its own commit fail.

use std::collections::BTreeMap;

use cairn_storage::{CheckpointKind, CheckpointMeta};

/// The custom field of a node-level checkpoint's metadata naming the node that asked for it.
pub const NODE_FIELD: &str = "node";

/// The custom field of every checkpoint the engine writes naming the step it closes.
pub const STEP_FIELD: &str = "step";

/// A checkpoint to write with a batch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CheckpointPlan {
    /// Why.
    pub kind: CheckpointKind,
    /// The node that asked for it (node and phase checkpoints).
    pub node: Option<String>,
    /// That node's `NodePolicy::tags`.
    pub tags: Vec<String>,
    /// The metadata a caller gave a manual checkpoint or asked a checkpoint with at run time
    /// (`checkpoint_requests.rs`), stored as given.
    pub given: Option<CheckpointMeta>,
}

impl CheckpointPlan {
    /// A checkpoint no node asked for (periodic, failure, completion).
    pub fn of(kind: CheckpointKind) -> Self {
        CheckpointPlan { kind, node: None, tags: Vec::new(), given: None }
    }

    /// A manual checkpoint with the caller's metadata.
    pub fn manual(meta: CheckpointMeta) -> Self {
        CheckpointPlan { given: Some(meta), ..Self::of(CheckpointKind::Manual) }
    }

    /// The plan when `candidate` also applies: the most specific kind wins (phase over node
    /// over periodic, by the kinds' declared order); between equals, the first one stays.
    pub fn stronger(current: Option<Self>, candidate: Self) -> Option<Self> {
        match current {
            Some(c) if c.kind as u8 >= candidate.kind as u8 => Some(c),
            _ => Some(candidate),
        }
    }

    /// The description of the checkpoint taken after step `step`.
    pub fn description(&self, step: u64) -> String {
        // A manual checkpoint's, or a requested one's (`checkpoint_requests.rs`) when its
        // caller gave one; else the engine's words.
        if let Some(given) = &self.given
            && (self.kind == CheckpointKind::Manual || !given.description.is_empty())
        {
            return manual_description(given);
        }
        match &self.node {
            Some(node) => format!("after step {step} (node {node})"),
            None => format!("after step {step}"),
        }
    }

    /// The stored metadata of the checkpoint taken after step `step`.
    pub fn meta(&self, step: u64) -> CheckpointMeta {
        if let Some(given) = &self.given {
            return given.clone();
        }
        let mut custom = BTreeMap::new();
        custom.insert(STEP_FIELD.to_owned(), step.to_string());
        if let Some(node) = &self.node {
            custom.insert(NODE_FIELD.to_owned(), node.clone());
        }
        CheckpointMeta {
            creator: "engine".into(),
            description: format!("{} checkpoint {}", self.kind, self.description(step)),
            tags: self.tags.clone(),
            custom,
        }
    }
}

/// The event description of a manual checkpoint: the caller's, or a default.
pub fn manual_description(meta: &CheckpointMeta) -> String {
    if meta.description.is_empty() {
        "manual checkpoint".to_owned()
    } else {
        meta.description.clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_node_checkpoint_names_its_node_and_carries_its_tags() {
        let plan = CheckpointPlan {
            kind: CheckpointKind::Node,
            node: Some("review".into()),
            tags: vec!["milestone".into()],
            given: None,
        };
        let meta = plan.meta(3);
        assert_eq!(meta.tags, vec!["milestone".to_owned()]);
        assert_eq!(meta.custom.get(NODE_FIELD).map(String::as_str), Some("review"));
        assert_eq!(meta.custom.get(STEP_FIELD).map(String::as_str), Some("3"));
        assert_eq!(meta.description, "node checkpoint after step 3 (node review)");
        let periodic = CheckpointPlan::of(CheckpointKind::Periodic).meta(4);
        assert!(periodic.tags.is_empty() && !periodic.custom.contains_key(NODE_FIELD));
    }

    #[test]
    fn the_most_specific_kind_wins_and_the_first_node_among_equals() {
        let node = |n: &str| CheckpointPlan {
            kind: CheckpointKind::Node,
            node: Some(n.into()),
            tags: Vec::new(),
            given: None,
        };
        let p = CheckpointPlan::stronger(None, node("a"));
        let p = CheckpointPlan::stronger(p, node("b"));
        assert_eq!(p.as_ref().and_then(|p| p.node.as_deref()), Some("a"));
        let p = CheckpointPlan::stronger(p, CheckpointPlan::of(CheckpointKind::Periodic));
        assert_eq!(p.as_ref().map(|p| p.kind), Some(CheckpointKind::Node));
        let p = CheckpointPlan::stronger(p, CheckpointPlan::of(CheckpointKind::Completion));
        assert_eq!(p.map(|p| p.kind), Some(CheckpointKind::Completion));
    }
}
