//! Restore: the thread context at a seq = the latest checkpoint at or before it + the events after.
//!
//! The cost is one checkpoint load plus the events since that checkpoint, so it does not grow with
//! the length of the thread's history as long as checkpoints are taken (periodic policy).
//!
//! [`Restore`] is the whole procedure without I/O: it says which read it needs next
//! ([`Read`]), is handed the answer, and folds it, until it has the context and says where it
//! started ([`Origin`]: a checkpoint's id and seq, or the first event). Its entries are the
//! context after a seq, the context a checkpoint holds (the rollback of `restore_and_retry`, the
//! start of the resume check's replay) and the context after the first event. One driver makes
//! the reads (`exec::fetch::restored`, with the store's async reads), so the engine, the debug
//! tools, the test kit and the reliability suites all restore through this one machine, and
//! nothing else looks up a thread's checkpoints to rebuild a context.
//!
//! A checkpoint that fails its checks (damaged bytes, a snapshot that does not decode or does
//! not match the seq it claims) is skipped with a warning: the next older one is used, and
//! failing all of them the thread's first event. The log is the source of truth; checkpoints
//! only bound the cost, so a damaged one costs time, never data.

use std::collections::VecDeque;

use cairn_dsl::DynWorkflow;
use cairn_storage::{Checkpoint, CheckpointId, CheckpointInfo, Event, PayloadRef, Seq, ThreadId};

use crate::codec;
use crate::error::Error;
use crate::limits;
use crate::thread_ctx::{Snapshot, ThreadCtx};

/// Decodes a checkpoint's snapshot bytes.
///
/// # Errors
/// [`Error::Record`] if the bytes are not a snapshot.
pub fn decode_snapshot(thread: &ThreadId, seq: u64, bytes: &[u8]) -> Result<Snapshot, Error> {
    serde_json::from_slice(bytes).map_err(|e| {
        Error::record(thread, seq, format!("checkpoint snapshot does not decode: {e}"))
    })
}

/// A read [`Restore`] needs, of its thread.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Read {
    /// The newest checkpoint covering a seq at or before `at` ([`Answer::Checkpoint`]).
    Latest {
        /// The seq.
        at: Seq,
    },
    /// The thread's checkpoints ([`Answer::Checkpoints`]), to find an older intact one.
    Checkpoints,
    /// One checkpoint ([`Answer::Checkpoint`]).
    Checkpoint(CheckpointId),
    /// The events from seq `from` to `to` ([`Answer::Events`]).
    Range {
        /// First seq.
        from: Seq,
        /// Last seq.
        to: Seq,
    },
    /// At most `limit` events after seq `after` ([`Answer::Events`]).
    Since {
        /// The seq the events follow.
        after: Seq,
        /// Most events.
        limit: usize,
    },
    /// An event's offloaded payload ([`Answer::Payload`]).
    Payload(PayloadRef),
}

/// The answer to a [`Read`].
#[derive(Debug, Clone)]
pub enum Answer {
    /// A checkpoint, or none.
    Checkpoint(Option<Checkpoint>),
    /// A list of checkpoints.
    Checkpoints(Vec<CheckpointInfo>),
    /// Events, in seq order.
    Events(Vec<Event>),
    /// A payload's bytes.
    Payload(Vec<u8>),
}

/// What [`Restore::step`] asks for next.
#[derive(Debug)]
pub enum Next {
    /// Make this read and hand the answer to the next [`Restore::step`].
    Read(Read),
    /// The restored context, and where the restore started.
    Done(Restored),
}

/// Where a restore started: the checkpoint whose context the events after it were folded onto,
/// or the thread's first event (no intact checkpoint at or before the target).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Origin {
    /// An intact checkpoint.
    Checkpoint {
        /// Its id.
        id: CheckpointId,
        /// The last seq it covers.
        seq: u64,
        /// When it was written (engine clock): what a periodic checkpoint every T ms counts
        /// from when a runner starts from it (it is the thread's latest intact checkpoint).
        at_ms: u64,
    },
    /// The thread's first event.
    Creation,
}

impl Origin {
    /// The last seq the origin's checkpoint covers; 0 for [`Origin::Creation`] (no checkpoint:
    /// every event of the thread is after it).
    pub fn covered(self) -> u64 {
        match self {
            Origin::Checkpoint { seq, .. } => seq,
            Origin::Creation => 0,
        }
    }

    /// When the origin's checkpoint was written; `None` for [`Origin::Creation`].
    pub fn checkpoint_at_ms(self) -> Option<u64> {
        match self {
            Origin::Checkpoint { at_ms, .. } => Some(at_ms),
            Origin::Creation => None,
        }
    }

    fn of(cp: &Checkpoint) -> Origin {
        Origin::Checkpoint { id: cp.id, seq: cp.covers.seq.0, at_ms: cp.created_at_ms }
    }
}

/// A finished [`Restore`].
#[derive(Debug)]
pub struct Restored {
    /// The context.
    pub ctx: Box<ThreadCtx>,
    /// Where the restore started.
    pub from: Origin,
    /// The context at [`Restored::from`], before any event was folded onto it: kept when
    /// asked for with [`Restore::keeping_start`].
    pub start: Option<Box<ThreadCtx>>,
}

/// Where a [`Restore`] is.
#[derive(Debug)]
enum Phase {
    /// Nothing asked yet; `created_only`: start from the first event, fold nothing after it.
    Start { created_only: bool },
    /// Asked for the latest checkpoint.
    Latest,
    /// A checkpoint was damaged: asked for the list, to try older ones below `below`.
    List { below: u64 },
    /// Asked for the first of `left` (older intact candidates, newest first).
    Candidate { left: VecDeque<CheckpointId> },
    /// Asked for the first event (and the first page after it, unless only the creation is
    /// wanted).
    First,
    /// Asked for the payload of the first event; `rest` and `full` as in `Fold`.
    FirstPayload { event: Event, rest: VecDeque<Event>, full: bool },
    /// Folding events onto `ctx`: `chunk` is the rest of the last page read, `full` whether
    /// that page was full (more may follow); `waiting` an event whose payload was asked for.
    Fold { ctx: Box<ThreadCtx>, chunk: VecDeque<Event>, full: bool, waiting: Option<Event> },
    /// Finished (or failed).
    Over,
}

/// The restore of one thread's context, as a machine without I/O: call [`Restore::step`] with
/// `None`, then with the answer to each [`Read`] it asks for, until it says [`Next::Done`].
/// `cairn::blocking::restore` drives it with a store's reads.
///
/// Its entries: [`Restore::new`] (the context after a seq), [`Restore::at_checkpoint`] (the
/// context a checkpoint holds, no event folded on) and [`Restore::created`] (the context after
/// the first event). Each says where it started ([`Restored::from`]).
#[derive(Debug)]
pub struct Restore<'w> {
    wf: &'w DynWorkflow,
    thread: ThreadId,
    /// Fold up to this seq (and start from a checkpoint at or before it).
    target: u64,
    /// Finish where it starts: fold no event.
    at_origin: bool,
    /// Keep a copy of the context it starts from ([`Restored::start`]).
    keep_start: bool,
    from: Origin,
    start: Option<Box<ThreadCtx>>,
    phase: Phase,
}

/// An answer, or the storage error the read failed with.
pub type Answered = Result<Answer, cairn_storage::Error>;

impl<'w> Restore<'w> {
    /// The restore of `thread`'s context after the event at `at` (after its last event when
    /// `None`): its newest intact checkpoint at or before `at`, and the events after it.
    pub fn new(wf: &'w DynWorkflow, thread: ThreadId, at: Option<u64>) -> Self {
        Restore {
            wf,
            thread,
            target: at.unwrap_or(u64::MAX),
            at_origin: false,
            keep_start: false,
            from: Origin::Creation,
            start: None,
            phase: Phase::Start { created_only: false },
        }
    }

    /// The restore of the context `thread`'s newest intact checkpoint at or before `at` holds
    /// (its latest when `None`), with no event folded onto it: the checkpoint [`Restore::new`]
    /// would start from, found the same way (a damaged one skipped for an older one). Without an
    /// intact checkpoint, the context after the first event ([`Origin::Creation`]).
    pub fn at_checkpoint(wf: &'w DynWorkflow, thread: ThreadId, at: Option<u64>) -> Self {
        Restore { at_origin: true, ..Restore::new(wf, thread, at) }
    }

    /// The restore of the context right after `thread`'s first event (its creation).
    pub fn created(wf: &'w DynWorkflow, thread: ThreadId) -> Self {
        Restore {
            target: 1,
            phase: Phase::Start { created_only: true },
            ..Self::new(wf, thread, None)
        }
    }

    /// This restore, keeping a copy of the context it starts from (before folding any event
    /// onto it) in [`Restored::start`].
    #[must_use]
    pub fn keeping_start(self) -> Self {
        Restore { keep_start: true, ..self }
    }

    /// Takes the answer to the last read asked for (`None` for the first call) and says what
    /// is needed next.
    ///
    /// # Errors
    /// [`Error::UnknownThread`] if the thread has no events; [`Error::Record`] if the log does
    /// not fold (damage or a different workflow); the storage error of a read whose failure
    /// restore cannot work around.
    ///
    /// # Panics
    /// If called again after it returned [`Next::Done`] or an error, or with an answer of
    /// another kind than the read asked for (a bug of the driver).
    pub fn step(&mut self, answer: Option<Answered>) -> Result<Next, Error> {
        let phase = std::mem::replace(&mut self.phase, Phase::Over);
        match (phase, answer) {
            (Phase::Start { created_only: true }, None) => Ok(self.first()),
            (Phase::Start { created_only: false }, None) => {
                self.phase = Phase::Latest;
                Ok(Next::Read(Read::Latest { at: Seq(self.target) }))
            }
            (Phase::Latest, Some(answer)) => self.latest(answer),
            (Phase::List { below }, Some(answer)) => Ok(self.listed(below, answer)),
            (Phase::Candidate { left }, Some(answer)) => self.candidate_read(left, answer),
            (Phase::First, Some(answer)) => self.first_read(answer),
            (Phase::FirstPayload { event, rest, full }, Some(answer)) => {
                let Answer::Payload(data) = answer? else { panic!("a payload was asked for") };
                self.created_from(Event { data, ..event }, rest, full)
            }
            (Phase::Fold { ctx, chunk, full, waiting }, answer) => {
                self.fold(ctx, chunk, full, waiting, answer)
            }
            (phase, answer) => panic!("restore at {phase:?} given {answer:?}"),
        }
    }

    /// The latest checkpoint at or before the target, read.
    fn latest(&mut self, answer: Answered) -> Result<Next, Error> {
        match answer {
            Ok(Answer::Checkpoint(None)) => Ok(self.first()),
            Ok(Answer::Checkpoint(Some(cp))) => match from_checkpoint(self.wf, &self.thread, &cp) {
                Ok(ctx) => self.started(ctx, Origin::of(&cp), VecDeque::new(), true),
                Err(e) if damage(&e) => Ok(self.older(cp.covers.seq.0, &e)),
                Err(e) => Err(e),
            },
            Ok(other) => panic!("a checkpoint was asked for, not {other:?}"),
            Err(e) => {
                let e = Error::from(e);
                if !damage(&e) {
                    return Err(e);
                }
                Ok(self.older(self.target.saturating_add(1), &e))
            }
        }
    }

    /// The thread's checkpoints, listed to find intact ones below `below`.
    fn listed(&mut self, below: u64, answer: Answered) -> Next {
        match answer {
            Ok(Answer::Checkpoints(mut infos)) => {
                infos.retain(|i| i.covers.seq.0 < below);
                infos.sort_by(|a, b| b.covers.seq.cmp(&a.covers.seq).then(b.id.cmp(&a.id)));
                let left = infos.into_iter().take(limits::RESTORE_FALLBACK_CHECKPOINTS_MAX);
                self.candidate(left.map(|i| i.id).collect())
            }
            Ok(other) => panic!("the checkpoints were asked for, not {other:?}"),
            Err(e) => {
                // The index itself is damaged: the log alone still restores the thread.
                tracing::warn!(thread = %self.thread, error = %e, "checkpoint list unreadable; folding the whole log");
                self.first()
            }
        }
    }

    /// The first of the candidates `left`, read: started from if intact, else the next one.
    fn candidate_read(
        &mut self,
        mut left: VecDeque<CheckpointId>,
        answer: Answered,
    ) -> Result<Next, Error> {
        let id = left.pop_front().expect("a candidate was asked for");
        let loaded = match answer {
            Ok(Answer::Checkpoint(Some(cp))) => {
                from_checkpoint(self.wf, &self.thread, &cp).map(|ctx| (ctx, Origin::of(&cp)))
            }
            Ok(Answer::Checkpoint(None)) => return Ok(self.candidate(left)),
            Ok(other) => panic!("a checkpoint was asked for, not {other:?}"),
            Err(e) => Err(e.into()),
        };
        match loaded {
            Ok((ctx, from)) => self.started(ctx, from, VecDeque::new(), true),
            Err(e) if damage(&e) => {
                tracing::warn!(thread = %self.thread, checkpoint = id.0, error = %e, "checkpoint damaged");
                Ok(self.candidate(left))
            }
            Err(e) => Err(e),
        }
    }

    /// The first event (and the page after it), read: the context it creates, once its payload
    /// is read if offloaded.
    fn first_read(&mut self, answer: Answered) -> Result<Next, Error> {
        let Answer::Events(events) = answer? else { panic!("the first event was asked for") };
        let full = events.len() >= limits::READ_CHUNK_EVENTS;
        let mut rest = VecDeque::from(events);
        let Some(event) = rest.pop_front() else {
            return Err(Error::UnknownThread(self.thread.to_string()));
        };
        if let Some(r) = offloaded(&event) {
            let read = Read::Payload(*r);
            self.phase = Phase::FirstPayload { event, rest, full };
            return Ok(Next::Read(read));
        }
        self.created_from(event, rest, full)
    }

    /// Asks for the first event: with the page of events after it in the same read when they
    /// are to be folded (a thread's first events share a frame, which one read decodes once).
    fn first(&mut self) -> Next {
        self.phase = Phase::First;
        Next::Read(if self.at_origin {
            Read::Range { from: Seq(1), to: Seq(1) }
        } else {
            Read::Since { after: Seq(0), limit: limits::READ_CHUNK_EVENTS }
        })
    }

    /// The context the first event creates, and the events after it folded on (up to the
    /// target): `rest` of the first page first, `full` whether that page was full.
    fn created_from(
        &mut self,
        event: Event,
        rest: VecDeque<Event>,
        full: bool,
    ) -> Result<Next, Error> {
        let rec = codec::decode_loaded(event)?;
        let ctx = ThreadCtx::created(self.wf, self.thread.as_str(), &rec.body, rec.bookmark.at_ms)?;
        self.started(ctx, Origin::Creation, rest, full)
    }

    /// Starts from `ctx` (at `from`): done if nothing is to be folded onto it, else folding
    /// `chunk` (the events after it already read; `full`: more may follow), then the pages after.
    fn started(
        &mut self,
        ctx: ThreadCtx,
        from: Origin,
        chunk: VecDeque<Event>,
        full: bool,
    ) -> Result<Next, Error> {
        self.from = from;
        if self.keep_start {
            self.start = Some(Box::new(ctx.clone()));
        }
        if self.at_origin || ctx.meta.seq >= self.target {
            return Ok(self.done(Box::new(ctx)));
        }
        self.fold(Box::new(ctx), chunk, full, None, None)
    }

    fn done(&mut self, ctx: Box<ThreadCtx>) -> Next {
        Next::Done(Restored { ctx, from: self.from, start: self.start.take() })
    }

    fn folding(&mut self, ctx: ThreadCtx) -> Next {
        let read = Read::Since { after: Seq(ctx.meta.seq), limit: limits::READ_CHUNK_EVENTS };
        self.phase =
            Phase::Fold { ctx: Box::new(ctx), chunk: VecDeque::new(), full: true, waiting: None };
        Next::Read(read)
    }

    fn older(&mut self, below: u64, why: &Error) -> Next {
        tracing::warn!(thread = %self.thread, error = %why, "checkpoint damaged; restoring from an older one");
        self.phase = Phase::List { below };
        Next::Read(Read::Checkpoints)
    }

    fn candidate(&mut self, left: VecDeque<CheckpointId>) -> Next {
        match left.front() {
            Some(id) => {
                let read = Read::Checkpoint(*id);
                self.phase = Phase::Candidate { left };
                Next::Read(read)
            }
            None => self.first(),
        }
    }

    /// Folds what is left of the page onto `ctx`, asking for payloads and further pages.
    fn fold(
        &mut self,
        mut ctx: Box<ThreadCtx>,
        mut chunk: VecDeque<Event>,
        mut full: bool,
        waiting: Option<Event>,
        answer: Option<Answered>,
    ) -> Result<Next, Error> {
        if let Some(answer) = answer {
            match (answer?, waiting) {
                (Answer::Payload(data), Some(event)) => chunk.push_front(Event { data, ..event }),
                (Answer::Events(events), None) => {
                    full = events.len() >= limits::READ_CHUNK_EVENTS;
                    chunk = events.into();
                }
                (other, _) => panic!("folding given {other:?}"),
            }
        }
        while let Some(event) = chunk.pop_front() {
            if event.bookmark.seq.0 > self.target {
                return Ok(self.done(ctx));
            }
            if let Some(r) = offloaded(&event) {
                let read = Read::Payload(*r);
                self.phase = Phase::Fold { ctx, chunk, full, waiting: Some(event) };
                return Ok(Next::Read(read));
            }
            let rec = codec::decode_loaded(event)?;
            ctx.apply(rec.bookmark.seq.0, rec.bookmark.at_ms, &rec.body)?;
        }
        if !full {
            return Ok(self.done(ctx));
        }
        Ok(self.folding(*ctx))
    }
}

/// The payload to read before `event` decodes: its body was offloaded and is not loaded yet.
pub fn offloaded(event: &Event) -> Option<&PayloadRef> {
    event.payload.as_ref().filter(|_| event.data.is_empty())
}

/// The context a checkpoint holds, checked against the seq it claims to cover.
pub fn from_checkpoint(
    wf: &DynWorkflow,
    thread: &ThreadId,
    cp: &Checkpoint,
) -> Result<ThreadCtx, Error> {
    let snapshot = decode_snapshot(thread, cp.covers.seq.0, &cp.snapshot)?;
    if snapshot.meta.seq != cp.covers.seq.0 {
        let detail = format!(
            "checkpoint {} covers seq {} but its snapshot is at {}",
            cp.id.0, cp.covers.seq, snapshot.meta.seq
        );
        return Err(Error::record(thread, cp.covers.seq.0, detail));
    }
    ThreadCtx::from_snapshot(wf, snapshot)
}

/// Whether `e` says a checkpoint is damaged (rather than that storage cannot be read at all).
pub fn damage(e: &Error) -> bool {
    matches!(
        e,
        Error::Record { .. }
            | Error::Codec(_)
            | Error::Storage(cairn_storage::Error::Corrupted { .. })
    )
}
