//! Children started at run time, replayed: a start and a join read what the parent's task
//! recorded, and a node that now starts another child (another workflow or input), or joins
//! another one, than the recorded run did is a divergence. Nothing is started or waited for.

use cairn_dsl::{ChildEnded, ChildStart, NodeError, ParentClose};
use serde_json::Value;

use super::node::ReplayNodeContext;
use crate::core::child_start::{CLOSES_CHILDREN_LABEL, ChildEnd, same_start};
use crate::core::drawn::Drawn;

impl ReplayNodeContext {
    /// The recorded start of `start`: the child's id.
    pub(super) fn replay_start(&self, start: &ChildStart) -> Result<String, NodeError> {
        if start.parent_close == ParentClose::Cancel {
            let marker = crate::core::marks::label(CLOSES_CHILDREN_LABEL, Some("yes"));
            self.marker(marker, "starts a child to cancel at its end");
        }
        let inner = self.value(Drawn::ChildStart);
        same_start(&inner, &start.workflow, &start.input).map_err(|detail| {
            self.diverged(detail.clone(), inner, Value::String(start.workflow.clone()));
            NodeError::Nondeterminism { detail }
        })
    }

    /// The recorded end of the join of `child`.
    pub(super) fn replay_join(&self, child: &str) -> Result<ChildEnded, NodeError> {
        let inner = self.value(Drawn::ChildJoin);
        match ChildEnd::read(&inner).filter(|end| end.child == child) {
            Some(end) => Ok(end.ended()),
            None => {
                let detail =
                    format!("the code joins child {child} where another join was recorded");
                self.diverged(detail.clone(), inner, Value::String(child.to_owned()));
                Err(NodeError::Nondeterminism { detail })
            }
        }
    }
}
