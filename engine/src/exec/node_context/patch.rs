//! Marker calls of a live attempt (`core::marks`): patches (`ctx.patched`,
//! `ctx.deprecate_patch`: the decision table of `core::patch`, made against what this attempt's
//! journal recorded and has not yet consumed), undos (`ctx.on_undo`), label changes
//! (`ctx.set_label`) and continue-as-new.

use cairn_dsl::NodeError;
use serde_json::Value;

use super::LiveNodeContext;
use crate::core::{marks, patch};

impl LiveNodeContext {
    /// The answer to a patch call of `id` (`deprecated`: `ctx.deprecate_patch`, whose task
    /// must not have gone past this point without the marker).
    pub(super) fn patch(&self, id: &str, deprecated: bool) -> bool {
        let mut st = self.state();
        if let Some(known) = st.patches.get(id) {
            return *known;
        }
        let taken = if patch::take(&mut st.replay_values, id) {
            true
        } else if st.replay_values.is_empty()
            && st.next_call >= st.calls_recorded
            && !st.suspensions.pending()
        {
            // At the head of the recorded history: this code is the first to get here.
            st.new_values.push(patch::marker(id));
            true
        } else {
            false
        };
        if deprecated && !taken {
            st.nondeterminism.get_or_insert(format!(
                "task {} went past deprecated patch {id:?} under the code before it: it needs \
                 the old branch, which the code no longer has",
                self.key
            ));
        }
        st.patches.insert(id.to_owned(), taken);
        taken
    }
}

impl LiveNodeContext {
    /// `ctx.on_undo(name, args)`: records the undo's marker (once: a task run again consumes the
    /// one its earlier run recorded).
    pub(super) fn undo(&self, name: &str, args: Value) -> Result<(), NodeError> {
        if self.env.wf.compensation(name).is_none() {
            return Err(NodeError::Failed {
                code: Some("undo".into()),
                message: format!("workflow {} declares no compensation {name:?}", self.env.wf.id()),
                retryable: false,
            });
        }
        self.mark(marks::undo(name, args));
        Ok(())
    }

    /// `ctx.continue_as_new(input)`: records the request, once the input is a valid state.
    pub(super) fn continue_as(&self, input: Value) -> Result<(), NodeError> {
        if self.env.depth > 0 {
            // Its parent's node waits for this thread's end and knows no successor.
            return Err(NodeError::Failed {
                code: Some("continue_as_new".into()),
                message: "a sub-workflow's child thread cannot continue as new".into(),
                retryable: false,
            });
        }
        self.env.wf.state_from_json(&input).map_err(|e| NodeError::Codec {
            detail: format!("the successor's input is not a valid state: {e}"),
        })?;
        self.mark(marks::successor(input));
        Ok(())
    }

    /// `ctx.set_label` / `ctx.remove_label`: records the change, applied when the step
    /// completes (`core::labels`).
    pub(super) fn label(&self, key: &str, value: Option<&str>) -> Result<(), NodeError> {
        self.mark(marks::label(key, value));
        Ok(())
    }

    fn mark(&self, marker: Value) {
        let mut st = self.state();
        if !marks::take(&mut st.replay_values, &marker) {
            st.new_values.push(marker);
        }
    }
}
