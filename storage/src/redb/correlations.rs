//! The correlation index in a redb file (`docs/format.md` §2.2): reads through it, and the
//! migration of a v1 file that builds it from the log.
//!
//! Writes are the planner's (`crate::plan`, applied in `apply.rs` in the commit of their events);
//! prune and verify keep it in their own modules.

use ::redb::{Database, ReadTransaction, ReadableTable};

use super::read::{open, storage};
use super::tables::{
    CORRELATIONS, EVENTS, META, META_CORRELATIONS_BUILT_TO, META_FORMAT_VERSION, PAYLOADS,
};
use crate::codec;
use crate::correlation::{self, CorrelationEntry, CorrelationQuery, corrupted};
use crate::error::Error;
use crate::event::Event;
use crate::ids::{Lsn, Seq};
use crate::limits::{self, MIGRATION_BATCH_EVENTS, READ_LIMIT_MAX};

/// The format a v1 file is migrated to (a later migration takes it on from there).
const WITH_CORRELATIONS: u16 = 2;

/// Up to `limit` events carrying `query.correlation` that pass its filters, with lsn > `after`,
/// in lsn order. Only the index entries of that correlation id and the events they admit are
/// read.
pub(crate) fn read_correlated(
    txn: &ReadTransaction,
    query: &CorrelationQuery,
    after: Lsn,
    limit: usize,
) -> Result<Vec<Event>, Error> {
    limits::check("READ_LIMIT_MAX", limit, READ_LIMIT_MAX)?;
    let index = open(txn, CORRELATIONS)?;
    let events = open(txn, EVENTS)?;
    let mut out = Vec::new();
    let key = query.correlation.as_str();
    let op = storage("read correlations");
    let range =
        index.range((key, CorrelationQuery::start(after))..=(key, u64::MAX)).map_err(&op)?;
    for item in range {
        if out.len() >= limit {
            break;
        }
        let (k, v) = item.map_err(&op)?;
        let entry = entry_at(key, k.value().1, v.value())?;
        if !query.admits(&entry) {
            continue;
        }
        let thread = Some(&entry.thread);
        let seq = Some(Seq(entry.seq));
        let event = super::log::event_at(&events, entry.lsn)
            .map_err(|e| codec::locate(e, thread, seq))?
            .ok_or_else(|| {
                let detail = format!("entry ({key:?}, lsn {}) points at no event", entry.lsn);
                corrupted(thread, seq, detail)
            })?;
        entry.check_event(&event)?;
        out.push(event);
    }
    Ok(out)
}

/// Decodes the entry stored under `(correlation, lsn)` and checks it against its key.
pub(crate) fn entry_at(
    correlation: &str,
    lsn: u64,
    bytes: &[u8],
) -> Result<CorrelationEntry, Error> {
    let entry = codec::decode_correlation(bytes)?;
    if entry.correlation != correlation || entry.lsn != lsn {
        return Err(corrupted(
            Some(&entry.thread),
            Some(Seq(entry.seq)),
            format!(
                "the entry under ({correlation:?}, lsn {lsn}) holds ({:?}, lsn {})",
                entry.correlation, entry.lsn
            ),
        ));
    }
    Ok(entry)
}

/// Builds the correlation index of a v1 database from its log, then marks it v2
/// (`docs/format.md` §2.2): [`MIGRATION_BATCH_EVENTS`] events per durable write transaction,
/// resuming after the lsn a crashed migration reached. Returns the entries written.
///
/// # Errors
/// Storage errors; the database is left at the last committed batch, and the next open resumes.
pub(crate) fn migrate(db: &Database) -> Result<u64, Error> {
    let mut written = 0;
    loop {
        let txn = db.begin_write().map_err(|e| Error::storage("begin migration", e))?;
        let done = {
            let op = storage("migrate to format v2");
            let open_table = |e| Error::storage("open table", e);
            let mut meta = txn.open_table(META).map_err(open_table)?;
            let built = match meta.get(META_CORRELATIONS_BUILT_TO).map_err(&op)? {
                None => 0,
                Some(v) => {
                    <[u8; 8]>::try_from(v.value()).map(u64::from_le_bytes).map_err(|_| {
                        Error::corrupted(
                            codec::table::META,
                            format!("meta key {META_CORRELATIONS_BUILT_TO} is not 8 bytes"),
                        )
                    })?
                }
            };
            let events = txn.open_table(EVENTS).map_err(open_table)?;
            let payloads = txn.open_table(PAYLOADS).map_err(open_table)?;
            let mut entries = Vec::new();
            let (mut last, mut read) = (built, 0);
            let first = built.saturating_add(1);
            for item in events.range(first..).map_err(&op)?.take(MIGRATION_BATCH_EVENTS) {
                let (k, v) = item.map_err(&op)?;
                (last, read) = (k.value(), read + 1);
                // A v1 log holds one event a record (a file of this build marked v1 by a test,
                // batch frames: `migrate_v6_log.rs` reads both).
                let events = match super::migrate_v6_log::log_record(v.value()) {
                    Ok(events) => events,
                    Err(error) => {
                        // Reads and verify report a damaged event; the migration goes on.
                        tracing::warn!(%error, lsn = last, "a damaged event is left unindexed");
                        continue;
                    }
                };
                for event in &events {
                    let of = correlation::of(event, |r| super::read::payload_in(&payloads, r));
                    if let Some(c) = of {
                        entries.push(CorrelationEntry::of_event(event, c));
                    }
                }
            }
            drop((events, payloads));
            let mut index = txn.open_table(CORRELATIONS).map_err(open_table)?;
            for entry in &entries {
                let framed = codec::encode_correlation(entry)?;
                index
                    .insert((entry.correlation.as_str(), entry.lsn), framed.as_slice())
                    .map_err(&op)?;
            }
            written += entries.len() as u64;
            let done = read < MIGRATION_BATCH_EVENTS;
            if done {
                let version = WITH_CORRELATIONS.to_le_bytes();
                meta.insert(META_FORMAT_VERSION, version.as_slice()).map_err(&op)?;
                meta.remove(META_CORRELATIONS_BUILT_TO).map_err(&op)?;
            } else {
                meta.insert(META_CORRELATIONS_BUILT_TO, last.to_le_bytes().as_slice())
                    .map_err(&op)?;
            }
            done
        };
        txn.commit().map_err(|e| Error::storage("commit migration", e))?;
        if done {
            tracing::info!(entries = written, "built the correlation index: format v2");
            return Ok(written);
        }
    }
}
