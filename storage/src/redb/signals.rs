//! The signal inbox in a redb file (`docs/format.md` §2.3): the table `signals`, keyed
//! `(thread, n)`, its reads, its check in `verify`, and the migration of a v2 file (which
//! lacks the table) to v3.
//!
//! Writes are the planner's (`crate::plan`, applied in `apply.rs`).

use ::redb::{ReadTransaction, ReadableTable, TableDefinition};

use super::index::storage;
use crate::codec::{self, table};
use crate::error::Error;
use crate::ids::{Seq, ThreadId};
use crate::limits::{self, READ_LIMIT_MAX};
use crate::signal::Signal;
use crate::store::Problem;

/// The inbox: framed [`Signal`] (kind 9) by `(thread, n)`.
pub(crate) const SIGNALS: TableDefinition<'_, (&str, u64), &[u8]> =
    TableDefinition::new(table::SIGNALS);

/// Decodes the signal stored under `(thread, n)` and checks it against its key.
pub(crate) fn signal_at(thread: &str, n: u64, bytes: &[u8]) -> Result<Signal, Error> {
    let id = ThreadId::new(thread).ok();
    let signal =
        codec::decode_signal(bytes).map_err(|e| codec::locate(e, id.as_ref(), Some(Seq(n))))?;
    let mismatch = (signal.thread.as_str() != thread || signal.n != n).then(|| {
        format!("key ({thread}, {n}) holds the signal of ({}, {})", signal.thread, signal.n)
    });
    codec::key_agrees(mismatch, table::SIGNALS, id.as_ref(), Some(Seq(n)))?;
    Ok(signal)
}

/// Up to `limit` signals of `thread` with n > `after`, in n order.
pub(crate) fn read(
    txn: &ReadTransaction,
    thread: &ThreadId,
    after: u64,
    limit: usize,
) -> Result<Vec<Signal>, Error> {
    limits::check("READ_LIMIT_MAX", limit, READ_LIMIT_MAX)?;
    let inbox = match txn.open_table(SIGNALS) {
        Ok(inbox) => inbox,
        // A v2 snapshot taken before its migration committed: no signal was ever sent.
        Err(::redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
        Err(e) => return Err(Error::storage("open table", e)),
    };
    let op = storage("read signals");
    let key = thread.as_str();
    let mut out = Vec::new();
    let range = inbox.range((key, after.saturating_add(1))..=(key, u64::MAX)).map_err(&op)?;
    for item in range.take(limit) {
        let (k, v) = item.map_err(&op)?;
        out.push(signal_at(key, k.value().1, v.value())?);
    }
    Ok(out)
}

/// The number of `thread`'s last signal in `inbox` (0: none).
pub(crate) fn last_in(
    inbox: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    thread: &ThreadId,
) -> Result<u64, Error> {
    let key = thread.as_str();
    let last = inbox
        .range((key, 0)..=(key, u64::MAX))
        .map_err(storage("read signals"))?
        .next_back()
        .transpose()
        .map_err(storage("read signals"))?;
    Ok(last.map_or(0, |(k, _)| k.value().1))
}

/// The number of the first signal of `thread` in `inbox` named `name` holding exactly `data`
/// (a thread holds at most `SIGNALS_PER_THREAD_MAX` signals: the scan is bounded).
pub(crate) fn find_in(
    inbox: &impl ReadableTable<(&'static str, u64), &'static [u8]>,
    thread: &ThreadId,
    name: &str,
    data: &[u8],
) -> Result<Option<u64>, Error> {
    let op = storage("read signals");
    let key = thread.as_str();
    for item in inbox.range((key, 0)..=(key, u64::MAX)).map_err(&op)? {
        let (k, v) = item.map_err(&op)?;
        let signal = signal_at(key, k.value().1, v.value())?;
        if signal.name == name && signal.data == data {
            return Ok(Some(signal.n));
        }
    }
    Ok(None)
}

/// Checks every signal: it decodes, sits under its own key, belongs to a thread that exists,
/// and each thread's numbers run from 1 without a gap. Returns the signals scanned.
pub(crate) fn verify(
    txn: &ReadTransaction,
    thread_exists: impl Fn(&ThreadId) -> bool,
    problems: &mut Vec<Problem>,
) -> Result<u64, Error> {
    let op = storage("verify signals");
    let inbox = match txn.open_table(SIGNALS) {
        Ok(inbox) => inbox,
        Err(::redb::TableError::TableDoesNotExist(_)) => return Ok(0),
        Err(e) => return Err(Error::storage("open table", e)),
    };
    let mut scanned = 0;
    let mut previous: Option<(String, u64)> = None;
    for item in inbox.iter().map_err(&op)? {
        let (k, v) = item.map_err(&op)?;
        let (thread, n) = k.value();
        scanned += 1;
        let expected = match &previous {
            Some((t, last)) if t == thread => last.saturating_add(1),
            _ => 1,
        };
        previous = Some((thread.to_owned(), n));
        let problem = |detail: String| Problem {
            table: table::SIGNALS,
            thread: ThreadId::new(thread).ok(),
            seq: Some(Seq(n)),
            detail,
        };
        if n != expected {
            problems
                .push(problem(format!("signal gap: signal {n} follows signal {}", expected - 1)));
        }
        match signal_at(thread, n, v.value()) {
            Ok(signal) if !thread_exists(&signal.thread) => {
                problems.push(problem(format!("signal {n} of a thread that does not exist")));
            }
            Ok(_) => {}
            Err(e) => problems.push(Problem::of(e)?),
        }
    }
    Ok(scanned)
}
