//! The fold by concern: [`ThreadCtx::apply`] moves the seq and the clock, then hands the event
//! to each concern of [`FOLD`], in that order; each concern changes only its own part of the
//! context and lets the events it has no part in pass.
//!
//! The order is the one place where concerns meet: `record` reads whether the task's attempt
//! was started before `tasks` opens its journal, `compensation` reads the journal `tasks` just
//! completed, and `telemetry` counts a step only once `tasks` completed it (an event a concern
//! refuses stops the fold there). The test below is the transition table: what every concern
//! does with every kind of event.

use crate::error::Error;
use crate::event::Body;
use crate::status::{Transition, transition};
use crate::thread_ctx::{EventAt, ThreadCtx};
use crate::{
    budgets, checkpoint_requests_fold, compensation_fold, continuation, journal, labels, published,
    record, recovery_fold, status, telemetry_fold, waits,
};

/// A part of the thread context with its own rules.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Concern {
    /// The thread's status (`status_changed`; a second `thread_created` is refused).
    Status,
    /// What a parked thread waits for, and the signals its nodes received.
    Waits,
    /// Per-node results, the recent history and errors, progress and the conversation.
    Record,
    /// The open step's task journals, and the step's completion (state, frontier, visits).
    Tasks,
    /// Counters (tool calls, usage, retries, errors, checkpoints, steps).
    Telemetry,
    /// The user state changed from outside a step, and the final output.
    State,
    /// Recovery strategies applied, and rollbacks to a checkpoint.
    Recovery,
    /// Undos registered, and the unwinding of a failed thread.
    Compensation,
    /// The successor a thread continued as, and the thread it continues.
    Continuation,
    /// Budgets set and budget warnings given.
    Budgets,
    /// Search attributes.
    Labels,
    /// Events the nodes published, and the promises they created.
    Published,
    /// Checkpoints asked for at run time, and their use.
    Checkpoints,
}

/// How one concern folds an event.
pub(crate) type FoldFn = fn(&mut ThreadCtx, EventAt<'_>) -> Result<(), Error>;

/// The fold's concerns in the order they see each event (why this order: the module doc).
pub(crate) const FOLD: [Concern; 13] = [
    Concern::Status,
    Concern::Waits,
    Concern::Record,
    Concern::Tasks,
    Concern::Telemetry,
    Concern::State,
    Concern::Recovery,
    Concern::Compensation,
    Concern::Continuation,
    Concern::Budgets,
    Concern::Labels,
    Concern::Published,
    Concern::Checkpoints,
];

impl Concern {
    /// The concern's fold.
    pub(crate) fn fold(self) -> FoldFn {
        match self {
            Concern::Status => status::fold,
            Concern::Waits => waits::fold,
            Concern::Record => record::fold,
            Concern::Tasks => journal::fold,
            Concern::Telemetry => telemetry_fold::fold,
            Concern::State => journal::fold_state,
            Concern::Recovery => recovery_fold::fold,
            Concern::Compensation => compensation_fold::fold,
            Concern::Continuation => continuation::fold,
            Concern::Budgets => budgets::fold,
            Concern::Labels => labels::fold,
            Concern::Published => published::fold,
            Concern::Checkpoints => checkpoint_requests_fold::fold,
        }
    }
}

impl ThreadCtx {
    /// Applies one recorded event. Pure: the result depends only on `self` and the event.
    /// Each concern of the fold takes its part, in the order of `fold::FOLD`.
    ///
    /// # Errors
    /// [`Error::Record`] when the event cannot follow the context (a seq gap, an update that does
    /// not decode): the log and the workflow disagree, which restore must not paper over.
    pub fn apply(&mut self, seq: u64, at_ms: u64, body: &Body) -> Result<(), Error> {
        if seq != self.meta.seq + 1 {
            return Err(self.meta.record(seq, format!("expected seq {}", self.meta.seq + 1)));
        }
        self.meta.seq = seq;
        // A checkpoint records the thread where it stands and does not move it: its time is not
        // the thread's (a checkpoint of a finished thread made a day later would add the day to
        // the thread's wall time and "updated").
        if !matches!(body, Body::CheckpointCreated { .. }) {
            self.meta.updated_at_ms = self.meta.updated_at_ms.max(at_ms);
        }
        let event = EventAt { seq, at_ms, body };
        for concern in FOLD {
            concern.fold()(self, event)?;
        }
        Ok(())
    }
}

/// Applies `body` to `ctx` under the next seq and keeps it in `events` (the batch being built).
///
/// # Errors
/// [`Error::Record`] if it does not apply.
pub fn emit(
    ctx: &mut ThreadCtx,
    events: &mut Vec<(Body, u64)>,
    body: Body,
    at_ms: u64,
) -> Result<(), Error> {
    let seq = ctx.meta.seq + 1;
    ctx.apply(seq, at_ms, &body)?;
    events.push((body, at_ms));
    Ok(())
}

/// [`emit`]s the status change `t` leads to from the context's status.
///
/// # Errors
/// [`Error::Transition`] if the status table refuses it; as [`emit`].
pub fn emit_status(
    ctx: &mut ThreadCtx,
    events: &mut Vec<(Body, u64)>,
    t: Transition,
    reason: &str,
    at_ms: u64,
) -> Result<(), Error> {
    let from = ctx.meta.status;
    let to = transition(from, t)
        .map_err(|source| Error::Transition { thread: ctx.meta.thread.clone(), source })?;
    emit(ctx, events, Body::StatusChanged { from, to, reason: reason.to_owned() }, at_ms)
}

#[cfg(test)]
mod tests {
    //! The fold's transition table: what every concern does with every kind of event, checked
    //! by folding events of each kind through the concerns one at a time.

    use std::collections::{BTreeMap, BTreeSet};
    use std::sync::Arc;

    use cairn_dsl::{DynWorkflow, END, NodeOutput, Replace, START, Workflow};
    use serde_json::{Value, json};

    use super::*;
    use crate::compensation::Unwinding;
    use crate::event::TaskKey;
    use crate::fold_samples::samples;
    use crate::thread_ctx::Waiting;

    /// What the concerns do with `body`; a concern not named does nothing with it. The match
    /// has no catch-all: a new kind of event does not compile without its row.
    fn row(body: &Body) -> &'static [(Concern, &'static str)] {
        use Concern::{
            Budgets, Checkpoints, Compensation, Continuation, Labels, Published, Record, Recovery,
            State, Status, Tasks, Telemetry, Waits,
        };
        let waits_for = &[
            (Waits, "waits for it; notes the signals the task received"),
            (Record, "history: waiting"),
            (Tasks, "the task's drawn values"),
        ];
        match body {
            Body::ThreadCreated { .. } => &[(Status, "refuses it: only the first event is one")],
            Body::BudgetsSet { .. } => &[(Budgets, "the thread's own limits; warns again")],
            Body::StatusChanged { .. } => &[(Status, "the new status")],
            Body::NodeStarted { .. } => {
                &[(Record, "the node runs"), (Tasks, "opens the attempt's journal")]
            }
            Body::NodeCompleted { .. } => &[
                (Waits, "notes the signals the task received"),
                (Record, "the node completed; history"),
                (Tasks, "the task's outcome and drawn values"),
                (Telemetry, "usage, time per node"),
                (Compensation, "the undos the task registered"),
                (Checkpoints, "uses up the node's request"),
            ],
            Body::NodeFailed { .. } => {
                &[(Record, "the node failed; error, history"), (Telemetry, "errors")]
            }
            Body::ToolCalled { .. } => &[
                (Waits, "notes the signals the task received"),
                (Tasks, "a call started, its input hash, drawn values"),
                (Telemetry, "tool calls"),
            ],
            Body::ToolReturned { .. } => {
                &[(Tasks, "the call's result, for the memo"), (Telemetry, "usage per model")]
            }
            Body::RetryScheduled { .. } => &[
                (Record, "history: retry"),
                (Tasks, "the next attempt's journal, not before its backoff"),
                (Telemetry, "retries"),
            ],
            Body::InputRequested { .. } | Body::SignalAwaited { .. } | Body::TimerSet { .. } => {
                waits_for
            }
            Body::InputReceived { .. } => &[(Waits, "wakes"), (Tasks, "the input, for the task")],
            Body::SignalArrived { .. } => &[(Waits, "wakes (the signal is read by the task)")],
            Body::TimerFired { .. } => &[(Waits, "wakes"), (Tasks, "a timer of the task fired")],
            Body::StepCompleted { .. } => &[
                (Tasks, "the updates in task order, visits, the next frontier"),
                (Telemetry, "steps"),
            ],
            Body::CheckpointCreated { .. } => &[(Telemetry, "checkpoints")],
            Body::Progress { .. } => &[(Record, "the last progress")],
            Body::Message { .. } => &[(Record, "the conversation")],
            // A note for people: what a restart did.
            Body::Recovered { .. } => &[],
            Body::Output { .. } => &[(State, "the output")],
            // Locks live in the store; the log says when they moved.
            Body::Lock { .. } => &[],
            Body::Budget { .. } => &[(Budgets, "a warning given once")],
            Body::RecoveryApplied { .. } => {
                &[(Record, "history: recovery"), (Recovery, "a fallback's outcome; restores")]
            }
            Body::RolledBack { .. } => &[(Recovery, "the checkpoint's context")],
            Body::ContinuedAsNew { .. } => &[(Continuation, "the successor")],
            Body::ContinuedFrom { .. } => &[(Continuation, "the predecessor")],
            Body::CompensationBegan { .. } => &[(Compensation, "the unwinding begins")],
            Body::UndoStarted { .. } => &[(Compensation, "the undo in flight")],
            Body::UndoFinished { .. } => &[(Compensation, "one undo more done")],
            Body::LabelsChanged { .. } => &[(Labels, "set and removed")],
            Body::StateUpdated { .. } => &[(State, "the update applied")],
            Body::UpdateApplied { .. } => &[(State, "the new state; the update's id")],
            Body::EventPublished { .. } => {
                &[(Tasks, "counts the task's publications"), (Published, "the key's latest value")]
            }
            Body::PromiseCreated { .. } => {
                &[(Tasks, "counts the task's publications"), (Published, "the promise's id")]
            }
            Body::CheckpointRequested { .. } => &[(Checkpoints, "the request in force")],
            Body::UpdateRefused { .. } => &[(State, "the refused update's id")],
        }
    }

    fn wf() -> Arc<DynWorkflow> {
        let noop = |_s: Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(0)) };
        Workflow::<Replace<u64>>::builder("fold", 1)
            .node("a", noop)
            .edge(START, "a")
            .edge("a", END)
            .build()
            .expect("workflow")
            .erase()
    }

    /// A running thread at step 0 that waits for input and unwinds: every kind of event has
    /// something to change in it.
    fn fixture(wf: &DynWorkflow) -> (ThreadCtx, Value) {
        let labels = BTreeMap::from([("old".to_owned(), "x".to_owned())]);
        let created = crate::fold_samples::created(wf, "a", labels);
        let mut ctx = ThreadCtx::created(wf, "t", &created, 10).expect("created");
        let first = serde_json::to_value(ctx.snapshot().expect("snapshot")).expect("json");
        ctx.apply(2, 10, &crate::fold_samples::started()).expect("running");
        let task = TaskKey::node("a");
        ctx.meta.waiting = Some(Waiting::Input { task, prompt: json!("?") });
        ctx.meta.unwinding = Some(Unwinding { reason: "earlier".into(), done: 1, running: None });
        let meta = cairn_storage::CheckpointMeta::default();
        ctx.meta.checkpoint_requests.at_nodes.insert("b".into(), meta);
        (ctx, first)
    }

    /// Whether `concern` changes `ctx` with `body` or refuses it, after the concerns before it
    /// in [`FOLD`] folded it (it reads what they did); `None` if one of those refused it.
    fn acts(ctx: &ThreadCtx, concern: Concern, body: &Body) -> Option<bool> {
        let event = EventAt { seq: ctx.meta.seq + 1, at_ms: 20, body };
        let mut before = ctx.clone();
        for earlier in FOLD.into_iter().take_while(|c| *c != concern) {
            earlier.fold()(&mut before, event).ok()?;
        }
        let mut after = before.clone();
        let refused = concern.fold()(&mut after, event).is_err();
        let state = |c: &ThreadCtx| c.state.to_json().expect("state");
        Some(refused || after.meta != before.meta || state(&after) != state(&before))
    }

    fn kind_name(body: &Body) -> String {
        serde_json::to_value(body).expect("json")["type"].as_str().expect("type").to_owned()
    }

    #[test]
    fn every_concern_does_with_every_kind_of_event_what_its_row_says() {
        let wf = wf();
        let (ctx, first) = fixture(&wf);
        // k = 0: a sample on which every concern its row names has something to do.
        for k in 0..12 {
            for body in samples(k, &first) {
                let named: BTreeMap<Concern, &str> = row(&body).iter().copied().collect();
                for concern in FOLD {
                    let kind = kind_name(&body);
                    match named.get(&concern) {
                        Some(does) if k == 0 => {
                            let acted = acts(&ctx, concern, &body);
                            assert_eq!(acted, Some(true), "{concern:?} on {kind}: {does}");
                        }
                        Some(_) => {}
                        None => assert!(
                            acts(&ctx, concern, &body) != Some(true),
                            "{concern:?} changed the context on {kind} (sample {k}), which its \
                             row says it leaves alone"
                        ),
                    }
                }
            }
        }
    }

    #[test]
    fn the_samples_hold_every_kind_of_event_and_the_fold_every_concern() {
        // Serde lists every kind of body it knows when it meets one it does not.
        let unknown = serde_json::from_value::<Body>(json!({"type": "no_such_kind"}));
        let message = unknown.expect_err("no such kind").to_string();
        let (_, listed) = message.split_once("expected one of").expect("the kinds serde knows");
        let known: BTreeSet<&str> = listed.split(',').map(|k| k.trim().trim_matches('`')).collect();
        let sampled: BTreeSet<String> = samples(0, &json!(null)).iter().map(kind_name).collect();
        let sampled: BTreeSet<&str> = sampled.iter().map(String::as_str).collect();
        assert_eq!(sampled, known, "one sample of every kind of event");
        assert!(known.len() >= 30, "{known:?}");

        let concerns: BTreeSet<Concern> = FOLD.into_iter().collect();
        assert_eq!(concerns.len(), FOLD.len(), "each concern folds once");
    }
}
