//! Planning one [`Batch`] against the state before it, for any backend.
//!
//! *Plan* reads the current state (including earlier batches of the same group commit, which
//! the plan keeps), checks every guard, lock, lease and thread, assigns seqs, lsns and
//! checkpoint ids, and encodes every record, writing nothing: any failure rejects only this
//! batch. The backend then writes the plan (redb: `redb/apply.rs`; PostgreSQL: `pg/write.rs`).
//! One planner means both backends agree on what a batch means, byte for byte.

use std::collections::BTreeMap;

use crate::batch::{Appended, Batch, Guard, LeaseOp, LockOp};
use crate::checkpoint::CheckpointInfo;
use crate::codec::{self, StoredThread, table};
use crate::correlation::CorrelationEntry;
use crate::error::Error;
use crate::event::Event;
use crate::ids::{Bookmark, CheckpointId, Lsn, PayloadRef, Seq, ThreadId};
use crate::lock::LockRecord;
use crate::lsns::SEQ_CHUNK_LEN;
use crate::lsns::SeqChunk;
use crate::signal::{NewSignal, Signal};
use crate::thread::{Lease, ThreadRecord};

/// What a plan reads of the stored state (inside the backend's write transaction).
pub(crate) trait PlanState: crate::plan_queue::QueueReads {
    /// A stored thread record and its seq-index tail, checked against its key.
    fn stored_thread(&mut self, id: &ThreadId) -> Result<Option<StoredThread>, Error>;
    /// A stored lock, checked against its key.
    fn lock(&mut self, name: &str) -> Result<Option<LockRecord>, Error>;
    /// The names of the stored locks `owner` may hold (a superset is fine: each is checked).
    fn lock_names(&mut self, owner: &str) -> Result<Vec<String>, Error>;
    /// Whether a payload with this hash is stored.
    fn payload_exists(&mut self, hash: &[u8; 32]) -> Result<bool, Error>;
    /// The number of the last signal stored in `thread`'s inbox (0: none), as the batches
    /// before this one in the group left it.
    fn last_signal(&mut self, thread: &ThreadId) -> Result<u64, Error>;
    /// The number of the first signal in `thread`'s inbox named `name` holding exactly
    /// `data`, as the batches before this one leave it (read in the write's transaction, under
    /// the thread's row lock where there is one).
    fn find_signal(
        &mut self,
        thread: &ThreadId,
        name: &str,
        data: &[u8],
    ) -> Result<Option<u64>, Error>;
    /// Whether the backend writes each event as its own frame (`Plan::events`); one that writes
    /// batch frames from `Plan::log` (redb, format v6) saves the encoding.
    fn frames_events(&self) -> bool {
        true
    }
}

/// The counters a writer continues from: the last lsn and the last checkpoint id ever assigned
/// (never reused, also after pruning removed the records that had them).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    /// The last lsn ever assigned.
    pub(crate) last_lsn: u64,
    /// The last checkpoint id ever assigned.
    pub(crate) last_checkpoint_id: u64,
}

/// Everything one batch will write, fully encoded.
#[derive(Default)]
pub(crate) struct Plan {
    /// The batch's events framed one by one, in lsn order, when the backend frames each event
    /// ([`PlanState::frames_events`]).
    pub(crate) events: Vec<FramedEvent>,
    /// The batch's events, in lsn order (the redb log frames them in runs: `redb/log.rs`); none
    /// when they were planned from a batch the writer keeps (`plan_kept`).
    pub(crate) log: Vec<Event>,
    /// (correlation id, lsn, framed entry): the correlation-index entries of the batch's events
    /// that carry one, written in the same commit as the events.
    pub(crate) correlations: Vec<(String, u64, Vec<u8>)>,
    /// (thread, first seq, framed chunk): seq-index chunks the batch's events filled.
    pub(crate) chunks: Vec<(ThreadId, u64, Vec<u8>)>,
    /// The threads the batch reads or writes, as it leaves them (`None`: not stored). Each
    /// boxed: a map node of the records themselves (2.8 KB, allocated for every batch) made the
    /// allocator sweep its free lists at each batch; one of boxes is a tenth of it.
    pub(crate) threads: BTreeMap<ThreadId, Box<Option<StoredThread>>>,
    pub(crate) dirty_threads: Vec<ThreadId>,
    pub(crate) checkpoints: Vec<(CheckpointInfo, Vec<u8>, Vec<u8>)>,
    pub(crate) payloads: Vec<(PayloadRef, Vec<u8>)>,
    pub(crate) locks: BTreeMap<String, Option<LockRecord>>,
    pub(crate) appended: Appended,
    pub(crate) counters: Counters,
    /// The batch's wake hints (stores that index them write them with the thread rows: only
    /// PostgreSQL's; a redb file ignores them).
    #[cfg_attr(
        not(feature = "postgres"),
        expect(dead_code, reason = "only the PostgreSQL backend indexes wake hints")
    )]
    pub(crate) wakes: Vec<(ThreadId, crate::batch::Wake)>,
    /// (thread, n, framed signal): the batch's signals, numbered.
    pub(crate) signals: Vec<(ThreadId, u64, Vec<u8>)>,
    /// The queues read and changed so far (`plan_queue.rs`).
    pub(crate) queue_plan: crate::plan_queue::QueuePlan,
    /// The queue writes, encoded once the plan is complete.
    pub(crate) queue_writes: crate::plan_queue::QueueWrites,
}

/// An event's record, framed, and where it sits.
#[cfg_attr(
    not(feature = "postgres"),
    expect(dead_code, reason = "only the PostgreSQL backend writes events framed one by one")
)]
pub(crate) struct FramedEvent {
    pub(crate) thread: ThreadId,
    pub(crate) seq: u64,
    pub(crate) lsn: u64,
    pub(crate) framed: Vec<u8>,
}

/// A batch's events, as the planner is given them.
enum Events<'e> {
    /// Its own: moved into the plan's log.
    Owned(Vec<crate::event::NewEvent>),
    /// Those of a batch the writer keeps (to plan it again in another transaction): only
    /// encoded, never copied.
    #[cfg_attr(
        not(feature = "postgres"),
        expect(dead_code, reason = "only the PostgreSQL writer keeps its batches")
    )]
    Kept(&'e [crate::event::NewEvent]),
}

/// [`plan`] for a batch the writer keeps (PostgreSQL's, which plans a group again when its
/// transaction meets another writer): `batch` is the batch without its events, which are
/// `events`, read in place and encoded straight into frames (the backend must frame each
/// event); the plan's log stays empty.
///
/// # Errors
/// As [`plan`].
#[cfg(feature = "postgres")]
pub(crate) fn plan_kept(
    tables: &mut impl PlanState,
    counters: Counters,
    batch: Batch,
    events: &[crate::event::NewEvent],
) -> Result<Plan, Error> {
    assert!(tables.frames_events(), "a kept batch is planned for a backend that frames each event");
    assert!(batch.events.is_empty(), "a kept batch's events are given apart");
    plan_events(tables, counters, batch, Events::Kept(events))
}

/// Checks `batch` against the state in `tables` and prepares its writes.
pub(crate) fn plan(
    tables: &mut impl PlanState,
    counters: Counters,
    mut batch: Batch,
) -> Result<Plan, Error> {
    let events = Events::Owned(std::mem::take(&mut batch.events));
    plan_events(tables, counters, batch, events)
}

/// [`plan`] of `batch`, whose events are `events`.
fn plan_events(
    tables: &mut impl PlanState,
    counters: Counters,
    mut batch: Batch,
    events: Events<'_>,
) -> Result<Plan, Error> {
    let (len, logged) = match &events {
        Events::Owned(events) => (events.len(), events.len()),
        Events::Kept(events) => (events.len(), 0),
    };
    let mut plan = Plan {
        log: Vec::with_capacity(logged),
        appended: Appended { bookmarks: Vec::with_capacity(len), ..Appended::default() },
        counters,
        wakes: std::mem::take(&mut batch.wakes),
        ..Plan::default()
    };
    for guard in batch.all_guards() {
        plan.check_guard(tables, guard)?;
    }
    for upsert in batch.threads {
        let id = upsert.id.clone();
        // Replaced where it is (no map entry removed and made again); the upsert takes its
        // tail and lease.
        let slot = thread_in(&mut plan.threads, tables, &id)?;
        *slot = Some(merge_upsert(upsert, slot.take()));
        mark_dirty(&mut plan.dirty_threads, &id);
    }
    match events {
        Events::Owned(events) => {
            for new in events {
                plan.event(tables, new)?;
            }
        }
        Events::Kept(events) => {
            for new in events {
                plan.kept_event(tables, new)?;
            }
        }
    }
    for new in batch.checkpoints {
        plan.checkpoint(tables, new)?;
    }
    for bytes in batch.payloads {
        let r = PayloadRef::of(&bytes);
        plan.appended.payloads.push(r);
        let stored = tables.payload_exists(&r.hash)?;
        if !stored && !plan.payloads.iter().any(|(p, _)| *p == r) {
            plan.payloads.push((r, bytes));
        }
    }
    for op in batch.locks {
        plan.lock_op(tables, op)?;
    }
    for op in batch.runner.and_then(|r| r.lease).into_iter().chain(batch.leases) {
        plan.lease_op(tables, op)?;
    }
    for signal in batch.signals {
        plan.signal(tables, signal)?;
    }
    for signal in batch.copied_signals {
        plan.copied_signal(tables, signal)?;
    }
    for op in batch.queues {
        plan.queue_op(tables, op)?;
    }
    plan.release_ended(tables)?;
    plan.queue_writes = plan.queue_plan.finish()?;
    Ok(plan)
}

impl Plan {
    /// Plans event `new`: its seq and lsn, its record, correlation and seq-index entries.
    fn event(
        &mut self,
        tables: &mut impl PlanState,
        new: crate::event::NewEvent,
    ) -> Result<(), Error> {
        let bookmark = self.place(tables, &new.thread, new.at_ms)?;
        let event = Event::from_new(new, bookmark.seq, bookmark.lsn);
        if tables.frames_events() {
            let framed = codec::encode_event(&event)?;
            self.events.push(FramedEvent::at(&event.thread, bookmark, framed));
        }
        if let Some(correlation) = &event.correlation {
            self.correlate(correlation, &event.thread, bookmark)?;
        }
        self.log.push(event);
        Ok(())
    }

    /// [`Plan::event`] of an event read in place (`plan_kept`): framed, not kept.
    fn kept_event(
        &mut self,
        tables: &mut impl PlanState,
        new: &crate::event::NewEvent,
    ) -> Result<(), Error> {
        let bookmark = self.place(tables, &new.thread, new.at_ms)?;
        let framed = codec::encode_new_event(new, bookmark)?;
        self.events.push(FramedEvent::at(&new.thread, bookmark, framed));
        if let Some(correlation) = &new.correlation {
            self.correlate(correlation, &new.thread, bookmark)?;
        }
        Ok(())
    }

    /// The bookmark of the next event of thread `id` (its next seq, the next lsn, `at_ms`),
    /// taken: the thread's record and seq-index tail move past it.
    fn place(
        &mut self,
        tables: &mut impl PlanState,
        id: &ThreadId,
        at_ms: u64,
    ) -> Result<Bookmark, Error> {
        let Some(stored) = thread_in(&mut self.threads, tables, id)? else {
            return Err(Error::UnknownThread(id.clone()));
        };
        let seq = match stored.record.last {
            None => stored.record.first_seq.0,
            Some(b) => b.seq.0.checked_add(1).ok_or_else(|| exhausted("seq", Some(id)))?,
        };
        self.counters.last_lsn =
            self.counters.last_lsn.checked_add(1).ok_or_else(|| exhausted("lsn", None))?;
        let lsn = self.counters.last_lsn;
        let bookmark = Bookmark { seq: Seq(seq), lsn: Lsn(lsn), at_ms };
        stored.record.last = Some(bookmark);
        stored.tail.push(lsn);
        if stored.tail.len() >= SEQ_CHUNK_LEN {
            // The tail is full: it becomes a chunk of the seq index, written once.
            let lsns = std::mem::take(&mut stored.tail);
            let first_seq = seq + 1 - lsns.len() as u64;
            let chunk = SeqChunk { thread: id.clone(), first_seq, lsns };
            self.chunks.push((id.clone(), first_seq, codec::encode_seq_chunk(&chunk)?));
        }
        self.appended.bookmarks.push(bookmark);
        mark_dirty(&mut self.dirty_threads, id);
        Ok(bookmark)
    }

    /// The correlation-index entry of the event of `thread` at `bookmark` carrying
    /// `correlation`.
    fn correlate(
        &mut self,
        correlation: &str,
        thread: &ThreadId,
        bookmark: Bookmark,
    ) -> Result<(), Error> {
        let entry = CorrelationEntry {
            correlation: correlation.to_owned(),
            lsn: bookmark.lsn.0,
            thread: thread.clone(),
            seq: bookmark.seq.0,
            at_ms: bookmark.at_ms,
        };
        let framed = codec::encode_correlation(&entry)?;
        self.correlations.push((entry.correlation, bookmark.lsn.0, framed));
        Ok(())
    }

    /// Plans checkpoint `new`: its id, covering its thread's last event.
    fn checkpoint(
        &mut self,
        tables: &mut impl PlanState,
        new: crate::checkpoint::NewCheckpoint,
    ) -> Result<(), Error> {
        let covers = match self.thread(tables, &new.thread)? {
            None => return Err(Error::UnknownThread(new.thread.clone())),
            Some(stored) => stored.record.last.ok_or_else(|| Error::Invalid {
                detail: format!("thread {} has no events for a checkpoint to cover", new.thread),
            })?,
        };
        self.counters.last_checkpoint_id = self
            .counters
            .last_checkpoint_id
            .checked_add(1)
            .ok_or_else(|| exhausted("checkpoint id", None))?;
        let id = CheckpointId(self.counters.last_checkpoint_id);
        let info = CheckpointInfo {
            id,
            thread: new.thread,
            workflow: new.workflow,
            covers,
            created_at_ms: new.created_at_ms,
            kind: new.kind,
            snapshot_len: new.snapshot.len() as u64,
            meta: new.meta,
        };
        let info_frame = codec::encode_checkpoint(&info)?;
        let snapshot_frame = codec::encode_snapshot(id, &new.snapshot)?;
        self.appended.checkpoints.push(id);
        self.checkpoints.push((info, info_frame, snapshot_frame));
        Ok(())
    }
}

impl FramedEvent {
    fn at(thread: &ThreadId, bookmark: Bookmark, framed: Vec<u8>) -> FramedEvent {
        FramedEvent { thread: thread.clone(), seq: bookmark.seq.0, lsn: bookmark.lsn.0, framed }
    }
}

/// A counter read from the file is at `u64::MAX`: only damage gets it there (2^64 appends will not
/// happen), so it is reported as corruption rather than wrapped.
pub(crate) fn exhausted(counter: &str, thread: Option<&ThreadId>) -> Error {
    Error::Corrupted {
        table: if thread.is_some() { table::THREADS } else { table::META },
        thread: thread.cloned(),
        seq: None,
        detail: format!("the {counter} counter is at its maximum"),
    }
}

/// The value `cache` holds under `key`, read with `read` (and kept) the first time.
pub(crate) fn cached<'c, K, Q, V>(
    cache: &'c mut BTreeMap<K, V>,
    key: &Q,
    read: impl FnOnce() -> Result<V, Error>,
) -> Result<&'c V, Error>
where
    K: Ord + std::borrow::Borrow<Q>,
    Q: Ord + ToOwned<Owned = K> + ?Sized,
{
    if !cache.contains_key(key) {
        let value = read()?;
        cache.insert(key.to_owned(), value);
    }
    Ok(&cache[key])
}

/// The thread `id` as the plan's `threads` hold it, read from `tables` (and kept) the first
/// time: one search of the map (an id's clone is a reference counted).
fn thread_in<'t>(
    threads: &'t mut BTreeMap<ThreadId, Box<Option<StoredThread>>>,
    tables: &mut impl PlanState,
    id: &ThreadId,
) -> Result<&'t mut Option<StoredThread>, Error> {
    Ok(match threads.entry(id.clone()) {
        std::collections::btree_map::Entry::Occupied(held) => held.into_mut(),
        std::collections::btree_map::Entry::Vacant(slot) => {
            slot.insert(Box::new(tables.stored_thread(id)?))
        }
    })
}

/// Adds `key` to the `dirty` keys (written at the end of the plan) unless it is there.
pub(crate) fn mark_dirty<K: PartialEq + Clone>(dirty: &mut Vec<K>, key: &K) {
    if !dirty.contains(key) {
        dirty.push(key.clone());
    }
}

/// The record an upsert writes: the caller's fields, the store's `last`, `first_seq`, `lease`
/// and seq-index tail.
fn merge_upsert(mut upsert: ThreadRecord, current: Option<StoredThread>) -> StoredThread {
    let (last, first_seq, lease, tail) = match current {
        Some(StoredThread { record, tail }) => (record.last, record.first_seq, record.lease, tail),
        None => (None, Seq(1), None, Vec::new()),
    };
    (upsert.last, upsert.first_seq, upsert.lease) = (last, first_seq, lease);
    StoredThread { record: upsert, tail }
}

impl Plan {
    /// Checks one guard against the thread as this batch found it (guards run first).
    fn check_guard(&mut self, tables: &mut impl PlanState, guard: &Guard) -> Result<(), Error> {
        let (thread, failure) = match guard {
            Guard::Lease { thread, owner, now_ms } => {
                let lease =
                    self.thread(tables, thread)?.as_ref().and_then(|s| s.record.lease.as_ref());
                match lease {
                    Some(l) if &l.owner == owner && *now_ms < l.expires_at_ms => return Ok(()),
                    Some(l) => {
                        (thread, format!("lease held by {} until {} ms", l.owner, l.expires_at_ms))
                    }
                    None => (thread, "no lease is held".to_string()),
                }
            }
            Guard::Status { thread, expected } => {
                match self.thread(tables, thread)?.as_ref().map(|s| &s.record) {
                    Some(r) if r.status == *expected => return Ok(()),
                    Some(r) => (thread, format!("status is {}, expected {expected}", r.status)),
                    None => (thread, format!("thread does not exist (expected status {expected})")),
                }
            }
            Guard::Absent { thread } => {
                match self.thread(tables, thread)?.as_ref().map(|s| &s.record) {
                    None => return Ok(()),
                    Some(_) => (thread, "thread already exists".to_string()),
                }
            }
            Guard::LastSeq { thread, seq } => {
                match self.thread(tables, thread)?.as_ref().map(|s| &s.record) {
                    Some(r) if r.last.map_or(Seq(0), |b| b.seq) == *seq => return Ok(()),
                    Some(r) => (
                        thread,
                        format!(
                            "last seq is {}, expected {}",
                            r.last.map_or(0, |b| b.seq.0),
                            seq.0
                        ),
                    ),
                    None => {
                        (thread, format!("thread does not exist (expected last seq {})", seq.0))
                    }
                }
            }
            Guard::NoSignal { thread, name, data } => {
                match tables.find_signal(thread, name, data)? {
                    None => return Ok(()),
                    Some(n) => (thread, format!("signal {n} is a {name:?} holding the same value")),
                }
            }
        };
        Err(Error::GuardFailed { thread: thread.clone(), detail: failure })
    }

    /// The thread as this batch sees it so far (stored, then this batch's changes).
    pub(crate) fn thread(
        &mut self,
        tables: &mut impl PlanState,
        id: &ThreadId,
    ) -> Result<&mut Option<StoredThread>, Error> {
        thread_in(&mut self.threads, tables, id)
    }

    /// Numbers a signal and encodes it, refusing a thread that does not exist or has ended as
    /// this batch sees it (so a thread that a batch before it in the group ended refuses it).
    fn signal(&mut self, tables: &mut impl PlanState, new: NewSignal) -> Result<(), Error> {
        match self.thread(tables, &new.thread)?.as_ref().map(|s| s.record.status) {
            None => return Err(Error::UnknownThread(new.thread)),
            Some(status) if status.is_terminal() => {
                return Err(Error::Finished { thread: new.thread, status });
            }
            Some(_) => {}
        }
        let n = crate::signal::next_n(self.last_signal(tables, &new.thread)?)?;
        let signal =
            Signal { thread: new.thread, n, name: new.name, at_ms: new.at_ms, data: new.data };
        self.push_signal(signal)
    }

    /// The number of `thread`'s last signal as this batch sees it.
    fn last_signal(&self, tables: &mut impl PlanState, thread: &ThreadId) -> Result<u64, Error> {
        match self.signals.iter().rev().find(|(t, _, _)| t == thread) {
            Some((_, n, _)) => Ok(*n),
            None => tables.last_signal(thread),
        }
    }

    /// Encodes a numbered signal into the plan.
    fn push_signal(&mut self, signal: Signal) -> Result<(), Error> {
        let framed = codec::encode_signal(&signal)?;
        self.appended.signals.push(signal.n);
        self.signals.push((signal.thread, signal.n, framed));
        Ok(())
    }

    /// Takes a signal copied from another store with its number, which must be its thread's
    /// next; any status will do (the signal was accepted when it was sent).
    fn copied_signal(&mut self, tables: &mut impl PlanState, signal: Signal) -> Result<(), Error> {
        if self.thread(tables, &signal.thread)?.is_none() {
            return Err(Error::UnknownThread(signal.thread));
        }
        let last = self.last_signal(tables, &signal.thread)?;
        if signal.n != crate::signal::next_n(last)? {
            return Err(Error::Invalid {
                detail: format!(
                    "copied signal {} of thread {} does not follow signal {last}",
                    signal.n, signal.thread
                ),
            });
        }
        self.push_signal(signal)
    }

    pub(crate) fn set_thread(&mut self, id: ThreadId, stored: StoredThread) {
        mark_dirty(&mut self.dirty_threads, &id);
        self.threads.insert(id, Box::new(Some(stored)));
    }

    fn lock(
        &mut self,
        tables: &mut impl PlanState,
        name: &str,
    ) -> Result<Option<LockRecord>, Error> {
        Ok(cached(&mut self.locks, name, || tables.lock(name))?.clone())
    }

    fn lock_op(&mut self, tables: &mut impl PlanState, op: LockOp) -> Result<(), Error> {
        match op {
            LockOp::Acquire { name, owner, now_ms, ttl_ms } => {
                if let Some(held) = self.lock(tables, &name)?
                    && held.owner != owner
                    && held.is_live(now_ms)
                {
                    return Err(Error::LockHeld {
                        name,
                        owner: held.owner,
                        expires_at_ms: held.expires_at_ms,
                    });
                }
                let expires_at_ms = now_ms.saturating_add(ttl_ms);
                let lock =
                    LockRecord { name: name.clone(), owner, acquired_at_ms: now_ms, expires_at_ms };
                self.locks.insert(name, Some(lock));
            }
            LockOp::Renew { name, owner, now_ms, ttl_ms } => match self.lock(tables, &name)? {
                Some(mut held) if held.owner == owner => {
                    held.expires_at_ms = now_ms.saturating_add(ttl_ms);
                    self.locks.insert(name, Some(held));
                }
                _ => return Err(Error::LockNotHeld { name, owner }),
            },
            LockOp::Release { name, owner } => match self.lock(tables, &name)? {
                None => {}
                Some(held) if held.owner == owner => {
                    self.locks.insert(name, None);
                }
                Some(_) => return Err(Error::LockNotHeld { name, owner }),
            },
            LockOp::ReleaseAll { owner } => {
                let mut names = tables.lock_names(&owner)?;
                names.extend(self.locks.keys().cloned());
                for name in names {
                    if self.lock(tables, &name)?.is_some_and(|held| held.owner == owner) {
                        self.locks.insert(name, None);
                    }
                }
            }
        }
        Ok(())
    }

    fn lease_op(&mut self, tables: &mut impl PlanState, op: LeaseOp) -> Result<(), Error> {
        let thread = op.thread().clone();
        // The plan's own copy, changed in place (not cloned): an error drops the whole plan.
        let Some(stored) = thread_in(&mut self.threads, tables, &thread)? else {
            return Err(Error::UnknownThread(thread));
        };
        let record = &mut stored.record;
        match op {
            LeaseOp::Acquire { owner, now_ms, ttl_ms, .. } => {
                if let Some(held) = &record.lease
                    && held.owner != owner
                    && now_ms < held.expires_at_ms
                {
                    return Err(Error::LeaseHeld {
                        thread,
                        owner: held.owner.to_string(),
                        expires_at_ms: held.expires_at_ms,
                    });
                }
                record.lease = Some(Lease { owner, expires_at_ms: now_ms.saturating_add(ttl_ms) });
            }
            LeaseOp::Renew { owner, now_ms, ttl_ms, .. } => match &mut record.lease {
                Some(held) if held.owner == owner => {
                    held.expires_at_ms = now_ms.saturating_add(ttl_ms);
                }
                _ => return Err(Error::LeaseNotHeld { thread, owner: owner.to_string() }),
            },
            LeaseOp::Release { owner, .. } => match &record.lease {
                None => return Ok(()),
                Some(held) if held.owner == owner => record.lease = None,
                Some(_) => return Err(Error::LeaseNotHeld { thread, owner: owner.to_string() }),
            },
        }
        mark_dirty(&mut self.dirty_threads, &thread);
        Ok(())
    }
}
