//! [`Effects`]: the side effects a workflow's tools really performed, as the tools report them.
//!
//! The log says which tool calls were *recorded*; only the tool itself knows when it *ran*
//! (charged the card, sent the mail). A test hands an `Effects` to its tools, each real
//! execution is recorded as an [`Effect`] (the tool's name and its input as JSON, the same
//! identity the log keeps), and the crash harness compares the executions of a crashed run with
//! an uninterrupted one: a tool whose result was recorded before the crash must not run again,
//! and no effect may go missing or appear from nowhere.

use std::future::Future;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};

use cairn_dsl::{Ctx, NodeError, ToolCtx, ToolError};
use serde::Serialize;
use serde::de::DeserializeOwned;

/// One real execution of a tool: its name and its input as canonical JSON text.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Effect {
    /// The tool's name, as passed to [`Ctx::tool`].
    pub tool: String,
    /// The tool's input as JSON text (`serde_json::to_string` of its value).
    pub input: String,
}

impl Effect {
    /// The effect of running `tool` on `input`.
    ///
    /// # Examples
    /// ```
    /// use cairn_testkit::Effect;
    /// let e = Effect::new("charge", &serde_json::json!({"order": 7}));
    /// assert_eq!(e.input, r#"{"order":7}"#);
    /// ```
    pub fn new(tool: &str, input: &impl Serialize) -> Effect {
        let input = serde_json::to_value(input)
            .and_then(|v| serde_json::to_string(&v))
            .unwrap_or_else(|e| format!("<input does not serialise: {e}>"));
        Effect { tool: tool.to_owned(), input }
    }
}

/// A shared, cloneable record of the side effects tools performed.
///
/// Clone it into the workflow's nodes and either wrap tool calls with [`Effects::tool`] (records
/// the execution, then runs the tool) or call [`Effects::record`] inside a tool body yourself
/// with the same name and input the call was made with.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use cairn_testkit::Effects;
/// use cairn::{Ctx, NodeOutput, Replace, Workflow, END, START};
///
/// let fx = Effects::new();
/// let node_fx = fx.clone();
/// let wf = Workflow::<Replace<u64>>::builder("charge", 1)
///     .node("charge", move |s: Arc<Replace<u64>>, ctx: Ctx| {
///         let fx = node_fx.clone();
///         async move {
///             let receipt: u64 = fx
///                 .tool(&ctx, "charge_card", s.0, |amount: u64, _| async move { Ok(amount + 1) })
///                 .await?;
///             Ok(cairn::NodeOutput::update(receipt))
///         }
///     })
///     .edge(START, "charge")
///     .edge("charge", END)
///     .build()
///     .expect("valid workflow");
/// # drop(wf);
/// assert!(fx.snapshot().is_empty());
/// ```
#[derive(Clone, Default)]
pub struct Effects {
    log: Arc<Mutex<Vec<Effect>>>,
}

impl std::fmt::Debug for Effects {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Effects").field("recorded", &self.lock().len()).finish()
    }
}

impl Effects {
    /// An empty record.
    pub fn new() -> Effects {
        Effects::default()
    }

    /// Records one execution of `tool` on `input`.
    pub fn record(&self, tool: &str, input: &impl Serialize) {
        self.lock().push(Effect::new(tool, input));
    }

    /// Calls the tool `name` through `ctx` (so its result is recorded and memoised as usual),
    /// recording each real execution of `run` first.
    ///
    /// # Errors
    /// As [`Ctx::tool`].
    pub async fn tool<I, O, F, Fut>(
        &self,
        ctx: &Ctx,
        name: &str,
        input: I,
        run: F,
    ) -> Result<O, NodeError>
    where
        I: Serialize + DeserializeOwned + Send + 'static,
        O: Serialize + DeserializeOwned,
        F: FnOnce(I, ToolCtx) -> Fut + Send + 'static,
        Fut: Future<Output = Result<O, ToolError>> + Send + 'static,
    {
        let log = self.clone();
        let tool = name.to_owned();
        ctx.tool(name, input, move |input: I, tool_ctx| {
            log.record(&tool, &input);
            run(input, tool_ctx)
        })
        .await
    }

    /// Every execution recorded so far, in order.
    pub fn snapshot(&self) -> Vec<Effect> {
        self.lock().clone()
    }

    /// Every execution recorded so far, in order, leaving the record empty.
    pub fn take(&self) -> Vec<Effect> {
        std::mem::take(&mut *self.lock())
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Effect>> {
        // A panicking tool leaves the list valid: pushes are single steps.
        self.log.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
