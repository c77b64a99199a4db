//! Sync reads for callers off the runtime (the test kit, the reliability suites, a user's
//! `cairn::restore::restore`): the same [`Restore`] machine and decoding as `fetch.rs`, driven
//! with the store's sync reads. Nothing of the engine's own paths reads through here.

use cairn_dsl::DynWorkflow;
use cairn_storage::{Event, Store, ThreadId, ThreadRecord};

use super::fetch::checkpoints_of;
use crate::core::children::{CHILDREN_PAGE, children_page};
use crate::core::codec::{self, Recorded};
use crate::core::restore::{Answer, Answered, Next, Read, Restore, offloaded};
use crate::core::thread_ctx::ThreadCtx;
use crate::error::Error;

/// The context of `thread` after the event at `at` (after its last event when `None`), read
/// with the store's sync reads: the latest checkpoint at or before it and the events after
/// (a damaged checkpoint is skipped for an older one, failing all of them the first event).
///
/// # Errors
/// [`Error::UnknownThread`] if the thread has no events; [`Error::Record`] if the log does not
/// fold (damage or a different workflow); storage errors.
pub fn restore(
    store: &dyn Store,
    wf: &DynWorkflow,
    thread: &ThreadId,
    at: Option<u64>,
) -> Result<ThreadCtx, Error> {
    let mut restore = Restore::new(wf, thread.clone(), at);
    let mut answer = None;
    loop {
        match restore.step(answer.take())? {
            Next::Done(ctx) => return Ok(*ctx),
            Next::Read(read) => answer = Some(read_sync(store, thread, read)),
        }
    }
}

/// The answer to `read` of `thread`.
fn read_sync(store: &dyn Store, thread: &ThreadId, read: Read) -> Answered {
    Ok(match read {
        Read::Latest { at } => {
            Answer::Checkpoint(store.latest_checkpoint_at_or_before(thread, at)?)
        }
        Read::Checkpoints => {
            let (filter, page) = checkpoints_of(thread);
            Answer::Checkpoints(store.list_checkpoints(&filter, page)?)
        }
        Read::Checkpoint(id) => Answer::Checkpoint(store.checkpoint(id)?),
        Read::Range { from, to } => Answer::Events(store.read_range(thread, from, to)?),
        Read::Since { after, limit } => Answer::Events(store.read_since(thread, after, limit)?),
        Read::Payload(r) => Answer::Payload(store.payload(&r)?),
    })
}

/// Decodes a stored event's body, its payload read first when it was offloaded.
///
/// # Errors
/// [`Error::Record`] if the data is not a body this engine understands; storage errors if the
/// payload is missing or damaged.
pub fn decode(store: &dyn Store, event: Event) -> Result<Recorded, Error> {
    let event = match offloaded(&event) {
        Some(r) => Event { data: store.payload(r)?, ..event },
        None => event,
    };
    codec::decode_loaded(event)
}

/// The child threads of `parent` (every page of them).
///
/// # Errors
/// Storage errors.
#[cfg_attr(not(feature = "testkit"), expect(dead_code, reason = "read by the test kit only"))]
pub(crate) fn children_of(
    store: &dyn Store,
    parent: &ThreadId,
) -> Result<Vec<ThreadRecord>, Error> {
    let mut out = Vec::new();
    loop {
        let (filter, page) = children_page(parent, out.len());
        let found = store.list_threads(&filter, page)?;
        let done = found.len() < CHILDREN_PAGE;
        out.extend(found);
        if done {
            return Ok(out);
        }
    }
}
