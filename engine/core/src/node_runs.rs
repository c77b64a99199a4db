//! Every run of every node of a thread, folded from its log: what the seed documents call
//! `nodeResults`, with all runs rather than each node's latest (the snapshot's
//! `ThreadMeta::node_results` keeps the latest, bounded; this is the whole record).
//!
//! Pure: a fold over decoded events and the workflow (for node types and the nodes never
//! reached). A run is one attempt of one task: a retried node has one run per attempt, a node
//! in a loop one per step. Statuses: `running` (started, not ended), `completed`, `failed`,
//! `cancelled` (running, or due next, when the thread was cancelled or timed out), `pending`
//! (the next step's nodes of a thread that has not ended) and `skipped` (a node of a completed
//! thread that never ran: no branch led to it).

use std::collections::{BTreeMap, BTreeSet};

use cairn_dsl::{DynNodeKind, DynWorkflow, NodeError};
use cairn_storage::ThreadStatus;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::codec::Recorded;
use crate::event::{Body, TaskKey};

/// Where a run stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    /// Due in the thread's next step.
    Pending,
    /// Started, not ended.
    Running,
    /// Ended with an output.
    Completed,
    /// Ended with an error (retried or not).
    Failed,
    /// Never reached by a completed thread.
    Skipped,
    /// Running or due when the thread was cancelled or timed out.
    Cancelled,
}

/// What kind of node ran.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NodeType {
    /// A handler run once per activation.
    Task,
    /// One item of a map node.
    Map,
    /// A sub-workflow run as a child thread.
    Subgraph,
    /// A node the workflow does not have (a log of another version).
    Unknown,
}

/// One run of one node.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct NodeRun {
    /// The task (the node, and the item for a map node's run).
    pub task: TaskKey,
    /// The node's kind.
    pub node_type: NodeType,
    /// The step it ran in (for a pending run, the step it is due in; 0 for a skipped node).
    pub step: u64,
    /// 1-based attempt (0 for pending and skipped).
    pub attempt: u32,
    /// Where it stands.
    pub status: RunStatus,
    /// When it started (engine clock).
    pub started_at_ms: Option<u64>,
    /// When it ended.
    pub ended_at_ms: Option<u64>,
    /// How long it ran, for a run that ended.
    pub duration_ms: Option<u64>,
    /// What it produced: the update of a completed run (JSON of the workflow's update type).
    pub data: Option<Value>,
    /// Its error, for a failed run.
    pub error: Option<NodeError>,
    /// The seq of the event that last changed it (0 for pending and skipped).
    pub seq: u64,
}

/// Folds `events` (a thread's log from its first event, in order) into its node runs, in the
/// order they started, followed by the pending or skipped nodes.
pub fn node_runs(wf: &DynWorkflow, events: impl IntoIterator<Item = Recorded>) -> Vec<NodeRun> {
    let mut fold = Fold::new(wf);
    for rec in events {
        fold.apply(&rec);
    }
    fold.finish()
}

struct Fold<'a> {
    wf: &'a DynWorkflow,
    runs: Vec<NodeRun>,
    /// Task -> index in `runs` of its run that has not ended.
    open: BTreeMap<TaskKey, usize>,
    frontier: Vec<String>,
    steps: u64,
    status: ThreadStatus,
}

impl<'a> Fold<'a> {
    fn new(wf: &'a DynWorkflow) -> Self {
        Fold {
            wf,
            runs: Vec::new(),
            open: BTreeMap::new(),
            frontier: Vec::new(),
            steps: 0,
            status: ThreadStatus::Created,
        }
    }

    fn node_type(&self, node: &str) -> NodeType {
        match self.wf.node_id(node).map(|id| &self.wf.nodes()[id].kind) {
            Some(DynNodeKind::Task(_)) => NodeType::Task,
            Some(DynNodeKind::Map { .. }) => NodeType::Map,
            Some(DynNodeKind::Subgraph { .. }) => NodeType::Subgraph,
            _ => NodeType::Unknown,
        }
    }

    fn start(&mut self, step: u64, task: &TaskKey, attempt: u32, at: u64, seq: u64) -> usize {
        self.runs.push(NodeRun {
            task: task.clone(),
            node_type: self.node_type(&task.node),
            step,
            attempt,
            status: RunStatus::Running,
            started_at_ms: Some(at),
            ended_at_ms: None,
            duration_ms: None,
            data: None,
            error: None,
            seq,
        });
        let index = self.runs.len() - 1;
        self.open.insert(task.clone(), index);
        index
    }

    /// The open run of `task` at `attempt`, or a new one started at `started`.
    fn run_of(&mut self, step: u64, task: &TaskKey, attempt: u32, started: u64, seq: u64) -> usize {
        match self.open.remove(task) {
            Some(i) if self.runs[i].attempt == attempt => i,
            _ => {
                let i = self.start(step, task, attempt, started, seq);
                self.open.remove(task);
                i
            }
        }
    }

    fn apply(&mut self, rec: &Recorded) {
        let (seq, at) = (rec.bookmark.seq.0, rec.bookmark.at_ms);
        match &rec.body {
            Body::ThreadCreated { frontier, .. } => self.frontier.clone_from(frontier),
            Body::NodeStarted { step, task, attempt, .. } => {
                // A start logged again for the same attempt (re-run after a crash) is one run.
                let again = self.open.get(task).is_some_and(|&i| self.runs[i].attempt == *attempt);
                if !again {
                    self.start(*step, task, *attempt, at, seq);
                }
            }
            Body::NodeCompleted { step, task, attempt, update, duration_ms, .. } => {
                let started = at.saturating_sub(*duration_ms);
                let i = self.run_of(*step, task, *attempt, started, seq);
                let run = &mut self.runs[i];
                run.status = RunStatus::Completed;
                run.ended_at_ms = Some(at);
                run.duration_ms = Some(*duration_ms);
                run.data.clone_from(update);
                run.seq = seq;
            }
            Body::NodeFailed { step, task, attempt, error, .. } => {
                let i = self.run_of(*step, task, *attempt, at, seq);
                let run = &mut self.runs[i];
                run.status = RunStatus::Failed;
                run.ended_at_ms = Some(at);
                run.duration_ms = run.started_at_ms.map(|s| at.saturating_sub(s));
                run.error = Some(error.clone());
                run.seq = seq;
            }
            Body::StepCompleted { step, next, .. } => {
                self.steps = *step;
                self.frontier.clone_from(next);
            }
            Body::StatusChanged { to, .. } => {
                self.status = *to;
                if matches!(to, ThreadStatus::Cancelled | ThreadStatus::TimedOut) {
                    for (_, i) in std::mem::take(&mut self.open) {
                        let run = &mut self.runs[i];
                        run.status = RunStatus::Cancelled;
                        run.ended_at_ms = Some(at);
                        run.duration_ms = run.started_at_ms.map(|s| at.saturating_sub(s));
                        run.seq = seq;
                    }
                }
            }
            Body::RolledBack { snapshot, .. } => {
                // The thread goes on from the checkpoint's step and frontier; the runs between
                // stay on record, and those it left open end with it.
                self.open.clear();
                let meta = &snapshot["meta"];
                self.steps = meta["step"].as_u64().unwrap_or(self.steps);
                if let Some(frontier) = meta["frontier"].as_array() {
                    let names = frontier.iter().filter_map(Value::as_str).map(str::to_owned);
                    self.frontier = names.collect();
                }
            }
            _ => {}
        }
    }

    fn finish(mut self) -> Vec<NodeRun> {
        let due = match self.status {
            s if !s.is_terminal() => Some(RunStatus::Pending),
            ThreadStatus::Cancelled | ThreadStatus::TimedOut => Some(RunStatus::Cancelled),
            _ => None,
        };
        if let Some(status) = due {
            // Nodes of the open step that started already have their run.
            let open_step = self.steps + 1;
            let started: BTreeSet<String> = (self.runs.iter())
                .filter(|r| r.step == open_step)
                .map(|r| r.task.node.to_string())
                .collect();
            for node in std::mem::take(&mut self.frontier) {
                if !started.contains(&node) {
                    self.runs.push(idle(self.node_type(&node), node, open_step, status));
                }
            }
        }
        if self.status == ThreadStatus::Completed {
            let ran: BTreeSet<&str> = self.runs.iter().map(|r| &*r.task.node).collect();
            let never: Vec<String> = (self.wf.nodes().iter())
                .map(|n| n.name.clone())
                .filter(|n| !ran.contains(n.as_str()))
                .collect();
            for node in never {
                self.runs.push(idle(self.node_type(&node), node, 0, RunStatus::Skipped));
            }
        }
        self.runs
    }
}

fn idle(node_type: NodeType, node: String, step: u64, status: RunStatus) -> NodeRun {
    NodeRun {
        task: TaskKey::node(node),
        node_type,
        step,
        attempt: 0,
        status,
        started_at_ms: None,
        ended_at_ms: None,
        duration_ms: None,
        data: None,
        error: None,
        seq: 0,
    }
}
