//! Reads of a store for a caller off the async runtime (a test's judge of what a thread did, a
//! script over a database file): a thread's context at a seq, an event's decoded body, a
//! parent's children. The same code as the engine's own async reads ([`crate::admin`]), waited
//! for on the caller's thread. Nothing of the engine's own paths reads through here.

use std::future::Future;

use cairn_dsl::DynWorkflow;
use cairn_storage::{Event, Store, ThreadId, ThreadRecord};

use super::fetch;
use crate::core::codec::Recorded;
use crate::core::thread_ctx::ThreadCtx;
use crate::error::Error;

/// The context of `thread` after the event at `at` (after its last event when `None`): the
/// latest checkpoint at or before it and the events after (a damaged checkpoint is skipped for
/// an older one, failing all of them the first event). The engine's own restore, waited for.
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
    wait(fetch::restore(store, wf, thread, at))
}

/// Decodes a stored event's body, its payload read first when it was offloaded.
///
/// # Errors
/// [`Error::Record`] if the data is not a body this engine understands; storage errors if the
/// payload is missing or damaged.
pub fn decode(store: &dyn Store, event: Event) -> Result<Recorded, Error> {
    wait(fetch::decode(store, event))
}

/// The child threads of `parent` (every page of them): the sub-workflow threads it started.
///
/// # Errors
/// Storage errors.
///
/// # Examples
/// ```
/// # fn run(engine: &cairn::Engine) -> Result<(), cairn::Error> {
/// let parent = cairn::ThreadId::new("order-1")?;
/// for child in cairn::blocking::children_of(engine.store().as_ref(), &parent)? {
///     assert_eq!(child.labels.get("parent").map(String::as_str), Some("order-1"));
/// }
/// # Ok(()) }
/// ```
pub fn children_of(store: &dyn Store, parent: &ThreadId) -> Result<Vec<ThreadRecord>, Error> {
    wait(fetch::children_of(store, parent))
}

/// The records of the child threads `parent`'s nodes started at run time (`ctx.start_child`,
/// named by their `started_by` label), at most `CHILDREN_PER_THREAD_MAX` of them.
///
/// # Errors
/// Storage errors.
///
/// # Examples
/// ```
/// # fn run(engine: &cairn::Engine) -> Result<(), cairn::Error> {
/// let parent = cairn::ThreadId::new("order-1")?;
/// for child in cairn::blocking::started_children_of(engine.store().as_ref(), &parent)? {
///     assert_eq!(child.labels.get("started_by").map(String::as_str), Some("order-1"));
/// }
/// # Ok(()) }
/// ```
pub fn started_children_of(
    store: &dyn Store,
    parent: &ThreadId,
) -> Result<Vec<ThreadRecord>, Error> {
    wait(fetch::started_children_of(store, parent, crate::limits::CHILDREN_PER_THREAD_MAX))
}

/// Runs `future` to its end on this thread. On a worker of a multi-thread runtime it waits
/// through `block_in_place`, so the runtime hands the worker's other tasks on meanwhile.
fn wait<F: Future>(future: F) -> F::Output {
    use tokio::runtime::{Handle, RuntimeFlavor};
    match Handle::try_current() {
        Ok(h) if h.runtime_flavor() == RuntimeFlavor::MultiThread => {
            tokio::task::block_in_place(|| futures::executor::block_on(future))
        }
        _ => futures::executor::block_on(future),
    }
}
