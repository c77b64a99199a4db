//! Sub-workflow child threads as the store knows them: the label that links a child to its
//! parent (the engine sets it; it is reserved), and the lookups by it.

use cairn_storage::{Page, Store, ThreadFilter, ThreadId, ThreadRecord};

use crate::error::Error;

/// The label that names a child thread's parent (set by the engine; reserved).
pub const PARENT_LABEL: &str = "parent";

/// Records read per page of a listing.
const PAGE_RECORDS: usize = 500;

/// The child threads of `parent` (every page of them), with sync reads: for callers off the
/// runtime (the test kit); the engine's paths, the debug tools and the endpoint await
/// `exec::fetch::children_of`.
///
/// # Errors
/// Storage errors.
#[cfg_attr(not(feature = "testkit"), expect(dead_code, reason = "read by the test kit only"))]
pub(crate) fn children_of(
    store: &dyn Store,
    parent: &ThreadId,
) -> Result<Vec<ThreadRecord>, Error> {
    let filter = ThreadFilter {
        label: Some((PARENT_LABEL.to_owned(), parent.to_string())),
        ..ThreadFilter::default()
    };
    let mut out = Vec::new();
    loop {
        let found = store.list_threads(&filter, Page { limit: PAGE_RECORDS, offset: out.len() })?;
        let done = found.len() < PAGE_RECORDS;
        out.extend(found);
        if done {
            return Ok(out);
        }
    }
}
