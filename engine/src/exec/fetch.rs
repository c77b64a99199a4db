//! What the engine's async paths read through the store (each read a `Reading`, awaited): a
//! thread's record, its context (restore), an event's body with its
//! payload, its child threads. On PostgreSQL each read is awaited, so a round trip to the server
//! suspends the task and blocks no runtime worker; on a file the reads answer at once.
//!
//! `core` does no I/O: the reads are made here and their data handed to it (the
//! [`Restore`] machine says which read it needs next; `core::codec::decode_loaded` decodes an
//! event whose payload is loaded already). `blocking.rs` waits for these same functions
//! for callers off the runtime (the test kit, `cairn::blocking::restore`). The debug tools
//! (`debug/`), the CLI and the endpoint read through here.

use cairn_dsl::DynWorkflow;
use cairn_storage::{CheckpointFilter, CheckpointInfo, Event, Page, Store, ThreadId};
use cairn_storage::{ThreadRecord, ThreadStatus};

use crate::core::children::{CHILDREN_PAGE, PARENT_LABEL, children_page};
use crate::core::codec::{self, Recorded};
use crate::core::restore::{Answer, Answered, Next, Read, Restore, Restored, offloaded};
use crate::core::thread_ctx::ThreadCtx;
use crate::error::Error;
use crate::limits;

/// The stored record of `id`.
///
/// # Errors
/// [`Error::UnknownThread`]; storage errors.
pub(crate) async fn record(store: &dyn Store, id: &ThreadId) -> Result<ThreadRecord, Error> {
    store.thread(id).await?.ok_or_else(|| Error::UnknownThread(id.to_string()))
}

/// The stored status of `id`, if it exists.
///
/// # Errors
/// Storage errors.
pub(crate) async fn status(
    store: &dyn Store,
    id: &ThreadId,
) -> Result<Option<ThreadStatus>, Error> {
    Ok(store.thread(id).await?.map(|r| r.status))
}

/// Decodes a stored event's body, its payload read first when it was offloaded.
///
/// # Errors
/// As [`codec::decode_loaded`]; storage errors reading the payload.
pub(crate) async fn decode(store: &dyn Store, event: Event) -> Result<Recorded, Error> {
    let event = match offloaded(&event) {
        Some(r) => {
            let data = store.payload(r).await?;
            Event { data, ..event }
        }
        None => event,
    };
    Ok(codec::decode_loaded(event)?)
}

/// [`decode`], then the id of the checkpoint a `checkpoint_created` event announces filled in
/// from the store (see [`crate::core::event::Body::CheckpointCreated`]): what event streams and
/// `cairn events` give; restore and replay fold the log as stored.
///
/// # Errors
/// As [`decode`]; storage errors reading the checkpoint index.
pub(crate) async fn decode_announced(store: &dyn Store, event: Event) -> Result<Recorded, Error> {
    let mut rec = decode(store, event).await?;
    if let crate::core::event::Body::CheckpointCreated { checkpoint, .. } = &mut rec.body {
        *checkpoint = store.checkpoint_covering(&rec.thread, rec.bookmark.seq).await?;
    }
    Ok(rec)
}

/// The context of `thread` after the event at `at` (or after its last event): the
/// [`Restore`] machine driven with the store's async reads (see [`restored`]).
///
/// # Errors
/// As [`Restore::step`].
pub(crate) async fn restore(
    store: &dyn Store,
    wf: &DynWorkflow,
    thread: &ThreadId,
    at: Option<u64>,
) -> Result<ThreadCtx, Error> {
    let restored = restored(store, thread, || Restore::new(wf, thread.clone(), at)).await?;
    Ok(*restored.ctx)
}

/// The restore `entry` makes (one of [`Restore`]'s entries, for `thread`), run to its end with
/// the store's async reads.
///
/// A restore whose reads met a prune between them (the checkpoint it read was replaced and the
/// events after it removed: `Pruned`) starts over, a new one from `entry`, at most
/// [`RESTORE_PRUNED_RETRIES`] times; a step that is really pruned answers `Pruned` again.
///
/// # Errors
/// As [`Restore::step`].
pub(crate) async fn restored<'w>(
    store: &dyn Store,
    thread: &ThreadId,
    entry: impl Fn() -> Restore<'w>,
) -> Result<Restored, Error> {
    let mut tries = 0;
    loop {
        match drive(store, thread, entry()).await {
            Err(Error::Storage(cairn_storage::Error::Pruned { .. }))
                if tries < RESTORE_PRUNED_RETRIES =>
            {
                tries += 1;
            }
            other => return other,
        }
    }
}

/// Times [`restored`] starts over after a concurrent prune (one prune per history pass, so one
/// retry is nearly always enough).
const RESTORE_PRUNED_RETRIES: u32 = 3;

/// Runs `restore` to its end, answering each read it asks for with the store's async reads.
async fn drive(
    store: &dyn Store,
    thread: &ThreadId,
    mut restore: Restore<'_>,
) -> Result<Restored, Error> {
    let mut answer = None;
    loop {
        match restore.step(answer.take())? {
            Next::Done(restored) => return Ok(restored),
            Next::Read(read) => answer = Some(read_answer(store, thread, read).await),
        }
    }
}

/// The answer to `read` of `thread`.
async fn read_answer(store: &dyn Store, thread: &ThreadId, read: Read) -> Answered {
    Ok(match read {
        Read::Latest { at } => {
            Answer::Checkpoint(store.latest_checkpoint_at_or_before(thread, at).await?)
        }
        Read::Checkpoints => {
            let (filter, page) = checkpoints_of(thread);
            Answer::Checkpoints(store.list_checkpoints(&filter, page).await?)
        }
        Read::Checkpoint(id) => Answer::Checkpoint(store.checkpoint(id).await?),
        Read::Range { from, to } => Answer::Events(store.read_range(thread, from, to).await?),
        Read::Since { after, limit } => {
            Answer::Events(store.read_since(thread, after, limit).await?)
        }
        Read::Payload(r) => Answer::Payload(store.payload(&r).await?),
    })
}

/// The listing [`Read::Checkpoints`] asks for.
pub(crate) fn checkpoints_of(thread: &ThreadId) -> (CheckpointFilter, Page) {
    let filter = CheckpointFilter { thread: Some(thread.clone()), ..CheckpointFilter::default() };
    (filter, Page { limit: limits::READ_CHUNK_EVENTS, offset: 0 })
}

/// Every checkpoint `filter` lists, a page at a time (listed newest first: one made meanwhile
/// may show twice).
///
/// # Errors
/// Storage errors.
pub(crate) async fn checkpoints_all(
    store: &dyn Store,
    filter: &CheckpointFilter,
) -> Result<Vec<CheckpointInfo>, Error> {
    every_page(limits::READ_CHUNK_EVENTS, |found| {
        store.list_checkpoints(filter, Page { limit: limits::READ_CHUNK_EVENTS, offset: found })
    })
    .await
}

/// The child threads of `parent` (every page of them).
///
/// # Errors
/// Storage errors.
pub(crate) async fn children_of(
    store: &dyn Store,
    parent: &ThreadId,
) -> Result<Vec<ThreadRecord>, Error> {
    every_page(CHILDREN_PAGE, |found| {
        let (filter, page) = children_page(parent, found);
        async move { store.list_threads(&filter, page).await }
    })
    .await
}

/// The records of the children `parent` started at run time (`ctx.start_child`), at most
/// `max` of them (read a page at a time).
///
/// # Errors
/// Storage errors.
pub(crate) async fn started_children_of(
    store: &dyn Store,
    parent: &ThreadId,
    max: usize,
) -> Result<Vec<ThreadRecord>, Error> {
    let mut out: Vec<ThreadRecord> = Vec::new();
    while out.len() < max {
        let (filter, page) = crate::core::child_start::started_page(parent, out.len());
        let found = store.list_threads(&filter, page).await?;
        let done = found.len() < page.limit;
        out.extend(found);
        if done {
            break;
        }
    }
    out.truncate(max);
    Ok(out)
}

/// Every item of a listing read `page` items at a time: `list(found)` reads the page after the
/// `found` items read so far, until a page comes back short.
async fn every_page<T, F>(page: usize, mut list: impl FnMut(usize) -> F) -> Result<Vec<T>, Error>
where
    F: std::future::Future<Output = Result<Vec<T>, cairn_storage::Error>>,
{
    let mut out = Vec::new();
    loop {
        let found = list(out.len()).await?;
        let done = found.len() < page;
        out.extend(found);
        if done {
            return Ok(out);
        }
    }
}

/// The unfinished parent of `record` if it is a sub-workflow's child whose parent has not
/// ended (named by its [`PARENT_LABEL`]): that parent's node drives it.
///
/// # Errors
/// Storage errors reading the parent's record.
pub(crate) async fn unfinished_parent(
    store: &dyn Store,
    record: &ThreadRecord,
) -> Result<Option<ThreadId>, Error> {
    let Some(parent) = record.labels.get(PARENT_LABEL) else { return Ok(None) };
    let parent = ThreadId::new(parent.clone())?;
    Ok(match store.thread(&parent).await? {
        Some(p) if !p.status.is_terminal() => Some(parent),
        _ => None,
    })
}
