//! The second demo workflow, `signoff-demo`: it talks to its caller. Its input is what is to
//! be approved (a string); it publishes its stage and the id of a promise, waits for that
//! promise, then streams the approved text in [`PARTS`] chunks and ends with a summary.
//!
//! ```text
//! START -> ask (set_event "stage", promise, set_event "promise", await it) -> write (PARTS chunks) -> END
//! ```
//!
//! Completing the promise with a value approves (`"approved <value>: <input>"`), with an error
//! refuses (`"refused (<error>): <input>"`); the output then says how many parts were streamed.

use std::sync::Arc;

use cairn_dsl::{BuildError, Ctx, END, NodeOutput, Replace, START, Workflow};
use serde_json::Value;

/// How many chunks `write` streams.
pub const PARTS: usize = 3;

/// The `signoff-demo` workflow (its state: the text so far).
///
/// ```
/// let wf = cairn_tools::demo_signoff::signoff_workflow().unwrap();
/// assert_eq!(wf.erase().id(), "signoff-demo");
/// ```
pub fn signoff_workflow() -> Result<Workflow<Replace<String>>, BuildError> {
    Workflow::<Replace<String>>::builder("signoff-demo", 1)
        .node("ask", |s: Arc<Replace<String>>, ctx: Ctx| async move {
            ctx.set_event("stage", "waiting for approval").await?;
            let p = ctx.promise().await?;
            ctx.set_event("promise", p.id()).await?;
            let note = match ctx.await_promise::<Value>(&p).await? {
                Ok(v) => format!("approved {v}: {}", s.0),
                Err(e) => format!("refused ({e}): {}", s.0),
            };
            ctx.set_event("stage", "writing").await?;
            Ok(NodeOutput::update(note))
        })
        .node("write", |s: Arc<Replace<String>>, ctx: Ctx| async move {
            for i in 1..=PARTS {
                ctx.stream(format!("part {i}/{PARTS}"))?;
            }
            Ok(NodeOutput::update(format!("{} ({PARTS} parts streamed)", s.0)))
        })
        .edge(START, "ask")
        .edge("ask", "write")
        .edge("write", END)
        .build()
}
