//! A thread's acknowledger: waits for the batches its runner handed to storage, in submission
//! order, checks the seqs storage assigned, and reports each closed step as soon as it is
//! durable.
//!
//! It runs in the runner's own task, polled beside the runner ([`Acknowledger::beside`]), not
//! as a task of its own: the writer's answer then wakes the one task that waits for it (and
//! none at all while the runner is computing ahead), where a separate acknowledger was woken by
//! the runner's every hand-over and by every answer, and woke the runner in turn when it
//! settled. A step is still reported once its commit is durable, not when the runner next
//! looks: while the runner awaits anything (a node, a tool, a timer), the task is woken by the
//! answer and the acknowledger is polled first.
//!
//! The runner hands its batches over through a queue both hold ([`HandedOver`]), not a channel:
//! a hand-over wakes nothing, since the runner hands over only while its task polls it, and
//! [`Acknowledger::beside`] takes up what it handed over in that same poll.
//!
//! On a store whose queueing never waits (a file's writer), the runner's batches are not even
//! queued to storage one by one: they are deferred, and handed to storage together when the
//! task is about to wait (its poll ends: a node awaits, the runner settles, it is done), or when
//! a task's write must follow them ([`HandedOver::flush`]). One hand-over wakes the writer once,
//! where each batch queued alone woke it (and a new thread's creation woke it, for the writer to
//! sleep again until the runner's batches came). Nothing waits on a deferred batch: it is in no
//! commit yet, and the runner's settle flushes before it waits.

use std::collections::VecDeque;
use std::future::Future;
use std::pin::{Pin, pin};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::Poll;

use std::time::Instant;

use cairn_storage::{Batch, Pending, Store, ThreadId};
use tokio::sync::watch;

use super::shell::StepAcks;
use crate::telemetry::metrics::Metrics;

/// One submitted batch and what the runner predicted for it.
pub(crate) struct InFlight {
    /// The storage ticket.
    pub pending: Pending,
    /// The seq the runner gave the batch's first event.
    pub first_seq: u64,
    /// The step this batch closes, reported to the step hook once it is durable.
    pub step: Option<u64>,
    /// When it was submitted (its commit latency is measured from here).
    pub at: std::time::Instant,
}

/// What the acknowledger has seen durable.
#[derive(Debug, Clone, Default)]
pub(crate) struct Acked {
    /// Batches durable, counted from the first.
    pub batches: u64,
    /// The first failure: the batches after it were rejected (or never reached the disk), so
    /// the runner's context is ahead of the log and every later settle reports it.
    pub failed: Option<cairn_storage::Error>,
}

/// [`Acked`] as the acknowledger updates it and the pipeline waits on it, in the runner's task.
///
/// A `watch` channel did this before: its every send woke eight lists of waiters (tokio's
/// `BigNotify`), about 450 instructions a batch with nobody waiting. This is one lock and one
/// list: [`AckState::update`] bumps a version and notifies [`AckState::wait_for`]'s waiters,
/// which register before they look, so no update is missed. Once the acknowledger is gone
/// ([`AckState::close`]), waiters are told so.
#[derive(Default)]
pub(crate) struct AckState {
    acked: Mutex<Acked>,
    /// Updates so far (what [`Published`] compares to see whether anything changed).
    version: AtomicU64,
    closed: AtomicBool,
    changed: tokio::sync::Notify,
}

/// The acknowledger is gone ([`AckState::close`]) before what was waited for was seen.
#[derive(Debug)]
pub(crate) struct AckClosed;

impl AckState {
    fn lock(&self) -> std::sync::MutexGuard<'_, Acked> {
        self.acked.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// What has been seen so far.
    pub fn get(&self) -> Acked {
        self.lock().clone()
    }

    /// Whether a batch has failed.
    pub fn failed(&self) -> Option<cairn_storage::Error> {
        self.lock().failed.clone()
    }

    fn version(&self) -> u64 {
        self.version.load(Ordering::Acquire)
    }

    /// Changes what was seen and wakes every waiter.
    fn update(&self, change: impl FnOnce(&mut Acked)) {
        change(&mut self.lock());
        self.version.fetch_add(1, Ordering::AcqRel);
        self.changed.notify_waiters();
    }

    /// The acknowledger is gone: waiters stop waiting.
    fn close(&self) {
        self.closed.store(true, Ordering::Release);
        self.changed.notify_waiters();
    }

    /// Waits until `ready` holds of what was seen, and returns it.
    ///
    /// # Errors
    /// [`AckClosed`] once the acknowledger is gone with `ready` never seen to hold.
    pub async fn wait_for(
        &self,
        mut ready: impl FnMut(&Acked) -> bool,
    ) -> Result<Acked, AckClosed> {
        self.wait_until(|| {
            let acked = self.lock();
            ready(&acked).then(|| acked.clone())
        })
        .await
    }

    /// Waits until `ready()` holds, looking again at every change of what was seen.
    ///
    /// # Errors
    /// [`AckClosed`] once the acknowledger is gone with `ready()` never seen to hold.
    pub async fn wait_until<T>(
        &self,
        mut ready: impl FnMut() -> Option<T>,
    ) -> Result<T, AckClosed> {
        // Most waits are over at once (a runner's pipeline has room): looked at first without
        // registering, which takes the waiters' lock twice.
        if let Some(out) = ready() {
            return Ok(out);
        }
        loop {
            let notified = self.changed.notified();
            let mut notified = pin!(notified);
            // Registered before looking again: an update after the look wakes this wait.
            notified.as_mut().enable();
            if let Some(out) = ready() {
                return Ok(out);
            }
            if self.closed.load(Ordering::Acquire) {
                return Err(AckClosed);
            }
            notified.await;
        }
    }
}

/// The batches handed over by a runner that its acknowledger has not taken up yet, and those
/// it deferred (not queued to storage yet).
pub(crate) struct HandedOver {
    queue: Mutex<Queue>,
    /// Held from taking the deferred batches to handing them over, so that hand-overs reach
    /// storage in the order the batches were deferred.
    deferred: Mutex<KeptBack>,
    /// Where deferred batches go; `None`: nothing is deferred (see [`HandedOver::defers`]).
    store: Option<Arc<dyn Store>>,
}

/// The deferred batches and, beside them, what each one's [`InFlight`] is to say.
struct KeptBack {
    /// Handed to storage out of this vector, which keeps its capacity for the runner's next ones.
    batches: Vec<Batch>,
    /// `(first_seq, step, at)` of each batch, in the same order.
    meta: Vec<(u64, Option<u64>, Instant)>,
    /// When the oldest batch was made, by the engine's clock ([`Deferred::at_ms`]).
    oldest_ms: u64,
}

/// Batches a runner has in flight at most before the queue grows (a short thread's creation,
/// steps and end are handed over together).
const HANDED_OVER_CAPACITY: usize = 16;

#[derive(Default)]
struct Queue {
    batches: VecDeque<InFlight>,
    /// The acknowledger found no batch at its last look, and waits for the next hand-over.
    idle: bool,
}

/// What the acknowledger has seen durable, as published to waiters outside the runner's task
/// ([`super::pipeline::Pipeline::durable_through`]: `start`, waiting for the creation). While
/// the runner runs, it is published as each of the task's polls ends; once the runner is done,
/// by its caller ([`Published::publish`], at the latest when this is dropped), right after the
/// thread's end is published and before anything that waits on storage: `start`'s caller,
/// woken once, then finds the thread's end as well (a short thread's creation, steps and end
/// are in one commit), and is never held by a store that does not answer.
pub(crate) struct Published {
    tx: Option<watch::Sender<Acked>>,
    seen: Arc<AckState>,
    /// The version of `seen` last published.
    version: u64,
}

impl Published {
    /// Publishes what the acknowledger has seen, waking waiters only if it changed.
    pub fn publish(&mut self) {
        let Some(tx) = &self.tx else { return };
        // Nothing acknowledged since the last look (one atomic load: this runs at every poll's
        // end).
        let version = self.seen.version();
        if version == self.version {
            return;
        }
        self.version = version;
        let now = self.seen.get();
        tx.send_if_modified(|p| {
            let changed = p.batches != now.batches || p.failed.is_some() != now.failed.is_some();
            *p = now;
            changed
        });
    }
}

impl Drop for Published {
    fn drop(&mut self) {
        self.publish();
    }
}

/// A batch the runner made and storage has not been given yet, with what its [`InFlight`] is
/// to say.
pub(crate) struct Deferred {
    pub batch: Batch,
    pub first_seq: u64,
    pub step: Option<u64>,
    /// When it was made (its commit latency is measured from here).
    pub at: Instant,
    /// The same by the engine's clock (what [`DEFER_MAX_MS`] is counted on).
    pub at_ms: u64,
}

/// The longest (by the engine's clock, in ms) a runner that computes on without waiting keeps
/// its batches back before the next one it makes goes with them: its steps are not
/// acknowledged before they reach storage, so the delay is bounded, by this plus one step's
/// computation (a node that neither awaits nor returns holds them as it holds its thread).
/// Counted in whole ms, so a batch waits between 1 and 2 ms before it counts as due.
pub(crate) const DEFER_MAX_MS: u64 = 2;

impl HandedOver {
    /// A queue; batches are deferred for `store` if it is given (a store whose queueing never
    /// waits), else handed over one by one as they come.
    pub fn new(store: Option<Arc<dyn Store>>) -> HandedOver {
        let batches = VecDeque::with_capacity(HANDED_OVER_CAPACITY);
        let queue = Mutex::new(Queue { batches, idle: false });
        // Room for as many as a short thread defers at once (grown a batch at a time, its
        // vectors were copied three times over).
        let room = if store.is_some() { HANDED_OVER_CAPACITY } else { 0 };
        let kept = KeptBack {
            batches: Vec::with_capacity(room),
            meta: Vec::with_capacity(room),
            oldest_ms: 0,
        };
        HandedOver { queue, deferred: Mutex::new(kept), store }
    }

    fn queue(&self) -> std::sync::MutexGuard<'_, Queue> {
        self.queue.lock().unwrap_or_else(PoisonError::into_inner)
    }

    fn deferred(&self) -> std::sync::MutexGuard<'_, KeptBack> {
        self.deferred.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Whether batches are deferred (then [`HandedOver::defer`] takes them).
    pub fn defers(&self) -> bool {
        self.store.is_some()
    }

    /// Keeps `batch` back until the next [`HandedOver::flush`]; hands it over at once with the
    /// others if the oldest was made [`DEFER_MAX_MS`] or more before it.
    pub fn defer(&self, batch: Deferred) {
        let mut deferred = self.deferred();
        let due = if deferred.batches.is_empty() {
            deferred.oldest_ms = batch.at_ms;
            false
        } else {
            batch.at_ms.saturating_sub(deferred.oldest_ms) >= DEFER_MAX_MS
        };
        deferred.batches.push(batch.batch);
        deferred.meta.push((batch.first_seq, batch.step, batch.at));
        if due {
            self.hand_over(deferred);
        }
    }

    /// Hands the deferred batches to storage in one hand-over and over to the acknowledger.
    pub fn flush(&self) {
        let deferred = self.deferred();
        if !deferred.batches.is_empty() {
            self.hand_over(deferred);
        }
    }

    fn hand_over(&self, mut deferred: std::sync::MutexGuard<'_, KeptBack>) {
        let Some(store) = &self.store else { return };
        let KeptBack { batches, meta, .. } = &mut *deferred;
        let pending = store.append_all(batches);
        let mut queue = self.queue();
        for (pending, (first_seq, step, at)) in pending.into_iter().zip(meta.drain(..)) {
            queue.batches.push_back(InFlight { pending, first_seq, step, at });
        }
    }

    /// Batches handed over or deferred and not taken up yet.
    pub fn in_flight(&self) -> usize {
        let deferred = self.deferred().batches.len();
        self.len() + deferred
    }

    /// Hands `batch` over (see [`Acknowledger::beside`] for who takes it up, and when).
    pub fn push(&self, batch: InFlight) {
        self.queue().batches.push_back(batch);
    }

    /// Batches handed over and not taken up yet.
    pub fn len(&self) -> usize {
        self.queue().batches.len()
    }

    /// The next batch handed over, if any.
    fn take(&self) -> Option<InFlight> {
        let mut queue = self.queue();
        let batch = queue.batches.pop_front();
        queue.idle = batch.is_none();
        batch
    }

    /// Whether the acknowledger waits for a hand-over that came since its last look.
    fn came_while_idle(&self) -> bool {
        let queue = self.queue();
        queue.idle && !queue.batches.is_empty()
    }
}

/// The acknowledger of one thread's pipeline: the receiving end of its batches in flight.
pub(crate) struct Acknowledger {
    pub(super) acks: Arc<StepAcks>,
    pub(super) metrics: Metrics,
    pub(super) thread: ThreadId,
    pub(super) handed: Arc<HandedOver>,
    /// What it has seen, closed when it is dropped.
    pub(super) acked: Arc<AckState>,
    /// What `acked` says, published to waiters outside the runner's task once the task's poll
    /// ends (see [`Acknowledger::beside`]); taken by `beside`.
    pub(super) published: Option<watch::Sender<Acked>>,
}

impl Drop for Acknowledger {
    fn drop(&mut self) {
        self.acked.close();
    }
}

impl Acknowledger {
    /// Runs `work` (the thread's runner, or what drives it) and acknowledges the pipeline's
    /// batches beside it, in the same task; once `work` is done, waits for the batches it left
    /// in flight (a runner stopped by an error may leave some), so that whoever waits for one
    /// learns its outcome. Returns `work`'s output and what is left to publish to waiters
    /// outside the task, published when the caller drops it. `work` is pinned where the caller
    /// made it: a runner's future is several KiB, not to be moved into this one.
    pub async fn beside<W: Future>(mut self, mut work: Pin<&mut W>) -> (W::Output, Published) {
        let handed = self.handed.clone();
        let seen = self.acked.clone();
        let mut published = Published { tx: self.published.take(), seen, version: 0 };
        let closing = AtomicBool::new(false);
        let mut acking = pin!(self.acknowledge(&closing));
        let mut acking_done = false;
        let out = std::future::poll_fn(|cx| {
            // First: a step that became durable is reported before the runner goes on.
            if !acking_done && acking.as_mut().poll(cx).is_ready() {
                acking_done = true;
            }
            let out = work.as_mut().poll(cx);
            // The task waits now (or the runner is done): what it deferred goes to storage.
            handed.flush();
            // Then what the runner handed over as it ran: taken up in this same poll (its
            // commit's answer wakes the task), so a hand-over needs no wake of its own.
            if !acking_done && handed.came_while_idle() && acking.as_mut().poll(cx).is_ready() {
                acking_done = true;
            }
            // Published once the poll is over, not batch by batch: the runner, polled after
            // the acknowledger, went on in this same poll; a runner done is published by
            // its caller (see `Published`).
            if out.is_pending() {
                published.publish();
            }
            out
        })
        .await;
        // Nothing is handed over after the runner: what is queued now is all there is. The same
        // acknowledgement goes on to its end: it may be waiting for a batch it took up (a new
        // one would not see that batch, and whoever waits for it would wait forever).
        closing.store(true, Ordering::Relaxed);
        if !acking_done {
            acking.await;
        }
        (out, published)
    }

    /// Waits for the batches in order until one fails, or (once `closing` is set: the runner
    /// is done) none is left.
    async fn acknowledge(&mut self, closing: &AtomicBool) {
        if self.acked.failed().is_some() {
            return;
        }
        let handed = self.handed.clone();
        let handed = &handed;
        let next = || {
            std::future::poll_fn(move |_| match handed.take() {
                Some(batch) => Poll::Ready(Some(batch)),
                None if closing.load(Ordering::Relaxed) => Poll::Ready(None),
                // Polled again by `beside` once the runner hands a batch over.
                None => Poll::Pending,
            })
        };
        while let Some(batch) = next().await {
            match batch.pending.wait().await {
                Ok(appended) => {
                    // A continue-as-new's successor, created in the thread's last batch, has
                    // seqs 1 and 2, below any batch's first seq here: not this thread's.
                    let own = appended.bookmarks.iter().filter(|b| b.seq.0 >= batch.first_seq);
                    for (i, b) in own.enumerate() {
                        // The runner is the thread's only writer while it holds the lease, and
                        // each batch is guarded by the seq it expects: any other seq is a bug.
                        assert_eq!(
                            b.seq.0,
                            batch.first_seq + i as u64,
                            "seq predicted by the runner"
                        );
                    }
                    self.metrics.commit(batch.at.elapsed());
                    if let Some(step) = batch.step {
                        self.acks.acknowledged(&self.thread, step);
                    }
                    self.acked.update(|a| a.batches += 1);
                }
                Err(e) => {
                    self.acked.update(|a| a.failed = Some(e));
                    return;
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::{Context, Wake, Waker};
    use std::time::Duration;

    use cairn_storage::Appended;
    use tokio::sync::oneshot;

    use super::*;

    #[derive(Default)]
    struct Wakes(AtomicUsize);

    impl Wake for Wakes {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    /// An acknowledger of thread `t` that defers nothing, its hand-over queue, and what it
    /// publishes.
    fn acknowledger() -> (Acknowledger, Arc<HandedOver>, Arc<AckState>) {
        let handed = Arc::new(HandedOver::new(None));
        let seen = Arc::new(AckState::default());
        let acknowledger = Acknowledger {
            acks: Arc::new(StepAcks::default()),
            metrics: Metrics::global(Duration::from_secs(1)),
            thread: ThreadId::new("t").unwrap(),
            handed: handed.clone(),
            acked: seen.clone(),
            published: None,
        };
        (acknowledger, handed, seen)
    }

    /// The runner's task is woken by the commit's answer only: the hand-over of the batch is
    /// taken up in the poll that made it (a channel woke the task once more per batch).
    #[test]
    fn a_batch_handed_over_as_the_runner_runs_wakes_nothing() {
        let (acknowledger, handed, seen) = acknowledger();
        let (answer, pending) = oneshot::channel();
        let mut runner = pin!(async {
            let pending = Pending::new(pending);
            handed.push(InFlight { pending, first_seq: 1, step: Some(1), at: Instant::now() });
            seen.wait_for(|a| a.batches == 1).await.is_ok()
        });
        let mut both = pin!(acknowledger.beside(runner.as_mut()));
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(both.as_mut().poll(&mut cx).is_pending());
        assert_eq!(wakes.0.load(Ordering::SeqCst), 0, "the hand-over woke the task");
        answer.send(Ok(Appended::default())).unwrap();
        assert_eq!(wakes.0.load(Ordering::SeqCst), 1, "the answer woke the task");
        let Poll::Ready((acked, _published)) = both.as_mut().poll(&mut cx) else {
            panic!("the batch is not acknowledged");
        };
        assert!(acked, "the batch is acknowledged");
    }

    /// A runner that ends (stopped by an error, say) while its acknowledger waits for a batch
    /// it took up: that batch's answer is still waited for and published. The wait used to be
    /// dropped with the batch, and whoever waited for the batch (`start`, for a creation)
    /// waited forever.
    #[test]
    fn a_runner_ending_while_its_batch_is_waited_for_leaves_the_batch_acknowledged() {
        let (acknowledger, handed, seen) = acknowledger();
        let (answer, pending) = oneshot::channel();
        let mut pending = Some(Pending::new(pending));
        // Hands its batch over in its first poll, and ends in its second.
        let mut runner = pin!(std::future::poll_fn(|cx| match pending.take() {
            Some(pending) => {
                handed.push(InFlight { pending, first_seq: 1, step: None, at: Instant::now() });
                cx.waker().wake_by_ref();
                Poll::Pending
            }
            None => Poll::Ready(()),
        }));
        let mut both = pin!(acknowledger.beside(runner.as_mut()));
        let waker = Waker::from(Arc::new(Wakes::default()));
        let mut cx = Context::from_waker(&waker);
        assert!(both.as_mut().poll(&mut cx).is_pending(), "the batch is taken up");
        assert!(both.as_mut().poll(&mut cx).is_pending(), "the runner ended; its batch is not");
        answer.send(Ok(Appended::default())).unwrap();
        assert!(both.as_mut().poll(&mut cx).is_ready());
        assert_eq!(seen.get().batches, 1, "the batch is acknowledged");
    }
    /// A wait registered before an update is woken by it and sees it; one that never sees
    /// what it waits for ends when the acknowledger is gone.
    #[test]
    fn a_wait_sees_the_update_it_waits_for_and_ends_when_the_acknowledger_is_gone() {
        let state = AckState::default();
        let mut two = pin!(state.wait_for(|a| a.batches >= 2));
        let mut never = pin!(state.wait_until(|| None::<()>));
        let wakes = Arc::new(Wakes::default());
        let waker = Waker::from(wakes.clone());
        let mut cx = Context::from_waker(&waker);
        assert!(two.as_mut().poll(&mut cx).is_pending());
        assert!(never.as_mut().poll(&mut cx).is_pending());
        state.update(|a| a.batches += 1);
        assert_eq!(wakes.0.load(Ordering::SeqCst), 2, "both waits are woken");
        assert!(two.as_mut().poll(&mut cx).is_pending(), "one batch is not two");
        state.update(|a| a.batches += 1);
        let Poll::Ready(Ok(seen)) = two.as_mut().poll(&mut cx) else { panic!("not woken") };
        assert_eq!(seen.batches, 2);
        assert!(never.as_mut().poll(&mut cx).is_pending());
        state.close();
        assert!(matches!(never.as_mut().poll(&mut cx), Poll::Ready(Err(AckClosed))));
    }
}
