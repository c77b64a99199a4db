//! The queue part of planning a batch (`crate::plan`): enqueue, admit, define, and the release
//! of the slot (or place in line) of every thread the batch ends. Both backends write what it
//! plans in the batch's transaction, so the counts admission decides against are the store's,
//! shared by every process on the database (`docs/queues.md`).
//!
//! Admission order (one decision per admitted thread, against the counts as the previous
//! decision left them):
//! 1. the global limit and the rate window must have room, else admission stops;
//! 2. each key with waiting threads and room under the per-key limit offers its head: its
//!    first waiting thread in rank order (highest priority, then oldest) that is Queued (not
//!    paused) and of a workflow the caller runs, looking at most `QUEUE_HEAD_SCAN_MAX` entries;
//! 3. the head with the highest priority wins; between equal priorities, on a queue whose
//!    fairness weights differ, the key with the lowest stride pass (`queue_fair.rs`: keys are
//!    served in proportion to their weights); then the key served least recently (round robin
//!    between keys: all a queue without weights looks at), then the oldest ticket.

use std::collections::BTreeMap;

use crate::plan::{cached, mark_dirty};

use crate::codec;
use crate::error::Error;
use crate::ids::ThreadId;
use crate::limits::QUEUE_HEAD_SCAN_MAX;
use crate::plan::{Plan, PlanState};
use crate::queue::{self, Enqueue, QueueMember, QueueOp, QueueState};
use crate::thread::ThreadStatus;

/// What queue planning reads of the stored state (inside the backend's write transaction), as
/// the batches before this one in the group left it. A backend shared by several processes
/// locks the queue's row when it reads it, so that one transaction at a time decides against
/// a queue's counts.
pub(crate) trait QueueReads {
    /// A stored queue (limits and counts), checked against its key, as the batches before this
    /// one in the group left it.
    fn queue(&mut self, name: &str) -> Result<Option<crate::queue::QueueState>, Error>;
    /// A thread's stored queue member record, checked against its key.
    fn queue_member(
        &mut self,
        thread: &ThreadId,
    ) -> Result<Option<crate::queue::QueueMember>, Error>;
    /// The first `limit` entries `(rank, thread)` of the waiting index under `(queue, key)`, in
    /// rank order.
    fn queue_waiting(
        &mut self,
        queue: &str,
        key: &str,
        limit: usize,
    ) -> Result<Vec<(u64, ThreadId)>, Error>;
    /// The thread holding `dedup` in `queue`, if any.
    fn queue_dedup(&mut self, queue: &str, dedup: &str) -> Result<Option<ThreadId>, Error>;
}

/// The queue writes of one plan, encoded: `None` removes.
#[derive(Default)]
pub(crate) struct QueueWrites {
    /// Queue records by name.
    pub(crate) queues: Vec<(String, Option<Vec<u8>>)>,
    /// Member records by thread.
    pub(crate) members: Vec<(ThreadId, Option<Vec<u8>>)>,
    /// Waiting-index entries `(queue, key, rank, thread)`: `true` puts, `false` removes, in order.
    pub(crate) waiting: Vec<(WaitKey, bool)>,
    /// Dedup-index entries `(queue, dedup, thread)`: `true` puts, `false` removes, in order.
    pub(crate) dedup: Vec<((String, String, ThreadId), bool)>,
}

/// A waiting-index key: queue, key, rank, thread.
pub(crate) type WaitKey = (String, String, u64, ThreadId);

/// What a plan has read and changed of the queues so far.
#[derive(Default)]
pub(crate) struct QueuePlan {
    queues: BTreeMap<String, Option<QueueState>>,
    members: BTreeMap<ThreadId, Option<QueueMember>>,
    dirty_queues: Vec<String>,
    dirty_members: Vec<ThreadId>,
    waiting: Vec<(WaitKey, bool)>,
    dedup: Vec<((String, String, ThreadId), bool)>,
}

impl QueuePlan {
    /// Encodes what changed, taking it out of this plan (a batch that touched no queue takes
    /// nothing, and its empty maps are dropped once, with the plan).
    pub(crate) fn finish(&mut self) -> Result<QueueWrites, Error> {
        let mut out = QueueWrites::default();
        if self.dirty_queues.is_empty()
            && self.dirty_members.is_empty()
            && self.waiting.is_empty()
            && self.dedup.is_empty()
        {
            return Ok(out); // most batches touch no queue
        }
        for name in std::mem::take(&mut self.dirty_queues) {
            let framed = match self.queues.remove(&name).flatten() {
                Some(q) => Some(codec::encode_queue(&q)?),
                None => None,
            };
            out.queues.push((name, framed));
        }
        for id in std::mem::take(&mut self.dirty_members) {
            let framed = match self.members.remove(&id).flatten() {
                Some(m) => Some(codec::encode_queue_member(&m)?),
                None => None,
            };
            out.members.push((id, framed));
        }
        out.waiting = std::mem::take(&mut self.waiting);
        out.dedup = std::mem::take(&mut self.dedup);
        Ok(out)
    }

    fn queue(
        &mut self,
        tables: &mut impl QueueReads,
        name: &str,
    ) -> Result<Option<QueueState>, Error> {
        Ok(cached(&mut self.queues, name, || tables.queue(name))?.clone())
    }

    fn put_queue(&mut self, q: QueueState) {
        mark_dirty(&mut self.dirty_queues, &q.name);
        self.queues.insert(q.name.clone(), Some(q));
    }

    fn member(
        &mut self,
        tables: &mut impl QueueReads,
        id: &ThreadId,
    ) -> Result<Option<QueueMember>, Error> {
        Ok(cached(&mut self.members, id, || tables.queue_member(id))?.clone())
    }

    fn set_member(&mut self, id: ThreadId, member: Option<QueueMember>) {
        mark_dirty(&mut self.dirty_members, &id);
        self.members.insert(id, member);
    }

    /// The holder of a dedup key as this plan sees it.
    fn dedup_holder(
        &mut self,
        tables: &mut impl QueueReads,
        queue: &str,
        dedup: &str,
    ) -> Result<Option<ThreadId>, Error> {
        let mut holder = tables.queue_dedup(queue, dedup)?;
        for ((q, d, thread), put) in &self.dedup {
            if q == queue && d == dedup {
                holder = put.then(|| thread.clone());
            }
        }
        Ok(holder)
    }

    /// Whether this plan removed (or added) a waiting entry: `Some(false)` removed.
    fn waiting_change(&self, key: &WaitKey) -> Option<bool> {
        self.waiting.iter().rev().find(|(k, _)| k == key).map(|(_, put)| *put)
    }
}

impl QueuePlan {
    /// Takes `thread` out of its queue, if it is in one.
    pub(crate) fn leave(
        &mut self,
        tables: &mut impl QueueReads,
        thread: &ThreadId,
    ) -> Result<(), Error> {
        let Some(member) = self.member(tables, thread)? else { return Ok(()) };
        let mut q = self
            .queue(tables, &member.queue)?
            .ok_or_else(|| missing_member(&member.queue, thread))?;
        let counts = q.key_mut(&member.key)?;
        if member.admitted_at_ms.is_some() {
            counts.running = counts.running.saturating_sub(1);
            q.running = q.running.saturating_sub(1);
        } else {
            counts.waiting = counts.waiting.saturating_sub(1);
            q.waiting = q.waiting.saturating_sub(1);
            let key = (member.queue.clone(), member.key.clone(), member.rank, thread.clone());
            self.waiting.push((key, false));
            q.forget_waiting(&member.key, thread);
        }
        q.drop_idle_key(&member.key);
        if let Some(dedup) = &member.dedup {
            let key = (member.queue.clone(), dedup.clone(), thread.clone());
            self.dedup.push((key, false));
        }
        self.set_member(thread.clone(), None);
        self.put_queue(q);
        Ok(())
    }
}

impl Plan {
    /// Plans one queue op.
    pub(crate) fn queue_op(
        &mut self,
        tables: &mut impl PlanState,
        op: QueueOp,
    ) -> Result<(), Error> {
        match op {
            QueueOp::Define { name, limits } => {
                let q = match self.queue_plan.queue(tables, &name)? {
                    Some(mut q) => {
                        q.limits = limits;
                        q
                    }
                    None => QueueState::new(name, limits),
                };
                self.queue_plan.put_queue(q);
                Ok(())
            }
            QueueOp::Enqueue(e) => self.enqueue(tables, e),
            QueueOp::Admit { queue, now_ms, max, workflows } => {
                self.admit(tables, &queue, now_ms, max, &workflows)
            }
        }
    }

    fn enqueue(&mut self, tables: &mut impl PlanState, e: Enqueue) -> Result<(), Error> {
        let mut q =
            self.queue_plan.queue(tables, &e.queue)?.ok_or(Error::UnknownQueue(e.queue.clone()))?;
        match self.thread(tables, &e.thread)?.as_ref().map(|s| s.record.status) {
            Some(ThreadStatus::Queued) => {}
            other => {
                return Err(Error::Invalid {
                    detail: format!(
                        "thread {} is enqueued with status {}, not queued (create it Queued in \
                         the same batch)",
                        e.thread,
                        other.map_or("absent".to_string(), |s| s.to_string())
                    ),
                });
            }
        }
        if self.queue_plan.member(tables, &e.thread)?.is_some() {
            return Err(Error::Invalid {
                detail: format!("thread {} is in a queue already", e.thread),
            });
        }
        if let Some(dedup) = &e.dedup
            && let Some(thread) = self.queue_plan.dedup_holder(tables, &e.queue, dedup)?
        {
            return Err(Error::Duplicate { queue: e.queue, dedup: dedup.clone(), thread });
        }
        q.forget_before(e.now_ms);
        if !e.continuation {
            flow_on_enqueue(&mut q, &e)?;
        }
        q.last_ticket = q
            .last_ticket
            .checked_add(1)
            .ok_or_else(|| crate::plan::exhausted("queue ticket", None))?;
        let rank = queue::rank(e.priority, q.last_ticket);
        let counts = q.key_mut(&e.key)?;
        counts.waiting += 1;
        q.waiting += 1;
        if let Some(dedup) = &e.dedup {
            self.queue_plan.dedup.push(((e.queue.clone(), dedup.clone(), e.thread.clone()), true));
        }
        self.queue_plan
            .waiting
            .push(((e.queue.clone(), e.key.clone(), rank, e.thread.clone()), true));
        let member = QueueMember {
            thread: e.thread.clone(),
            queue: e.queue,
            key: e.key,
            rank,
            dedup: e.dedup,
            admitted_at_ms: None,
            batch_of: e.batch_of,
        };
        self.queue_plan.set_member(e.thread, Some(member));
        self.queue_plan.put_queue(q);
        Ok(())
    }

    fn admit(
        &mut self,
        tables: &mut impl PlanState,
        name: &str,
        now_ms: u64,
        max: usize,
        workflows: &[String],
    ) -> Result<(), Error> {
        let mut q = self.queue_plan.queue(tables, name)?.ok_or(Error::UnknownQueue(name.into()))?;
        q.forget_before(now_ms);
        let mut passed = std::collections::BTreeSet::new();
        let mut admitted = 0;
        let weighted = q.weighted().cloned();
        while admitted < max && q.has_room() {
            // (rank, (pass, served_at), key, thread); the pass is 0 without weights.
            let mut best: Option<(u64, (u64, u64), String, ThreadId)> = None;
            let keys: Vec<(String, crate::queue::KeyCounts)> =
                q.keys.iter().map(|(k, c)| (k.clone(), *c)).collect();
            for (key, counts) in keys {
                if counts.waiting == 0
                    || !q.key_has_room(&key, &counts)
                    || passed.contains(&key)
                    || q.debouncing(&key, now_ms)
                {
                    continue;
                }
                let Some((rank, thread)) = self.head(tables, &q, &key, workflows)? else {
                    passed.insert(key);
                    continue;
                };
                let pass = weighted.as_ref().map_or(0, |_| q.fair.pass_of(&key));
                let turn = (pass, counts.served_at);
                let better = best.as_ref().is_none_or(|(b_rank, b_turn, _, _)| {
                    let (p, bp) = (queue::priority_of(rank), queue::priority_of(*b_rank));
                    p > bp || (p == bp && (turn, rank) < (*b_turn, *b_rank))
                });
                if better {
                    best = Some((rank, turn, key, thread));
                }
            }
            let Some((rank, _, key, thread)) = best else { break };
            if let Some(fair) = &weighted {
                q.fair.served(&key, fair.weight_of(&key));
            }
            self.queue_plan
                .waiting
                .push(((name.to_string(), key.clone(), rank, thread.clone()), false));
            let mut member = self
                .queue_plan
                .member(tables, &thread)?
                .ok_or_else(|| missing_member(name, &thread))?;
            member.admitted_at_ms = Some(now_ms);
            self.queue_plan.set_member(thread.clone(), Some(member));
            q.admitted += 1;
            q.waiting = q.waiting.saturating_sub(1);
            q.running += 1;
            if !q.limits.rate_drops {
                q.count_start(&key, now_ms)?;
            }
            q.forget_waiting(&key, &thread);
            let served = q.admitted;
            let counts = q.key_mut(&key)?;
            counts.waiting = counts.waiting.saturating_sub(1);
            counts.running += 1;
            counts.served_at = served;
            let mut stored = self
                .thread(tables, &thread)?
                .clone()
                .ok_or_else(|| Error::UnknownThread(thread.clone()))?;
            stored.record.status = ThreadStatus::Created;
            stored.record.updated_at_ms = now_ms;
            self.set_thread(thread.clone(), stored);
            self.appended.admitted.push(thread);
            admitted += 1;
        }
        self.queue_plan.put_queue(q);
        Ok(())
    }

    /// The first waiting thread of `key` that may be admitted now, as this plan sees the index
    /// (on a batching queue, a start waiting to be gathered into a batch run is not one).
    fn head(
        &mut self,
        tables: &mut impl PlanState,
        q: &QueueState,
        key: &str,
        workflows: &[String],
    ) -> Result<Option<(u64, ThreadId)>, Error> {
        let queue = q.name.as_str();
        let gathering = q.batching.get(key);
        // Entries this plan removed are still in the table: read past them.
        let removed = self
            .queue_plan
            .waiting
            .iter()
            .filter(|((q, k, _, _), put)| q == queue && k == key && !put)
            .count();
        let entries = tables.queue_waiting(queue, key, QUEUE_HEAD_SCAN_MAX + removed)?;
        let mut looked = 0;
        for (rank, thread) in entries {
            let wait_key = (queue.to_string(), key.to_string(), rank, thread.clone());
            if self.queue_plan.waiting_change(&wait_key) == Some(false) {
                continue;
            }
            looked += 1;
            if looked > QUEUE_HEAD_SCAN_MAX {
                break;
            }
            let Some(stored) = self.thread(tables, &thread)?.as_ref() else {
                return Err(missing_member(queue, &thread));
            };
            if stored.record.status == ThreadStatus::Queued
                && workflows.iter().any(|w| **w == *stored.record.workflow.id)
                && !gathering.is_some_and(|b| b.members.contains(&thread))
            {
                return Ok(Some((rank, thread)));
            }
        }
        Ok(None)
    }

    /// Releases the queue place of every thread this batch ends: an admitted one's slot, a
    /// waiting one's place in line, and its dedup key. Called once the batch's records are
    /// planned.
    pub(crate) fn release_ended(&mut self, tables: &mut impl PlanState) -> Result<(), Error> {
        let ended: Vec<ThreadId> = self
            .dirty_threads
            .iter()
            .filter(|id| {
                let stored = self.threads.get(*id).and_then(|s| s.as_ref().as_ref());
                stored.is_some_and(|s| s.record.status.is_terminal())
            })
            .cloned()
            .collect();
        for id in ended {
            self.queue_plan.leave(tables, &id)?;
        }
        Ok(())
    }
}

/// The flow control of an enqueue (`docs/queues.md`), on the queue as the plan sees it: a
/// start over a dropping rate is refused; a debounced start must supersede the key's waiting
/// start as the caller read it, and becomes it; a start on a batching queue joins its key's
/// gathering starts; a batch run must take the first gathering starts of its key.
fn flow_on_enqueue(q: &mut QueueState, e: &Enqueue) -> Result<(), Error> {
    let moved =
        |detail: String| Error::QueueMoved { queue: e.queue.clone(), key: e.key.clone(), detail };
    if !e.batch_of.is_empty() {
        let gathering = q.batching.get(&e.key).map_or(&[][..], |b| b.members.as_slice());
        if !gathering.starts_with(&e.batch_of) {
            return Err(moved("the batch's starts are not the key's first waiting ones".into()));
        }
        // They leave the line with their cancellation, in this batch (`leave`).
        return Ok(());
    }
    if e.supersedes.is_some() && q.limits.debounce_ms.is_none() {
        return Err(Error::Invalid { detail: format!("queue {} does not debounce", e.queue) });
    }
    q.accept_start(&e.key, e.now_ms)?;
    if let Some(quiet) = q.limits.debounce_ms {
        let waiting = q.debounced.get(&e.key).map(|d| &d.thread);
        if waiting != e.supersedes.as_ref() {
            return Err(moved(format!(
                "its waiting start is {waiting:?}, the start supersedes {:?}",
                e.supersedes
            )));
        }
        let due_ms = e.now_ms.saturating_add(quiet);
        let entry = crate::queue::Debounced { thread: e.thread.clone(), due_ms };
        q.debounced.insert(e.key.clone(), entry);
    }
    if q.limits.batches() {
        let waiting: usize = q.batching.values().map(|b| b.members.len()).sum();
        crate::limits::check(
            "QUEUE_BATCH_WAITING_MAX",
            waiting + 1,
            crate::limits::QUEUE_BATCH_WAITING_MAX,
        )?;
        let gathering = q
            .batching
            .entry(e.key.clone())
            .or_insert_with(|| crate::queue::Batching { members: Vec::new(), since_ms: e.now_ms });
        gathering.members.push(e.thread.clone());
    }
    Ok(())
}

fn missing_member(queue: &str, thread: &ThreadId) -> Error {
    Error::Corrupted {
        table: codec::table::QUEUE_MEMBERS,
        thread: Some(thread.clone()),
        seq: None,
        detail: format!("queue {queue} lists thread {thread}, which has no record or member"),
    }
}
