//! The crash proptest of [`crate::crash`] with controls at random points: human input (interrupt
//! and `send_input`), durable sleeps on a manual clock, a budget that stops a thread (raised and
//! resumed), a cancel, an explicit pause (then resumed), and a durable lock shared by the threads
//! (released in node code, or held until the thread ends), on a random linear chain followed by
//! an optional fan-out whose branches may wait for input or sleep too.
//!
//! Each case runs once without a crash, then again on a store that dies at a random append
//! boundary (a control's own write included), is reopened and driven to the end. A driver per
//! thread answers what the thread waits for from its status, so the crash may land before, during
//! or after any control: after the reopen the driver does whatever is still missing.
//!
//! The cancel lands at a deterministic point, so both runs agree: on a chain node that parks
//! (input or sleep) the driver cancels instead of answering; on a plain node the node signals and
//! waits for its cancellation token (a gate only the cancel opens: runners compute steps ahead of
//! their commits, so racing the step hook would not pin the step). The pause lands the same way:
//! the node at the pause point signals and waits for a gate the driver opens once it has asked
//! for the pause, so the thread must stop Paused at that node's step boundary (checked).
//!
//! Signals: a chain node may receive a signal (`ctx.recv`), which the driver sends when the
//! thread parks waiting for it or, for some threads, for every such node right after the start
//! (buffered before the node asks); a send is an append the store may die at too. After a
//! crash the driver sends only what the inbox lacks. Each thread's receipts (the signal numbers
//! its recorded values hold) must be unique, every signal of a completed thread received, and
//! every acknowledged send in the inbox.
//!
//! Deletion and retention: a thread may be deleted by hand (`Engine::delete`) once its driver
//! has seen it end, or end under the retention policy (period 0, so a pass deletes every
//! finished thread): in a case with such a thread, a pass runs whenever a thread is parked
//! waiting for input or paused (it must still be there, unchanged, after the pass: retention
//! never removes an unfinished thread), when that thread ends (it must be gone after), and at
//! the end of the run. Deletions are crash points like appends. After a crash and after the
//! resumed run, what the store holds must be exactly what its threads hold (`leftovers`: the
//! threads, events, checkpoints, payloads, signals and locks `verify` counts against those of
//! the threads present): a deleted thread leaves nothing, and one that a crash interrupted
//! mid-deletion is whole (its log from seq 1, restorable) or gone. A thread gone after the
//! crash is not started again (its id is free: a start would make a new thread). The first
//! tool call of node `c0` carries an input above the inline bound, so every thread that runs it
//! has a payload to leave behind.
//!
//! Queues ([`queue`]): a thread may start on the case's queue (a key, a priority, maybe a dedup
//! key) under a global limit of 1 or 2 and a per-key limit of 1 or 2, then wait in line for
//! the others; its driver may cancel it there (or delete it, forced, when its plan deletes it)
//! if it finds it still waiting, and probes its dedup key under another id while it is parked
//! (the holder must answer, nothing be written). After each run (the uninterrupted one, and
//! the resumed one after a crash and recovery), from the logs and the store: at no point did
//! more queued threads run than the global limit, or than the per-key limit within a key (a
//! thread runs from its first `Running` status event to its terminal one, in lsn order); no
//! queued thread was lost (every one ends or was deleted as acknowledged); none was admitted
//! twice (the queue counts nothing once all ended, and `verify` finds its counts equal to its
//! members, at the crash too).
//!
//! Schedules ([`schedule`]): a case may create up to two schedules (interval or cron, a
//! catch-up policy, maybe a start and an end) whose driver pauses, resumes, triggers and deletes
//! them and moves the clock, beside the threads' drivers; the crash may land in any of it, and
//! the clock jumps by a downtime before the reopen. After each run, from the store alone
//! (`cairn_testkit::check_schedule`): every round started exactly the ticks its policy picks,
//! each once, none while paused, outside the start and end, or after the delete; each
//! acknowledged trigger made one thread of its own.
//!
//! Locks: node code records when it holds the shared lock ([`gates::Gates`]), and the logs give
//! each thread's holding intervals in global log order; neither may overlap between threads, and
//! once every thread has ended the store holds no lock.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use cairn::clock::ManualClock;
use cairn::dsl::{Ctx, NodeOutput, State, Workflow};
use cairn::event::Body;
use cairn::storage::limits::READ_LIMIT_MAX;
use cairn::storage::{Durability, RedbStore, Store, ThreadId};
use cairn::{END, NodeError, START, Seq, ThreadStatus};
use proptest::prelude::*;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::Notify;

use crate::crash::{EffectLog, cases_from_env};
use driver::{Acked, Case, Hooks, Tally, run};
use gates::{Gates, LOCK, LOCK_TTL_MS};

/// The state: every node appends what it saw.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Acc {
    items: Vec<u64>,
}

impl State for Acc {
    type Update = Vec<u64>;
    fn apply(&mut self, u: Vec<u64>) {
        self.items.extend(u);
    }
}

/// Short against the runners' lease (60 s of engine clock, renewed every step), so the cases
/// do not lean on what a clock moved past a running thread's lease does (a tool call that
/// outlasted its lease once lost its result: fixed, `findings::a_tool_call_longer_than_the_lease_still_completes`).
const SLEEP_MS: u64 = 1_000;
/// A sleep no driver wakes.
const NEVER_MS: u64 = 1 << 40;
const CLOCK_START_MS: u64 = 1_000_000;
/// Longest a clean or resumed run may take before the case fails as stuck.
const STUCK_SECS: u64 = 10;

/// What a chain node does between its tool calls.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Plain,
    Input,
    Sleep,
    /// Receives a signal (chain nodes only).
    Signal,
}

/// The name of the signals chain nodes receive.
const SIGNAL: &str = "go";

/// How a chain node uses the shared lock.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum LockUse {
    None,
    /// Taken at the node's start, released by the node at its end.
    Scoped,
    /// Taken at the node's start and never released by node code: it goes when the thread ends.
    Held,
}

/// One node of the chain: its kind, its tool calls before and after the control, its lock.
#[derive(Debug, Clone, Copy)]
struct Step {
    kind: Kind,
    before: usize,
    after: usize,
    lock: LockUse,
}

/// How a thread is removed once it has ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Remove {
    /// `Engine::delete`, once its driver has seen it end.
    Delete,
    /// By the retention policy's passes (which then run in the whole case).
    Retention,
}

/// Bytes of padding on the input of node `c0`'s first tool call: above the engine's inline
/// bound (16 KiB), so the call's event refers to a payload.
const PAYLOAD_PAD: usize = 17 * 1024;

/// The budget a thread starts with.
#[derive(Debug, Clone, Copy)]
enum Limit {
    Steps(u64),
    ToolCalls(u64),
}

/// The controls of one thread.
#[derive(Debug, Clone, Copy)]
struct ThreadPlan {
    /// The chain node at which the thread is cancelled.
    cancel_at: Option<usize>,
    /// The plain chain node after whose step the thread is paused (then resumed).
    pause_at: Option<usize>,
    /// Pause the thread the first time (in a run) it waits for input (or sleeps, when it is
    /// the only thread), then resume it, back into that wait.
    pause_parked: bool,
    budget: Option<Limit>,
    /// Send the signals of every signal node right after the start, before any asks.
    early_signals: bool,
    /// Removed once it has ended.
    remove: Option<Remove>,
    /// Started on the case's queue ([`queue`]).
    queued: Option<queue::Queued>,
}

#[derive(Debug, Clone)]
struct Plan {
    chain: Vec<Step>,
    /// The branches of a fan-out after the chain, joined before END (none: no fan-out). A
    /// branch calls one tool after its control (input or sleep), if any.
    branches: Vec<Kind>,
    threads: Vec<ThreadPlan>,
    /// The limits of the queue some threads start on.
    queue: queue::Limits,
    /// The schedules the case creates and drives ([`schedule`]).
    schedules: Vec<schedule::SchedulePlan>,
    /// How far the clock jumps between the crash and the reopen (in a case with schedules).
    downtime_ms: u64,
}

impl Plan {
    /// Whether the case runs retention passes (a thread of it is removed by them).
    fn retention(&self) -> bool {
        self.threads.iter().any(|t| t.remove == Some(Remove::Retention))
    }

    /// Whether thread `t` may be gone once it has ended: deleted by hand, or by a retention
    /// pass of the case.
    fn removable(&self, t: usize) -> bool {
        self.retention() || self.threads[t].remove.is_some()
    }

    /// The chain nodes that receive a signal, in order: the `j`th receives the `j`th signal.
    fn signal_nodes(&self) -> Vec<usize> {
        (0..self.chain.len()).filter(|&i| self.chain[i].kind == Kind::Signal).collect()
    }

    /// The nodes of the step after chain node `i`.
    fn after(&self, i: usize) -> Vec<String> {
        if i + 1 < self.chain.len() {
            vec![format!("c{}", i + 1)]
        } else if self.branches.is_empty() {
            vec![END.to_owned()]
        } else {
            (0..self.branches.len()).map(|b| format!("w{b}")).collect()
        }
    }
}

fn plan() -> impl Strategy<Value = Plan> {
    let kind = prop_oneof![
        3 => Just(Kind::Plain),
        1 => Just(Kind::Input),
        1 => Just(Kind::Sleep),
        1 => Just(Kind::Signal)
    ];
    let branch_kind =
        prop_oneof![2 => Just(Kind::Plain), 1 => Just(Kind::Input), 1 => Just(Kind::Sleep)];
    let lock =
        prop_oneof![4 => Just(LockUse::None), 1 => Just(LockUse::Scoped), 1 => Just(LockUse::Held)];
    let step = (kind.clone(), 0usize..3, 0usize..2, lock)
        .prop_map(|(kind, before, after, lock)| Step { kind, before, after, lock });
    let branches = prop::collection::vec(branch_kind, 0..3);
    (prop::collection::vec(step, 1..6), branches).prop_flat_map(|(chain, branches)| {
        let n = chain.len();
        // A tool-call budget may run out between two calls of one node (the thread stops
        // Paused inside the step, `findings::a_tool_call_budget_reached_inside_a_node_stops_
        // cleanly`) or at a step boundary.
        let limit = prop_oneof![
            2 => (1..n as u64 + 3).prop_map(Limit::Steps),
            1 => (1u64..5).prop_map(Limit::ToolCalls)
        ];
        // A pause at a plain node with a step after it (a pause at the last step would find the
        // thread completed), before any cancel.
        let pausable: Vec<bool> = (0..n)
            .map(|i| chain[i].kind == Kind::Plain && (i + 1 < n || !branches.is_empty()))
            .collect();
        let thread = (
            prop::option::weighted(0.3, 0..n),
            prop::option::weighted(0.5, 0..n),
            prop::option::weighted(0.4, limit),
            prop::bool::weighted(0.3),
            prop::bool::weighted(0.5),
            prop::option::weighted(
                0.35,
                prop_oneof![Just(Remove::Delete), Just(Remove::Retention)],
            ),
            queue::queued(),
        )
            .prop_map(
                move |(
                    cancel_at,
                    pause_at,
                    budget,
                    pause_parked,
                    early_signals,
                    remove,
                    queued,
                )| {
                    let pause_at =
                        pause_at.filter(|&p| pausable[p] && cancel_at.is_none_or(|c| p < c));
                    ThreadPlan {
                        cancel_at,
                        pause_at,
                        pause_parked,
                        budget,
                        early_signals,
                        remove,
                        queued,
                    }
                },
            );
        (prop::collection::vec(thread, 1..3), queue::limits(), schedule::plans(), 0u64..300_000)
            .prop_map(move |(threads, queue, schedules, downtime_ms)| {
                let mut plan = Plan {
                    chain: chain.clone(),
                    branches: branches.clone(),
                    threads,
                    queue,
                    schedules,
                    downtime_ms,
                };
                if plan.retention() {
                    plan.schedules = plan.schedules.into_iter().map(|s| s.kept()).collect();
                }
                plan
            })
    })
}

/// The races the drivers can retry (a cancel acknowledged before it is recorded or lost to a
/// parking runner, budgets refused while the runner lets go) fail the case: the engine fixed
/// them. `CAIRN_CRASH_CONTROLS_STRICT=0` retries them instead (to count them on an older engine).
fn strict() -> bool {
    std::env::var("CAIRN_CRASH_CONTROLS_STRICT").map_or(true, |v| v != "0")
}

fn tid(t: usize) -> String {
    format!("t{t}")
}

/// The input the driver answers node `node` (`c<i>` of the chain, `w<i>` a branch) of thread
/// `t` with.
fn answer(node: &str, t: usize) -> u64 {
    let i: u64 = node[1..].parse().unwrap();
    let base = if node.starts_with('w') { 100_000 } else { 1_000 };
    base * (i + 1) + t as u64
}

/// Hang signals of the current run: a plain node at its thread's cancel point notifies its
/// thread's driver. Replaced for every run, so a signal of a crashed run never reaches the next.
#[derive(Default)]
struct Signals(Mutex<BTreeMap<String, Arc<Notify>>>);

impl Signals {
    fn reset(&self, threads: usize) -> Vec<Arc<Notify>> {
        let fresh: Vec<Arc<Notify>> = (0..threads).map(|_| Arc::new(Notify::new())).collect();
        let mut map = self.0.lock().unwrap();
        map.clear();
        for (t, n) in fresh.iter().enumerate() {
            map.insert(tid(t), n.clone());
        }
        fresh
    }

    fn raise(&self, thread: &str) {
        if let Some(n) = self.0.lock().unwrap().get(thread) {
            n.notify_one();
        }
    }
}

async fn tool(ctx: &Ctx, fx: &EffectLog, key: String) -> Result<u64, NodeError> {
    let fx = fx.clone();
    ctx.tool("effect", key, move |key: String, _| async move {
        fx.record(key.clone());
        Ok::<_, cairn::ToolError>(key.len() as u64)
    })
    .await
}

fn build(plan: &Plan, fx: &EffectLog, signals: &Arc<Signals>, gates: &Arc<Gates>) -> Workflow<Acc> {
    let cancel_at: Arc<Vec<Option<usize>>> =
        Arc::new(plan.threads.iter().map(|t| t.cancel_at).collect());
    let pause_at: Arc<Vec<Option<usize>>> =
        Arc::new(plan.threads.iter().map(|t| t.pause_at).collect());
    let mut b = Workflow::<Acc>::builder("ctl", 1);
    let mut prev = START.to_owned();
    for (i, step) in plan.chain.iter().copied().enumerate() {
        let name = format!("c{i}");
        let (fx, signals, cancel_at) = (fx.clone(), signals.clone(), cancel_at.clone());
        let (gates, pause_at) = (gates.clone(), pause_at.clone());
        let node = move |s: Arc<Acc>, ctx: Ctx| {
            let (fx, signals, cancel_at) = (fx.clone(), signals.clone(), cancel_at.clone());
            let (gates, pause_at) = (gates.clone(), pause_at.clone());
            async move {
                let thread = ctx.thread_id().to_owned();
                let t: usize = thread[1..].parse().unwrap();
                let key = |c: usize| {
                    let pad = if i == 0 && c == 0 { PAYLOAD_PAD } else { 0 };
                    format!("{thread}:c{i}:{}:{c}{}", s.items.len(), " ".repeat(pad))
                };
                let live = (pause_at[t] == Some(i) || step.lock != LockUse::None)
                    && !gates.replaying(&ctx);
                if live && pause_at[t] == Some(i) {
                    gates.pause_point(&thread, &ctx).await?;
                }
                if step.lock != LockUse::None {
                    ctx.lock(LOCK, LOCK_TTL_MS).await?;
                    if live {
                        gates.acquired(&thread);
                    }
                }
                let mut out = vec![ctx.random_u64() % 1000];
                for c in 0..step.before {
                    out.push(tool(&ctx, &fx, key(c)).await?);
                }
                match step.kind {
                    Kind::Input => out.push(ctx.interrupt(serde_json::json!({ "node": i }))?),
                    Kind::Sleep => {
                        // At its cancel point a thread sleeps past any time the other
                        // threads' drivers move the shared clock to: only the cancel ends it.
                        let ms = if cancel_at[t] == Some(i) { NEVER_MS } else { SLEEP_MS };
                        ctx.sleep_ms(ms).await?;
                        out.push(7);
                    }
                    Kind::Plain | Kind::Signal => {
                        if cancel_at[t] == Some(i) {
                            signals.raise(&thread);
                            ctx.cancelled().await;
                            return Err(NodeError::Cancelled);
                        }
                        if step.kind == Kind::Signal {
                            out.push(ctx.recv(SIGNAL).await?);
                        }
                    }
                }
                for c in step.before..step.before + step.after {
                    out.push(tool(&ctx, &fx, key(c)).await?);
                }
                if step.lock == LockUse::Scoped {
                    if live {
                        gates.releasing(&thread);
                    }
                    ctx.unlock(LOCK).await?;
                }
                Ok(NodeOutput::update(out))
            }
        };
        b = b.node(name.clone(), node).edge(prev, name.clone());
        prev = name;
    }
    if !plan.branches.is_empty() {
        let branches: Vec<String> = (0..plan.branches.len()).map(|i| format!("w{i}")).collect();
        for (i, (br, kind)) in branches.iter().zip(plan.branches.iter().copied()).enumerate() {
            let fx = fx.clone();
            b = b.node(br.clone(), move |s: Arc<Acc>, ctx: Ctx| {
                let fx = fx.clone();
                async move {
                    let key = format!("{}:w{i}:{}", ctx.thread_id(), s.items.len());
                    let mut out = vec![i as u64];
                    match kind {
                        Kind::Input => out.push(ctx.interrupt(serde_json::json!({ "branch": i }))?),
                        Kind::Sleep => {
                            ctx.sleep_ms(SLEEP_MS).await?;
                            out.push(7);
                        }
                        Kind::Plain | Kind::Signal => {}
                    }
                    out.push(tool(&ctx, &fx, key).await?);
                    Ok(NodeOutput::update(out))
                }
            });
        }
        b = b
            .fan_out(prev, branches.clone())
            .node("j", |_s: Arc<Acc>, ctx: Ctx| async move {
                Ok(NodeOutput::update(vec![ctx.random_u64() % 1000]))
            })
            .join(branches, "j");
        prev = "j".to_owned();
    }
    b.edge(prev, END).build().expect("generated workflow")
}

mod driver;
mod findings;
mod gates;
mod queue;
mod schedule;

/// How a thread ended, as far as a crashed run must agree with the uninterrupted one.
#[derive(Debug, Clone, PartialEq)]
struct View {
    status: ThreadStatus,
    state: Value,
    /// Steps completed.
    steps: u64,
    /// Human inputs delivered, in order.
    inputs: Vec<Value>,
    /// Budget warnings and stops: (budget, used, limit).
    budget_events: Vec<(String, u64, u64)>,
    /// The numbers of the signals its nodes received, in log order.
    received: Vec<u64>,
}

/// What a thread's log holds.
#[derive(Debug)]
struct Facts {
    view: View,
    step_max: u64,
    budgets_set: u64,
    resumes: u64,
    /// Explicit pauses recorded (not budget stops).
    pauses: u64,
    /// Lock acquisitions recorded (renewals included).
    locks: u64,
    /// When the thread held the shared lock: [first acquire, release or end] in log order (lsn).
    held: Vec<(u64, u64)>,
    /// Keys of the tool calls whose results are recorded.
    recorded: BTreeSet<String>,
    /// Signals in the thread's inbox.
    inbox: u64,
    /// When it ran: [its first `Running` status event, its terminal one (or `u64::MAX`)], in
    /// log order (lsn); `None`: it never ran.
    ran: Option<(u64, u64)>,
    /// Broken log invariants (seq gaps, a step completed twice or skipped).
    problems: Vec<String>,
}

fn inspect(store: &dyn Store, wf: &Workflow<Acc>, t: usize) -> Option<Facts> {
    let id = ThreadId::new(tid(t)).unwrap();
    let record = store.thread(&id).wait().unwrap()?;
    let events = store.read_since(&id, Seq(0), READ_LIMIT_MAX).wait().unwrap();
    assert!(events.len() < READ_LIMIT_MAX, "{id}: log longer than one read");
    let mut problems = Vec::new();
    if let Some((k, e)) = events.iter().enumerate().find(|(k, e)| e.bookmark.seq.0 != *k as u64 + 1)
    {
        problems.push(format!("seq gap: event {k} has seq {}", e.bookmark.seq.0));
    }
    let (mut inputs, mut budget_events, mut steps_seen) = (Vec::new(), Vec::new(), Vec::new());
    let (mut budgets_set, mut resumes, mut pauses, mut locks) = (0, 0, 0, 0);
    let (mut held, mut since) = (Vec::new(), None);
    let (mut called, mut recorded) = (BTreeMap::new(), BTreeSet::new());
    let mut received = Vec::new();
    let (mut ran_from, mut ran_to) = (None, u64::MAX);
    for e in events {
        let lsn = e.bookmark.lsn.0;
        let body = cairn::blocking::decode(store, e).unwrap().body;
        if let Body::ToolCalled { values, .. }
        | Body::NodeCompleted { values, .. }
        | Body::InputRequested { values, .. }
        | Body::SignalAwaited { values, .. }
        | Body::TimerSet { values, .. } = &body
        {
            received.extend(values.iter().filter_map(|v| v["signal"]["n"].as_u64()));
        }
        if let Body::StatusChanged { to, .. } = &body {
            if *to == ThreadStatus::Running {
                ran_from.get_or_insert(lsn);
            } else if to.is_terminal() && ran_from.is_some() {
                ran_to = lsn;
            }
        }
        match body {
            Body::Lock { acquired: true, .. } => {
                locks += 1;
                since.get_or_insert(lsn);
            }
            Body::Lock { acquired: false, .. } => {
                if let Some(from) = since.take() {
                    held.push((from, lsn));
                }
            }
            Body::StatusChanged { to, .. } if to.is_terminal() => {
                // Every lock of the thread goes with the batch that ends it.
                if let Some(from) = since.take() {
                    held.push((from, lsn));
                }
            }
            Body::StatusChanged { to: ThreadStatus::Paused, reason, .. }
                if reason.starts_with("paused") =>
            {
                pauses += 1;
            }
            Body::InputReceived { value, .. } => inputs.push(value),
            Body::Budget { budget, used, limit } => budget_events.push((budget, used, limit)),
            Body::BudgetsSet { .. } => budgets_set += 1,
            Body::StatusChanged {
                from: ThreadStatus::Paused,
                to: ThreadStatus::Running | ThreadStatus::WaitingInput | ThreadStatus::Sleeping,
                ..
            } => {
                resumes += 1;
            }
            Body::StepCompleted { step, .. } => steps_seen.push(step),
            Body::ToolCalled { step, task, attempt, call, input, .. } => {
                called.insert((step, task, attempt, call), input);
            }
            Body::ToolReturned { step, task, attempt, call, .. } => {
                if let Some(input) = called.get(&(step, task, attempt, call)) {
                    recorded.insert(input.as_str().unwrap_or_default().to_owned());
                }
            }
            _ => {}
        }
    }
    if steps_seen.iter().enumerate().any(|(k, s)| *s != k as u64 + 1) {
        problems.push(format!("steps completed out of order or twice: {steps_seen:?}"));
    }
    let ctx = cairn::blocking::restore(store, &wf.erase(), &id, None).unwrap();
    let snapshot = ctx.snapshot().unwrap();
    let view = View {
        status: record.status,
        state: snapshot.state,
        steps: snapshot.meta.step,
        inputs,
        budget_events,
        received,
    };
    let inbox = store.signals(&id, 0, READ_LIMIT_MAX).wait().unwrap().len() as u64;
    Some(Facts {
        inbox,
        ran: ran_from.map(|from| (from, ran_to)),
        view,
        step_max: steps_seen.last().copied().unwrap_or(0),
        budgets_set,
        resumes,
        pauses,
        locks,
        held: held.into_iter().chain(since.map(|from| (from, u64::MAX))).collect(),
        recorded,
        problems,
    })
}

/// What the crashed run acknowledged but the log after the crash lacks (`removable`: the
/// thread may have been deleted, once ended).
fn lost(acked: &Acked, facts: Option<&Facts>, removable: bool) -> Vec<String> {
    let Some(f) = facts else {
        return if acked.started && !removable {
            vec!["a started thread is gone".into()]
        } else {
            vec![]
        };
    };
    let mut lost = Vec::new();
    if acked.deleted {
        lost.push("its deletion was acknowledged and it is still there".into());
    }
    if f.step_max < acked.step {
        lost.push(format!("step {} acknowledged, log ends at step {}", acked.step, f.step_max));
    }
    if (f.view.inputs.len() as u64) < acked.inputs {
        lost.push(format!("{} inputs acknowledged, {} logged", acked.inputs, f.view.inputs.len()));
    }
    if f.budgets_set < acked.budgets_set {
        lost.push(format!(
            "{} budget raises acknowledged, {} logged",
            acked.budgets_set, f.budgets_set
        ));
    }
    if f.pauses < acked.pauses {
        lost.push(format!("{} pauses acknowledged, {} logged", acked.pauses, f.pauses));
    }
    if f.resumes < acked.resumes {
        lost.push(format!("{} resumes acknowledged, {} logged", acked.resumes, f.resumes));
    }
    if f.inbox < acked.signals {
        lost.push(format!("{} signals acknowledged, {} in the inbox", acked.signals, f.inbox));
    }
    if acked.cancelled && f.view.status != ThreadStatus::Cancelled {
        lost.push(format!("cancel acknowledged, status {:?}", f.view.status));
    }
    lost
}

/// What the store holds beyond the threads present (thread `t` of `0..threads`, and the
/// schedules' threads and those they started): deleted threads' events, checkpoints, signals
/// or locks, and totals `verify` counts (threads, events, checkpoints, payloads, signals) other
/// than those of the threads present.
fn leftovers(store: &dyn Store, threads: usize) -> Vec<String> {
    let mut problems = Vec::new();
    let report = store.verify().unwrap();
    if !report.is_clean() {
        problems.push(format!("verify: {:?}", report.problems));
    }
    let locks = store.locks().wait().unwrap();
    let (mut present, mut events_n, mut checkpoints_n, mut signals_n) = (0u64, 0u64, 0u64, 0u64);
    let mut payloads = BTreeSet::new();
    for t in 0..threads {
        let id = ThreadId::new(tid(t)).unwrap();
        let events = store.read_since(&id, Seq(0), READ_LIMIT_MAX).wait().unwrap_or_default();
        let filter = cairn::storage::CheckpointFilter {
            thread: Some(id.clone()),
            ..cairn::storage::CheckpointFilter::default()
        };
        let page = cairn::storage::Page { limit: READ_LIMIT_MAX, offset: 0 };
        let checkpoints = store.list_checkpoints(&filter, page).wait().unwrap().len() as u64;
        let signals = store.signals(&id, 0, READ_LIMIT_MAX).wait().unwrap().len() as u64;
        let held = locks.iter().filter(|l| l.owner == id.as_str()).count();
        if store.thread(&id).wait().unwrap().is_none() {
            if !events.is_empty() || checkpoints > 0 || signals > 0 || held > 0 {
                problems.push(format!(
                    "{id} is deleted, and {} events, {checkpoints} checkpoints, {signals} \
                     signals and {held} locks of it remain",
                    events.len()
                ));
            }
            continue;
        }
        present += 1;
        events_n += events.len() as u64;
        checkpoints_n += checkpoints;
        signals_n += signals;
        payloads.extend(events.iter().filter_map(|e| e.payload.as_ref().map(|p| p.hash)));
    }
    // The schedules' threads and the threads their ticks and triggers started.
    let page = cairn::storage::Page { limit: READ_LIMIT_MAX, offset: 0 };
    let all = store.list_threads(&cairn::storage::ThreadFilter::default(), page).wait().unwrap();
    let ours: BTreeSet<String> = (0..threads).map(tid).collect();
    for record in all.iter().filter(|r| !ours.contains(r.id.as_str())) {
        let id = &record.id;
        let events = store.read_since(id, Seq(0), READ_LIMIT_MAX).wait().unwrap();
        let filter = cairn::storage::CheckpointFilter {
            thread: Some(id.clone()),
            ..cairn::storage::CheckpointFilter::default()
        };
        present += 1;
        events_n += events.len() as u64;
        checkpoints_n += store.list_checkpoints(&filter, page).wait().unwrap().len() as u64;
        signals_n += store.signals(id, 0, READ_LIMIT_MAX).wait().unwrap().len() as u64;
        payloads.extend(events.iter().filter_map(|e| e.payload.as_ref().map(|p| p.hash)));
    }
    let want = (present, events_n, checkpoints_n, payloads.len() as u64, signals_n);
    let have = (report.threads, report.events, report.checkpoints, report.payloads, report.signals);
    if want != have {
        problems.push(format!(
            "the store holds (threads, events, checkpoints, payloads, signals) {have:?}, the \
             threads present {want:?}"
        ));
    }
    problems
}

/// Lock holding intervals of different threads that overlap, and locks left once every thread
/// ended.
fn lock_problems(store: &dyn Store, facts: &[Option<Facts>]) -> Vec<String> {
    let mut problems = Vec::new();
    let present = || facts.iter().enumerate().filter_map(|(t, f)| f.as_ref().map(|f| (t, f)));
    for (a, fa) in present() {
        for (b, fb) in present().filter(|(b, _)| *b > a) {
            for &(s1, e1) in &fa.held {
                for &(s2, e2) in &fb.held {
                    if s1 < e2 && s2 < e1 {
                        problems.push(format!(
                            "{} held {LOCK} over lsn {s1}..{e1}, {} over {s2}..{e2}",
                            tid(a),
                            tid(b)
                        ));
                    }
                }
            }
        }
    }
    let left: Vec<_> = store.locks().wait().unwrap();
    if !left.is_empty() {
        problems.push(format!("locks left after every thread ended: {left:?}"));
    }
    problems
}

/// Where a case's databases live: files, or databases of a PostgreSQL cluster.
pub(super) enum Db {
    File(PathBuf),
    #[cfg(feature = "postgres")]
    Pg(String),
}

/// Lease time of the engines on PostgreSQL (the database's clock): short, so that an engine
/// reopened after the crash takes the dead one's threads over quickly.
#[cfg(feature = "postgres")]
const PG_LEASE_TTL_MS: u64 = 500;

impl Db {
    fn open(&self, durability: Durability) -> Arc<dyn Store> {
        match self {
            Db::File(path) => {
                let options = cairn::storage::Options { durability, ..Default::default() };
                Arc::new(RedbStore::open(path, options).unwrap())
            }
            #[cfg(feature = "postgres")]
            Db::Pg(url) => Arc::new(cairn::storage::PgStore::connect(url, durability).unwrap()),
        }
    }

    /// The engine settings a backend needs (on a shared database: leases lapse on the
    /// database's clock, and work is found by looking for it).
    fn tune(&self, b: cairn::EngineBuilder) -> cairn::EngineBuilder {
        match self {
            Db::File(_) => b,
            #[cfg(feature = "postgres")]
            Db::Pg(_) => b.lease_ttl_ms(PG_LEASE_TTL_MS).poll_ms(50),
        }
    }
}

fn open_store(db: &Db) -> Arc<dyn Store> {
    db.open(Durability::Immediate)
}

/// Effects that ran more than once within one run (a memoised call re-executed).
fn duplicates(effects: &[String]) -> Vec<String> {
    let mut seen = BTreeSet::new();
    effects.iter().filter(|k| !seen.insert(*k)).cloned().collect()
}

/// A case's two databases (the uninterrupted run's and the crashed one's), fresh.
type NewDbs<'a> = &'a dyn Fn(&std::path::Path) -> (Db, Db);

fn one_case(
    plan: &Plan,
    crash_frac: f64,
    tally: &Tally,
    new_dbs: NewDbs<'_>,
) -> Result<(), TestCaseError> {
    let rt =
        tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().unwrap();
    rt.block_on(async {
        let fx = EffectLog::default();
        let signals = Arc::new(Signals::default());
        let gates = Arc::new(Gates::default());
        let wf = build(plan, &fx, &signals, &gates);
        let hooks = Hooks { signals: &signals, gates: &gates };
        let dir = tempfile::tempdir().unwrap();
        let threads = plan.threads.len();

        let (clean, crashed) = new_dbs(dir.path());
        // The uninterrupted run, with the same controls.
        let clock = ManualClock::new(CLOCK_START_MS);
        let untallied = Tally::default();
        let none = BTreeSet::new();
        let no_prior = BTreeMap::new();
        let case = Case { wf: &wf, plan, clock: &clock, hooks };
        let (appends, clean_acks) = run(&clean, case, None, &untallied, &none, &no_prior).await?;
        let baseline = fx.take();
        prop_assert!(duplicates(&baseline).is_empty(), "{:?} ran twice", duplicates(&baseline));
        let store = open_store(&clean);
        let expected: Vec<Option<Facts>> =
            (0..threads).map(|t| inspect(store.as_ref(), &wf, t)).collect();
        let problems = lock_problems(store.as_ref(), &expected);
        prop_assert!(problems.is_empty(), "uninterrupted: {:?}", problems);
        let left = leftovers(store.as_ref(), threads);
        prop_assert!(left.is_empty(), "uninterrupted: {:?}", left);
        let limits = queue::problems(plan, &expected, store.as_ref(), true);
        prop_assert!(limits.is_empty(), "uninterrupted: {:?}", limits);
        let scheduled =
            schedule::problems(&plan.schedules, store.as_ref(), &clean_acks, false, None);
        prop_assert!(scheduled.is_empty(), "uninterrupted: {:?}; plan {:?}", scheduled, plan);
        drop(store);
        let seen = gates.take_violations();
        prop_assert!(seen.is_empty(), "uninterrupted: {:?}", seen);
        for (t, f) in expected.iter().enumerate() {
            // Removed once ended: deleted by hand, or by the retention pass at the run's end.
            prop_assert_eq!(f.is_none(), plan.removable(t), "uninterrupted {} present", tid(t));
            let Some(f) = f else { continue };
            // A cancel in line may come just after the admission: Cancelled all the same.
            let in_line = plan.threads[t].queued.is_some_and(|q| q.in_line);
            let cancelled = in_line && f.view.status == ThreadStatus::Cancelled;
            let want = if plan.threads[t].cancel_at.is_some() || cancelled {
                ThreadStatus::Cancelled
            } else {
                ThreadStatus::Completed
            };
            prop_assert_eq!(f.view.status, want, "uninterrupted {}", tid(t));
            prop_assert!(f.problems.is_empty(), "uninterrupted {}: {:?}", tid(t), f.problems);
        }

        // Crash at a random append boundary, check nothing acknowledged is lost, resume.
        let clock = ManualClock::new(CLOCK_START_MS);
        let crash_after = ((appends as f64 * crash_frac) as i64).max(1);
        let case = Case { wf: &wf, plan, clock: &clock, hooks };
        let (_, acks) = run(&crashed, case, Some(crash_after), tally, &none, &no_prior).await?;
        let before_crash = fx.take();
        let store = open_store(&crashed);
        let mut recorded = BTreeSet::new();
        let mut lost_now = Vec::new();
        let mut gone = BTreeSet::new();
        // Threads Paused at the crash, with their last seq: they must stay Paused over the
        // reopen until the driver resumes them.
        let mut paused = Vec::new();
        for t in 0..threads {
            let id = ThreadId::new(tid(t)).unwrap();
            if let Some(r) =
                store.thread(&id).wait().unwrap().filter(|r| r.status == ThreadStatus::Paused)
            {
                paused.push((t, r.last.map_or(0, |b| b.seq.0)));
            }
            let facts = inspect(store.as_ref(), &wf, t);
            if let Some(f) = &facts {
                recorded.extend(f.recorded.iter().cloned());
            }
            let acked = acks.get(&tid(t)).cloned().unwrap_or_default();
            lost_now.extend(
                lost(&acked, facts.as_ref(), plan.removable(t))
                    .into_iter()
                    .map(|l| format!("{}: {l}", tid(t))),
            );
            if facts.is_none() && acked.started {
                // Deleted whole before the crash: done with (a start would make a new thread).
                gone.insert(t);
            }
        }
        // A crash inside a deletion leaves the thread whole (checked above: its log folds)
        // or gone, with nothing of it left.
        let left_at_crash = leftovers(store.as_ref(), threads);
        let scheduled_at_crash =
            schedule::problems(&plan.schedules, store.as_ref(), &acks, true, None);
        drop(store);
        if !plan.schedules.is_empty() {
            // A downtime: the reopened schedules catch up what they missed meanwhile.
            clock.advance_ms(plan.downtime_ms);
            tally.downtime_jumps.fetch_add(1, Ordering::SeqCst);
        }
        tally.lost.fetch_add(lost_now.len() as u64, Ordering::SeqCst);
        tally.removed_at_crash.fetch_add(gone.len() as u64, Ordering::SeqCst);
        let (_, resumed) = run(&crashed, case, None, tally, &gone, &acks).await?;
        let after = fx.take();
        for &(t, seq) in &paused {
            // Still Paused after the reopen: the driver found it so and resumed it from there
            // (recovery must not run it on its own).
            let at = resumed.get(&tid(t)).map(|a| a.resumed_at.clone()).unwrap_or_default();
            prop_assert!(
                at.first() == Some(&seq),
                "{} Paused at seq {} when the store died; resumed from {:?}",
                tid(t),
                seq,
                at
            );
            tally.paused_at_crash.fetch_add(1, Ordering::SeqCst);
        }

        tally.cases.fetch_add(1, Ordering::SeqCst);
        let mut repeated: Vec<String> =
            after.iter().filter(|k| recorded.contains(*k)).cloned().collect();
        repeated.extend(duplicates(&before_crash));
        repeated.extend(duplicates(&after));
        tally.repeated.fetch_add(repeated.len() as u64, Ordering::SeqCst);
        let store = open_store(&crashed);
        let got: Vec<Option<Facts>> =
            (0..threads).map(|t| inspect(store.as_ref(), &wf, t)).collect();
        tally.locks.fetch_add(got.iter().flatten().map(|f| f.locks).sum(), Ordering::SeqCst);
        // A tool call in flight at the crash counts against a tool-call budget (it may have
        // run), so the stop can come earlier than in the uninterrupted run: the budget events
        // of such threads are not compared, only how they end.
        let comparable = |facts: &[Option<Facts>]| -> Vec<Option<View>> {
            let mut views: Vec<Option<View>> =
                facts.iter().map(|f| f.as_ref().map(|f| f.view.clone())).collect();
            for (v, tp) in views.iter_mut().zip(&plan.threads) {
                if let Some(v) = v
                    && matches!(tp.budget, Some(Limit::ToolCalls(_)))
                {
                    v.budget_events.clear();
                }
            }
            views
        };
        for (g, e) in got.iter().zip(&expected) {
            if let (Some(g), Some(e)) = (g, e)
                && g.view.budget_events != e.view.budget_events
            {
                tally.budget_drift.fetch_add(1, Ordering::SeqCst);
            }
        }
        // A thread with a control in line may have been admitted before its driver looked in
        // one run and not in the other (or the cancel came after the admission, at another
        // step): its end is not compared when the runs differ (its other checks still run).
        let (mut got_views, mut want_views) = (comparable(&got), comparable(&expected));
        for t in 0..threads {
            if plan.threads[t].queued.is_some_and(|q| q.in_line) && got_views[t] != want_views[t] {
                tally.in_line_raced.fetch_add(1, Ordering::SeqCst);
                (got_views[t], want_views[t]) = (None, None);
            }
        }
        if got_views != want_views {
            tally.diverged.fetch_add(1, Ordering::SeqCst);
        }
        let ctx = format!("plan {plan:?} crash after {crash_after} of {appends} appends");
        prop_assert!(lost_now.is_empty(), "acknowledged but lost: {:?}; {}", lost_now, ctx);
        prop_assert!(left_at_crash.is_empty(), "after the crash: {:?}; {}", left_at_crash, ctx);
        prop_assert!(
            scheduled_at_crash.is_empty(),
            "schedules after the crash: {:?}; {}",
            scheduled_at_crash,
            ctx
        );
        let merged = schedule::merge(&acks, &resumed, plan.schedules.len());
        let scheduled =
            schedule::problems(&plan.schedules, store.as_ref(), &merged, false, Some(tally));
        prop_assert!(scheduled.is_empty(), "schedules: {:?}; {}", scheduled, ctx);
        let seen = gates.take_violations();
        prop_assert!(seen.is_empty(), "{:?}; {}", seen, ctx);
        let problems = lock_problems(store.as_ref(), &got);
        prop_assert!(problems.is_empty(), "{:?}; {}", problems, ctx);
        prop_assert_eq!(got_views, want_views, "{}", ctx);
        prop_assert!(repeated.is_empty(), "ran again: {:?}; {}", repeated, ctx);
        // The effects of a thread with a control in line depend on whether it was admitted
        // before its driver looked (none ran twice all the same: `repeated`).
        let in_line: Vec<String> = (0..threads)
            .filter(|&t| plan.threads[t].queued.is_some_and(|q| q.in_line))
            .map(|t| format!("{}:", tid(t)))
            .collect();
        let compared = |k: &String| !in_line.iter().any(|p| k.starts_with(p.as_str()));
        let all: BTreeSet<String> =
            before_crash.into_iter().chain(after).filter(compared).collect();
        let baseline: BTreeSet<String> = baseline.into_iter().filter(compared).collect();
        prop_assert_eq!(all, baseline, "the set of side effects differs; {}", ctx);
        for (t, f) in got.iter().enumerate() {
            let Some(f) = f else { continue };
            prop_assert!(f.problems.is_empty(), "{}: {:?}; {}", tid(t), f.problems, ctx);
            let once: BTreeSet<u64> = f.view.received.iter().copied().collect();
            prop_assert_eq!(
                once.len(),
                f.view.received.len(),
                "{} received twice; {}",
                tid(t),
                ctx
            );
            if f.view.status == ThreadStatus::Completed {
                let all: BTreeSet<u64> = (1..=f.inbox).collect();
                prop_assert_eq!(once, all, "{}: a signal never received; {}", tid(t), ctx);
            }
            tally.signals_received.fetch_add(f.view.received.len() as u64, Ordering::SeqCst);
        }
        let left = leftovers(store.as_ref(), threads);
        prop_assert!(left.is_empty(), "{:?}; {}", left, ctx);
        let limits = queue::problems(plan, &got, store.as_ref(), true);
        prop_assert!(limits.is_empty(), "{:?}; {}", limits, ctx);
        if plan.threads.iter().any(|t| t.queued.is_some()) {
            let (global, per_key) = queue::concurrency(plan, &got);
            let per_key = per_key.values().copied().max().unwrap_or(0);
            tally.queue_checks.fetch_add(1, Ordering::SeqCst);
            tally.max_running.fetch_max(global as u64, Ordering::SeqCst);
            tally.max_running_per_key.fetch_max(per_key as u64, Ordering::SeqCst);
            if global == plan.queue.global as usize {
                tally.reached_global.fetch_add(1, Ordering::SeqCst);
            }
            if per_key == plan.queue.per_key as usize {
                tally.reached_per_key.fetch_add(1, Ordering::SeqCst);
            }
            let admitted = (0..threads)
                .filter(|&t| plan.threads[t].queued.is_some())
                .filter(|&t| got[t].as_ref().is_some_and(|f| f.ran.is_some()))
                .count();
            tally.admitted.fetch_add(admitted as u64, Ordering::SeqCst);
        }
        Ok(())
    })
}

/// Runs the proptest with `cases` cases (a fixed, printed seed: a failure, even one the
/// shrinker cannot reduce, like a case that hangs, is replayed with
/// `CAIRN_CRASH_CONTROLS_SEED=<seed>`) and prints the summary line under `name`.
fn crash_with_controls(name: &str, cases: u32, new_dbs: NewDbs<'_>) {
    let config = ProptestConfig { cases, failure_persistence: None, ..ProptestConfig::default() };
    let tally = Tally::default();
    let seed: u64 = std::env::var("CAIRN_CRASH_CONTROLS_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_nanos() as u64)
        });
    let sweep = |seed: u64| {
        let mut seed_bytes = [0u8; 32];
        seed_bytes[..8].copy_from_slice(&seed.to_le_bytes());
        let rng = proptest::test_runner::TestRng::from_seed(
            proptest::test_runner::RngAlgorithm::ChaCha,
            &seed_bytes,
        );
        let mut runner = proptest::test_runner::TestRunner::new_with_rng(config.clone(), rng);
        runner
            .run(&(plan(), 0.0f64..1.0), |(plan, frac)| one_case(&plan, frac, &tally, new_dbs))
            .map_err(|e| match e {
                // The reason last as well: a CI log cut to its tail keeps it.
                proptest::test_runner::TestError::Fail(why, input) => {
                    format!("{why}\nminimal failing input: {input:#?}\nfailed: {why}")
                }
                other => other.to_string(),
            })
    };
    let mut result = sweep(seed);
    // The random cases of one sweep may miss a rare path (a CI sweep of 256 paused schedules 31
    // times and skipped no tick after a pause): another sweep of the same size, on the next
    // seed, goes on counting, at most twice. Every case of every sweep is checked in full.
    let mut sweeps = 1;
    while result.is_ok() && cases >= 64 && !uncovered(&tally).is_empty() && sweeps < 3 {
        result = sweep(seed.wrapping_add(sweeps));
        sweeps += 1;
    }
    let n = |c: &AtomicU64| c.load(Ordering::SeqCst);
    crate::common::report(&format!(
        "RELIABILITY {name} cases={} cancels={} inputs={} sleeps={} budgets={} pauses={} pauses_by_budget={} parked_pauses={} locks={} branch_controls={} signals_sent={} signals_received={} queued={} admitted={} in_line_cancels={} in_line_deletes={} in_line_raced={} dedup_hits={} queue_checks={} max_running={} max_running_per_key={} reached_global_limit={} reached_per_key_limit={} deletes={} retention_passes={} retention_deleted={} retention_kept_parked={} removed_at_crash={} crashes_in_removal={} paused_at_crash={} crashes_in_control={} cancel_early={} cancel_lost={} budget_races={} tool_budget_drift={} diverged={} repeated_effects={} lost_acked={} schedules={} schedule_rounds={} ticks_started={} catch_up_ticks={} ticks_skipped={} paused_skips={} triggered={} triggered_checked={} triggers_found_after_crash={} triggers_refused={} schedule_pauses={} schedule_resumes={} schedule_deletes={} schedules_ended={} clock_moves={} ticks_awaited={} downtime_jumps={} crashes_in_schedule={} schedule_continuations={}",
        n(&tally.cases),
        n(&tally.cancels),
        n(&tally.inputs),
        n(&tally.sleeps),
        n(&tally.budgets),
        n(&tally.pauses),
        n(&tally.pauses_by_budget),
        n(&tally.parked_pauses),
        n(&tally.locks),
        n(&tally.branch_controls),
        n(&tally.signals),
        n(&tally.signals_received),
        n(&tally.queued),
        n(&tally.admitted),
        n(&tally.in_line_cancels),
        n(&tally.in_line_deletes),
        n(&tally.in_line_raced),
        n(&tally.dedup_hits),
        n(&tally.queue_checks),
        n(&tally.max_running),
        n(&tally.max_running_per_key),
        n(&tally.reached_global),
        n(&tally.reached_per_key),
        n(&tally.deletes),
        n(&tally.retention_passes),
        n(&tally.retention_deleted),
        n(&tally.retention_kept_parked),
        n(&tally.removed_at_crash),
        n(&tally.crashes_in_removal),
        n(&tally.paused_at_crash),
        n(&tally.crashes_in_control),
        n(&tally.cancel_early),
        n(&tally.cancel_lost),
        n(&tally.budget_races),
        n(&tally.budget_drift),
        n(&tally.diverged),
        n(&tally.repeated),
        n(&tally.lost),
        n(&tally.schedules),
        n(&tally.schedule_rounds),
        n(&tally.ticks_started),
        n(&tally.catch_up_ticks),
        n(&tally.ticks_skipped),
        n(&tally.paused_skips),
        n(&tally.triggered),
        n(&tally.triggered_checked),
        n(&tally.triggers_found_after_crash),
        n(&tally.triggers_refused),
        n(&tally.schedule_pauses),
        n(&tally.schedule_resumes),
        n(&tally.schedule_deletes),
        n(&tally.schedules_ended),
        n(&tally.clock_moves),
        n(&tally.ticks_awaited),
        n(&tally.downtime_jumps),
        n(&tally.crashes_in_schedule),
        n(&tally.schedule_continuations)
    ));
    if let Err(e) = result {
        let last = seed.wrapping_add(sweeps - 1);
        panic!("{e}\nreplay with CAIRN_CRASH_CONTROLS_SEED={last}");
    }
    if n(&tally.cases) >= 64 {
        // A generator that stopped producing a control would leave its checks with nothing.
        let missed = uncovered(&tally);
        assert!(
            missed.is_empty(),
            "no case of {sweeps} sweeps from seed {seed} exercised {missed:?}"
        );
    }
}

/// The paths no case exercised yet.
fn uncovered(tally: &Tally) -> Vec<&'static str> {
    let n = |c: &AtomicU64| c.load(Ordering::SeqCst);
    let counters: [(&'static str, &AtomicU64); _] = [
        ("cancels", &tally.cancels),
        ("inputs", &tally.inputs),
        ("sleeps", &tally.sleeps),
        ("budgets", &tally.budgets),
        ("pauses", &tally.pauses),
        ("parked pauses", &tally.parked_pauses),
        ("locks", &tally.locks),
        ("branch controls", &tally.branch_controls),
        ("signals", &tally.signals),
        ("signals received", &tally.signals_received),
        ("deletes", &tally.deletes),
        ("retention passes", &tally.retention_passes),
        ("retention deletes", &tally.retention_deleted),
        ("retention passes beside a parked thread", &tally.retention_kept_parked),
        ("queued starts", &tally.queued),
        ("admissions", &tally.admitted),
        ("cancels in line", &tally.in_line_cancels),
        ("dedup probes", &tally.dedup_hits),
        ("the global limit reached", &tally.reached_global),
        ("a per-key limit reached", &tally.reached_per_key),
        ("schedules", &tally.schedules),
        ("schedule ticks started", &tally.ticks_started),
        ("schedule catch-up ticks", &tally.catch_up_ticks),
        ("ticks skipped by a catch-up policy", &tally.ticks_skipped),
        ("ticks skipped after a pause", &tally.paused_skips),
        ("schedule triggers", &tally.triggered),
        ("triggers of a deleted schedule", &tally.triggers_refused),
        ("schedule pauses", &tally.schedule_pauses),
        ("schedule resumes", &tally.schedule_resumes),
        ("schedule deletes", &tally.schedule_deletes),
        ("schedules past their end", &tally.schedules_ended),
        ("downtime jumps", &tally.downtime_jumps),
        ("crashes in a schedule's control", &tally.crashes_in_schedule),
        ("schedules continued as new", &tally.schedule_continuations),
    ];
    counters.iter().filter(|(_, c)| n(c) == 0).map(|(name, _)| *name).collect()
}

#[test]
fn engine_crash_with_controls_then_resume() {
    let files =
        |dir: &std::path::Path| (Db::File(dir.join("clean.db")), Db::File(dir.join("crashed.db")));
    crash_with_controls(
        "engine_crash_controls",
        cases_from_env("CAIRN_CRASH_CONTROLS_CASES", 256),
        &files,
    );
}

/// The same proptest on PostgreSQL: leases and locks timed by the database's clock, the
/// reopened engine taking the dead one's threads over once their leases lapse, its looks for
/// work going through the wake index.
#[cfg(feature = "postgres")]
#[test]
fn engine_crash_with_controls_then_resume_on_postgres() {
    let Some(cluster) =
        cairn_storage_testkit::pg_cluster::Cluster::start("engine_crash_with_controls_pg")
    else {
        return;
    };
    let databases =
        |_: &std::path::Path| (Db::Pg(cluster.new_database()), Db::Pg(cluster.new_database()));
    crash_with_controls(
        "engine_crash_controls_pg",
        cases_from_env("CAIRN_PG_CRASH_CONTROLS_CASES", 24),
        &databases,
    );
}
