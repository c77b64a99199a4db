//! Keeping the `index` table (format v6, `index_keys.rs`) equal to what it indexes, inside the
//! writer's transaction: a thread's status and label entries follow every write and delete of
//! its record, a checkpoint's entries are added and removed with it. The reads through the
//! table are `thread_search.rs` and `read.rs`; its check is `index_check.rs`.

use super::index::storage;
use super::index_keys::{Entry, IndexKeys};
use super::tables::Tables;
use crate::checkpoint::CheckpointInfo;
use crate::error::Error;
use crate::ids::ThreadId;

impl Tables<'_, '_> {
    /// Moves `id`'s index entries from what `old` needs to what `new` needs (`None`: no record),
    /// touching only the entries that differ.
    pub(crate) fn reindex_thread(
        &mut self,
        id: &ThreadId,
        old: Option<&IndexKeys>,
        new: Option<&IndexKeys>,
    ) -> Result<(), Error> {
        if old == new {
            return Ok(());
        }
        let thread = id.as_str();
        let old = old.map_or_else(Vec::new, |k| k.entries(thread));
        let new = new.map_or_else(Vec::new, |k| k.entries(thread));
        for entry in old.iter().filter(|e| !new.contains(e)) {
            self.unindex(entry)?;
        }
        for entry in new.iter().filter(|e| !old.contains(e)) {
            self.index_entry(entry)?;
        }
        Ok(())
    }

    /// Adds checkpoint `info`'s entries.
    pub(crate) fn index_checkpoint(&mut self, info: &CheckpointInfo) -> Result<(), Error> {
        for entry in super::index_keys::checkpoint_entries(info) {
            self.index_entry(&entry)?;
        }
        Ok(())
    }

    /// Removes checkpoint `info`'s entries.
    pub(crate) fn unindex_checkpoint(&mut self, info: &CheckpointInfo) -> Result<(), Error> {
        for entry in super::index_keys::checkpoint_entries(info) {
            self.unindex(&entry)?;
        }
        Ok(())
    }

    fn index_entry(&mut self, entry: &Entry<'_>) -> Result<(), Error> {
        let key = entry.key();
        self.index()?.insert(key.as_slice(), &[][..]).map_err(storage("write index"))?;
        Ok(())
    }

    fn unindex(&mut self, entry: &Entry<'_>) -> Result<(), Error> {
        let key = entry.key();
        self.index()?.remove(key.as_slice()).map_err(storage("write index"))?;
        Ok(())
    }
}
