//! Listing threads: through the search index (`thread_index.rs`) when the filter names labels
//! or a status, else by a scan of the thread records.
//!
//! Every index entry is a candidate only: its record is read, checked and matched against the
//! whole filter, so the index narrows and never decides. Each index is ordered by thread id
//! within one label or status, so a walk yields the same order as the scan (key order) and a
//! cursor (`after`) starts the walk where the last page ended.

use std::ops::Bound;

use ::redb::ReadTransaction;

use super::index::storage;
use super::index_keys::{Entry, INDEX, Prefix, key_after, status_indexed};
use super::read::open;
use super::rows::{Row, THREAD_ROW, kind_range};
use crate::codec::{self, table};
use crate::error::Error;
use crate::ids::ThreadId;
use crate::limits::{self, READ_LIMIT_MAX};
use crate::store::{Page, ThreadFilter};
use crate::thread::ThreadRecord;

/// Thread ids from one index, in id order.
type Ids = Box<dyn Iterator<Item = Result<String, Error>>>;

/// One index range a filter's matches all lie in.
#[derive(Clone, Copy)]
enum Source<'f> {
    Label(&'f str, &'f str),
    Status(u8),
}

impl Source<'_> {
    /// The ids of this range after `after`.
    fn ids(self, txn: &ReadTransaction, after: Option<&str>) -> Result<Ids, Error> {
        let op = storage("read thread index");
        let prefix = match self {
            Source::Label(key, value) => Prefix::ThreadsLabelled(key, value),
            Source::Status(status) => Prefix::ThreadsInStatus(status),
        }
        .bytes();
        let start = match after {
            None => Bound::Included(prefix.clone()),
            Some(a) => Bound::Excluded(key_after(&prefix, a.as_bytes())),
        };
        let range = open(txn, INDEX)?
            .range::<&[u8]>((start.as_ref().map(Vec::as_slice), Bound::Unbounded))
            .map_err(&op)?;
        Ok(Box::new(range.map_while(move |entry| {
            let key = match entry {
                Ok((key, _)) => key,
                Err(e) => return Some(Err(op(e))),
            };
            let key = key.value();
            if !key.starts_with(&prefix) {
                return None;
            }
            Some(match Entry::decode(key) {
                Some(
                    Entry::ThreadByLabel { thread, .. } | Entry::ThreadByStatus { thread, .. },
                ) => Ok(thread.to_string()),
                _ => Err(super::read::bad_key(key)),
            })
        })))
    }
}

/// The index ranges `filter` narrows to: one per label, and its status unless that is one
/// without entries (completed: the scan of the thread rows answers it).
fn sources(filter: &ThreadFilter) -> Vec<Source<'_>> {
    let labels = filter.labels.iter().map(|(k, v)| Source::Label(k, v));
    let status = filter.status.map(|s| s as u8).filter(|s| status_indexed(*s));
    labels.chain(status.map(Source::Status)).collect()
}

/// Entries of each range the choice of the smallest steps through at most: ranges all longer
/// than this are alike for a page (its matches are likely dense), and the first is walked.
pub(crate) const CHOOSE_STEPS_MAX: usize = 4_096;

/// The smallest of `sources` after `after`: their ranges are stepped through together until
/// one ends, so choosing costs at most (number of sources) x (the smallest range's size, or
/// [`CHOOSE_STEPS_MAX`]).
fn smallest<'f>(
    txn: &ReadTransaction,
    sources: &[Source<'f>],
    after: Option<&str>,
) -> Result<Source<'f>, Error> {
    if let [only] = sources {
        return Ok(*only);
    }
    let mut ranges = sources.iter().map(|s| s.ids(txn, after)).collect::<Result<Vec<_>, _>>()?;
    for _ in 0..CHOOSE_STEPS_MAX {
        for (source, range) in sources.iter().zip(&mut ranges) {
            match range.next() {
                None => return Ok(*source),
                Some(Err(e)) => return Err(e),
                Some(Ok(_)) => {}
            }
        }
    }
    Ok(sources[0])
}

/// Calls `visit` with every thread record matching `filter` whose id sorts after `after`, in id
/// order, until it returns false.
fn each_match(
    txn: &ReadTransaction,
    filter: &ThreadFilter,
    after: Option<&ThreadId>,
    mut visit: impl FnMut(ThreadRecord) -> bool,
) -> Result<(), Error> {
    let index = open(txn, INDEX)?;
    let op = storage("read threads");
    let sources = sources(filter);
    let after = after.map(ThreadId::as_str);
    if sources.is_empty() {
        let rows = kind_range(THREAD_ROW);
        let after = after.map(|a| Row::Thread(a).key());
        let start = after.as_deref().map_or(Bound::Included(rows.start), Bound::Excluded);
        for entry in index.range::<&[u8]>((start, Bound::Excluded(rows.end))).map_err(&op)? {
            let (key, value) = entry.map_err(&op)?;
            if let Some(record) = matching_thread(thread_key(key.value())?, value.value(), filter)?
                && !visit(record)
            {
                break;
            }
        }
        return Ok(());
    }
    let source = smallest(txn, &sources, after)?;
    for id in source.ids(txn, after)? {
        let id = id?;
        let Some(value) = index.get(Row::Thread(&id).key().as_slice()).map_err(&op)? else {
            return Err(Error::Corrupted {
                table: table::INDEX,
                thread: ThreadId::new(id.as_str()).ok(),
                seq: None,
                detail: format!("an index entry of thread {id}, which has no record"),
            });
        };
        if let Some(record) = matching_thread(&id, value.value(), filter)?
            && !visit(record)
        {
            break;
        }
    }
    Ok(())
}

/// Threads matching `filter`, in id order, skipping `page.offset` matches.
pub(crate) fn list_threads(
    txn: &ReadTransaction,
    filter: &ThreadFilter,
    page: Page,
) -> Result<Vec<ThreadRecord>, Error> {
    limits::check("READ_LIMIT_MAX", page.limit, READ_LIMIT_MAX)?;
    let mut out = Vec::new();
    let mut skipped = 0;
    if page.limit == 0 {
        return Ok(out);
    }
    each_match(txn, filter, None, |record| {
        if skipped < page.offset {
            skipped += 1;
        } else {
            out.push(record);
        }
        out.len() < page.limit
    })?;
    Ok(out)
}

/// Threads matching `filter` with ids after `after` in key (byte) order, at most `limit`: a
/// range walk that starts at the cursor, so a page costs what it reads, not what precedes it.
pub(crate) fn list_threads_after(
    txn: &ReadTransaction,
    filter: &ThreadFilter,
    after: Option<&ThreadId>,
    limit: usize,
) -> Result<Vec<ThreadRecord>, Error> {
    limits::check("READ_LIMIT_MAX", limit, READ_LIMIT_MAX)?;
    let mut out = Vec::new();
    if limit == 0 {
        return Ok(out);
    }
    each_match(txn, filter, after, |record| {
        out.push(record);
        out.len() < limit
    })?;
    Ok(out)
}

/// The thread id of a thread row's key (its bytes after the kind byte).
fn thread_key(key: &[u8]) -> Result<&str, Error> {
    match Row::decode(key) {
        Some(Row::Thread(id)) => Ok(id),
        _ => Err(Error::corrupted(table::THREADS, format!("key {key:?} is not a thread's"))),
    }
}

/// The record stored under `key`, checked, if it matches `filter`.
fn matching_thread(
    key: &str,
    value: &[u8],
    filter: &ThreadFilter,
) -> Result<Option<ThreadRecord>, Error> {
    let id = ThreadId::new(key).map_err(|e| {
        Error::corrupted(table::THREADS, format!("key {key:?} is not a valid thread id: {e}"))
    })?;
    let record = codec::decode_thread(value).map_err(|e| codec::locate(e, Some(&id), None))?;
    let mismatch =
        (record.id != id).then(|| format!("key {id} holds the record of thread {}", record.id));
    codec::key_agrees(mismatch, table::THREADS, Some(&id), None)?;
    Ok(filter.matches(&record).then_some(record))
}
