//! The writer's copy of the thread records it last wrote.
//!
//! Every append plans against its threads' records; decoding a record (and its seq-index tail)
//! from the threads table was a tenth of the writer's CPU with 64 concurrent appenders. The
//! writer is the only writer, so the record it last wrote for a thread *is* the stored record,
//! for as long as the store is not poisoned (a failed commit poisons it, and a reopen starts
//! with an empty cache). Records are cached only when written, never when read, so an entry is
//! always one this process encoded; the read paths still decode and check what is on disk.
//! Only records whose thread is leased (a runner drives it) are kept: a parked or ended
//! thread's record leaves the cache when it is written, so parked threads cost no memory here.
//! Only the bytes bound matters for running threads.
//!
//! The writer also remembers that the `queue_members` table was empty when a transaction last
//! read it, until a transaction writes a member: a thread that ends gives up its queue place in
//! the same write, and on a file where no thread holds one that look would open the table
//! (about 5,000 instructions) for every thread that ends. Kept with the records for the same
//! reason as they are: this writer is the only one, and a failed commit poisons the store.

use std::collections::HashMap;

use crate::codec::StoredThread;
use crate::ids::ThreadId;

/// The most encoded bytes the cache holds before it starts over (a thread record's summary
/// may be up to 64 KiB, so the count of entries alone does not bound memory).
const CACHE_BYTES_MAX: usize = 16 * 1024 * 1024;

/// Thread records by id, as last written (see the module doc).
#[derive(Default)]
pub(crate) struct ThreadCache {
    map: HashMap<ThreadId, (StoredThread, usize)>,
    bytes: usize,
    /// The `queue_members` table was empty when last read, and no member was written since.
    pub(crate) no_queue_members: bool,
}

impl ThreadCache {
    /// The record last written for `id`, if cached.
    pub(crate) fn get(&self, id: &ThreadId) -> Option<&StoredThread> {
        self.map.get(id).map(|(stored, _)| stored)
    }

    /// Records that `stored`, `encoded_len` bytes once framed, was written for `id`.
    pub(crate) fn put(&mut self, id: ThreadId, stored: StoredThread, encoded_len: usize) {
        if let Some((_, old)) = self.map.remove(&id) {
            self.bytes -= old;
        }
        if self.bytes + encoded_len > CACHE_BYTES_MAX {
            self.map.clear();
            self.bytes = 0;
        }
        self.bytes += encoded_len;
        self.map.insert(id, (stored, encoded_len));
    }

    /// Drops the record of `id`, if cached: the next write of the thread reads it from disk.
    pub(crate) fn forget(&mut self, id: &ThreadId) {
        if let Some((_, old)) = self.map.remove(id) {
            self.bytes -= old;
        }
    }

    /// Records cached.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.map.len()
    }
}
