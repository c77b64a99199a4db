//! Sub-workflow child threads as the store knows them: the label that links a child to its
//! parent (the engine sets it; it is reserved). The lookups by it read the store: `exec/fetch.rs`
//! (async) and `exec/blocking.rs` (sync).

/// The label that names a child thread's parent (set by the engine; reserved).
pub const PARENT_LABEL: &str = "parent";

/// Records read per page of a listing of child threads.
pub const CHILDREN_PAGE: usize = 500;

/// The listing filter of `parent`'s child threads, and the page after `found` of them.
pub fn children_page(
    parent: &cairn_storage::ThreadId,
    found: usize,
) -> (cairn_storage::ThreadFilter, cairn_storage::Page) {
    let filter = cairn_storage::ThreadFilter {
        labels: vec![(PARENT_LABEL.to_owned(), parent.to_string())],
        ..cairn_storage::ThreadFilter::default()
    };
    (filter, cairn_storage::Page { limit: CHILDREN_PAGE, offset: found })
}
