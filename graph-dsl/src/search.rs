//! Search attributes: labels a node sets or removes on its thread ([`Ctx::set_label`],
//! [`Ctx::remove_label`]). The engine records each change among the task's drawn values and,
//! when the step completes, as a `labels_changed` event that also updates the thread's record
//! in the same commit, so `cairn threads --label` and the stores' label index see it, and replay
//! and forks fold it like any event (`docs/search.md`).

use crate::limits::check_label;
use crate::{Ctx, NodeError};

impl Ctx {
    /// Sets the label `key` to `value` on this thread (a search attribute: `cairn threads
    /// --label key=value` finds it). It takes effect when the step completes (a task that fails
    /// or is retried changes nothing); a thread keeps at most the engine's label count
    /// (64 labels) and each key and value is at most [`LABEL_BYTES_MAX`](crate::limits::LABEL_BYTES_MAX) bytes.
    ///
    /// # Errors
    /// [`NodeError::Failed`] (code `label`) for an empty key or one, or a value, past
    /// [`LABEL_BYTES_MAX`](crate::limits::LABEL_BYTES_MAX) bytes.
    ///
    /// # Examples
    /// ```
    /// use cairn_dsl::{Ctx, NodeError};
    /// async fn await_payment(ctx: &Ctx) -> Result<(), NodeError> {
    ///     ctx.set_label("stage", "payment")?;
    ///     ctx.remove_label("retrying")
    /// }
    /// ```
    pub fn set_label(&self, key: &str, value: &str) -> Result<(), NodeError> {
        check_label(key, Some(value)).map_err(label_error)?;
        self.inner().change_label(key, Some(value))
    }

    /// Removes the label `key` from this thread (nothing if it has none), when the step
    /// completes, as [`Ctx::set_label`].
    ///
    /// # Errors
    /// As [`Ctx::set_label`], for the key.
    pub fn remove_label(&self, key: &str) -> Result<(), NodeError> {
        check_label(key, None).map_err(label_error)?;
        self.inner().change_label(key, None)
    }
}

fn label_error(message: String) -> NodeError {
    NodeError::Failed { code: Some("label".into()), message, retryable: false }
}
