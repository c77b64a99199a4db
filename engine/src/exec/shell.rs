//! What the exec layer runs on: the store, the clock, the coordinator, the registered
//! workflows, the settings and the engine's task tracker, built by the API when the engine
//! opens and handed to each runner. Tasks of a thread get less: their `ThreadEnv` (`env.rs`).

use std::collections::HashSet;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};

use cairn_storage::{Store, ThreadId};
use tokio::sync::Semaphore;

use super::registry::Registry;
use crate::clock::Clock;
use crate::config::Config;
use crate::coord::Coordinator;
use crate::tasks::Tasks;
use crate::telemetry::metrics::Metrics;

/// A hook called after every acknowledged step (test harnesses, the demo's crash switch).
pub type StepHook = Arc<dyn Fn(&ThreadId, u64, u64) + Send + Sync>;

/// Called once a runner has durably recorded that a thread failed, before anyone waiting on the
/// thread is told (the debug layer's `export_on_failure` policy). It must not fail the thread:
/// it reports its own errors itself.
/// The runner awaits the future it returns (its reads are the store's async reads).
pub(crate) type FailureHook =
    Arc<dyn Fn(&Arc<Shell>, &ThreadId) -> futures::future::BoxFuture<'static, ()> + Send + Sync>;

/// Called by a health pass's policy ([`crate::Engine::act_on_health`]) for every stuck thread it
/// names, before the policy's own action: a notifier (a page, a chat message, a ticket). It
/// reports its own errors itself.
pub(crate) type StuckHook = Arc<
    dyn Fn(&Arc<Shell>, &crate::telemetry::StuckThread) -> futures::future::BoxFuture<'static, ()>
        + Send
        + Sync,
>;

/// The exec layer's services.
pub(crate) struct Shell {
    pub store: Arc<dyn Store>,
    /// The read-only view of the store for the tools (`sealing/view.rs`): never read by the
    /// engine itself.
    pub view: crate::sealing::SealedView,
    pub clock: Arc<dyn Clock>,
    pub coord: Arc<dyn Coordinator>,
    pub tasks: Tasks,
    pub config: Config,
    pub registry: Registry,
    /// This engine instance's lease owner name.
    pub owner: std::sync::Arc<str>,
    /// Ids and seeds the engine makes.
    pub ids: Ids,
    /// Steps acknowledged, and the hook told of each.
    pub acks: Arc<StepAcks>,
    /// Threads checked against this process's code (`resume_check.rs`).
    pub verified: Verified,
    /// Threads driven at once.
    pub permits: Arc<Semaphore>,
    /// Threads with a drive queued or running here (`drive.rs` `spawn_drive`).
    pub queued: Arc<Queued>,
    /// What to do when a runner fails a thread.
    pub on_failure: Option<FailureHook>,
    /// Who to tell about a stuck thread.
    pub on_stuck: Option<StuckHook>,
    /// The engine's metric handles.
    pub metrics: Metrics,
    /// The report of the latest retention pass run in the background (`api/retention.rs`).
    pub retention: tokio::sync::watch::Sender<crate::config::RetentionReport>,
    /// Wakes the queue admitter (`api/queues.rs`): a thread ended or was queued here.
    pub admit: tokio::sync::Notify,
    /// Whether the admitter's last look found threads waiting in a queue: only then may a
    /// thread's end free a slot somebody waits for (otherwise the admitter's poll finds what
    /// other processes queue, and a start here wakes it itself).
    pub queue_waiting: std::sync::atomic::AtomicBool,
    /// Runnable threads seen without a lease, and since when (`api/recover.rs`).
    pub orphans: Orphans,
    /// The live streams of threads driven or read here (`streams.rs`).
    pub streams: super::streams::StreamHub,
}

/// When this engine first saw each runnable thread without a lease, in this process's real
/// time: on a shared database such a thread is left to the engine that made it runnable for
/// a grace, timed here so that neither an engine's clock (a test's manual one, or a skewed
/// one) nor another engine's can stretch or skip it.
#[derive(Debug, Default)]
pub(crate) struct Orphans(Mutex<std::collections::HashMap<ThreadId, std::time::Instant>>);

impl Orphans {
    /// Whether `thread` has been seen without a lease for `grace` or longer (its first sighting
    /// starts the count).
    pub fn waited(&self, thread: &ThreadId, grace: std::time::Duration) -> bool {
        let mut seen = self.0.lock().unwrap_or_else(PoisonError::into_inner);
        if seen.len() >= crate::limits::ORPHANS_TRACKED_MAX && !seen.contains_key(thread) {
            seen.clear();
        }
        let since = *seen.entry(thread.clone()).or_insert_with(std::time::Instant::now);
        since.elapsed() >= grace
    }

    /// Forgets `thread` (taken over, or no longer runnable).
    pub fn forget(&self, thread: &ThreadId) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).remove(thread);
    }
}

/// How many drives of each thread are queued or running in this engine.
#[derive(Debug, Default)]
pub(crate) struct Queued(Mutex<std::collections::HashMap<ThreadId, usize>>);

impl Queued {
    /// Counts one more drive of `thread` until the returned guard drops.
    pub fn enter(self: &Arc<Self>, thread: &ThreadId) -> QueuedGuard {
        *self
            .0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .entry(thread.clone())
            .or_default() += 1;
        QueuedGuard(self.clone(), thread.clone())
    }

    /// Whether a drive of `thread` is queued or running.
    pub fn contains(&self, thread: &ThreadId) -> bool {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).contains_key(thread)
    }
}

/// One counted drive; uncounted when dropped (also when its task is dropped by a crash).
pub(crate) struct QueuedGuard(Arc<Queued>, ThreadId);

impl Drop for QueuedGuard {
    fn drop(&mut self) {
        let mut map = (self.0).0.lock().unwrap_or_else(PoisonError::into_inner);
        if let Some(n) = map.get_mut(&self.1) {
            *n -= 1;
            if *n == 0 {
                map.remove(&self.1);
            }
        }
    }
}

/// The engine's random stream (SplitMix64) for the ids and seeds it makes.
pub(crate) struct Ids {
    /// The configured seed, if any (a seeded engine makes the same ids run after run).
    configured: Option<u64>,
    /// The seed of node randomness for threads created before seeds were recorded in the log.
    pub seed: u64,
    state: Mutex<u64>,
}

impl Ids {
    /// A stream from `seed`; `configured` says whether the user chose it. `history` (the
    /// store's last lsn when the engine opened) is mixed into a configured seed's stream: one
    /// seed gives the same ids on the same history (run after run, from an empty database), and
    /// new ones on a database it wrote to before (a reopened seeded engine drew the ids of its
    /// previous life again, and a start without an id answered with that life's first thread).
    pub fn new(seed: u64, configured: bool, history: u64) -> Self {
        // splitmix(0) is 0: an empty database keeps the seed's stream as it is.
        let state = if configured { seed ^ splitmix(history) } else { seed };
        Self { configured: configured.then_some(seed), seed, state: Mutex::new(state) }
    }

    /// The seed recorded in a new thread's `ThreadCreated` event: the engine's own seed when
    /// one was configured (a seeded engine draws the same values run after run), else the next
    /// number of the stream.
    pub fn thread_seed(&self) -> u64 {
        self.configured.unwrap_or_else(|| self.random_u64())
    }

    /// The next number of the stream.
    pub fn random_u64(&self) -> u64 {
        let mut s = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        *s = s.wrapping_add(0x9E37_79B9_7F4A_7C15);
        splitmix(*s)
    }

    /// A fresh 128-bit id as 32 hex digits.
    pub fn new_id(&self) -> String {
        format!("{:016x}{:016x}", self.random_u64(), self.random_u64())
    }
}

/// SplitMix64's output function.
pub(crate) fn splitmix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Counts acknowledged steps and calls the step hook.
#[derive(Default)]
pub(crate) struct StepAcks {
    count: AtomicU64,
    hook: RwLock<Option<StepHook>>,
    /// Runners stopped because their write was refused as another owner's thread (fenced).
    fenced: AtomicU64,
}

impl StepAcks {
    /// Counts an acknowledged step of `thread` and calls the hook.
    pub fn acknowledged(&self, thread: &ThreadId, step: u64) {
        let total = self.count.fetch_add(1, Ordering::SeqCst) + 1;
        let hook = self.hook.read().unwrap_or_else(PoisonError::into_inner).clone();
        if let Some(hook) = hook {
            hook(thread, step, total);
        }
    }

    /// Steps acknowledged so far.
    pub fn count(&self) -> u64 {
        self.count.load(Ordering::SeqCst)
    }

    /// Counts a runner fenced off its thread.
    pub fn fenced(&self) {
        self.fenced.fetch_add(1, Ordering::SeqCst);
    }

    /// Runners fenced so far.
    pub fn fenced_count(&self) -> u64 {
        self.fenced.load(Ordering::SeqCst)
    }

    /// Replaces the hook.
    pub fn set_hook(&self, hook: StepHook) {
        *self.hook.write().unwrap_or_else(PoisonError::into_inner) = Some(hook);
    }
}

/// Unfinished threads this instance created or checked against its code: code cannot change
/// inside one process. An entry goes when its thread ends, so the set is bounded by the live
/// threads; parked threads keep theirs, so an entry is 128 bits of a hash of the thread's id
/// (16 bytes in the table, where the id itself took about 70 with its allocation). Two ids of
/// one process sharing a hash would take about 2^64 threads.
#[derive(Debug, Default)]
pub(crate) struct Verified(Mutex<HashSet<u128>>);

impl Verified {
    pub fn contains(&self, thread: &ThreadId) -> bool {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).contains(&Self::key(thread))
    }

    pub fn insert(&self, thread: &ThreadId) {
        self.0.lock().unwrap_or_else(PoisonError::into_inner).insert(Self::key(thread));
    }

    /// Forgets `thread` once it has ended (it will not be driven again).
    pub fn forget(&self, thread: &ThreadId) {
        let key = Self::key(thread);
        self.0.lock().unwrap_or_else(PoisonError::into_inner).remove(&key);
    }

    /// The first 128 bits of the BLAKE3 hash of the id.
    fn key(thread: &ThreadId) -> u128 {
        let hash = blake3::hash(thread.as_str().as_bytes());
        let mut first = [0u8; 16];
        first.copy_from_slice(&hash.as_bytes()[..16]);
        u128::from_le_bytes(first)
    }
}
