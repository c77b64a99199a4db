//! The open step in the fold: each task's journal (its attempt, tool calls and results, drawn
//! values, inputs, fired timers, outcome), the step's completion (its tasks' updates applied in
//! task order, visits counted, the next frontier), and the user state changed from outside.

use std::collections::BTreeMap;

use crate::error::Error;
use crate::event::{Body, TaskKey};
use crate::thread_ctx::EventAt;
use crate::thread_ctx::{
    Publication, TaskJournal, TaskOutcome, ThreadCtx, ThreadMeta, ToolRecord, input_hash,
};

/// Folds the journals' part of `e` into `ctx`.
///
/// # Errors
/// [`Error::Record`] for a step completion that does not follow the last step, or whose tasks
/// did not all complete or whose updates do not apply.
pub(crate) fn fold(ctx: &mut ThreadCtx, e: EventAt<'_>) -> Result<(), Error> {
    let m = &mut ctx.meta;
    match e.body {
        Body::NodeStarted { task, attempt, .. } => {
            let j = m.open.entry(task.clone()).or_default();
            if j.attempt != *attempt {
                *j = TaskJournal { attempt: *attempt, ..TaskJournal::default() };
            }
        }
        Body::ToolCalled { task, attempt, values, input, .. } => {
            let j = journal(m, task, *attempt);
            j.calls_started += 1;
            j.called_input_hash = Some(input_hash(input));
            j.values.extend(values.iter().cloned());
        }
        Body::ToolReturned { task, attempt, name, output, .. } => {
            let j = journal(m, task, *attempt);
            let input_hash = j.called_input_hash.take();
            j.tools.push(ToolRecord { name: name.clone(), input_hash, output: output.clone() });
        }
        Body::NodeCompleted { task, attempt, update, goto, values, .. } => {
            let j = journal(m, task, *attempt);
            j.values.extend(values.iter().cloned());
            j.outcome = Some(TaskOutcome { update: update.clone(), goto: goto.clone() });
        }
        Body::RetryScheduled { task, attempt, at_ms: not_before, .. } => {
            let j = m.open.entry(task.clone()).or_default();
            *j = TaskJournal {
                attempt: *attempt,
                not_before_ms: *not_before,
                ..TaskJournal::default()
            };
        }
        Body::InputRequested { task, values, .. }
        | Body::SignalAwaited { task, values, .. }
        | Body::TimerSet { task, values, .. } => {
            let attempt = m.open.get(task).map_or(1, |j| j.attempt);
            journal(m, task, attempt).values.extend(values.iter().cloned());
        }
        Body::EventPublished { task, key, .. } => {
            let attempt = m.open.get(task).map_or(1, |j| j.attempt);
            journal(m, task, attempt).published.push(Publication::Event(key.clone()));
        }
        Body::PromiseCreated { task, .. } => {
            let attempt = m.open.get(task).map_or(1, |j| j.attempt);
            journal(m, task, attempt).published.push(Publication::Promise);
        }
        Body::InputReceived { task, value } => {
            m.open.entry(task.clone()).or_default().inputs.push(value.clone());
        }
        Body::TimerFired { task, .. } => m.open.entry(task.clone()).or_default().timers_fired += 1,
        Body::StepCompleted { step, next, arrivals } => {
            if *step != m.step + 1 {
                let detail = format!("step {step} follows step {}", m.step);
                return Err(Error::record(&m.thread, e.seq, detail));
            }
            complete_step(ctx, e.seq, *step, next, arrivals)?;
        }
        _ => {}
    }
    Ok(())
}

/// Folds a change of the user state from outside a step, and the final output.
///
/// # Errors
/// [`Error::Record`] for an update that does not apply to the state.
pub(crate) fn fold_state(ctx: &mut ThreadCtx, e: EventAt<'_>) -> Result<(), Error> {
    match e.body {
        Body::Output { output } => ctx.meta.output = Some(output.clone()),
        Body::StateUpdated { update, .. } => {
            let detail = |e| format!("state update does not apply: {e}");
            let record = |d| Error::record(&ctx.meta.thread, e.seq, d);
            ctx.state.apply_json(update).map_err(|e| record(detail(e)))?;
        }
        Body::UpdateApplied { id, name, state, .. } => {
            let detail = |e| format!("the state of update {name:?} does not apply: {e}");
            let record = |d| Error::record(&ctx.meta.thread, e.seq, d);
            ctx.state.replace_json(state).map_err(|e| record(detail(e)))?;
            ctx.meta.updates.insert(id.clone(), e.seq);
        }
        Body::UpdateRefused { id, error, .. } => {
            ctx.meta.updates_refused.insert(id.clone(), error.clone());
        }
        _ => {}
    }
    Ok(())
}

/// Applies the open step's outcomes in task order and moves to the next frontier.
fn complete_step(
    ctx: &mut ThreadCtx,
    seq: u64,
    step: u64,
    next: &[String],
    arrivals: &BTreeMap<String, Vec<String>>,
) -> Result<(), Error> {
    let ThreadCtx { meta, state } = ctx;
    // BTreeMap order: by node name, then item index. This fixed order is what makes a
    // step's result independent of which task finished first.
    for (task, journal) in &meta.open {
        let record = |detail| Error::record(&meta.thread, seq, detail);
        let Some(outcome) = &journal.outcome else {
            return Err(record(format!("step {step} completed but {task} did not")));
        };
        if let Some(update) = &outcome.update {
            let detail = |e| format!("update of {task} does not apply: {e}");
            state.apply_json(update).map_err(|e| record(detail(e)))?;
        }
    }
    // A node's tasks are next to each other in that order: each node counts one visit.
    let mut last: Option<&str> = None;
    for task in meta.open.keys() {
        if last == Some(&*task.node) {
            continue;
        }
        last = Some(&task.node);
        match meta.visits.get_mut(&*task.node) {
            Some(n) => *n += 1,
            None => {
                meta.visits.insert(task.node.clone(), 1);
            }
        }
    }
    // Emptied entry by entry, not dropped: the map keeps its root node for the next step's
    // tasks (an emptied `BTreeMap` keeps a leaf root; a new one allocates it again).
    while meta.open.pop_first().is_some() {}
    ctx.meta.step = step;
    next.clone_into(&mut ctx.meta.frontier);
    ctx.meta.arrivals.clone_from(arrivals);
    Ok(())
}

/// The journal of `task`'s `attempt`, opened (or reset for a new attempt) if need be.
fn journal<'a>(m: &'a mut ThreadMeta, task: &TaskKey, attempt: u32) -> &'a mut TaskJournal {
    // The key is cloned only for a task not yet open.
    if !m.open.contains_key(task) {
        m.open.insert(task.clone(), TaskJournal::default());
    }
    let j = m.open.get_mut(task).expect("inserted above");
    if j.attempt != attempt {
        *j = TaskJournal { attempt, ..TaskJournal::default() };
    }
    j
}
