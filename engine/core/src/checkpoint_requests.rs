//! Checkpoints asked for at run time (their fold is `checkpoint_requests_fold.rs`): a periodic
//! checkpoint per thread with the caller's metadata (`Engine::checkpoint_every`, cancelled by
//! `Engine::cancel_periodic_checkpoint`), and a checkpoint the next time the thread completes a
//! node (`Engine::checkpoint_at_node`).
//!
//! Each request is a `checkpoint_requested` event in the thread's log, so it is durable the
//! moment the call returns and every runner, process and replay sees the same requests in
//! [`crate::thread_ctx::ThreadMeta::checkpoint_requests`]. A node's request is used up by the
//! fold of that node's next `node_completed` (the step decision reads it just before, in
//! `decide.rs`), so it is taken once, whichever runner completes the node, and never again
//! after a crash.
//!
//! The step decision turns the requests into [`CheckpointPlan`]s: a periodic one is due when
//! its interval has passed since the thread's latest checkpoint (as the engine's own periodic
//! policy, and at the same places: after a step the thread goes on from), a node's one with the
//! step that completes the node (as a node's own `checkpoint_after`, whose place it takes).

use std::collections::BTreeMap;

use cairn_storage::{CheckpointKind, CheckpointMeta};
use serde::{Deserialize, Serialize};

use crate::checkpoint_plan::CheckpointPlan;

/// One request, as its `checkpoint_requested` event holds it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum CheckpointRequest {
    /// A periodic checkpoint every `interval_ms` of the engine's clock, each stored with `meta`
    /// (replacing an earlier periodic request).
    Every {
        /// The interval, counted from the thread's latest checkpoint (more than 0).
        interval_ms: u64,
        /// Stored with each checkpoint it makes.
        meta: CheckpointMeta,
    },
    /// The periodic request is cancelled.
    CancelEvery,
    /// A checkpoint the next time the thread completes `node` (replacing an earlier request
    /// for that node).
    AtNode {
        /// The node (one of the thread's workflow).
        node: String,
        /// Stored with the checkpoint.
        meta: CheckpointMeta,
    },
}

/// The requests in force for a thread.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckpointRequests {
    /// The periodic request: its interval and metadata.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub every: Option<Every>,
    /// The nodes whose next completion takes a checkpoint, with its metadata.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub at_nodes: BTreeMap<String, CheckpointMeta>,
}

/// A periodic request in force.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Every {
    /// Its interval in ms.
    pub interval_ms: u64,
    /// Stored with each checkpoint it makes.
    pub meta: CheckpointMeta,
}

impl CheckpointRequest {
    /// The one line its event shows in listings.
    pub fn summary(&self) -> String {
        match self {
            CheckpointRequest::Every { interval_ms, .. } => {
                format!("checkpoint requested every {interval_ms} ms")
            }
            CheckpointRequest::CancelEvery => "periodic checkpoint request cancelled".to_owned(),
            CheckpointRequest::AtNode { node, .. } => {
                format!("checkpoint requested when node {node} completes")
            }
        }
    }
}

impl CheckpointRequests {
    /// `request` in force from now on.
    pub fn apply(&mut self, request: &CheckpointRequest) {
        match request {
            CheckpointRequest::Every { interval_ms, meta } => {
                self.every = Some(Every { interval_ms: *interval_ms, meta: meta.clone() });
            }
            CheckpointRequest::CancelEvery => self.every = None,
            CheckpointRequest::AtNode { node, meta } => {
                self.at_nodes.insert(node.clone(), meta.clone());
            }
        }
    }

    /// Whether none is in force (then absent from the snapshot).
    pub fn is_empty(&self) -> bool {
        self.every.is_none() && self.at_nodes.is_empty()
    }

    /// The periodic checkpoint due at `now` when the thread's latest checkpoint was written at
    /// `last_checkpoint_ms`, if one is.
    pub fn periodic_due(&self, now: u64, last_checkpoint_ms: u64) -> Option<CheckpointPlan> {
        let every = self.every.as_ref()?;
        (now.saturating_sub(last_checkpoint_ms) >= every.interval_ms).then(|| CheckpointPlan {
            given: Some(every.meta.clone()),
            ..CheckpointPlan::of(CheckpointKind::Periodic)
        })
    }

    /// The checkpoint asked for when `node` completes, if one is: of kind `kind` (the node's
    /// own, or `Node`), with the request's metadata.
    pub fn at_node(&self, node: &str, kind: CheckpointKind) -> Option<CheckpointPlan> {
        let meta = self.at_nodes.get(node)?;
        Some(CheckpointPlan {
            kind,
            node: Some(node.to_owned()),
            tags: Vec::new(),
            given: Some(meta.clone()),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta(description: &str) -> CheckpointMeta {
        CheckpointMeta { description: description.into(), ..CheckpointMeta::default() }
    }

    #[test]
    fn a_request_sets_replaces_and_cancels() {
        let mut r = CheckpointRequests::default();
        r.apply(&CheckpointRequest::Every { interval_ms: 10, meta: meta("a") });
        r.apply(&CheckpointRequest::Every { interval_ms: 20, meta: meta("b") });
        assert_eq!(r.every.as_ref().map(|e| e.interval_ms), Some(20));
        assert!(r.periodic_due(119, 100).is_none(), "19 ms after the latest checkpoint");
        let due = r.periodic_due(120, 100).expect("20 ms after");
        assert_eq!((due.kind, due.given), (CheckpointKind::Periodic, Some(meta("b"))));
        r.apply(&CheckpointRequest::CancelEvery);
        assert!(r.periodic_due(1_000, 0).is_none());
        r.apply(&CheckpointRequest::AtNode { node: "n".into(), meta: meta("c") });
        let plan = r.at_node("n", CheckpointKind::Node).expect("asked for n");
        assert_eq!((plan.node.as_deref(), plan.given), (Some("n"), Some(meta("c"))));
        assert!(r.at_node("m", CheckpointKind::Node).is_none());
    }
}
