//! `verify()`: one read transaction scanning every table, reporting every problem with its
//! location instead of stopping at the first.
//!
//! Checks: every frame's CRC, kind and length; keys agree with records; per thread, seqs run
//! without gaps from `first_seq` to the record's `last`, lsns rise with seq, and `last` equals
//! the last event's bookmark; the lsn index and the events agree both ways; checkpoints and their
//! three indexes agree both ways, each has its snapshot, and covers an event that exists (or was
//! pruned); payloads hash to their keys and every referenced payload exists; the meta counters
//! are at or above every lsn and checkpoint id in use.

use std::collections::{BTreeMap, BTreeSet};

use ::redb::{ReadTransaction, ReadableTable};

use super::read::{decode_event_at, storage};
use super::tables::{
    self, CHECKPOINTS, CHECKPOINTS_BY_TAG, CHECKPOINTS_BY_THREAD, CHECKPOINTS_BY_WORKFLOW, EVENTS,
    LOCKS, LSN_INDEX, MetaState, PAYLOADS, SNAPSHOTS, THREADS,
};
use crate::codec::{self, table};
use crate::{
    Bookmark, CheckpointInfo, Error, PayloadRef, Problem, Seq, ThreadId, ThreadRecord, VerifyReport,
};

/// The thread whose events are being scanned.
struct Cursor {
    id: ThreadId,
    next: u64,
    last_lsn: u64,
    last: Option<Bookmark>,
}

struct Scan<'t> {
    txn: &'t ReadTransaction,
    report: VerifyReport,
}

/// Scans everything; see the module doc.
pub(crate) fn verify(txn: &ReadTransaction) -> Result<VerifyReport, Error> {
    let mut scan = Scan { txn, report: VerifyReport::default() };
    let threads = scan.threads()?;
    let max_lsn = scan.events(&threads)?;
    scan.lsn_index()?;
    let max_checkpoint = scan.checkpoints(&threads)?;
    scan.payloads()?;
    scan.locks()?;
    scan.meta(max_lsn, max_checkpoint)?;
    Ok(scan.report)
}

impl Scan<'_> {
    fn problem(
        &mut self,
        table: &'static str,
        thread: Option<&ThreadId>,
        seq: Option<u64>,
        detail: String,
    ) {
        self.report.problems.push(Problem {
            table,
            thread: thread.cloned(),
            seq: seq.map(Seq),
            detail,
        });
    }

    /// Reports a record error as a problem at its location.
    fn record_error(&mut self, error: Error) -> Result<(), Error> {
        match error {
            Error::Corrupted { table, thread, seq, detail } => {
                self.report.problems.push(Problem { table, thread, seq, detail });
                Ok(())
            }
            other => Err(other),
        }
    }

    fn open<K: ::redb::Key + 'static, V: ::redb::Value + 'static>(
        &self,
        def: ::redb::TableDefinition<'_, K, V>,
    ) -> Result<::redb::ReadOnlyTable<K, V>, Error> {
        self.txn.open_table(def).map_err(|e| Error::storage("open table", e))
    }

    fn threads(&mut self) -> Result<BTreeMap<ThreadId, ThreadRecord>, Error> {
        let op = storage("verify threads");
        let mut out = BTreeMap::new();
        for entry in self.open(THREADS)?.iter().map_err(&op)? {
            let (key, value) = entry.map_err(&op)?;
            self.report.threads += 1;
            let id = match ThreadId::new(key.value()) {
                Ok(id) => id,
                Err(e) => {
                    self.problem(
                        table::THREADS,
                        None,
                        None,
                        format!("invalid key {:?}: {e}", key.value()),
                    );
                    continue;
                }
            };
            match codec::decode_thread(value.value()) {
                Ok(record) if record.id == id => {
                    out.insert(id, record);
                }
                Ok(record) => self.problem(
                    table::THREADS,
                    Some(&id),
                    None,
                    format!("key holds the record of thread {}", record.id),
                ),
                Err(e) => self.record_error(codec::locate(e, Some(&id), None))?,
            }
        }
        Ok(out)
    }

    /// Scans events per thread; returns the highest lsn seen.
    fn events(&mut self, threads: &BTreeMap<ThreadId, ThreadRecord>) -> Result<u64, Error> {
        let op = storage("verify events");
        let index = self.open(LSN_INDEX)?;
        let payloads = self.open(PAYLOADS)?;
        let mut max_lsn = 0;
        let mut cursor: Option<Cursor> = None;
        let mut seen = BTreeSet::new();
        for entry in self.open(EVENTS)?.iter().map_err(&op)? {
            let (key, value) = entry.map_err(&op)?;
            self.report.events += 1;
            let (thread, seq) = key.value();
            let Ok(id) = ThreadId::new(thread) else {
                self.problem(
                    table::EVENTS,
                    None,
                    Some(seq),
                    format!("invalid thread id {thread:?}"),
                );
                continue;
            };
            if cursor.as_ref().is_none_or(|c| c.id != id) {
                if let Some(done) = cursor.take() {
                    self.end_thread(threads, &done);
                }
                let first = match threads.get(&id) {
                    Some(record) => record.first_seq.0,
                    None => {
                        let detail = "event of a thread with no record".to_string();
                        self.problem(table::EVENTS, Some(&id), Some(seq), detail);
                        seq
                    }
                };
                seen.insert(id.clone());
                cursor = Some(Cursor { id: id.clone(), next: first, last_lsn: 0, last: None });
            }
            let Some(c) = cursor.as_mut() else { continue };
            if seq != c.next {
                let detail = format!("seq gap: expected seq {}, found {seq}", c.next);
                self.problem(table::EVENTS, Some(&id), Some(seq), detail);
            }
            c.next = seq.saturating_add(1);
            let event = match decode_event_at(&id, seq, value.value()) {
                Ok(event) => event,
                Err(e) => {
                    self.record_error(e)?;
                    continue;
                }
            };
            let lsn = event.bookmark.lsn.0;
            max_lsn = max_lsn.max(lsn);
            if lsn <= c.last_lsn {
                let detail = format!("lsn {lsn} not above the previous {}", c.last_lsn);
                self.problem(table::EVENTS, Some(&id), Some(seq), detail);
            }
            c.last_lsn = lsn;
            c.last = Some(event.bookmark);
            match index.get(lsn).map_err(&op)? {
                Some(entry) if entry.value() == (id.as_str(), seq) => {}
                Some(entry) => {
                    let (t, s) = entry.value();
                    let detail = format!("lsn index entry {lsn} points to ({t}, {s})");
                    self.problem(table::LSN_INDEX, Some(&id), Some(seq), detail);
                }
                None => {
                    let detail = format!("lsn {lsn} is not indexed");
                    self.problem(table::LSN_INDEX, Some(&id), Some(seq), detail);
                }
            }
            if let Some(r) = event.payload
                && payloads.get(&r.hash).map_err(&op)?.is_none()
            {
                self.problem(table::PAYLOADS, Some(&id), Some(seq), format!("missing payload {r}"));
            }
        }
        if let Some(done) = cursor.take() {
            self.end_thread(threads, &done);
        }
        for (id, record) in threads {
            if !seen.contains(id) && record.last.is_some_and(|b| b.seq >= record.first_seq) {
                let last = record.last.map_or(0, |b| b.seq.0);
                let detail = format!("the record's last seq {last} has no events");
                self.problem(table::EVENTS, Some(id), Some(record.first_seq.0), detail);
            }
        }
        Ok(max_lsn)
    }

    fn end_thread(&mut self, threads: &BTreeMap<ThreadId, ThreadRecord>, done: &Cursor) {
        let Some(record) = threads.get(&done.id) else { return };
        let want = record.last.map_or(0, |b| b.seq.0);
        if done.next != want.saturating_add(1) {
            let detail = format!(
                "events end at seq {}, the thread record says {want}",
                done.next.saturating_sub(1)
            );
            self.problem(table::EVENTS, Some(&done.id), Some(done.next), detail);
        } else if done.last.is_some() && done.last != record.last {
            let detail = "last bookmark differs from the last event".to_string();
            self.problem(table::THREADS, Some(&done.id), Some(want), detail);
        }
    }

    fn lsn_index(&mut self) -> Result<(), Error> {
        let op = storage("verify lsn index");
        let events = self.open(EVENTS)?;
        let mut previous = 0;
        for entry in self.open(LSN_INDEX)?.iter().map_err(&op)? {
            let (key, value) = entry.map_err(&op)?;
            let lsn = key.value();
            let (thread, seq) = value.value();
            let id = ThreadId::new(thread).ok();
            if lsn <= previous {
                self.problem(
                    table::LSN_INDEX,
                    id.as_ref(),
                    Some(seq),
                    format!("lsn {lsn} out of order"),
                );
            }
            previous = lsn;
            if events.get((thread, seq)).map_err(&op)?.is_none() {
                let detail = format!("lsn {lsn} points to a missing event");
                self.problem(table::LSN_INDEX, id.as_ref(), Some(seq), detail);
            }
        }
        Ok(())
    }

    /// Scans checkpoints and their indexes; returns the highest id seen.
    fn checkpoints(&mut self, threads: &BTreeMap<ThreadId, ThreadRecord>) -> Result<u64, Error> {
        let op = storage("verify checkpoints");
        let snapshots = self.open(SNAPSHOTS)?;
        let events = self.open(EVENTS)?;
        let by_thread = self.open(CHECKPOINTS_BY_THREAD)?;
        let by_workflow = self.open(CHECKPOINTS_BY_WORKFLOW)?;
        let by_tag = self.open(CHECKPOINTS_BY_TAG)?;
        let mut infos: BTreeMap<u64, CheckpointInfo> = BTreeMap::new();
        let mut max_id = 0;
        for entry in self.open(CHECKPOINTS)?.iter().map_err(&op)? {
            let (key, value) = entry.map_err(&op)?;
            let id = key.value();
            max_id = max_id.max(id);
            self.report.checkpoints += 1;
            let info = match codec::decode_checkpoint(value.value()) {
                Ok(info) if info.id.0 == id => info,
                Ok(info) => {
                    self.problem(
                        table::CHECKPOINTS,
                        None,
                        Some(id),
                        format!("key holds checkpoint {}", info.id),
                    );
                    continue;
                }
                Err(e) => {
                    self.record_error(codec::locate(e, None, Some(Seq(id))))?;
                    continue;
                }
            };
            let thread = Some(&info.thread);
            match snapshots.get(id).map_err(&op)? {
                None => self.problem(table::SNAPSHOTS, thread, Some(id), "snapshot missing".into()),
                Some(bytes) => match codec::decode_snapshot(bytes.value()) {
                    Ok((stored, snapshot))
                        if stored.0 == id && snapshot.len() as u64 == info.snapshot_len => {}
                    Ok(_) => self.problem(
                        table::SNAPSHOTS,
                        thread,
                        Some(id),
                        "snapshot id or length differs".into(),
                    ),
                    Err(e) => self.record_error(codec::locate(e, thread, Some(Seq(id))))?,
                },
            }
            match threads.get(&info.thread) {
                None => self.problem(
                    table::CHECKPOINTS,
                    thread,
                    Some(id),
                    "checkpoint of a thread with no record".into(),
                ),
                Some(record) => {
                    let covers = info.covers.seq;
                    if record.last.is_none_or(|b| b.seq < covers) {
                        self.problem(
                            table::CHECKPOINTS,
                            thread,
                            Some(id),
                            format!("covers seq {covers} past the thread's last"),
                        );
                    } else if covers >= record.first_seq {
                        let stored = events.get((info.thread.as_str(), covers.0)).map_err(&op)?;
                        let matches = stored
                            .and_then(|e| codec::decode_event(e.value()).ok())
                            .is_some_and(|e| e.bookmark == info.covers);
                        if !matches {
                            self.problem(
                                table::CHECKPOINTS,
                                thread,
                                Some(id),
                                format!("covered event {covers} missing or different"),
                            );
                        }
                    }
                }
            }
            if by_thread.get((info.thread.as_str(), info.covers.seq.0, id)).map_err(&op)?.is_none()
            {
                self.problem(
                    table::CHECKPOINTS_BY_THREAD,
                    thread,
                    Some(id),
                    "not indexed by thread".into(),
                );
            }
            if by_workflow.get((info.workflow.id.as_str(), id)).map_err(&op)?.is_none() {
                self.problem(
                    table::CHECKPOINTS_BY_WORKFLOW,
                    thread,
                    Some(id),
                    "not indexed by workflow".into(),
                );
            }
            for tag in &info.meta.tags {
                if by_tag.get((tag.as_str(), id)).map_err(&op)?.is_none() {
                    self.problem(
                        table::CHECKPOINTS_BY_TAG,
                        thread,
                        Some(id),
                        format!("not indexed by tag {tag:?}"),
                    );
                }
            }
            infos.insert(id, info);
        }
        for entry in by_thread.iter().map_err(&op)? {
            let (key, _) = entry.map_err(&op)?;
            let (thread, covers, id) = key.value();
            if !infos
                .get(&id)
                .is_some_and(|i| i.thread.as_str() == thread && i.covers.seq.0 == covers)
            {
                let detail = format!("entry ({thread}, {covers}, {id}) has no matching checkpoint");
                self.problem(
                    table::CHECKPOINTS_BY_THREAD,
                    ThreadId::new(thread).ok().as_ref(),
                    Some(id),
                    detail,
                );
            }
        }
        for entry in by_workflow.iter().map_err(&op)? {
            let (key, _) = entry.map_err(&op)?;
            let (workflow, id) = key.value();
            if infos.get(&id).is_none_or(|i| i.workflow.id != workflow) {
                self.problem(
                    table::CHECKPOINTS_BY_WORKFLOW,
                    None,
                    Some(id),
                    format!("entry ({workflow}, {id}) has no matching checkpoint"),
                );
            }
        }
        for entry in by_tag.iter().map_err(&op)? {
            let (key, _) = entry.map_err(&op)?;
            let (tag, id) = key.value();
            if !infos.get(&id).is_some_and(|i| i.meta.tags.iter().any(|t| t == tag)) {
                self.problem(
                    table::CHECKPOINTS_BY_TAG,
                    None,
                    Some(id),
                    format!("entry ({tag}, {id}) has no matching checkpoint"),
                );
            }
        }
        for entry in snapshots.iter().map_err(&op)? {
            let (key, _) = entry.map_err(&op)?;
            let id = key.value();
            if !infos.contains_key(&id)
                && !self.report.problems.iter().any(|p| p.seq == Some(Seq(id)))
            {
                self.problem(
                    table::SNAPSHOTS,
                    None,
                    Some(id),
                    "snapshot without a checkpoint".into(),
                );
            }
        }
        Ok(max_id)
    }

    fn payloads(&mut self) -> Result<(), Error> {
        let op = storage("verify payloads");
        for entry in self.open(PAYLOADS)?.iter().map_err(&op)? {
            let (key, value) = entry.map_err(&op)?;
            self.report.payloads += 1;
            let r = PayloadRef::of(value.value());
            if &r.hash != key.value() {
                let stored = PayloadRef { hash: *key.value(), len: r.len };
                self.problem(
                    table::PAYLOADS,
                    None,
                    None,
                    format!("payload {stored} does not hash to its key"),
                );
            }
        }
        Ok(())
    }

    fn locks(&mut self) -> Result<(), Error> {
        let op = storage("verify locks");
        for entry in self.open(LOCKS)?.iter().map_err(&op)? {
            let (key, value) = entry.map_err(&op)?;
            self.report.locks += 1;
            match codec::decode_lock(value.value()) {
                Ok(lock) if lock.name == key.value() => {}
                Ok(lock) => self.problem(
                    table::LOCKS,
                    None,
                    None,
                    format!("key {:?} holds lock {:?}", key.value(), lock.name),
                ),
                Err(e) => self.record_error(e)?,
            }
        }
        Ok(())
    }

    fn meta(&mut self, max_lsn: u64, max_checkpoint: u64) -> Result<(), Error> {
        match tables::check_meta_txn(self.txn) {
            Ok(MetaState::Cairn(counters)) => {
                if counters.last_lsn < max_lsn {
                    self.problem(
                        table::META,
                        None,
                        None,
                        format!("last_lsn {} below lsn {max_lsn} in use", counters.last_lsn),
                    );
                }
                if counters.last_checkpoint_id < max_checkpoint {
                    self.problem(
                        table::META,
                        None,
                        None,
                        format!(
                            "last_checkpoint_id {} below id {max_checkpoint} in use",
                            counters.last_checkpoint_id
                        ),
                    );
                }
            }
            Ok(MetaState::Empty) => {
                self.problem(table::META, None, None, "meta table missing".into())
            }
            Err(Error::Corrupted { detail, .. }) => self.problem(table::META, None, None, detail),
            Err(e) => return Err(e),
        }
        Ok(())
    }
}
