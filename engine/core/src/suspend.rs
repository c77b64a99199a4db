//! What a task's interrupts and durable sleeps see when it runs again: the human inputs and fired
//! timers recorded for it, consumed in the order the node asks. Shared by the live node context
//! and the replay context, so both suspend and resume a node the same way.

use cairn_dsl::NodeError;
use serde_json::Value;

/// The recorded inputs and timers of one task, and how many the node has consumed.
#[derive(Debug, Default)]
pub struct Suspensions {
    inputs: Vec<Value>,
    next_input: usize,
    timers_fired: u32,
    next_timer: u32,
}

impl Suspensions {
    /// Suspensions from a task's journal.
    pub fn new(inputs: Vec<Value>, timers_fired: u32) -> Self {
        Self { inputs, next_input: 0, timers_fired, next_timer: 0 }
    }

    /// Every input recorded for the task.
    pub fn inputs(&self) -> &[Value] {
        &self.inputs
    }

    /// Whether recorded inputs or fired timers remain that the node has not consumed yet: the
    /// recorded run went past the node's current point (see `core::patch`).
    pub fn pending(&self) -> bool {
        self.next_input < self.inputs.len() || self.next_timer < self.timers_fired
    }

    /// The node's next interrupt: its recorded input, or a suspension asking `prompt`.
    pub fn interrupt(&mut self, prompt: Value) -> Result<Value, NodeError> {
        let i = self.next_input;
        self.next_input += 1;
        self.inputs.get(i).cloned().ok_or(NodeError::Interrupted { prompt })
    }

    /// Fired timers the node has not consumed: at a select deciding now, those of its own
    /// deadline (every earlier wait of the task consumed its own before it).
    pub fn unconsumed_timers(&self) -> u32 {
        self.timers_fired.saturating_sub(self.next_timer)
    }

    /// Consumes `n` fired timers (a select's, as its outcome records them).
    pub fn consume_timers(&mut self, n: u32) {
        self.next_timer = self.next_timer.saturating_add(n);
    }

    /// The node's next durable sleep, started at `now_ms`: done if its timer fired, else a
    /// suspension until it is due.
    pub fn sleep(&mut self, now_ms: u64, duration_ms: u64) -> Result<(), NodeError> {
        self.sleep_until(now_ms.saturating_add(duration_ms))
    }

    /// The node's next durable sleep until `at_ms`: done if its timer fired, else a suspension
    /// until then.
    pub fn sleep_until(&mut self, at_ms: u64) -> Result<(), NodeError> {
        let i = self.next_timer;
        self.next_timer += 1;
        if i < self.timers_fired { Ok(()) } else { Err(NodeError::Sleeping { until_ms: at_ms }) }
    }
}
