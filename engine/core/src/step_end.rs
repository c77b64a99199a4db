//! How a step ends when several concerns want a say: the concerns that can end a step, in the
//! order that settles between them ([`PRECEDENCE`], written here once), the claims a step's task
//! runs make, and how each concern carries out its claim.
//!
//! `decide::close_step` folds the task runs into [`Claims`] (the first claim of each concern
//! stands), then walks [`PRECEDENCE`]: the first concern with a claim decides the step. Labels
//! and routing claim from the context, not from a run, so they are asked only when every concern
//! before them let the step go on (their events belong to a step that completes).

use std::collections::BTreeMap;

use cairn_dsl::NodeError;
use cairn_storage::CheckpointKind;

use crate::checkpoint_plan::CheckpointPlan;
use crate::decide::{Closing, Next, route_step};
use crate::error::Error;
use crate::event::{Body, TaskKey};
use crate::status::Transition;
use crate::{continuation, labels};

/// A concern that can decide how a step ends.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Ending {
    /// A task failed for good under the `fail` strategy: the thread fails.
    Fail,
    /// A task's recovery strategy gave the work up: the thread ends Cancelled.
    Abandon,
    /// A task's recovery strategy rolls the thread back to its latest checkpoint.
    Restore,
    /// A task waits for input, a signal or a timer (or escalated): the thread parks.
    Park,
    /// A budget ran out inside a node: the thread pauses.
    Budget,
    /// Something a node waits on is paused (a child thread): the thread pauses.
    Pause,
    /// The step's label changes pass the limit: the thread fails.
    Labels,
    /// The step completes and routes: the next step, the end, or a successor.
    Route,
}

/// The precedence: when several concerns claim a step, the first of them here decides it.
/// Failure outranks everything (a failed task's work cannot be kept); a wait outranks a budget
/// or a pause (the tasks that hit those run again once the thread resumes, and meet them then);
/// `Route` is last and always decides, so every step ends.
pub(crate) const PRECEDENCE: [Ending; 8] = [
    Ending::Fail,
    Ending::Abandon,
    Ending::Restore,
    Ending::Park,
    Ending::Budget,
    Ending::Pause,
    Ending::Labels,
    Ending::Route,
];

/// What a concern claims for the step's end.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Claim {
    /// The thread stops with this transition, for this reason.
    Stop(Transition, String),
    /// The thread rolls back to its latest checkpoint.
    Restore,
    /// The thread parks with this transition; why, for its status change.
    Park(Transition, &'static str),
    /// This budget ran out inside a node: a budget event, and the thread pauses.
    Budget(String),
}

/// The claims a step's task runs made: the first of each concern.
#[derive(Debug, Default)]
pub(crate) struct Claims(BTreeMap<Ending, Claim>);

impl Claims {
    /// `by` claims the step's end, unless it already did (its first claim stands).
    pub(crate) fn claim(&mut self, by: Ending, claim: Claim) {
        self.0.entry(by).or_insert(claim);
    }

    /// Whether `by` claimed the step's end.
    pub(crate) fn has(&self, by: Ending) -> bool {
        self.0.contains_key(&by)
    }
}

/// What the thread does next, and the checkpoint to write with the step's events.
pub(crate) type Verdict = (Next, Option<CheckpointPlan>);

/// The step's end: the verdict of the first concern in [`PRECEDENCE`] that claims it.
///
/// # Errors
/// As the concern's events (`fold::emit`), and [`Error::Codec`] if the final state does not
/// serialise.
pub(crate) fn resolve(c: &mut Closing<'_>) -> Result<Verdict, Error> {
    for by in PRECEDENCE {
        let verdict = match by {
            Ending::Labels => labels_past_limit(c)?,
            Ending::Route => Some(route(c)?),
            _ => match c.claims.0.remove(&by) {
                Some(claim) => Some(carry_out(c, claim)?),
                None => None,
            },
        };
        if let Some(verdict) = verdict {
            return Ok(verdict);
        }
    }
    unreachable!("Route, last in PRECEDENCE, decides every step")
}

/// The verdict of a claim the task runs made, with its closing events.
fn carry_out(c: &mut Closing<'_>, claim: Claim) -> Result<Verdict, Error> {
    Ok(match claim {
        Claim::Stop(t, reason) => (Next::Stop(t, reason), None),
        Claim::Restore => (Next::Restore, None),
        Claim::Park(t, why) => {
            c.out.emit_status(t, why, c.now)?;
            (Next::Park(t), c.checkpoint.take())
        }
        Claim::Budget(budget) => {
            let limit = c.max_tool_calls.unwrap_or(0);
            let used = c.out.ctx.meta.telemetry.tool_calls;
            c.out.emit(Body::Budget { budget: budget.clone(), used, limit }, c.now)?;
            let why = format!("budget {budget} exhausted inside a node");
            (Next::Stop(Transition::Pause, why), None)
        }
    })
}

/// Labels: the step's `labels_changed`, or the thread fails when they pass their limit.
fn labels_past_limit(c: &mut Closing<'_>) -> Result<Option<Verdict>, Error> {
    match labels::requested(&c.out.ctx.meta) {
        Ok(Some(change)) => c.out.emit(change, c.now)?,
        Ok(None) => {}
        Err(message) => {
            let error = NodeError::Failed { code: Some("label".into()), message, retryable: false };
            return fail_step(c, error, "labels past their limit").map(Some);
        }
    }
    Ok(None)
}

/// Routing: the step completes; the thread goes on, or ends (with its output, and a successor
/// if the step asked for one), or fails when the routing does.
fn route(c: &mut Closing<'_>) -> Result<Verdict, Error> {
    let (next, arrivals) = match route_step(c.wf, c.out.ctx, c.step) {
        Ok(x) => x,
        Err(error) => return fail_step(c, error, "routing failed"),
    };
    let ended = next.is_empty();
    let successor = continuation::requested(&c.out.ctx.meta).cloned();
    c.out.emit(Body::StepCompleted { step: c.step, next, arrivals }, c.now)?;
    if !ended {
        let mut checkpoint = c.checkpoint.take();
        // A periodic one asked at run time first: among periodic ones, its metadata is kept.
        let requests = &c.out.ctx.meta.checkpoint_requests;
        if let Some(asked) = requests.periodic_due(c.now, c.rules.last_checkpoint_ms) {
            checkpoint = CheckpointPlan::stronger(checkpoint, asked);
        }
        if c.rules.periodic_due(c.step, c.now, c.out.events.len() as u64) {
            let periodic = CheckpointPlan::of(CheckpointKind::Periodic);
            checkpoint = CheckpointPlan::stronger(checkpoint, periodic);
        }
        return Ok((Next::Continue, checkpoint));
    }
    let output = c.out.ctx.state.to_json().map_err(|e| Error::Codec(e.to_string()))?;
    c.out.emit(Body::Output { output }, c.now)?;
    // The end's status change is one more event; the runner writes it with the checkpoint.
    let events = c.out.events.len() as u64 + 1;
    let asked = c.checkpoint.take().is_some();
    let checkpoint = c
        .rules
        .completion_due(asked, c.step, c.now, events)
        .then(|| CheckpointPlan::of(CheckpointKind::Completion));
    let stop =
        |reason: &str| (Next::Stop(Transition::Complete, reason.to_owned()), checkpoint.clone());
    let Some(input) = successor else { return Ok(stop("every branch reached END")) };
    let thread = continuation::successor_id(&c.out.ctx.meta.thread);
    c.out.emit(Body::ContinuedAsNew { thread, input }, c.now)?;
    Ok(stop(continuation::REASON))
}

/// The thread fails at the step's end with `error`, charged to the first node of the frontier.
fn fail_step(c: &mut Closing<'_>, error: NodeError, reason: &str) -> Result<Verdict, Error> {
    let task = TaskKey::node(c.out.ctx.meta.frontier.first().cloned().unwrap_or_default());
    let failed = Body::NodeFailed { step: c.step, task, attempt: 1, error, terminal: true };
    c.out.emit(failed, c.now)?;
    Ok((Next::Stop(Transition::Fail, reason.to_owned()), None))
}

#[cfg(test)]
mod tests {
    //! The precedence, table-driven: steps where several concerns claim at once, and the one the
    //! table puts first decides.

    use std::sync::Arc;

    use cairn_dsl::{
        DynWorkflow, END, NodeError, NodeOutput, NodePolicy, Recovery, Replace, START, Usage,
        Workflow,
    };
    use serde_json::{Value, json};

    use super::*;
    use crate::decide::{TaskEnd, TaskRun, close_step};
    use crate::marks;

    /// A chain of nodes, one per concern's sample (`esc` escalates, `ab` abandons, `rs`
    /// restores), on a `u64` state.
    fn chain() -> Arc<DynWorkflow> {
        let noop = |_s: Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(0)) };
        let on = |r| NodePolicy::default().on_failure(r);
        let mut b = Workflow::<Replace<u64>>::builder("precedence", 1)
            .node("f", noop)
            .node_with("ab", noop, on(Recovery::Abandon))
            .node_with("rs", noop, on(Recovery::RestoreAndRetry))
            .node_with("esc", noop, on(Recovery::Escalate));
        let names = ["rt", "f", "ab", "rs", "esc", "w", "bud", "pz", "lab"];
        for name in ["rt", "w", "bud", "pz", "lab"] {
            b = b.node(name, noop);
        }
        b = b.edge(START, "rt");
        for pair in names.windows(2) {
            b = b.edge(pair[0], pair[1]);
        }
        b.edge("lab", END).build().expect("workflow").erase()
    }

    fn run(node: &str, values: Vec<Value>, end: TaskEnd) -> TaskRun {
        TaskRun {
            key: TaskKey::node(node.to_owned()),
            attempt: 1,
            item: None,
            started_at_ms: 100,
            duration_ms: 5,
            started_logged: false,
            values,
            appended: Vec::new(),
            end,
        }
    }

    fn done() -> TaskEnd {
        let usage = Usage::default();
        TaskEnd::Done { update: None, goto: Vec::new(), usage, messages: Vec::new() }
    }

    fn failed() -> TaskEnd {
        TaskEnd::Failed { error: NodeError::fatal("boom") }
    }

    /// A task run that makes `by` claim the step (alone, it decides the step that way).
    fn claiming(by: Ending) -> TaskRun {
        match by {
            Ending::Fail => run("f", Vec::new(), failed()),
            Ending::Abandon => run("ab", Vec::new(), failed()),
            Ending::Restore => run("rs", Vec::new(), failed()),
            Ending::Park => run("w", Vec::new(), TaskEnd::WaitInput { prompt: json!("go?") }),
            Ending::Budget => run("bud", Vec::new(), TaskEnd::Budget { budget: "tools".into() }),
            Ending::Pause => run("pz", Vec::new(), TaskEnd::Paused { reason: "child".into() }),
            Ending::Labels => {
                let many = (0..=cairn_storage::limits::LABELS_PER_THREAD_MAX)
                    .map(|i| marks::label(&format!("k{i}"), Some("v")))
                    .collect();
                run("lab", many, done())
            }
            Ending::Route => run("rt", Vec::new(), done()),
        }
    }

    /// How a step that `by` decides ends, in words.
    fn expected(by: Ending) -> &'static str {
        match by {
            Ending::Fail => "stop Fail: a node failed",
            Ending::Abandon => "stop Cancel: abandoned by its recovery policy",
            Ending::Restore => "restore",
            Ending::Park => "park WaitInput",
            Ending::Budget => "stop Pause: budget tools exhausted inside a node",
            Ending::Pause => "stop Pause: child",
            Ending::Labels => "stop Fail: labels past their limit",
            Ending::Route => "continue",
        }
    }

    fn said(next: &Next) -> String {
        match next {
            Next::Continue => "continue".into(),
            Next::Park(t) => format!("park {t:?}"),
            Next::Stop(t, reason) => format!("stop {t:?}: {reason}"),
            Next::Restore => "restore".into(),
        }
    }

    /// How the step with `runs` ends, in words.
    fn ends(runs: Vec<TaskRun>) -> String {
        let wf = chain();
        let mut ctx = crate::fold_samples::running(&wf, "rt");
        let d = close_step(&mut ctx, Vec::new(), &wf, 1, runs, 200, Default::default(), Some(10));
        said(&d.expect("decision").next)
    }

    #[test]
    fn when_two_concerns_claim_a_step_the_first_in_the_table_decides() {
        for (i, &first) in PRECEDENCE.iter().enumerate() {
            assert!(ends(vec![claiming(first)]).starts_with(expected(first)), "{first:?} alone");
            for &then in &PRECEDENCE[i + 1..] {
                for runs in
                    [vec![claiming(first), claiming(then)], vec![claiming(then), claiming(first)]]
                {
                    let order: Vec<_> = runs.iter().map(|r| r.key.node.clone()).collect();
                    let got = ends(runs);
                    assert!(
                        got.starts_with(expected(first)),
                        "{first:?} and {then:?} (runs {order:?}): got {got:?}"
                    );
                }
            }
        }
    }

    #[test]
    fn several_claims_at_once_end_the_step_as_the_table_says() {
        let wait = || run("w", Vec::new(), TaskEnd::WaitInput { prompt: json!("go?") });
        let sleep = || run("w", Vec::new(), TaskEnd::Sleep { until_ms: 900 });
        let signal = || run("w", Vec::new(), TaskEnd::WaitSignal { name: "s".into() });
        let escalate = || run("esc", Vec::new(), failed());
        let [fail, abandon, restore, _, budget, pause, labels, route] = PRECEDENCE.map(claiming);
        let cases: Vec<(&str, Vec<TaskRun>, &str)> = vec![
            ("fail and pause", vec![pause, fail], "stop Fail: a node failed"),
            ("budget and a wait", vec![budget, wait()], "park WaitInput"),
            ("a sleep and a pause", vec![claiming(Ending::Pause), sleep()], "park Sleep"),
            (
                "an escalation and a budget",
                vec![claiming(Ending::Budget), escalate()],
                "park WaitInput",
            ),
            ("abandon and restore", vec![restore, abandon], "stop Cancel: abandoned"),
            ("restore and a signal", vec![signal(), claiming(Ending::Restore)], "restore"),
            ("a wait then a failure", vec![wait(), claiming(Ending::Fail)], "stop Fail"),
            ("labels and routing", vec![route, labels], "stop Fail: labels past their limit"),
            ("everything at once", PRECEDENCE.map(claiming).into(), "stop Fail: a node failed"),
        ];
        for (case, runs, end) in cases {
            let got = ends(runs);
            assert!(got.starts_with(end), "{case}: {got:?}, not {end:?}");
        }
    }

    #[test]
    fn route_is_last_and_decides_every_step_nothing_claimed() {
        assert_eq!(PRECEDENCE.last(), Some(&Ending::Route));
        assert_eq!(ends(Vec::new()), "stop Complete: every branch reached END");
    }
}
