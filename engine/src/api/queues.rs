//! Named queues (`docs/queues.md`): defining them, starting a thread in one, and the admitter
//! that moves waiting threads on as the limits allow.
//!
//! The engine decides nothing about limits: admission is a store write
//! ([`cairn_storage::QueueOp::Admit`]) that picks the threads and flips their status from
//! Queued to Created against the counts the store keeps, and the batch that ends a thread
//! releases its slot. The engine only asks (after a start on a queue, after a thread of its
//! own ends, when a rate window opens, and every `Config::poll_ms` for what other processes
//! and controls freed) and drives what it was given. So a crash anywhere leaves each thread
//! waiting or admitted, and an admitted thread is an ordinary Created thread that recovery
//! drives.

use cairn_dsl::DynWorkflow;
use cairn_storage::{
    Batch, Enqueue, Pending, QueueLimits, QueueOp, QueueState, ThreadId, ThreadStatus,
};

use super::engine::Engine;
use crate::config::StartOptions;
use crate::error::Error;
use crate::exec::drive::spawn_drive;
use crate::exec::start;
use crate::limits::ADMIT_PER_WRITE_MAX;

impl Engine {
    /// Defines queue `name` with `limits`, or replaces the limits of an existing one (its
    /// waiting and running threads are kept; new limits apply from the next admission). The
    /// builder's [`crate::EngineBuilder::queue`] does this at open.
    ///
    /// # Errors
    /// [`Error::Invalid`] for a bad name or a zero limit; storage errors.
    ///
    /// # Examples
    /// ```no_run
    /// # async fn run(engine: cairn::Engine) -> Result<(), cairn::Error> {
    /// use cairn::storage::QueueLimits;
    /// let limits = QueueLimits { concurrency_max: Some(4), ..QueueLimits::default() };
    /// engine.define_queue("emails", limits).await?;
    /// assert_eq!(engine.queues().await?[0].limits.concurrency_max, Some(4));
    /// # Ok(()) }
    /// ```
    pub async fn define_queue(&self, name: &str, limits: QueueLimits) -> Result<(), Error> {
        check_batch_size(&limits)?;
        self.define_queues(&[(name.to_string(), limits)]).await
    }

    pub(super) async fn define_queues(
        &self,
        queues: &[(String, QueueLimits)],
    ) -> Result<(), Error> {
        if queues.is_empty() {
            return Ok(());
        }
        for (_, limits) in queues {
            check_batch_size(limits)?;
        }
        let ops = queues
            .iter()
            .map(|(name, limits)| QueueOp::Define { name: name.clone(), limits: limits.clone() })
            .collect();
        self.write(Batch { queues: ops, ..Batch::default() }).await?;
        self.shell.admit.notify_one();
        Ok(())
    }

    /// Every queue of the store with its limits and its counts (running and waiting, in all and
    /// per key), by name.
    ///
    /// # Errors
    /// Storage errors.
    pub async fn queues(&self) -> Result<Vec<QueueState>, Error> {
        Ok(self.shell.store.queues().await?)
    }

    /// One admission pass: for each queue with waiting threads and room under its limits,
    /// admits (in the store) as many as the limits allow now and drives them. Returns the
    /// threads admitted. The background admitter runs this; call it to admit at once (after
    /// advancing a manual clock past a rate window, for instance).
    ///
    /// # Errors
    /// Storage errors.
    pub async fn admit_queued(&self) -> Result<Vec<ThreadId>, Error> {
        let workflows = self.workflow_ids();
        let mut admitted = Vec::new();
        let queues = self.shell.store.queues().await?;
        let waiting = queues.iter().any(|q| q.waiting > 0);
        self.shell.queue_waiting.store(waiting, std::sync::atomic::Ordering::Relaxed);
        for queue in queues {
            let now_ms = self.shell.clock.now_ms();
            let before = admitted.len() as u64;
            let batch_runs = if queue.limits.batches() {
                self.write_batch_runs(&queue, now_ms).await?
            } else {
                0
            };
            if batch_runs > 0 || may_admit(&queue, now_ms) {
                self.admit_from(&queue.name, now_ms, &workflows, &mut admitted).await?;
            }
            // The queue's gauges, from the counts the store keeps (so right after a restart too)
            // and this pass's admissions.
            let n = admitted.len() as u64 - before;
            let (waiting, running) = (queue.waiting.saturating_sub(n), queue.running + n);
            // A batch run ends its members and waits in their place.
            let waiting = waiting.saturating_sub(batch_runs as u64);
            self.shell.metrics.queue(&queue.name, waiting, running);
        }
        Ok(admitted)
    }

    /// Admits from `queue` as many threads as its limits allow now, and drives them.
    async fn admit_from(
        &self,
        queue: &str,
        now_ms: u64,
        workflows: &[String],
        admitted: &mut Vec<ThreadId>,
    ) -> Result<(), Error> {
        loop {
            let op = QueueOp::Admit {
                queue: queue.to_owned(),
                now_ms,
                max: ADMIT_PER_WRITE_MAX,
                workflows: workflows.to_vec(),
            };
            let batch = Batch { queues: vec![op], ..Batch::default() };
            let written = self.write(batch).await?;
            let n = written.admitted.len();
            for thread in written.admitted {
                spawn_drive(&self.shell, thread.clone(), "admitted");
                admitted.push(thread);
            }
            if n < ADMIT_PER_WRITE_MAX {
                return Ok(());
            }
        }
    }

    /// Runs admission passes in the background until the engine stops.
    pub(super) fn spawn_admitter(&self) {
        let engine = self.clone();
        let stopping = self.shell.tasks.stopping().clone();
        self.shell.tasks.spawn(async move {
            let poll = std::time::Duration::from_millis(engine.shell.config.poll_ms.max(1));
            let mut failing = crate::telemetry::repeated::Repeated::new("queue admission");
            loop {
                let admitted = engine.admit_queued().await;
                if admitted.is_ok() {
                    failing.passed();
                }
                let next_rate = match admitted {
                    // Nobody waits: no rate window to wake for (and nothing to read).
                    Ok(_)
                        if !engine
                            .shell
                            .queue_waiting
                            .load(std::sync::atomic::Ordering::Relaxed) =>
                    {
                        None
                    }
                    Ok(_) => engine.rate_opens_at().await,
                    Err(e) => {
                        failing.failed(&e);
                        None
                    }
                };
                let clock = engine.shell.clock.clone();
                let rate = async move {
                    match next_rate {
                        Some(at) => clock.sleep_until(at).await,
                        None => std::future::pending().await,
                    }
                };
                tokio::select! {
                    () = engine.shell.admit.notified() => {}
                    () = rate => {}
                    () = tokio::time::sleep(poll) => {}
                    () = stopping.cancelled() => return,
                }
            }
        });
    }

    /// When the soonest full rate window of a queue with waiting threads opens, a debounced
    /// start falls due or a batch window closes (engine clock).
    async fn rate_opens_at(&self) -> Option<u64> {
        let queues = self.shell.store.queues().await.ok()?;
        queues.iter().filter(|q| q.waiting > 0).filter_map(QueueState::next_due_at).min()
    }

    /// A thread's creation batch turned into a start on `options`' queue: the thread is created
    /// Queued and put in line in the same batch, so its creation and its place in line are durable
    /// together.
    pub(super) fn enqueued(mut batch: Batch, id: &ThreadId, options: &StartOptions) -> Batch {
        for record in &mut batch.threads {
            record.status = ThreadStatus::Queued;
        }
        let now_ms = batch.threads.first().map_or(0, |r| r.created_at_ms);
        let queue = options.queue.clone().unwrap_or_default();
        let key = options.queue_key.clone().unwrap_or_default();
        batch.queues.push(QueueOp::Enqueue(Enqueue {
            priority: options.priority,
            dedup: options.dedup_key.clone(),
            ..Enqueue::new(id.clone(), queue, key, now_ms)
        }));
        batch
    }

    /// Waits for the write of a start on a queue: the thread that answers the start is `id`,
    /// put in line (`true`) or created meanwhile by another start of the id, or the holder of
    /// its dedup key (`false`: the write was refused and wrote nothing).
    pub(super) async fn settle_queued(
        &self,
        wf: &DynWorkflow,
        id: &ThreadId,
        pending: Pending,
    ) -> Result<(ThreadId, bool), Error> {
        match pending.wait().await {
            Ok(_) => Ok((id.clone(), true)),
            Err(cairn_storage::Error::Duplicate { thread, .. }) => Ok((thread, false)),
            Err(cairn_storage::Error::GuardFailed { .. }) => {
                // Created meanwhile by another start of the id: the same answer as finding it.
                let existing = crate::exec::fetch::record(self.shell.store.as_ref(), id).await?;
                start::same_workflow(&existing, wf)?;
                Ok((id.clone(), false))
            }
            Err(e) => Err(e.into()),
        }
    }
}

/// Whether an admission write could admit anything from `queue` at `now_ms` (a read-only
/// check, so that a pass writes nothing for a queue that is full or empty).
fn may_admit(queue: &QueueState, now_ms: u64) -> bool {
    let mut q = queue.clone();
    q.forget_before(now_ms);
    let gathering = |key: &str| q.batching.get(key).map_or(0, |b| b.members.len() as u64);
    q.waiting > 0
        && q.has_room()
        && q.keys.iter().any(|(key, k)| {
            k.waiting > gathering(key) && q.key_has_room(key, k) && !q.debouncing(key, now_ms)
        })
}

/// Refuses a batch size one batch run cannot take.
fn check_batch_size(limits: &QueueLimits) -> Result<(), Error> {
    match limits.batch_max {
        Some(max) if max as usize > crate::limits::BATCH_RUN_MEMBERS_MAX => {
            Err(cairn_storage::Error::LimitExceeded {
                limit: "BATCH_RUN_MEMBERS_MAX",
                value: u64::from(max),
                max: crate::limits::BATCH_RUN_MEMBERS_MAX as u64,
            }
            .into())
        }
        _ => Ok(()),
    }
}
