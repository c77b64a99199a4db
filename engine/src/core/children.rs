//! Sub-workflow child threads as the store knows them: the label that links a child to its
//! parent (the engine sets it; it is reserved). The lookups by it read the store: `exec/fetch.rs`
//! (async) and `exec/blocking.rs` (sync).

/// The label that names a child thread's parent (set by the engine; reserved).
pub const PARENT_LABEL: &str = "parent";
