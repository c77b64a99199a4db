//! Copying threads from one store to another (a redb file to PostgreSQL and back), through the
//! [`Store`] trait only: each thread's record, its whole log in order, its checkpoints (each
//! in the batch with the event it covers, so it covers the same seq), the payloads its events
//! refer to, and its signal inbox after the log (every signal with its number and send time, so
//! the receipts the log records name the same signals and those not yet received are received
//! after the move, in order, once). Seqs, timestamps, correlation ids and every byte of the events' bodies are kept
//! (the destination indexes the correlation ids at its own lsns); lsns and checkpoint
//! ids are the destination's (they are positions in a store, not in a thread). Leases are not
//! copied: a copied thread is driven by nobody until an engine on the destination takes it.
//! Both stores are read with their async reads, awaited: on PostgreSQL a round trip suspends
//! the copying task and blocks no thread of its runtime.
//!
//! # Examples
//! ```no_run
//! # async fn run(from: &dyn cairn_storage::Store, to: &dyn cairn_storage::Store) -> Result<(), cairn_storage::Error> {
//! let report = cairn_storage::copy::copy_all(from, to).await?;
//! assert!(report.skipped.is_empty(), "{:?}", report.skipped);
//! # Ok(()) }
//! ```

use crate::batch::{Batch, Guard};
use crate::checkpoint::NewCheckpoint;
use crate::error::Error;
use crate::event::NewEvent;
use crate::ids::{Seq, ThreadId};
use crate::store::{CheckpointFilter, Page, Store, ThreadFilter};

/// Events per batch written to the destination.
const COPY_BATCH_EVENTS: usize = 1_000;
/// Threads listed per page of the source.
const THREADS_PAGE: usize = 500;
/// Signals read per page of the source's inbox, and written per batch at most.
const SIGNALS_PAGE: usize = 500;

/// What a copy did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct CopyReport {
    /// Threads copied.
    pub copied: Vec<ThreadId>,
    /// Threads left alone, with why (already in the destination, pruned).
    pub skipped: Vec<(ThreadId, String)>,
    /// Events written.
    pub events: u64,
    /// Checkpoints written.
    pub checkpoints: u64,
    /// Payloads written (each once per batch that needs it; the destination keeps one copy).
    pub payloads: u64,
    /// Signals written (inbox entries, received or not).
    pub signals: u64,
}

/// Copies every thread of `from` into `to` (see the module documentation); a thread the
/// destination has already, or whose log was pruned, is skipped and reported.
///
/// # Errors
/// Reading the source or writing the destination failed; threads copied before stay copied.
pub async fn copy_all(from: &dyn Store, to: &dyn Store) -> Result<CopyReport, Error> {
    let mut report = CopyReport::default();
    let mut offset = 0;
    loop {
        let page = Page { limit: THREADS_PAGE, offset };
        let page = from.list_threads(&ThreadFilter::default(), page).await?;
        offset += page.len();
        for record in &page {
            copy_thread(from, to, &record.id, &mut report).await?;
        }
        if page.len() < THREADS_PAGE {
            return Ok(report);
        }
    }
}

/// Copies thread `id` of `from` into `to`, adding to `report`.
///
/// # Errors
/// [`Error::UnknownThread`] if the source has no such thread; reads and writes failing.
pub async fn copy_thread(
    from: &dyn Store,
    to: &dyn Store,
    id: &ThreadId,
    report: &mut CopyReport,
) -> Result<(), Error> {
    let record = from.thread(id).await?.ok_or_else(|| Error::UnknownThread(id.clone()))?;
    if record.first_seq.0 > 1 {
        let why = format!(
            "its log was pruned (it starts at seq {}): copy keeps logs whole",
            record.first_seq.0
        );
        report.skipped.push((id.clone(), why));
        return Ok(());
    }
    if to.thread(id).await?.is_some() {
        report.skipped.push((id.clone(), "the destination has a thread with this id".into()));
        return Ok(());
    }
    let mut checkpoints = checkpoints_of(from, id).await?.into_iter().peekable();
    let last = record.last.map_or(0, |b| b.seq.0);
    // The first batch creates the thread (its record as the source has it now) and checks that
    // nobody created it meanwhile.
    let mut batch = Batch {
        threads: vec![record.clone()],
        guards: vec![Guard::Absent { thread: id.clone() }],
        ..Batch::default()
    };
    let mut after = Seq(0);
    while after.0 < last {
        for event in from.read_since(id, after, COPY_BATCH_EVENTS).await? {
            after = event.bookmark.seq;
            if let Some(r) = event.payload
                && !batch.payloads.iter().any(|p| crate::ids::PayloadRef::of(p) == r)
            {
                batch.payloads.push(from.payload(&r).await?);
                report.payloads += 1;
            }
            // A v1 message event names its correlation id only in its body: the copy carries
            // it in the record, so the destination indexes it (`docs/format.md` §2.2).
            // Its payload, if it has one, is in the batch already (read just above).
            let correlation = crate::correlation::of(&event, |r| {
                let held = batch.payloads.iter().find(|p| crate::ids::PayloadRef::of(p) == *r);
                held.cloned().ok_or(Error::MissingPayload(*r))
            });
            batch.events.push(NewEvent {
                correlation,
                thread: event.thread,
                kind: event.kind,
                node: event.node,
                status: event.status,
                summary: event.summary,
                payload: event.payload,
                data: event.data,
                at_ms: event.bookmark.at_ms,
            });
            report.events += 1;
            let mut closes = false;
            while let Some(info) = checkpoints.next_if(|c| c.covers.seq == after) {
                batch.checkpoints.push(new_checkpoint(from, info.id).await?);
                report.checkpoints += 1;
                closes = true;
            }
            // A checkpoint covers the last event of its batch: it closes the batch. So does a
            // full batch, or one whose payloads reach a payload's size limit.
            let payload_bytes: usize = batch.payloads.iter().map(Vec::len).sum();
            if closes
                || batch.events.len() >= COPY_BATCH_EVENTS
                || payload_bytes >= crate::limits::PAYLOAD_BYTES_MAX
            {
                write(to, std::mem::take(&mut batch)).await?;
            }
        }
    }
    if !batch.is_empty() {
        write(to, batch).await?;
    }
    copy_inbox(from, to, id, report).await?;
    let copied_last = to.thread(id).await?.and_then(|r| r.last).map_or(0, |b| b.seq.0);
    if copied_last != last {
        return Err(Error::Invalid {
            detail: format!("thread {id} was copied up to seq {copied_last}, not {last}"),
        });
    }
    report.copied.push(id.clone());
    Ok(())
}

/// The checkpoints of thread `id` in `from`, oldest first, so each goes into the batch of the
/// event it covers.
async fn checkpoints_of(
    from: &dyn Store,
    id: &ThreadId,
) -> Result<Vec<crate::checkpoint::CheckpointInfo>, Error> {
    let mut checkpoints = Vec::new();
    let mut offset = 0;
    loop {
        let filter = CheckpointFilter { thread: Some(id.clone()), ..CheckpointFilter::default() };
        let page = from.list_checkpoints(&filter, Page { limit: THREADS_PAGE, offset }).await?;
        offset += page.len();
        let done = page.len() < THREADS_PAGE;
        checkpoints.extend(page);
        if done {
            break;
        }
    }
    checkpoints.sort_by_key(|c| (c.covers.seq, c.id));
    Ok(checkpoints)
}

/// Checkpoint `id` of `from`, as a copy writes it.
async fn new_checkpoint(
    from: &dyn Store,
    id: crate::ids::CheckpointId,
) -> Result<NewCheckpoint, Error> {
    let full = from.checkpoint(id).await?;
    let full = full.ok_or(Error::UnknownCheckpoint(id))?;
    Ok(NewCheckpoint {
        thread: full.thread,
        workflow: full.workflow,
        kind: full.kind,
        snapshot: full.snapshot,
        meta: full.meta,
        created_at_ms: full.created_at_ms,
    })
}

/// Copies thread `id`'s signal inbox, in number order, in batches that stay within the batch
/// bounds (a signal's value may be 256 KiB).
async fn copy_inbox(
    from: &dyn Store,
    to: &dyn Store,
    id: &ThreadId,
    report: &mut CopyReport,
) -> Result<(), Error> {
    let mut after = 0;
    loop {
        let page = from.signals(id, after, SIGNALS_PAGE).await?;
        let done = page.len() < SIGNALS_PAGE;
        let mut batch = Batch::default();
        let mut bytes = 0;
        for signal in page {
            if bytes + signal.data.len() > crate::limits::BATCH_BYTES_MAX {
                write(to, std::mem::take(&mut batch)).await?;
                bytes = 0;
            }
            after = signal.n;
            bytes += signal.data.len();
            batch.copied_signals.push(signal);
            report.signals += 1;
        }
        if !batch.is_empty() {
            write(to, batch).await?;
        }
        if done {
            return Ok(());
        }
    }
}

async fn write(to: &dyn Store, batch: Batch) -> Result<(), Error> {
    to.append(batch)?.wait().await.map(|_| ())
}
