//! Patch calls of a live attempt (`ctx.patched`, `ctx.deprecate_patch`): the decision table of
//! `core::patch`, made against what this attempt's journal recorded and has not yet consumed.

use super::LiveNodeContext;
use crate::core::patch;

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
