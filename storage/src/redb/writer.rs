//! The group-commit writer: one std thread owns every write transaction.
//!
//! Callers queue [`Command`]s on a bounded channel (`Options::queue_depth`). The writer takes
//! the first, opens a write transaction and applies it, then takes the writes that follow
//! (whatever is queued, and, for a short while, those still arriving; see [`Writer::group`]) and
//! applies each as it comes, up to `group_max_batches`; then it commits once and replies to all.
//! A rejected batch changes nothing (see [`super::apply`]). Under `Durability::Periodic` it also
//! commits durably when the interval since the last durable commit has passed, with an empty
//! commit if nothing else is queued.
//!
//! After a failed commit (or a failure half-way through applying a batch) the outcome of the
//! whole group is unknown: every caller in it gets the error, and the store is poisoned (see
//! [`super::poison`]), refusing writes until reopened (redb repairs on reopen; the counters are
//! reread from the file), which the writer does by itself when it may ([`super::reopen`]).

use std::sync::Arc;
use std::time::{Duration, Instant};

use ::redb::{Database, Durability as RedbDurability, WriteTransaction};
use tokio::sync::watch;

use super::cache::ThreadCache;
use super::guard::guard;
use super::tables::{Counters, Tables, write_counters};
use super::writer_queue::Turn;
use super::{apply, delete, prune};
use crate::error::Error;
use crate::ids::ThreadId;
pub(crate) use crate::request::Write;
use crate::request::{Answer, Outcome, Request};
use crate::store::Durability;

/// Where callers leave commands for the writer, and where it rests between groups.
pub(crate) type WriterQueue = super::writer_queue::WriterQueue<Command, Writer>;

/// Messages to the writer.
pub(crate) enum Command {
    /// A write to apply in the next group.
    Write(Write),
    /// Writes handed over together, applied in order in one group (see
    /// [`crate::Append::append_all`]): one wake of the writer for all of them.
    Writes(Vec<Write>),
    /// Make everything durable and stop.
    Close(std::sync::mpsc::Sender<Result<(), Error>>),
    /// Look at the clock now: flush if a periodic flush is due, then answer.
    Tick(std::sync::mpsc::Sender<Result<(), Error>>),
    /// The last write intent was withdrawn: a group kept open for intents may commit now.
    Nudge,
}

/// The distinct callers of one group: the threads its writes belong to (a write that names no
/// thread counts as a caller of its own).
///
/// The ids come from callers, so the set's hash is seeded per process (foldhash's: a fraction
/// of SipHash's cost); it holds at most one group's writes (`group_max_batches`), which bounds
/// what colliding ids could cost.
#[derive(Default)]
struct Callers {
    threads: std::collections::HashSet<ThreadId, foldhash::fast::RandomState>,
    anonymous: usize,
}

impl Callers {
    fn add(&mut self, write: &Write) {
        match write.thread() {
            // An id's clone is a reference counted: one hash, whether or not it is new.
            Some(thread) => _ = self.threads.insert(thread.clone()),
            None => self.anonymous += 1,
        }
    }

    fn count(&self) -> usize {
        self.threads.len() + self.anonymous
    }
}

/// What a group gathered so far.
#[derive(Default)]
struct Gathered {
    /// The reply channel of each write, in order, and its result once applied.
    answers: Vec<Answer>,
    results: Vec<Result<Outcome, Error>>,
    callers: Callers,
    /// Flush ticks, answered once the group is committed.
    ticks: Vec<std::sync::mpsc::Sender<Result<(), Error>>>,
    /// The events and bytes of its appends.
    events: usize,
    bytes: usize,
    /// Whether a write other than an append is in it (the counters are written then).
    removes: bool,
    /// The reply to a close received while gathering (the writer stops after the group).
    close: Option<std::sync::mpsc::Sender<Result<(), Error>>>,
    /// How many times it waited for more writes.
    waits: usize,
}

/// The writer thread's state.
pub(crate) struct Writer {
    /// `None` only while a reopen could not open the database again (the store is poisoned).
    pub(crate) db: Option<Arc<Database>>,
    /// How the store reopens its database after a failed commit (`None`: it stays poisoned
    /// until its owner reopens it; see [`super::reopen`]).
    pub(crate) reopen: Option<super::reopen::Reopen>,
    pub(crate) counters: Counters,
    pub(crate) durability: Durability,
    pub(crate) group_max: usize,
    pub(crate) poison: super::poison::Poison,
    pub(crate) committed: watch::Sender<u64>,
    /// Non-durable commits since the last durable one.
    pub(crate) dirty: bool,
    pub(crate) last_durable: Instant,
    /// The clock of the durability policy (see [`crate::Clock`]).
    pub(crate) clock: Arc<dyn crate::clock::Clock>,
    /// Callers (threads) whose writes the last group held, the gathering target for the next
    /// (see `group`).
    pub(crate) last_group: usize,
    /// How long the last group's commit took, the gathering window for the next.
    pub(crate) last_commit: Duration,
    /// The thread records this writer last wrote (see [`super::cache`]).
    pub(crate) cache: ThreadCache,
    /// Where a group's events wait to be framed (see [`Tables::stage_events`]), kept with its
    /// room: a group of many threads' batches grew a new one by copying, each commit.
    staged_events: Vec<crate::event::Event>,
    /// Where each group commit's figures go.
    pub(crate) metrics: crate::telemetry::StoreMetrics,
    /// Writes that callers announced and are still computing (see [`crate::WriteIntents`]).
    pub(crate) intents: Arc<crate::intent::WriteIntents>,
    /// The longest a group waits beyond what is queued ([`GATHER_WAIT_MAX`]; tests lengthen it).
    pub(crate) gather_max: Duration,
    /// Thread rows the last group wrote: one per thread it changed, however many of its
    /// batches the group held.
    pub(crate) thread_rows: usize,
    /// The tables the last group's transaction opened (by accessor): those its commit touches.
    pub(crate) tables_opened: Vec<&'static str>,
    /// Times the last group blocked waiting for more writes (each a sleep and a wake of this
    /// thread).
    pub(crate) waits: usize,
}

/// The longest the writer waits to fill a group beyond what is already queued: well under a
/// disk's fsync time, so a caller that stopped writing costs the others little.
pub(crate) const GATHER_WAIT_MAX: Duration = Duration::from_millis(2);

impl Writer {
    /// A writer (not yet running) on `db`, whose counters are `counters`, writing as `options`
    /// say and publishing the last committed lsn on `committed`.
    pub(crate) fn new(
        db: Arc<Database>,
        counters: Counters,
        options: &super::Options,
        committed: watch::Sender<u64>,
        clock: Arc<dyn crate::clock::Clock>,
        intents: Arc<crate::intent::WriteIntents>,
    ) -> Writer {
        let metrics = crate::telemetry::StoreMetrics::default();
        Writer {
            db: Some(db),
            reopen: None,
            counters,
            durability: options.durability,
            group_max: options.group_max_batches.max(1),
            poison: super::poison::Poison::new(metrics.clone()),
            committed,
            dirty: false,
            last_durable: clock.now(),
            clock,
            last_group: 1,
            last_commit: Duration::ZERO,
            cache: ThreadCache::default(),
            staged_events: Vec::new(),
            metrics,
            intents,
            gather_max: GATHER_WAIT_MAX,
            thread_rows: 0,
            tables_opened: Vec::new(),
            waits: 0,
        }
    }

    /// Runs the writer resting in `queue` (the writer's thread) until a `Close` command.
    pub(crate) fn run(queue: Arc<WriterQueue>) {
        or_abort(|| serve(&queue));
    }

    /// How long the resting writer may wait for a command before it has work of its own: a
    /// reopen to try, or a periodic flush (measured by the store's clock); `None`: none.
    fn due(&mut self) -> Option<Duration> {
        if let Some(due) = self.reopen_due() {
            return Some(due.saturating_duration_since(Instant::now()));
        }
        self.flush_deadline().map(|deadline| deadline.saturating_duration_since(self.clock.now()))
    }

    /// The work [`Writer::due`] said was due.
    fn on_due(&mut self) {
        if self.reopen_due().is_some() {
            self.recover();
        } else if let Err(error) = self.flush_if_due() {
            tracing::error!(%error, "durable flush failed; the store is poisoned");
        }
    }

    /// Closes the database (the writer stopped). If this is the last handle on it, dropping it
    /// closes redb, which may read pages: guarded like every other call into redb.
    fn stop(self) {
        let db = self.db;
        if let Err(error) = guard("close", move || {
            drop(db);
            Ok(())
        }) {
            tracing::error!(%error, "closing the database failed");
        }
    }

    /// Carries out `command` (the first of a group, for a write): the replies to send once the
    /// writer rests, or `None` once it closed.
    fn handle(&mut self, command: Command, queue: &WriterQueue) -> Option<Replies> {
        let (replies, close) = match command {
            Command::Close(reply) => (Replies::default(), Some(reply)),
            Command::Write(write) => self.group(Taken::one(write), Some(queue)),
            Command::Writes(writes) => self.group(Taken::many(writes), Some(queue)),
            Command::Tick(reply) => {
                let result = self.flush_if_due();
                drop(reply.send(result));
                (Replies::default(), None)
            }
            Command::Nudge => (Replies::default(), None),
        };
        let Some(close) = close else { return Some(replies) };
        replies.send();
        let result = self.flush();
        // Later commands find the queue closed; answer those queued now.
        for command in queue.close() {
            match command {
                Command::Write(write) => refuse(write, &Error::Closed),
                Command::Writes(writes) => {
                    writes.into_iter().for_each(|w| refuse(w, &Error::Closed))
                }
                Command::Close(other) | Command::Tick(other) => drop(other.send(Ok(()))),
                Command::Nudge => {}
            }
        }
        drop(close.send(result));
        None
    }

    /// The database, or why there is none (a reopen could not open it: the store is poisoned).
    fn db(&self) -> Result<&Database, Error> {
        self.db.as_deref().ok_or_else(|| self.poison.refusal().unwrap_or(Error::Closed))
    }

    fn flush_deadline(&self) -> Option<Instant> {
        match self.durability {
            Durability::Periodic { interval_ms } if self.dirty => {
                Some(self.last_durable + Duration::from_millis(interval_ms))
            }
            _ => None,
        }
    }

    /// Flushes if the periodic flush is due by the clock (a real timeout may come a little
    /// before the clock says so, and a manual clock may not have moved at all).
    fn flush_if_due(&mut self) -> Result<(), Error> {
        match self.flush_deadline() {
            Some(deadline) if self.clock.now() >= deadline => self.flush(),
            _ => Ok(()),
        }
    }

    /// Makes every non-durable commit durable with an empty durable commit.
    fn flush(&mut self) -> Result<(), Error> {
        if !self.dirty {
            return Ok(());
        }
        if let Some(refused) = self.poison.refusal() {
            // Nothing more can be made durable until reopen; forget the debt so the periodic
            // timer does not fire again and again.
            self.dirty = false;
            return Err(refused);
        }
        let result = guard("flush", || {
            let txn = self.db()?.begin_write().map_err(|e| Error::storage("begin write", e))?;
            txn.commit().map_err(|e| Error::storage("commit", e))
        });
        match result {
            Ok(()) => {
                self.dirty = false;
                self.last_durable = self.clock.now();
                Ok(())
            }
            Err(error) => {
                self.poison.set(&error);
                self.dirty = false;
                Err(error)
            }
        }
    }

    /// Gathers, applies and commits one group that starts with `first`; returns its replies (to
    /// send once the writer rests: a caller woken by its answer then finds the writer free for
    /// its next hand-over) and a `Close` command that ended the gathering.
    ///
    /// Each write is applied as soon as it is taken from the queue, inside the group's open
    /// transaction, so the writer's work overlaps the callers' (with 64 callers each waiting for
    /// its last answer, they send their next writes while the writer applies the first ones).
    ///
    /// Whatever is already queued joins at once. Beyond that, the writer waits a little for the
    /// callers it answered last time: each of them is likely to send its next write as soon as it
    /// wakes, and committing before they do would alternate one tiny group with one large group,
    /// halving throughput under concurrency. So it keeps the group open until writes of as many
    /// callers as the last group held have arrived, or for at most the last commit's duration
    /// (capped at [`GATHER_WAIT_MAX`]), whichever comes first. A caller is a thread: one
    /// thread's pipelined batches count once, because they arrive together or not at all. So a
    /// lone caller never waits, even right after a group of many of its own writes (a new
    /// thread's first write after the previous thread's last steps used to wait a commit time).
    ///
    /// Within the same bound, the group also stays open while any write intent is held (see
    /// [`crate::WriteIntents`]): a runner computing its next batch, or a `start` whose runner
    /// has not sent its first one yet, so that a new thread's creation and its run share one
    /// commit. The last intent withdrawn nudges the writer, which commits at once. While only
    /// intents keep the group open (the callers expected have all written), the writer sleeps
    /// until the intents are withdrawn and then takes every write queued meanwhile, instead of
    /// waking for each: one sleep per group, not one thread switch per pipelined batch.
    ///
    /// Without a `queue` (a caller committing its own hand-over, see [`commit_alone`]) the group
    /// is `taken` alone: nothing is gathered, and no intent keeps it open.
    fn group(
        &mut self,
        mut taken: Taken,
        queue: Option<&WriterQueue>,
    ) -> (Replies, Option<std::sync::mpsc::Sender<Result<(), Error>>>) {
        if let Some(refused) = self.poison.refusal() {
            let replies =
                Replies { unreached: taken, failure: Some(refused), ..Replies::default() };
            return (replies, None);
        }
        let durable = self.durable_due();
        // Open until the gathering below ends (see `WriteIntents::gathering`).
        self.intents.gathering(queue.is_some());
        let target = self.last_group.clamp(1, self.group_max);
        let deadline = Instant::now() + self.last_commit.min(self.gather_max);
        let mut g = Gathered {
            answers: Vec::with_capacity(target),
            results: Vec::with_capacity(target),
            ..Gathered::default()
        };
        let span = crate::telemetry::group_span("redb", durable);
        let _in_span = span.enter();
        let mut commit_time = Duration::ZERO;
        // A panic inside redb (a damaged page met while updating a B-tree) becomes an error here,
        // and is handled like a failed commit: the writer thread survives, the store poisons.
        let outcome = guard("commit", || {
            let mut txn = self.db()?.begin_write().map_err(|e| Error::storage("begin write", e))?;
            let level = if durable { RedbDurability::Immediate } else { RedbDurability::None };
            if let Err(e) = txn.set_durability(level) {
                abort(txn);
                return Err(Error::storage("set durability", e));
            }
            let mut cache = std::mem::take(&mut self.cache);
            let mut events = std::mem::take(&mut self.staged_events);
            let mut tables = Tables::new(&txn, &mut cache, &mut events);
            let applied = self.gather(&mut tables, &mut taken, &mut g, queue, (target, deadline));
            self.intents.gathering(false);
            // The group's events, framed once, and each thread record it changed, written once
            // (see `Tables::stage_events`, `Tables::stage_thread`).
            let applied = applied.and_then(|()| tables.write_staged_events());
            let applied = applied.and_then(|()| tables.write_staged_threads()).and_then(|()| {
                if g.removes { write_counters(tables.meta()?, self.counters) } else { Ok(()) }
            });
            self.thread_rows = tables.thread_rows;
            self.tables_opened = tables.opened();
            drop(tables);
            // Back for the next group (after a failure too: the store is poisoned then, and a
            // reopen starts with a new writer and an empty cache).
            self.cache = cache;
            self.staged_events = events;
            if let Err(error) = applied {
                abort(txn);
                return Err(error);
            }
            let started = Instant::now();
            let committed = txn.commit().map_err(|e| Error::storage("commit", e));
            commit_time = started.elapsed();
            committed
        });
        self.last_group = g.callers.count();
        self.last_commit = commit_time;
        self.waits = g.waits;
        self.record_group(&span, &g, commit_time, durable, outcome.is_ok());
        let failure = self.settle(outcome, durable);
        for tick in g.ticks {
            let result = self.flush_if_due();
            drop(tick.send(result));
        }
        let replies = Replies { answers: g.answers, results: g.results, failure, unreached: taken };
        (replies, g.close)
    }

    /// Applies `taken` and the writes that follow (see [`Writer::group`]) in the open group's
    /// transaction (`tables`) until the group closes: the queue empty and nobody else expected
    /// by `deadline` (`until`: the callers expected, and the deadline), the group full, or a
    /// close; an error if a write left the transaction half-written.
    fn gather(
        &mut self,
        tables: &mut Tables<'_, '_>,
        taken: &mut Taken,
        g: &mut Gathered,
        queue: Option<&WriterQueue>,
        (target, deadline): (usize, Instant),
    ) -> Result<(), Error> {
        loop {
            // The writes of one hand-over are applied together (they are at most a pipeline's
            // batches of one thread), so the group may exceed its bound by them.
            if let Some(write) = taken.next() {
                self.apply_write(tables, write, g)?;
                continue;
            }
            if g.answers.len() >= self.group_max {
                return Ok(());
            }
            let Some(queue) = queue else { return Ok(()) };
            let Some(command) =
                self.next_command(queue, &g.callers, target, deadline, &mut g.waits)
            else {
                return Ok(());
            };
            match command {
                Command::Write(write) => *taken = Taken::one(write),
                Command::Writes(writes) => *taken = Taken::many(writes),
                Command::Close(reply) => {
                    g.close = Some(reply);
                    return Ok(());
                }
                // Answered once this group is committed (it may be the due flush itself).
                Command::Tick(reply) => g.ticks.push(reply),
                // Looked at again above: the intents may all be gone.
                Command::Nudge => {}
            }
        }
    }

    /// Records the figures of group `g` (committed in `commit`, or not: `ok`) on its span and
    /// in the store's metrics.
    fn record_group(
        &self,
        span: &tracing::Span,
        g: &Gathered,
        commit: Duration,
        durable: bool,
        ok: bool,
    ) {
        let figures = crate::telemetry::GroupFigures {
            writes: g.answers.len(),
            events: g.events,
            bytes: g.bytes,
            commit,
            durable,
            ok,
            retries: 0,
        };
        figures.record_on(span);
        span.record("callers", self.last_group);
        self.metrics.group(&figures);
    }

    /// Applies `write` in the group's transaction (`tables`), noting it in `g`; an error if the
    /// transaction is now half-written (the group stops).
    fn apply_write(
        &mut self,
        tables: &mut Tables<'_, '_>,
        write: Write,
        g: &mut Gathered,
    ) -> Result<(), Error> {
        g.callers.add(&write);
        if let Write::Append(batch, _) = &write {
            g.events += batch.events.len();
            g.bytes += crate::telemetry::batch_bytes(batch);
        }
        let (op, answer) = write.split();
        g.removes |= !matches!(op, Request::Append(..));
        g.answers.push(answer);
        let (result, fatal) = self.apply_one(tables, op);
        g.results.push(result);
        fatal.map_or(Ok(()), Err)
    }

    /// Whether the next group commits durably: always, never, or once the interval since the
    /// last durable commit has passed.
    fn durable_due(&self) -> bool {
        match self.durability {
            Durability::Immediate => true,
            Durability::Periodic { interval_ms } => {
                self.clock.now().saturating_duration_since(self.last_durable)
                    >= Duration::from_millis(interval_ms)
            }
            Durability::None => false,
        }
    }

    /// The next command for the open group, or `None` when the group closes: at once if one is
    /// queued; else, while callers of the last group are still to come, the next to arrive
    /// before `deadline`; else, while only write intents keep it open, what is queued once they
    /// are withdrawn (or at `deadline`). Counts each wait in `waits`.
    fn next_command(
        &self,
        queue: &WriterQueue,
        callers: &Callers,
        target: usize,
        deadline: Instant,
        waits: &mut usize,
    ) -> Option<Command> {
        match queue.try_recv() {
            Some(command) => Some(command),
            None => {
                let now = Instant::now();
                let short = callers.count() < target;
                if !(short || self.intents.held() > 0) || now >= deadline {
                    return None;
                }
                *waits += 1;
                if short {
                    // Callers of the last group are still to come: take each write as
                    // it arrives, so applying overlaps their sending.
                    queue.recv_until(deadline)
                } else {
                    // Only announced writes keep the group open: sleep until their
                    // intents are withdrawn (a runner settling) or the bound, not woken
                    // by each batch sent meanwhile, then take what was queued at once.
                    self.intents.wait_withdrawn(deadline);
                    queue.try_recv()
                }
            }
        }
    }

    /// Takes a group's outcome: the durable and published marks after a commit, the store
    /// poisoned after a failure (which is returned, for the group's writes).
    fn settle(&mut self, outcome: Result<(), Error>, durable: bool) -> Option<Error> {
        match outcome {
            Ok(()) => {
                if durable {
                    self.dirty = false;
                    self.last_durable = self.clock.now();
                } else {
                    self.dirty = true;
                }
                self.committed.send_replace(self.counters.last_lsn);
                None
            }
            Err(error) => {
                self.poison.set(&error);
                tracing::error!(%error, "group commit failed; the store is poisoned");
                Some(error)
            }
        }
    }

    /// Applies one op: its result (which may be a rejection), and an error if the transaction is
    /// now half-written.
    fn apply_one(
        &mut self,
        tables: &mut Tables<'_, '_>,
        op: Request,
    ) -> (Result<Outcome, Error>, Option<Error>) {
        fn written<T>(
            result: Result<T, Error>,
            outcome: impl FnOnce(T) -> Outcome,
        ) -> (Result<Outcome, Error>, Option<Error>) {
            match result {
                Ok(value) => (Ok(outcome(value)), None),
                Err(e) => (Err(e.clone()), Some(e)),
            }
        }
        match op {
            Request::Append(batch) => match crate::plan::plan(tables, self.counters, batch) {
                Err(error) => rejected(error),
                Ok(plan) => {
                    written(apply::apply(tables, &mut self.counters, plan), Outcome::Append)
                }
            },
            Request::DeleteCheckpoint(id) => match prune::plan_delete(tables, id) {
                Err(error) => rejected(error),
                Ok(infos) => written(prune::remove_checkpoints(tables, &infos), |()| {
                    Outcome::Delete(!infos.is_empty())
                }),
            },
            Request::ClearCheckpoints(thread) => match prune::plan_clear(tables, &thread) {
                Err(error) => rejected(error),
                Ok(infos) => written(prune::remove_checkpoints(tables, &infos), |()| {
                    Outcome::Clear(infos.len() as u64)
                }),
            },
            Request::Prune(thread, keep) => match prune::plan_prune(tables, &thread, keep) {
                Err(error) => rejected(error),
                Ok(plan) => written(prune::apply_prune(tables, plan), Outcome::Prune),
            },
            Request::DeleteThread(thread, options) => {
                match delete::plan_delete_thread(tables, &thread, options) {
                    Err(error) => rejected(error),
                    Ok(None) => (Ok(Outcome::DeleteThread(None)), None),
                    Ok(Some(plan)) => written(delete::apply_delete_thread(tables, plan), |d| {
                        Outcome::DeleteThread(Some(d))
                    }),
                }
            }
        }
    }
}

/// Runs `f`, the writer's work, on whichever thread does it. A panic there is a Cairn bug
/// (redb's panics on damaged pages are caught by the guards and become errors): the writer's
/// invariants no longer hold, so nothing may be acknowledged after it. The process ends, as
/// TigerBeetle's does on a broken assertion; a restart recovers from the last durable commit.
/// The panic was printed by the hook.
fn or_abort<T>(f: impl FnOnce() -> T) -> T {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f)).unwrap_or_else(|_| {
        tracing::error!("the storage writer hit a broken invariant (a bug): aborting");
        std::process::abort()
    })
}

/// The writer's thread: takes the writer from `queue` with each command (or when it has work of
/// its own due), and puts it back to rest after, until a close.
fn serve(queue: &WriterQueue) {
    while let Some(turn) = queue.next_turn(Writer::due) {
        match turn {
            Turn::Command(mut writer, command) => {
                let Some(replies) = writer.handle(command, queue) else {
                    writer.stop();
                    return;
                };
                queue.rest(writer, false);
                replies.send();
            }
            Turn::Due(mut writer) => {
                writer.on_due();
                queue.rest(writer, false);
            }
        }
    }
}

/// The most bytes of events and payloads a caller commits on its own thread ([`commit_alone`]):
/// a larger hand-over goes to the writer's thread, so that a runtime thread spends at most a
/// small commit's time in redb.
pub(crate) const ALONE_BYTES_MAX: usize = 256 * 1024;

/// Commits `writes` (one caller's hand-over) as one group on the calling thread, if the writer
/// rests with nothing queued, no other write is announced ([`crate::WriteIntents`]: a group
/// that waits for it would share the commit), the group need not be durable (an fsync is never
/// made on a caller's thread), and the hand-over is small ([`ALONE_BYTES_MAX`]); else gives
/// `writes` back, for the writer's thread.
///
/// A lone runner's group then costs no thread switch: the writer's thread woken for the
/// hand-over, and the runner woken for the answer, were a third of its CPU time (see
/// benches/README.md).
pub(crate) fn commit_alone(queue: &WriterQueue, writes: Vec<Write>) -> Result<(), Vec<Write>> {
    let bytes: usize = writes
        .iter()
        .map(|write| match write {
            Write::Append(batch, _) => crate::telemetry::batch_bytes(batch),
            _ => 0,
        })
        .sum();
    let may = |writer: &Writer| {
        bytes <= ALONE_BYTES_MAX && writer.intents.held() == 0 && !writer.durable_due()
    };
    let Some(mut writer) = queue.take_idle(may) else { return Err(writes) };
    let had_due = writer.flush_deadline().is_some();
    let replies = or_abort(|| writer.group(Taken::many(writes), None).0);
    // A first commit that is not durable starts the periodic flush's wait: the writer's
    // thread must learn of it.
    let wake = !had_due && writer.flush_deadline().is_some();
    queue.rest(writer, wake);
    replies.send();
    Ok(())
}

/// A group's answers, and the writes of a hand-over it never reached.
#[derive(Default)]
struct Replies {
    /// The reply channel of each write applied, in order, and its result.
    answers: Vec<Answer>,
    results: Vec<Result<Outcome, Error>>,
    /// What failed the group (its commit, or the store's poison), if anything did.
    failure: Option<Error>,
    /// Writes of a hand-over not reached when a failure stopped the group.
    unreached: Taken,
}

impl Replies {
    /// Answers each write: a write that was rejected keeps its own error (it changed nothing);
    /// one that was applied, or never reached, gets the group's failure (never reached without
    /// one: the writer closed).
    fn send(self) {
        let Replies { answers, results, failure, unreached } = self;
        let mut results = results.into_iter();
        for answer in answers {
            let result = match (results.next(), &failure) {
                (Some(Err(rejected)), _) => Err(rejected),
                (Some(Ok(outcome)), None) => Ok(outcome),
                (_, Some(error)) => Err(error.clone()),
                // One result per applied write until the first failure stops the group.
                (None, None) => unreachable!("a write went unanswered"),
            };
            answer.send(result);
        }
        let unreached_error = failure.unwrap_or(Error::Closed);
        unreached.for_each(|w| refuse(w, &unreached_error));
    }
}

/// A write whose planning failed. A logical failure (a guard, a held lock, an unknown thread, a
/// record that fails its checks) rejects only that write: planning wrote nothing. An error from
/// the storage engine itself (an I/O error, a table redb cannot open) fails the whole group, like
/// a failed commit, and poisons the store: the transaction's state is no longer trusted.
fn rejected(error: Error) -> (Result<Outcome, Error>, Option<Error>) {
    match error {
        Error::Storage { .. } | Error::DiskFull { .. } => (Err(error.clone()), Some(error)),
        other => (Err(other), None),
    }
}

/// The writes taken from the queue and not applied yet: one write, or a hand-over of several.
#[derive(Default)]
struct Taken {
    one: Option<Write>,
    many: std::vec::IntoIter<Write>,
}

impl Taken {
    fn one(write: Write) -> Taken {
        Taken { one: Some(write), many: Vec::new().into_iter() }
    }

    fn many(writes: Vec<Write>) -> Taken {
        Taken { one: None, many: writes.into_iter() }
    }
}

impl Iterator for Taken {
    type Item = Write;

    fn next(&mut self) -> Option<Write> {
        self.one.take().or_else(|| self.many.next())
    }
}

/// Answers a write with `error` without running it.
fn refuse(write: Write, error: &Error) {
    write.split().1.send(Err(error.clone()));
}

fn abort(txn: WriteTransaction) {
    if let Err(error) = txn.abort() {
        tracing::error!(%error, "aborting a failed group's transaction failed");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::batch::{Appended, Batch, Guard, LeaseOp};
    use crate::ids::{CheckpointId, Seq};
    use tokio::sync::oneshot;

    fn append(thread: &str) -> Write {
        let (tx, _rx) = oneshot::channel();
        let mut batch = Batch::default();
        let thread = ThreadId::new(thread).expect("id");
        batch.guards.push(Guard::LastSeq { thread, seq: Seq(0) });
        Write::Append(batch, tx)
    }

    /// Runs a group as the writer's thread does, its replies sent at once; the `Close` that
    /// ended it, if any.
    fn group(
        writer: &mut Writer,
        taken: Taken,
        queue: Option<&WriterQueue>,
    ) -> Option<std::sync::mpsc::Sender<Result<(), Error>>> {
        let (replies, close) = writer.group(taken, queue);
        replies.send();
        close
    }

    /// A writer on a fresh file under `dir`, not yet running.
    fn writer_on(dir: &std::path::Path) -> Writer {
        let db = Database::create(dir.join("writer.redb")).expect("create");
        super::super::initialise(&db).expect("initialise");
        let options = super::super::Options::default().with_durability(Durability::None);
        let (clock, intents) =
            (Arc::new(crate::clock::SystemClock), crate::intent::WriteIntents::new(|| {}));
        let committed = watch::channel(0).0;
        Writer::new(Arc::new(db), Counters::default(), &options, committed, clock, intents)
    }

    /// A write of `batch`, and where its answer comes.
    fn write(batch: Batch) -> (Write, oneshot::Receiver<Result<Appended, Error>>) {
        let (tx, rx) = oneshot::channel();
        (Write::Append(batch, tx), rx)
    }

    /// The batch that creates the record of `thread` (no event: only the record matters here).
    fn create(thread: &ThreadId) -> Batch {
        let workflow =
            crate::thread::WorkflowRef { id: "w".into(), version: 1, fingerprint: "f".into() };
        Batch {
            threads: vec![crate::thread::ThreadRecord::new(thread.clone(), workflow, 0)],
            guards: vec![Guard::Absent { thread: thread.clone() }],
            ..Batch::default()
        }
    }

    /// The writer keeps the records of leased threads only: a thread that nobody drives (just
    /// created, parked, ended) costs the cache nothing, however many there are.
    #[test]
    fn only_leased_threads_stay_in_the_cache() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut writer = writer_on(dir.path());
        let rx = WriterQueue::new(1);
        let mut run = |batch: Batch| {
            let (write, answer) = write(batch);
            assert!(group(&mut writer, Taken::one(write), Some(&rx)).is_none());
            answer.blocking_recv().expect("answered").expect("appended");
            writer.cache.len()
        };
        let thread = ThreadId::new("a").expect("id");
        assert_eq!(run(create(&thread)), 0, "a thread nobody drives yet");
        let owner = "engine".to_owned();
        let acquire = LeaseOp::Acquire {
            thread: thread.clone(),
            owner: owner.clone().into(),
            now_ms: 0,
            ttl_ms: 1,
        };
        assert_eq!(run(Batch { leases: vec![acquire], ..Batch::default() }), 1, "a driven thread");
        let release = LeaseOp::Release { thread, owner: owner.into() };
        assert_eq!(run(Batch { leases: vec![release], ..Batch::default() }), 0, "parked: gone");
    }

    /// A group stays open while a write intent is held, for the write it announces, and commits
    /// as soon as the last intent is withdrawn (without the intents, the second write would come
    /// 50 ms after the first group committed).
    #[test]
    fn a_group_waits_for_the_writes_announced_to_it() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (mut writer, rx) = waiting_writer_on(dir.path(), 8);
        let tx = rx.clone();
        let a = ThreadId::new("a").expect("id");
        let b = ThreadId::new("b").expect("id");
        let intent = writer.intents.hold();
        let (first, first_answer) = write(create(&a));
        let (second, second_answer) = write(create(&b));
        let sender = announced(tx, intent, vec![second], Duration::from_millis(50));
        let started = Instant::now();
        assert!(group(&mut writer, Taken::one(first), Some(&rx)).is_none());
        let tx = sender.join().expect("sender");
        assert_eq!(writer.last_group, 2, "the announced write joined the group");
        assert!(started.elapsed() < Duration::from_secs(10), "committed when the intent went");
        first_answer.blocking_recv().expect("answered").expect("appended");
        second_answer.blocking_recv().expect("answered").expect("appended");
        // An intent withdrawn with no write: the group commits on the nudge, not at its bound
        // (one caller expected, as after a lone caller's group).
        writer.last_group = 1;
        let intent = writer.intents.hold();
        let (third, third_answer) = write(create(&ThreadId::new("c").expect("id")));
        let withdraw = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            drop(intent);
        });
        let started = Instant::now();
        assert!(group(&mut writer, Taken::one(third), Some(&rx)).is_none());
        withdraw.join().expect("withdraw");
        assert_eq!(writer.last_group, 1);
        assert!(started.elapsed() < Duration::from_secs(10), "committed on the nudge");
        third_answer.blocking_recv().expect("answered").expect("appended");
        drop(tx);
    }

    /// A hand-over of several writes is one group, applied in order with an answer each: a
    /// write its guard refuses changes nothing and takes nothing else with it.
    #[test]
    fn a_hand_over_is_one_group_applied_in_order_with_an_answer_each() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut writer = writer_on(dir.path());
        let rx = Arc::new(WriterQueue::new(8));
        let tx = rx.clone();
        let (a, b) = (ThreadId::new("a").expect("id"), ThreadId::new("b").expect("id"));
        let (first, first_answer) = write(create(&a));
        let (again, again_answer) = write(create(&a));
        let (other, other_answer) = write(create(&b));
        assert!(group(&mut writer, Taken::many(vec![first, again, other]), Some(&rx)).is_none());
        assert_eq!(writer.last_group, 2, "one group, of threads a and b");
        first_answer.blocking_recv().expect("answered").expect("created");
        let refused = again_answer.blocking_recv().expect("answered");
        assert!(matches!(refused, Err(Error::GuardFailed { .. })), "{refused:?}");
        other_answer.blocking_recv().expect("answered").expect("created after the refusal");
        drop(tx);
    }

    /// The last intent withdrawn nudges the writer only while a group is open: an idle writer
    /// is not woken for nothing.
    #[test]
    fn a_withdrawn_intent_nudges_only_a_gathering_writer() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (mut writer, rx) = waiting_writer_on(dir.path(), 8);
        let tx = rx.clone();
        let (first, answer) = write(create(&ThreadId::new("a").expect("id")));
        assert!(group(&mut writer, Taken::one(first), Some(&rx)).is_none());
        answer.blocking_recv().expect("answered").expect("created");
        drop(writer.intents.hold());
        assert!(rx.try_recv().is_none(), "idle: no nudge queued");
        // Control: withdrawn while a group gathers, it nudges.
        writer.intents.gathering(true);
        drop(writer.intents.hold());
        assert!(matches!(rx.try_recv(), Some(Command::Nudge)), "a nudge for the open group");
        drop(tx);
    }

    /// A writer on `dir` whose groups wait only for announced writes (its gathering bounds 30 s),
    /// with its queue of `depth`, which a withdrawn intent nudges.
    fn waiting_writer_on(dir: &std::path::Path, depth: usize) -> (Writer, Arc<WriterQueue>) {
        let mut writer = writer_on(dir);
        let queue = Arc::new(WriterQueue::new(depth));
        let nudge = queue.clone();
        writer.intents =
            crate::intent::WriteIntents::new(move || _ = nudge.try_send(Command::Nudge));
        writer.gather_max = Duration::from_secs(30);
        writer.last_commit = Duration::from_secs(30);
        (writer, queue)
    }

    /// A runner on another thread: sends `writes` to the writer's queue `tx`, `gap` apart, then
    /// withdraws the `intent` that announced them; joined, it gives `tx` back.
    fn announced(
        tx: Arc<WriterQueue>,
        intent: crate::intent::WriteIntent,
        writes: Vec<Write>,
        gap: Duration,
    ) -> std::thread::JoinHandle<Arc<WriterQueue>> {
        std::thread::spawn(move || {
            for write in writes {
                std::thread::sleep(gap);
                assert!(tx.send(Command::Write(write)).is_ok(), "queued");
            }
            drop(intent);
            tx
        })
    }

    /// A batch of one event for `thread` after its seq `after`.
    fn step(thread: &ThreadId, after: u64) -> Batch {
        Batch {
            guards: vec![Guard::LastSeq { thread: thread.clone(), seq: Seq(after) }],
            events: vec![crate::event::NewEvent {
                thread: thread.clone(),
                kind: crate::event::EventKind::ThreadCreated,
                node: None,
                status: crate::event::EventStatus::Info,
                summary: format!("step {}", after + 1),
                payload: None,
                data: Vec::new(),
                at_ms: after,
                correlation: None,
            }],
            ..Batch::default()
        }
    }

    /// The record of `thread` as committed (read in a fresh read transaction, not the cache).
    fn committed(writer: &Writer, thread: &ThreadId) -> Option<crate::thread::ThreadRecord> {
        use ::redb::ReadableDatabase;
        let txn = writer.db.as_ref().expect("open").begin_read().expect("read");
        super::super::read::thread(&txn, thread).expect("readable")
    }

    /// A one-thread commit (steps, the thread's end with a label, its completion checkpoint
    /// with a tag) touches the log, the thread record, the checkpoint and its snapshot, and
    /// one index table: format v5 touched five index tables for it (`threads_by_status`,
    /// `threads_by_label`, `checkpoints_by_thread`, `checkpoints_by_workflow`,
    /// `checkpoints_by_tag`), and redb pays per table a commit touches.
    #[test]
    fn a_thread_commit_touches_one_index_table() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut writer = writer_on(dir.path());
        let rx = WriterQueue::new(1);
        let a = ThreadId::new("a").expect("id");
        let (first, created) = write(create(&a));
        assert!(group(&mut writer, Taken::one(first), Some(&rx)).is_none());
        created.blocking_recv().expect("answered").expect("created");
        let mut batch = step(&a, 0);
        let mut record = create(&a).threads.remove(0);
        record.status = crate::thread::ThreadStatus::Completed;
        record.labels.insert("customer".into(), "c-1".into());
        batch.threads.push(record.clone());
        batch.checkpoints.push(crate::checkpoint::NewCheckpoint {
            thread: a.clone(),
            workflow: record.workflow.clone(),
            kind: crate::checkpoint::CheckpointKind::Completion,
            snapshot: vec![1, 2, 3],
            meta: crate::checkpoint::CheckpointMeta {
                tags: vec!["done".into()],
                ..crate::checkpoint::CheckpointMeta::default()
            },
            created_at_ms: 1,
        });
        let (next, answer) = write(batch);
        assert!(group(&mut writer, Taken::one(next), Some(&rx)).is_none());
        answer.blocking_recv().expect("answered").expect("appended");
        // `queue_members` is read, not written: an ended thread leaves its queue, if any.
        assert_eq!(
            writer.tables_opened,
            ["events_table", "queue_members", "index"],
            "the tables of a one-thread commit"
        );
    }

    /// A group rewrites each thread record it changes once, whatever number of the thread's
    /// batches it holds (a runner's pipelined steps), and what it writes is the record after
    /// the last of them; a delete later in the same group still removes the thread whole.
    #[test]
    fn a_group_writes_each_thread_record_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut writer = writer_on(dir.path());
        let rx = Arc::new(WriterQueue::new(64));
        let tx = rx.clone();
        let a = ThreadId::new("a").expect("id");
        let b = ThreadId::new("b").expect("id");
        let (first, answer) = write(create(&a));
        assert!(group(&mut writer, Taken::one(first), Some(&rx)).is_none());
        answer.blocking_recv().expect("answered").expect("created");
        // Ten batches of `a` and two of `b`, all queued before the group starts.
        let mut answers = Vec::new();
        for n in 0..10 {
            let (next, answer) = write(step(&a, n));
            answers.push(answer);
            if n == 0 {
                let (create_b, created) = write(create(&b));
                assert!(tx.send(Command::Write(create_b)).is_ok(), "queued");
                answers.push(created);
                let (step_b, stepped) = write(step(&b, 0));
                assert!(tx.send(Command::Write(step_b)).is_ok(), "queued");
                answers.push(stepped);
            }
            assert!(tx.send(Command::Write(next)).is_ok(), "queued");
        }
        let Some(Command::Write(first)) = rx.try_recv() else { panic!("a queued write") };
        assert!(group(&mut writer, Taken::one(first), Some(&rx)).is_none());
        for answer in answers {
            answer.blocking_recv().expect("answered").expect("appended");
        }
        assert_eq!(writer.last_group, 2, "one group of both threads");
        assert_eq!(writer.thread_rows, 2, "one row per thread, not one per batch");
        let last = |record: Option<crate::thread::ThreadRecord>| {
            record.and_then(|r| r.last).map(|b| b.seq)
        };
        assert_eq!(last(committed(&writer, &a)), Some(Seq(10)), "the record after the last batch");
        assert_eq!(last(committed(&writer, &b)), Some(Seq(1)));
        // Two more steps of `a` and its deletion in one group: no row of `a` is left behind.
        let (first, stepped) = write(step(&a, 10));
        let (next, stepped_again) = write(step(&a, 11));
        assert!(tx.send(Command::Write(next)).is_ok(), "queued");
        let (delete_tx, deleted) = oneshot::channel();
        let force = crate::delete::DeleteOptions { force: true };
        assert!(tx.send(Command::Write(Write::DeleteThread(a.clone(), force, delete_tx))).is_ok());
        assert!(group(&mut writer, Taken::one(first), Some(&rx)).is_none());
        stepped.blocking_recv().expect("answered").expect("appended");
        stepped_again.blocking_recv().expect("answered").expect("appended");
        let deleted = deleted.blocking_recv().expect("answered").expect("deleted");
        assert_eq!(deleted.map(|d| d.events), Some(12), "every event of the thread went");
        assert!(committed(&writer, &a).is_none(), "the deleted thread has no record");
        assert_eq!(last(committed(&writer, &b)), Some(Seq(1)), "the other thread is untouched");
    }

    /// The frames of the log as committed: (thread, first seq, events) each, in lsn order.
    fn frames(writer: &Writer) -> Vec<(String, u64, usize)> {
        use ::redb::{ReadableDatabase, ReadableTable};
        let txn = writer.db.as_ref().expect("open").begin_read().expect("read");
        let log = txn.open_table(super::super::tables::EVENTS).expect("log");
        let mut out = Vec::new();
        for entry in log.iter().expect("iterate") {
            let (key, value) = entry.expect("entry");
            let events =
                super::super::log::decode_frame_at(key.value(), value.value()).expect("frame");
            let first = &events[0];
            out.push((first.thread.to_string(), first.bookmark.seq.0, events.len()));
        }
        out
    }

    /// A group frames the batches of one thread that it holds in a row once: a runner's
    /// pipelined steps become one record of the log, not one a batch; another thread's batch
    /// between them ends the run (a frame's lsns follow each other).
    #[test]
    fn a_group_frames_a_threads_batches_in_a_row_once() {
        let dir = tempfile::tempdir().expect("temp dir");
        let mut writer = writer_on(dir.path());
        let rx = Arc::new(WriterQueue::new(64));
        let tx = rx.clone();
        let a = ThreadId::new("a").expect("id");
        let b = ThreadId::new("b").expect("id");
        let (first, answer) = write(create(&a));
        assert!(group(&mut writer, Taken::one(first), Some(&rx)).is_none());
        answer.blocking_recv().expect("answered").expect("created");
        let mut answers = Vec::new();
        let queue = |write: Write| assert!(tx.send(Command::Write(write)).is_ok(), "queued");
        for n in 1..5 {
            let (batch, answer) = write(step(&a, n));
            queue(batch);
            answers.push(answer);
        }
        for batch in [create(&b), step(&b, 0)] {
            let (batch, answer) = write(batch);
            queue(batch);
            answers.push(answer);
        }
        for n in 5..8 {
            let (batch, answer) = write(step(&a, n));
            queue(batch);
            answers.push(answer);
        }
        let (first, answer) = write(step(&a, 0));
        answers.insert(0, answer);
        assert!(group(&mut writer, Taken::one(first), Some(&rx)).is_none());
        for answer in answers {
            answer.blocking_recv().expect("answered").expect("appended");
        }
        let expected = [("a", 1, 5), ("b", 1, 1), ("a", 6, 3)];
        let expected: Vec<_> = expected.iter().map(|(t, s, n)| (t.to_string(), *s, *n)).collect();
        assert_eq!(frames(&writer), expected, "a frame per run of a thread in the group");
    }

    /// A group kept open only for announced writes sleeps until their intent is withdrawn and
    /// then takes what was queued meanwhile: it does not wake for each write (a runner's
    /// pipelined batches used to wake the writer one by one, a thread switch each).
    #[test]
    fn a_group_open_for_an_intent_wakes_once_when_it_is_withdrawn() {
        let dir = tempfile::tempdir().expect("temp dir");
        let (mut writer, rx) = waiting_writer_on(dir.path(), 64);
        let tx = rx.clone();
        let a = ThreadId::new("a").expect("id");
        let intent = writer.intents.hold();
        let (first, created) = write(create(&a));
        let mut batches = Vec::new();
        let mut answers = Vec::new();
        for n in 0..10 {
            let (batch, answer) = write(step(&a, n));
            batches.push(batch);
            answers.push(answer);
        }
        // The runner: ten batches a few ms apart, then it settles (withdraws its intent).
        let runner = announced(tx, intent, batches, Duration::from_millis(5));
        let started = Instant::now();
        assert!(group(&mut writer, Taken::one(first), Some(&rx)).is_none());
        let tx = runner.join().expect("runner");
        assert!(started.elapsed() < Duration::from_secs(10), "committed when the intent went");
        created.blocking_recv().expect("answered").expect("created");
        for answer in answers {
            answer.blocking_recv().expect("answered").expect("appended");
        }
        assert_eq!(writer.thread_rows, 1, "the creation and the ten batches in one group");
        assert!(writer.waits <= 2, "woken {} times for one runner's batches", writer.waits);
        drop(tx);
    }

    /// A queue of `depth` with a writer (not durable) resting in it, and no writer's thread:
    /// whatever is applied is applied by the caller.
    fn resting(dir: &std::path::Path, depth: usize) -> WriterQueue {
        let queue = WriterQueue::new(depth);
        queue.rest(Box::new(writer_on(dir)), false);
        queue
    }

    fn id(name: &str) -> ThreadId {
        ThreadId::new(name).expect("id")
    }

    /// With the writer resting and nothing queued, a hand-over is committed before
    /// `commit_alone` returns, on the caller's thread (this test has no writer's thread).
    #[test]
    fn a_lone_hand_over_is_committed_on_the_callers_thread() {
        let dir = tempfile::tempdir().expect("temp dir");
        let queue = resting(dir.path(), 4);
        let (first, mut first_answer) = write(create(&id("a")));
        let (again, mut again_answer) = write(create(&id("a")));
        assert!(commit_alone(&queue, vec![first, again]).is_ok(), "committed alone");
        first_answer.try_recv().expect("answered").expect("created");
        let refused = again_answer.try_recv().expect("answered");
        assert!(matches!(refused, Err(Error::GuardFailed { .. })), "{refused:?}");
        assert!(queue.take_idle(|_| true).is_some(), "the writer rests again");
    }

    /// The hand-over goes to the writer's thread (given back, untouched) whenever committing it
    /// alone could reorder writes, keep others from a shared group, sync on the caller's thread,
    /// or hold the caller long.
    #[test]
    fn a_hand_over_goes_to_the_writers_thread_unless_it_is_alone_small_and_not_durable() {
        let dir = tempfile::tempdir().expect("temp dir");
        let given_back = |queue: &WriterQueue, why: &str| {
            let (w, mut answer) = write(create(&id("b")));
            assert!(commit_alone(queue, vec![w]).is_err(), "{why}: committed alone");
            assert!(answer.try_recv().is_err(), "{why}: answered");
        };
        // A command queued before it: it must come first.
        let queue = resting(dir.path(), 4);
        let (queued, _answer) = write(create(&id("q")));
        assert!(queue.send(Command::Write(queued)).is_ok());
        given_back(&queue, "a command queued before it");
        drop(queue);
        // Another write announced: the writer's thread would share its group with it.
        let dir = tempfile::tempdir().expect("temp dir");
        let queue = resting(dir.path(), 4);
        let writer = queue.take_idle(|_| true).expect("resting");
        let intent = writer.intents.hold();
        queue.rest(writer, false);
        given_back(&queue, "an intent held");
        drop(intent);
        // The writer busy (its thread, or another caller, holds it).
        let writer = queue.take_idle(|_| true).expect("resting");
        given_back(&queue, "the writer busy");
        // A durable group: never synced on a caller's thread.
        let mut writer = writer;
        writer.durability = Durability::Immediate;
        queue.rest(writer, false);
        given_back(&queue, "a durable group");
        let mut writer = queue.take_idle(|_| true).expect("resting");
        writer.durability = Durability::None;
        queue.rest(writer, false);
        // Too large.
        let mut big = create(&id("c"));
        big.payloads.push(vec![0; ALONE_BYTES_MAX + 1]);
        let (w, mut answer) = write(big);
        assert!(commit_alone(&queue, vec![w]).is_err(), "a large hand-over committed alone");
        assert!(answer.try_recv().is_err());
        // Control: the same queue and writer commit a small one alone.
        let (w, mut answer) = write(create(&id("d")));
        assert!(commit_alone(&queue, vec![w]).is_ok(), "not committed alone");
        answer.try_recv().expect("answered").expect("created");
    }

    /// The gathering target counts threads, not writes: a runner's pipelined batches arrive
    /// together, so after a group of ten batches of one thread the next group does not wait for
    /// ten writes (a new thread's first write used to wait a commit time for them).
    #[test]
    fn a_group_counts_its_callers_once_each() {
        let mut callers = Callers::default();
        for _ in 0..10 {
            callers.add(&append("a"));
        }
        assert_eq!(callers.count(), 1, "ten pipelined batches of one thread");
        callers.add(&append("b"));
        let (tx, _rx) = oneshot::channel();
        callers.add(&Write::DeleteCheckpoint(CheckpointId(1), tx));
        assert_eq!(callers.count(), 3, "another thread, and a write that names none");
    }
}
