//! `verify`'s check of the `index` table (`index_keys.rs`) against what it indexes, both ways:
//! every entry is one that a thread record or a checkpoint needs, with the same fields (a stale
//! or undecodable entry is a problem), and every entry they need is there (a missing one is).

use std::collections::BTreeMap;

use ::redb::ReadTransaction;

use super::index::storage;
use super::index_keys::{Entry, INDEX, IndexKeys, checkpoint_entries};
use super::rows::{SNAPSHOT_ROW, THREAD_ROW, kind_range};
use crate::checkpoint::CheckpointInfo;
use crate::codec::table;
use crate::error::Error;
use crate::ids::{Seq, ThreadId};
use crate::store::Problem;
use crate::thread::ThreadRecord;

/// Where an entry's problem is reported: its thread and, for a checkpoint's, its id.
fn located(entry: &Entry<'_>) -> (Option<ThreadId>, Option<Seq>) {
    let thread = |t: &str| ThreadId::new(t).ok();
    match *entry {
        Entry::CheckpointByThread { thread: t, id, .. } => (thread(t), Some(Seq(id))),
        Entry::CheckpointByWorkflow { id, .. } | Entry::CheckpointByTag { id, .. } => {
            (None, Some(Seq(id)))
        }
        Entry::ThreadByStatus { thread: t, .. } | Entry::ThreadByLabel { thread: t, .. } => {
            (thread(t), None)
        }
    }
}

/// Checks the table against `records` (every decodable thread record) and `checkpoints`
/// (every decodable checkpoint). Returns the entries read.
///
/// # Errors
/// Storage errors (the caller reports them as one problem of the table).
pub(crate) fn verify<'r>(
    txn: &ReadTransaction,
    records: impl Iterator<Item = &'r ThreadRecord>,
    checkpoints: impl Iterator<Item = &'r CheckpointInfo>,
    problems: &mut Vec<Problem>,
) -> Result<u64, Error> {
    // The key of every entry wanted -> its description and location.
    let mut want = BTreeMap::new();
    let mut wanted = |entry: Entry<'_>| {
        let (thread, seq) = located(&entry);
        want.insert(entry.key(), (entry.describe(), thread, seq));
    };
    for record in records {
        IndexKeys::of(record).entries(record.id.as_str()).into_iter().for_each(&mut wanted);
    }
    for info in checkpoints {
        checkpoint_entries(info).into_iter().for_each(&mut wanted);
    }
    let op = storage("verify index");
    let mut read = 0;
    let index = txn.open_table(INDEX).map_err(|e| Error::storage("open table", e))?;
    // The entries, around the records the table holds beside them (`rows.rs`), which their
    // own scans check.
    let (rows_start, rows_end) = (kind_range(THREAD_ROW).start, kind_range(SNAPSHOT_ROW).end);
    let below = index.range::<&[u8]>(..rows_start).map_err(&op)?;
    let above = index.range::<&[u8]>(rows_end..).map_err(&op)?;
    for entry in below.chain(above) {
        let (key, _) = entry.map_err(&op)?;
        read += 1;
        let key = key.value();
        if want.remove(key).is_some() {
            continue;
        }
        let (detail, (thread, seq)) = match Entry::decode(key) {
            Some(entry) => (format!("stale entry: {}", entry.describe()), located(&entry)),
            None => (format!("an undecodable key: {key:02x?}"), (None, None)),
        };
        problems.push(Problem { table: table::INDEX, thread, seq, detail });
    }
    for (detail, thread, seq) in want.into_values() {
        let detail = format!("missing entry: {detail}");
        problems.push(Problem { table: table::INDEX, thread, seq, detail });
    }
    Ok(read)
}
