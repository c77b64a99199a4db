//! The `index` table (format v6, `docs/format.md` §2.6): every secondary index of a redb file as
//! entries of one table, so a commit that moves a thread's status and adds a checkpoint touches
//! one index table, not five (redb pays per table a commit touches). A leaf: the writer's tables
//! (`tables.rs`) open it, the upkeep (`thread_index.rs`, `apply.rs`, `prune.rs`) and the reads
//! (`read.rs`, `thread_search.rs`) use it, `verify.rs` checks it.
//!
//! A key is a byte string: one kind byte, then the exact-match strings of its kind, each as a
//! 4-byte big-endian length and its UTF-8 bytes, then the part entries of one prefix are ordered
//! by: big-endian integers, or a thread id's bytes (last, unprefixed). Values are empty.

use std::collections::BTreeMap;

use ::redb::TableDefinition;

use crate::codec::{self, table};
use crate::error::Error;
use crate::ids::ThreadId;
use crate::thread::{ThreadRecord, ThreadStatus};

/// Every secondary index: key (see the module doc) -> empty value.
pub(crate) const INDEX: TableDefinition<'_, &[u8], &[u8]> = TableDefinition::new(table::INDEX);

/// The kind byte of a checkpoint-by-thread entry: `thread, covers seq, id`.
const CHECKPOINT_BY_THREAD: u8 = 1;
/// The kind byte of a checkpoint-by-workflow entry: `workflow id, id`.
const CHECKPOINT_BY_WORKFLOW: u8 = 2;
/// The kind byte of a checkpoint-by-tag entry: `tag, id`.
const CHECKPOINT_BY_TAG: u8 = 3;
/// The kind byte of a thread-by-status entry: `status, thread`.
pub(crate) const THREAD_BY_STATUS: u8 = 4;
/// The kind byte of a thread-by-label entry: `key, value, thread`.
const THREAD_BY_LABEL: u8 = 5;

/// One entry of the index table, as its key says.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub(crate) enum Entry<'a> {
    /// Checkpoint `id` of `thread` covers seq `covers`.
    CheckpointByThread { thread: &'a str, covers: u64, id: u64 },
    /// Checkpoint `id` is of workflow `workflow`.
    CheckpointByWorkflow { workflow: &'a str, id: u64 },
    /// Checkpoint `id` carries `tag`.
    CheckpointByTag { tag: &'a str, id: u64 },
    /// Thread `thread` is in status `status` (its discriminant).
    ThreadByStatus { status: u8, thread: &'a str },
    /// Thread `thread` has the label `key` = `value`.
    ThreadByLabel { key: &'a str, value: &'a str, thread: &'a str },
}

impl<'a> Entry<'a> {
    /// The entry's key.
    pub(crate) fn key(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(48);
        match *self {
            Entry::CheckpointByThread { thread, covers, id } => {
                prefixed(&mut out, CHECKPOINT_BY_THREAD, &[thread]);
                out.extend_from_slice(&covers.to_be_bytes());
                out.extend_from_slice(&id.to_be_bytes());
            }
            Entry::CheckpointByWorkflow { workflow, id } => {
                prefixed(&mut out, CHECKPOINT_BY_WORKFLOW, &[workflow]);
                out.extend_from_slice(&id.to_be_bytes());
            }
            Entry::CheckpointByTag { tag, id } => {
                prefixed(&mut out, CHECKPOINT_BY_TAG, &[tag]);
                out.extend_from_slice(&id.to_be_bytes());
            }
            Entry::ThreadByStatus { status, thread } => {
                out.extend_from_slice(&[THREAD_BY_STATUS, status]);
                out.extend_from_slice(thread.as_bytes());
            }
            Entry::ThreadByLabel { key, value, thread } => {
                prefixed(&mut out, THREAD_BY_LABEL, &[key, value]);
                out.extend_from_slice(thread.as_bytes());
            }
        }
        out
    }

    /// The entry `key` encodes; `None` for bytes no entry encodes (a damaged key).
    pub(crate) fn decode(key: &'a [u8]) -> Option<Entry<'a>> {
        let (&kind, rest) = key.split_first()?;
        let mut r = Reader(rest);
        let entry = match kind {
            CHECKPOINT_BY_THREAD => {
                let thread = r.string()?;
                Entry::CheckpointByThread { thread, covers: r.u64()?, id: r.u64()? }
            }
            CHECKPOINT_BY_WORKFLOW => {
                Entry::CheckpointByWorkflow { workflow: r.string()?, id: r.u64()? }
            }
            CHECKPOINT_BY_TAG => Entry::CheckpointByTag { tag: r.string()?, id: r.u64()? },
            THREAD_BY_STATUS => {
                let (&status, thread) = r.0.split_first()?;
                r.0 = &[];
                Entry::ThreadByStatus { status, thread: std::str::from_utf8(thread).ok()? }
            }
            THREAD_BY_LABEL => {
                let (key, value) = (r.string()?, r.string()?);
                let thread = std::str::from_utf8(std::mem::take(&mut r.0)).ok()?;
                Entry::ThreadByLabel { key, value, thread }
            }
            _ => return None,
        };
        r.0.is_empty().then_some(entry)
    }

    /// What this entry is, for a problem's detail.
    pub(crate) fn describe(&self) -> String {
        match self {
            Entry::CheckpointByThread { thread, covers, id } => {
                format!("checkpoint-by-thread ({thread}, {covers}, {id})")
            }
            Entry::CheckpointByWorkflow { workflow, id } => {
                format!("checkpoint-by-workflow ({workflow}, {id})")
            }
            Entry::CheckpointByTag { tag, id } => format!("checkpoint-by-tag ({tag:?}, {id})"),
            Entry::ThreadByStatus { status, thread } => {
                format!("thread-by-status ({status}, {thread})")
            }
            Entry::ThreadByLabel { key, value, thread } => {
                format!("thread-by-label ({key}={value}, {thread})")
            }
        }
    }
}

/// Writes `kind` and each of `strings`, length-prefixed.
fn prefixed(out: &mut Vec<u8>, kind: u8, strings: &[&str]) {
    out.push(kind);
    for s in strings {
        // Strings longer than 4 GiB cannot reach a key: redb's values are smaller.
        let len = u32::try_from(s.len()).unwrap_or(u32::MAX);
        out.extend_from_slice(&len.to_be_bytes());
        out.extend_from_slice(s.as_bytes());
    }
}

/// Reads a key's parts, refusing what is short or not UTF-8.
struct Reader<'a>(&'a [u8]);

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize) -> Option<&'a [u8]> {
        if self.0.len() < n {
            return None;
        }
        let (head, rest) = self.0.split_at(n);
        self.0 = rest;
        Some(head)
    }

    fn u64(&mut self) -> Option<u64> {
        Some(u64::from_be_bytes(self.take(8)?.try_into().ok()?))
    }

    fn string(&mut self) -> Option<&'a str> {
        let len = u32::from_be_bytes(self.take(4)?.try_into().ok()?);
        std::str::from_utf8(self.take(usize::try_from(len).ok()?)?).ok()
    }
}

/// The key prefix all entries of one range share: a walk from it stops at the first key that
/// does not start with it.
pub(crate) enum Prefix<'a> {
    /// The checkpoints of a thread.
    CheckpointsOfThread(&'a str),
    /// The checkpoints of a workflow.
    CheckpointsOfWorkflow(&'a str),
    /// The checkpoints carrying a tag.
    CheckpointsTagged(&'a str),
    /// The threads in a status.
    ThreadsInStatus(u8),
    /// The threads with a label.
    ThreadsLabelled(&'a str, &'a str),
}

impl Prefix<'_> {
    /// The prefix's bytes.
    pub(crate) fn bytes(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        match *self {
            Prefix::CheckpointsOfThread(thread) => {
                prefixed(&mut out, CHECKPOINT_BY_THREAD, &[thread])
            }
            Prefix::CheckpointsOfWorkflow(w) => prefixed(&mut out, CHECKPOINT_BY_WORKFLOW, &[w]),
            Prefix::CheckpointsTagged(tag) => prefixed(&mut out, CHECKPOINT_BY_TAG, &[tag]),
            Prefix::ThreadsInStatus(status) => out.extend_from_slice(&[THREAD_BY_STATUS, status]),
            Prefix::ThreadsLabelled(k, v) => prefixed(&mut out, THREAD_BY_LABEL, &[k, v]),
        }
        out
    }
}

/// The key `prefix` followed by `tail`.
pub(crate) fn key_after(prefix: &[u8], tail: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + tail.len());
    out.extend_from_slice(prefix);
    out.extend_from_slice(tail);
    out
}

/// The entries checkpoint `info` needs.
pub(crate) fn checkpoint_entries(info: &crate::checkpoint::CheckpointInfo) -> Vec<Entry<'_>> {
    let id = info.id.0;
    let mut out = vec![
        Entry::CheckpointByThread { thread: info.thread.as_str(), covers: info.covers.seq.0, id },
        Entry::CheckpointByWorkflow { workflow: &info.workflow.id, id },
    ];
    out.extend(info.meta.tags.iter().map(|tag| Entry::CheckpointByTag { tag, id }));
    out
}

/// What the index holds for one thread: its status and its labels.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct IndexKeys {
    pub(crate) status: u8,
    pub(crate) labels: BTreeMap<String, String>,
}

impl IndexKeys {
    /// The entries `record` needs.
    pub(crate) fn of(record: &ThreadRecord) -> IndexKeys {
        IndexKeys { status: record.status as u8, labels: record.labels.clone() }
    }

    /// The entries of thread `thread` these keys stand for.
    pub(crate) fn entries<'a>(&'a self, thread: &'a str) -> Vec<Entry<'a>> {
        let mut out = Vec::with_capacity(1 + self.labels.len());
        if status_indexed(self.status) {
            out.push(Entry::ThreadByStatus { status: self.status, thread });
        }
        out.extend(self.labels.iter().map(|(key, value)| Entry::ThreadByLabel {
            key,
            value,
            thread,
        }));
        out
    }
}

/// Whether a thread in `status` (its discriminant) has a thread-by-status entry: every status
/// but completed (format v8). Most threads end completed, so a completed thread's entry was an
/// insert into a leaf of its own in the thread's last commit (about 45,000 instructions a thread
/// on redb 4.5), for a listing a scan of the thread rows answers nearly as fast: where most
/// threads are completed, a page of them reads about what it returns.
pub(crate) fn status_indexed(status: u8) -> bool {
    status != ThreadStatus::Completed as u8
}

/// The index keys of the framed thread record `bytes` stored under `id`.
pub(crate) fn keys_of_frame(id: &ThreadId, bytes: &[u8]) -> Result<IndexKeys, Error> {
    let record = codec::decode_thread(bytes).map_err(|e| codec::locate(e, Some(id), None))?;
    Ok(IndexKeys::of(&record))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_decode_to_their_entries_and_sort_within_a_prefix() {
        let entries = [
            Entry::CheckpointByThread { thread: "t", covers: 7, id: 3 },
            Entry::CheckpointByWorkflow { workflow: "w", id: u64::MAX },
            Entry::CheckpointByTag { tag: "", id: 0 },
            Entry::ThreadByStatus { status: 2, thread: "t-1" },
            Entry::ThreadByLabel { key: "k", value: "v", thread: "t-1" },
        ];
        for entry in &entries {
            assert_eq!(Entry::decode(&entry.key()).as_ref(), Some(entry));
        }
        // Within one prefix, keys sort as their ordered part: covers, then id; thread ids.
        let by_thread = |covers, id| Entry::CheckpointByThread { thread: "t", covers, id }.key();
        assert!(by_thread(1, 9) < by_thread(2, 0) && by_thread(2, 0) < by_thread(2, 1));
        let status = |thread| Entry::ThreadByStatus { status: 1, thread }.key();
        assert!(status("a") < status("ab") && status("ab") < status("b"));
        let prefix = Prefix::ThreadsLabelled("k", "v").bytes();
        assert!(entries[4].key().starts_with(&prefix));
        // A label key that is a prefix of another is not mistaken for it.
        let other = Entry::ThreadByLabel { key: "k", value: "vv", thread: "t" }.key();
        assert!(!other.starts_with(&prefix));
        // Damaged keys are refused, not read past their end.
        for bad in [&[][..], &[9], &[1, 0, 0, 0, 5, b't'], &[4], &[5, 0, 0, 0, 1, 0xff]] {
            assert_eq!(Entry::decode(bad), None, "{bad:?}");
        }
        let mut long = by_thread(1, 1);
        long.push(0);
        assert_eq!(Entry::decode(&long), None);
    }
}
