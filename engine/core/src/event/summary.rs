//! One human line per event ([`Body::summary`]), kept in the event's record for listings.
//!
//! A step writes two of them (a node's completion and the step's), so those kinds are put
//! together piece by piece ([`Line`]) rather than through `format!`: one allocation of about
//! the right size, no formatting machinery. The others are rarer and use `format!`.

use cairn_dsl::Recovery;

use super::{Body, TaskKey};

/// A summary line put together piece by piece.
struct Line(String);

impl Line {
    /// Room for a typical line ("step 12: node completed") without growing.
    const CAPACITY: usize = 48;

    fn new() -> Line {
        Line(String::with_capacity(Self::CAPACITY))
    }

    fn text(mut self, s: &str) -> Line {
        self.0.push_str(s);
        self
    }

    /// `n` in decimal, as `Display` writes it.
    fn number(mut self, mut n: u64) -> Line {
        let mut digits = [0u8; 20];
        let mut at = digits.len();
        loop {
            at -= 1;
            digits[at] = b'0' + (n % 10) as u8;
            n /= 10;
            if n == 0 {
                break;
            }
        }
        for &d in &digits[at..] {
            self.0.push(char::from(d));
        }
        self
    }

    /// `key` as its `Display` writes it: the node, and the item's index in brackets.
    fn task(self, key: &TaskKey) -> Line {
        let line = self.text(&key.node);
        match key.item {
            Some(i) => line.text("[").number(u64::from(i)).text("]"),
            None => line,
        }
    }
}

impl From<Line> for String {
    fn from(line: Line) -> String {
        line.0
    }
}

impl Body {
    /// The summary of a change of the state from outside a step.
    fn state_summary(&self) -> String {
        match self {
            Body::StateUpdated { reason, .. } => format!("state updated: {reason}"),
            Body::UpdateApplied { id, name, .. } => format!("update {name:?} applied (id {id})"),
            other => format!("{:?}", other.kind()),
        }
    }

    /// A one-line summary for listings.
    pub fn summary(&self) -> String {
        match self {
            Body::ThreadCreated { workflow, .. } => {
                format!("thread created: {} v{}", workflow.id, workflow.version)
            }
            Body::StatusChanged { from, to, reason } => format!("{from} -> {to}: {reason}"),
            Body::NodeStarted { step, task, attempt, .. } => Line::new()
                .text("step ")
                .number(*step)
                .text(": ")
                .task(task)
                .text(" started (attempt ")
                .number(u64::from(*attempt))
                .text(")")
                .into(),
            Body::NodeCompleted { step, task, .. } => Line::new()
                .text("step ")
                .number(*step)
                .text(": ")
                .task(task)
                .text(" completed")
                .into(),
            Body::NodeFailed { step, task, error, .. } => {
                format!("step {step}: {task} failed: {error}")
            }
            Body::ToolCalled { task, name, call, .. } => {
                format!("{task}: tool {name} called (#{call})")
            }
            Body::ToolReturned { task, name, output, .. } => match output {
                Ok(_) => format!("{task}: tool {name} returned"),
                Err(e) => format!("{task}: tool {name} failed: {}", e.message),
            },
            Body::RetryScheduled { task, attempt, delay_ms, .. } => {
                format!("{task}: attempt {attempt} in {delay_ms} ms")
            }
            Body::InputRequested { task, .. } => format!("{task}: waiting for input"),
            Body::InputReceived { task, .. } => format!("{task}: input received"),
            Body::SignalAwaited { task, name, .. } => {
                format!("{task}: waiting for signal {name:?}")
            }
            Body::SignalArrived { task, name } => format!("{task}: signal {name:?} arrived"),
            Body::TimerSet { task, until_ms, .. } => format!("{task}: sleeping until {until_ms}"),
            Body::TimerFired { task, .. } => format!("{task}: timer fired"),
            Body::StepCompleted { step, next, .. } => {
                let line = Line::new().text("step ").number(*step).text(" completed; ");
                match next.split_first() {
                    None => line.text("reached END").into(),
                    Some((first, rest)) => {
                        let line = line.text("next: ").text(first);
                        rest.iter().fold(line, |line, n| line.text(", ").text(n)).into()
                    }
                }
            }
            Body::CheckpointCreated { kind, description, .. } => {
                format!("{kind} checkpoint: {description}")
            }
            Body::Progress { task, progress } => {
                format!("{task}: {}/{} {}", progress.step, progress.total, progress.message)
            }
            Body::Message { task, message } => {
                format!("{task}: [{}] {}", message.role, message.content)
            }
            Body::Recovered { action } => format!("recovered after restart: {action}"),
            Body::Output { .. } => "output recorded".to_owned(),
            Body::Lock { name, acquired: true } => format!("lock {name} acquired"),
            Body::Lock { name, acquired: false } => format!("lock {name} released"),
            Body::Budget { budget, used, limit } => format!("budget {budget}: {used} of {limit}"),
            Body::StateUpdated { .. } | Body::UpdateApplied { .. } => self.state_summary(),
            Body::RolledBack { checkpoint, to_seq, reason, .. } => {
                format!("rolled back to checkpoint {checkpoint} (seq {to_seq}): {reason}")
            }
            Body::BudgetsSet { .. } => "budgets changed".to_owned(),
            Body::ContinuedAsNew { thread, .. } => format!("continued as new: {thread}"),
            Body::ContinuedFrom { thread } => format!("continued from {thread}"),
            later => later.summary_later(),
        }
    }

    /// [`Body::summary`] of the kinds added later (labels, compensation, recovery, published
    /// events and promises).
    fn summary_later(&self) -> String {
        match self {
            Body::LabelsChanged { set, removed } => {
                let set = set.iter().map(|(k, v)| format!("{k}={v}"));
                let removed = removed.iter().map(|k| format!("-{k}"));
                format!("labels: {}", set.chain(removed).collect::<Vec<_>>().join(", "))
            }
            Body::CompensationBegan { reason, undos } => {
                format!("compensating: {undos} undo(s) after: {reason}")
            }
            Body::UndoStarted { index, name, .. } => format!("undo #{index} {name} started"),
            Body::UndoFinished { index, name, output: Ok(_), .. } => {
                format!("undo #{index} {name} finished")
            }
            Body::UndoFinished { index, name, output: Err(e), .. } => {
                format!("undo #{index} {name} failed: {}", e.message)
            }
            Body::RecoveryApplied { task, strategy: Recovery::Fallback(to), .. } => {
                format!("{task}: recovery: fall back to {to}")
            }
            Body::RecoveryApplied { task, strategy, .. } => {
                format!("{task}: recovery: {}", strategy.name())
            }
            Body::EventPublished { task, key, .. } => format!("{task}: published {key:?}"),
            Body::PromiseCreated { task, promise } => format!("{task}: promise {promise} created"),
            Body::CheckpointRequested { request } => request.summary(),
            Body::UpdateRefused { id, name, error } => {
                format!("update {name:?} refused (id {id}): {error}")
            }
            // Every other kind is summed up by `summary`.
            other => format!("{:?}", other.kind()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The lines put together piece by piece read exactly as `format!` wrote them.
    #[test]
    fn the_hot_summaries_read_as_format_wrote_them() {
        let keys = [TaskKey::node("fetch"), TaskKey { node: "map".into(), item: Some(0) }];
        for task in keys {
            for step in [0, 7, 10, 1_234_567, u64::MAX] {
                let started =
                    Body::NodeStarted { step, task: task.clone(), attempt: 3, item: None };
                assert_eq!(started.summary(), format!("step {step}: {task} started (attempt 3)"));
                let completed = Body::NodeCompleted {
                    step,
                    task: task.clone(),
                    attempt: 1,
                    update: None,
                    goto: Vec::new(),
                    values: Vec::new(),
                    duration_ms: 0,
                    usage: cairn_dsl::Usage::default(),
                };
                assert_eq!(completed.summary(), format!("step {step}: {task} completed"));
            }
        }
        let step_with = |next: &[&str]| Body::StepCompleted {
            step: 4,
            next: next.iter().map(|n| (*n).to_owned()).collect(),
            arrivals: Default::default(),
        };
        assert_eq!(step_with(&[]).summary(), "step 4 completed; reached END");
        assert_eq!(step_with(&["b"]).summary(), "step 4 completed; next: b");
        assert_eq!(step_with(&["b", "c", "d"]).summary(), "step 4 completed; next: b, c, d");
    }
}
