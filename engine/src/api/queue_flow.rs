//! Flow control on queues (`docs/queues.md`): debounced starts and batch runs.
//!
//! The store decides (`storage/src/plan_queue.rs`); the engine builds the writes it checks.
//! A **debounced start** reads its key's waiting start from the queue's record and writes, in
//! one batch, that thread's end (cancelled, labelled `superseded_by`) and its own creation,
//! put in line to be admitted after the quiet period; the store refuses the batch
//! (`QueueMoved`, or a failed status guard) when the waiting start is another by then, and the
//! start reads again, at most `DEBOUNCE_ATTEMPTS_MAX` times. A **batch run** is written by the
//! admitter when a key's gathering starts are due: in one batch, a new thread of their workflow
//! whose input is the list of their inputs, put in line on the same queue and key, and each
//! member's end (cancelled, labelled `batched_into`). So a crash leaves a member either waiting
//! or taken by exactly one batch run, never both.

use cairn_storage::{Batch, QueueOp, QueueState, ThreadId, ThreadRecord, ThreadStatus};
use serde_json::Value;

use super::engine::Engine;
use super::handle::{BATCHED_INTO_LABEL, SUPERSEDED_BY_LABEL, ThreadHandle};
use crate::config::StartOptions;
use crate::core::event::Body;
use crate::error::Error;
use crate::exec::{fetch, parked};
use crate::limits::{BATCH_RUN_MEMBERS_MAX, DEBOUNCE_ATTEMPTS_MAX};

impl Engine {
    /// Whether queue `name` debounces its starts (`false` for a queue nobody defined: the
    /// start is refused by the store as for any queue).
    pub(super) async fn debounces(&self, name: &str) -> Result<bool, Error> {
        let queues = self.shell.store.queues().await?;
        Ok(queues.iter().any(|q| q.name == name && q.limits.debounce_ms.is_some()))
    }

    /// A start on a debounced queue: it supersedes its key's waiting start in the same write.
    pub(super) async fn start_debounced(
        &self,
        workflow: &str,
        input: Value,
        options: StartOptions,
    ) -> Result<ThreadHandle, Error> {
        let queue = options.queue.clone().unwrap_or_default();
        let key = options.queue_key.clone().unwrap_or_default();
        let mut last = None;
        for _ in 0..DEBOUNCE_ATTEMPTS_MAX {
            let state = self.queue_state(&queue).await?;
            let waiting = state.debounced.get(&key).map(|d| d.thread.clone());
            let prepared = self.prepare_start(workflow, input.clone(), options.clone()).await?;
            let id = prepared.id.clone();
            let Some(mut batch) = prepared.batch else {
                return Ok(ThreadHandle::new(self.clone(), id));
            };
            for op in &mut batch.queues {
                if let QueueOp::Enqueue(e) = op {
                    e.supersedes.clone_from(&waiting);
                }
            }
            let old = match &waiting {
                Some(old) => Some(fetch::record(self.shell.store.as_ref(), old).await?),
                None => None,
            };
            if let Some(old) = &old {
                let why = format!("debounced: superseded by {id}");
                end_taken(&mut batch, old.clone(), SUPERSEDED_BY_LABEL, &id, &why, self.now())?;
            }
            let pending = self.shell.store.append_async(batch).await?;
            match pending.wait().await {
                Ok(_) => {
                    if let Some(old) = old {
                        self.shell.coord.status_changed(&old.id, ThreadStatus::Cancelled).await;
                    }
                    self.shell.admit.notify_one();
                    return Ok(ThreadHandle::new(self.clone(), id));
                }
                Err(cairn_storage::Error::Duplicate { thread, .. }) => {
                    return Ok(ThreadHandle::new(self.clone(), thread));
                }
                Err(e @ cairn_storage::Error::QueueMoved { .. }) => last = Some(e),
                Err(e @ cairn_storage::Error::GuardFailed { .. }) => {
                    if self.shell.store.thread(&id).await?.is_some() {
                        // Created meanwhile by another start of the id.
                        return Ok(ThreadHandle::new(self.clone(), id));
                    }
                    last = Some(e);
                }
                Err(e) => return Err(e.into()),
            }
        }
        let e = last.expect("DEBOUNCE_ATTEMPTS_MAX > 0: the loop ran and refused each attempt");
        Err(e.into())
    }

    /// The stored queue `name`.
    async fn queue_state(&self, name: &str) -> Result<QueueState, Error> {
        let queues = self.shell.store.queues().await?;
        let found = queues.into_iter().find(|q| q.name == name);
        found.ok_or_else(|| cairn_storage::Error::UnknownQueue(name.to_string()).into())
    }

    fn now(&self) -> u64 {
        self.shell.clock.now_ms()
    }

    /// Writes the batch runs of `queue` whose starts are due at `now_ms`: one per due key, of
    /// the key's first gathering starts of one workflow this engine runs. Returns how many it
    /// wrote; a key whose starts moved meanwhile is left to the next pass.
    pub(super) async fn write_batch_runs(
        &self,
        queue: &QueueState,
        now_ms: u64,
    ) -> Result<usize, Error> {
        let mut written = 0;
        for key in queue.batches_due(now_ms) {
            let Some(gathering) = queue.batching.get(&key) else { continue };
            let take = queue.limits.batch_size().min(BATCH_RUN_MEMBERS_MAX);
            let members: Vec<ThreadId> = gathering.members.iter().take(take).cloned().collect();
            if self.write_batch_run(&queue.name, &key, members, now_ms).await? {
                written += 1;
            }
        }
        Ok(written)
    }

    /// One batch run of `members` (the leading ones of one workflow); `false` when they moved
    /// since the queue was read, or their workflow is not this engine's.
    async fn write_batch_run(
        &self,
        queue: &str,
        key: &str,
        members: Vec<ThreadId>,
        now_ms: u64,
    ) -> Result<bool, Error> {
        let store = self.shell.store.as_ref();
        let mut records: Vec<ThreadRecord> = Vec::with_capacity(members.len());
        for id in &members {
            let record = match fetch::record(store, id).await {
                Ok(record) => record,
                // Deleted since the queue was read (its delete took it out of line): the next
                // pass reads the queue again.
                Err(Error::UnknownThread(_)) => return Ok(false),
                Err(e) => return Err(e),
            };
            if records.first().is_some_and(|first| first.workflow != record.workflow) {
                break;
            }
            records.push(record);
        }
        let Some(first) = records.first() else { return Ok(false) };
        let Ok(wf) = self.shell.registry.workflow_for(first) else { return Ok(false) };
        let mut inputs = Vec::with_capacity(records.len());
        for record in &records {
            inputs.push(created_input(self, &record.id).await?);
        }
        let id = ThreadId::new(self.shell.ids.new_id())?;
        // The highest priority: ahead of the key's starts still gathering, which admission
        // passes over (at most `QUEUE_HEAD_SCAN_MAX` of them).
        let options = StartOptions::id(id.to_string()).on_queue(queue).key(key).priority(u8::MAX);
        let prepared = self.prepare_start(wf.id(), Value::Array(inputs), options).await?;
        let Some(mut batch) = prepared.batch else { return Ok(false) };
        for op in &mut batch.queues {
            if let QueueOp::Enqueue(e) = op {
                e.batch_of = records.iter().map(|r| r.id.clone()).collect();
            }
        }
        for record in &records {
            let why = format!("batched into {id}");
            end_taken(&mut batch, record.clone(), BATCHED_INTO_LABEL, &id, &why, now_ms)?;
        }
        let pending = self.shell.store.append_async(batch).await?;
        match pending.wait().await {
            Ok(_) => {
                for record in &records {
                    self.shell.coord.status_changed(&record.id, ThreadStatus::Cancelled).await;
                }
                tracing::debug!(queue, key, run = %id, members = records.len(), "batch run");
                Ok(true)
            }
            Err(
                cairn_storage::Error::QueueMoved { .. } | cairn_storage::Error::GuardFailed { .. },
            ) => Ok(false),
            Err(e) => Err(e.into()),
        }
    }
}

/// Adds to `batch` the end of a waiting start another start took over (`by`): cancelled,
/// labelled `label` = `by`, with `why` recorded, guarded by its status as read.
fn end_taken(
    batch: &mut Batch,
    mut record: ThreadRecord,
    label: &str,
    by: &ThreadId,
    why: &str,
    now: u64,
) -> Result<(), Error> {
    let from = record.status;
    record.labels.insert(label.to_string(), by.to_string());
    let to = crate::core::status::transition(from, crate::core::status::Transition::Cancel)
        .map_err(|source| Error::Transition { thread: record.id.to_string(), source })?;
    let body = Body::StatusChanged { from, to, reason: why.to_string() };
    let end = parked::move_batch(record, to, &[body], now)?;
    batch.events.extend(end.events);
    batch.threads.extend(end.threads);
    batch.guards.extend(end.guards);
    batch.wakes.extend(end.wakes);
    Ok(())
}

/// The input `thread` was created on (its `thread_created` event).
async fn created_input(engine: &Engine, thread: &ThreadId) -> Result<Value, Error> {
    let store = engine.shell.store.as_ref();
    let first = store.read_range(thread, cairn_storage::Seq(1), cairn_storage::Seq(1)).await?;
    let event = first.into_iter().next().ok_or_else(|| Error::UnknownThread(thread.to_string()))?;
    match fetch::decode(store, event).await?.body {
        Body::ThreadCreated { input, .. } => Ok(input),
        _ => Err(Error::Record {
            thread: thread.to_string(),
            seq: 1,
            detail: "its first event is not thread_created".into(),
        }),
    }
}
