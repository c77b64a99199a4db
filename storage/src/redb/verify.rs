//! `verify()`: one read transaction scanning every table, reporting every problem with its
//! location instead of stopping at the first.
//!
//! Checks: every frame's CRC, kind and length; keys agree with records; per thread, the seq index
//! (chunks, then the tail in the thread record) covers every seq from `first_seq` to the record's
//! `last` exactly once, lsns rise with seq, and `last` equals the last event's bookmark; the seq
//! index and the log's batch frames agree both ways (every indexed lsn lies in a frame, which
//! holds that thread's event of that seq there; every event of every frame is indexed once;
//! frames do not overlap; this keeps one u64-sized entry per event in memory);
//! the correlation index and the events that carry a correlation id agree both ways (one entry
//! per such event kept in memory);
//! checkpoints and their
//! three indexes agree both ways, each has its snapshot, and covers an event that exists (or was
//! pruned); payloads hash to their keys and every referenced payload exists; the thread search
//! index (labels, status) and the thread records agree both ways; the meta counters
//! are at or above every lsn and checkpoint id in use.

use std::collections::{BTreeMap, BTreeSet};

use ::redb::{ReadTransaction, ReadableTable};

use super::index::{check_event_at, decode_chunk_at, storage};
use super::index_keys::INDEX;
use super::rows::{self, CHECKPOINT_ROW, Row, SNAPSHOT_ROW, THREAD_ROW, kind_range};
use super::tables::{self, CORRELATIONS, EVENTS, LOCKS, MetaState, PAYLOADS, SEQ_INDEX};
use crate::checkpoint::CheckpointInfo;
use crate::codec::{self, StoredThread, table};
use crate::correlation;
use crate::error::Error;
use crate::ids::{CheckpointId, PayloadRef, Seq, ThreadId};
use crate::store::{Problem, VerifyReport};

/// One seq-index entry: thread `thread` (an index into the sorted thread ids) has seq `seq` at
/// `lsn`.
#[derive(Clone, Copy)]
struct Ref {
    lsn: u64,
    thread: usize,
    seq: u64,
}

/// The thread whose seq index is being walked.
struct Walk {
    thread: usize,
    /// The next seq the index must cover; `None` after an undecodable chunk (resync at the next).
    next: Option<u64>,
    last_lsn: u64,
}

type Threads = BTreeMap<ThreadId, StoredThread>;

/// The walk of the log against the seq index: the entries, sorted by lsn, and how far it got.
struct Log<'a> {
    threads: &'a Threads,
    ids: &'a [&'a ThreadId],
    payloads: ::redb::ReadOnlyTable<&'static [u8; 32], &'static [u8]>,
    refs: &'a [Ref],
    /// The first entry not yet met.
    next: usize,
}

impl<'a> Log<'a> {
    /// The entries not yet met with lsns up to `lsn`, passed.
    fn take_through(&mut self, lsn: u64) -> &'a [Ref] {
        let refs: &'a [Ref] = self.refs;
        let rest = &refs[self.next..];
        let n = rest.partition_point(|r| r.lsn <= lsn);
        self.next += n;
        &rest[..n]
    }

    /// Reports entry `r` as pointing at an lsn no frame holds.
    fn missing(&self, scan: &mut Scan<'_>, r: &Ref) {
        let detail = format!("seq gap: the event of seq {} (lsn {}) is missing", r.seq, r.lsn);
        scan.problem(table::EVENTS, Some(self.ids[r.thread]), Some(r.seq), detail);
    }
}

struct Scan<'t> {
    txn: &'t ReadTransaction,
    report: VerifyReport,
    /// (correlation id, lsn) -> (thread, seq) of every event that carries a correlation id: the
    /// entries the correlation index must hold, exactly.
    correlated: BTreeMap<(String, u64), (ThreadId, u64)>,
}

/// The tables a checkpoint is checked against, open for the scan of the checkpoints.
struct CheckpointTables {
    index: ::redb::ReadOnlyTable<&'static [u8], &'static [u8]>,
    events: ::redb::ReadOnlyTable<u64, &'static [u8]>,
}

/// Every decodable checkpoint, by id.
type Infos = BTreeMap<u64, CheckpointInfo>;

/// Scans everything; see the module doc.
///
/// A table that cannot be read to its end (redb fails, or panics on a damaged page) is one
/// problem, and the scan goes on with the next table: every damaged record it can reach is
/// reported, not only the first.
pub(crate) fn verify(txn: &ReadTransaction) -> Result<VerifyReport, Error> {
    let mut scan = Scan { txn, report: VerifyReport::default(), correlated: BTreeMap::new() };
    let threads = scan.section(table::THREADS, Scan::threads).unwrap_or_default();
    let refs = scan.section(table::SEQ_INDEX, |s| s.seq_index(&threads)).unwrap_or_default();
    let max_lsn = scan.section(table::EVENTS, |s| s.events(&threads, &refs));
    if max_lsn.is_some() {
        scan.section(table::CORRELATIONS, Scan::correlations);
    }
    let checkpoints = scan.section(table::CHECKPOINTS, |s| s.checkpoints(&threads));
    let max_checkpoint = checkpoints.as_ref().map(|(max, _)| *max);
    scan.section(table::PAYLOADS, Scan::payloads);
    scan.section(table::LOCKS, Scan::locks);
    scan.section(table::SIGNALS, |s| {
        let known = |id: &ThreadId| threads.contains_key(id);
        s.report.signals = super::signals::verify(s.txn, known, &mut s.report.problems)?;
        Ok(())
    });
    if let Some((_, infos)) = &checkpoints {
        scan.section(table::INDEX, |s| {
            let records = threads.values().map(|stored| &stored.record);
            super::index_check::verify(s.txn, records, infos.values(), &mut s.report.problems)
        });
    }
    scan.section(table::QUEUES, |s| {
        s.report.queues = super::queues::verify(s.txn, &mut s.report.problems)?;
        Ok(())
    });
    if let (Some(lsn), Some(checkpoint)) = (max_lsn, max_checkpoint) {
        scan.section(table::META, |s| s.meta(lsn, checkpoint));
    }
    Ok(scan.report)
}

impl Scan<'_> {
    /// Runs one table's scan, guarded; a failure is a problem of that table, and `None`.
    fn section<T>(
        &mut self,
        table: &'static str,
        scan: impl FnOnce(&mut Self) -> Result<T, Error>,
    ) -> Option<T> {
        match super::guard::guard("verify", || scan(self)) {
            Ok(value) => Some(value),
            Err(error) => {
                let detail = format!("the table could not be read to its end: {error}");
                self.problem(table, None, None, detail);
                None
            }
        }
    }

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
        self.report.problems.push(Problem::of(error)?);
        Ok(())
    }

    fn open<K: ::redb::Key + 'static, V: ::redb::Value + 'static>(
        &self,
        def: ::redb::TableDefinition<'_, K, V>,
    ) -> Result<::redb::ReadOnlyTable<K, V>, Error> {
        self.txn.open_table(def).map_err(|e| Error::storage("open table", e))
    }

    fn threads(&mut self) -> Result<Threads, Error> {
        let op = storage("verify threads");
        let mut out = BTreeMap::new();
        for entry in self.open(INDEX)?.range(kind_range(THREAD_ROW)).map_err(&op)? {
            let (key, value) = entry.map_err(&op)?;
            self.report.threads += 1;
            let parsed = match Row::decode(key.value()) {
                Some(Row::Thread(id)) => ThreadId::new(id).map_err(|e| e.to_string()),
                _ => Err("not a thread id".to_owned()),
            };
            let id = match parsed {
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
            match codec::decode_stored_thread(value.value()) {
                Ok(stored) if stored.record.id == id => {
                    out.insert(id, stored);
                }
                Ok(stored) => self.problem(
                    table::THREADS,
                    Some(&id),
                    None,
                    format!("key holds the record of thread {}", stored.record.id),
                ),
                Err(e) => self.record_error(codec::locate(e, Some(&id), None))?,
            }
        }
        Ok(out)
    }

    /// Walks every thread's seq index, chunks then tail; returns every entry, sorted by lsn.
    fn seq_index(&mut self, threads: &Threads) -> Result<Vec<Ref>, Error> {
        let op = storage("verify seq index");
        let ids: Vec<&ThreadId> = threads.keys().collect();
        let mut refs = Vec::new();
        let mut walk: Option<Walk> = None;
        let mut orphan: Option<String> = None;
        for entry in self.open(SEQ_INDEX)?.iter().map_err(&op)? {
            let (key, value) = entry.map_err(&op)?;
            let (thread, first) = key.value();
            let current = walk.as_ref().map(|w| ids[w.thread].as_str());
            if current != Some(thread) && orphan.as_deref() != Some(thread) {
                if let Some(done) = walk.take() {
                    self.end_walk(threads, &ids, done, &mut refs);
                }
                orphan = None;
                match ids.binary_search_by(|id| id.as_str().cmp(thread)) {
                    Ok(i) => {
                        let first_seq = threads[ids[i]].record.first_seq.0;
                        walk = Some(Walk { thread: i, next: Some(first_seq), last_lsn: 0 });
                    }
                    Err(_) => {
                        let id = ThreadId::new(thread).ok();
                        let detail = "seq index of a thread with no record".to_string();
                        self.problem(table::SEQ_INDEX, id.as_ref(), Some(first), detail);
                        orphan = Some(thread.to_string());
                    }
                }
            }
            let Some(w) = walk.as_mut() else { continue };
            let id = ids[w.thread];
            let chunk = match decode_chunk_at(id, first, value.value()) {
                Ok(chunk) => chunk,
                Err(e) => {
                    w.next = None;
                    self.record_error(e)?;
                    continue;
                }
            };
            if let Some(next) = w.next
                && next != first
            {
                let detail = if first > next {
                    format!("seq gap: seqs {next}..{first} are in no chunk")
                } else {
                    format!("the chunk at seq {first} overlaps seqs before {next}")
                };
                self.problem(table::SEQ_INDEX, Some(id), Some(next.min(first)), detail);
            }
            for (seq, &lsn) in (first..).zip(&chunk.lsns) {
                if lsn <= w.last_lsn {
                    let detail = format!("lsn {lsn} not above the previous {}", w.last_lsn);
                    self.problem(table::SEQ_INDEX, Some(id), Some(seq), detail);
                }
                w.last_lsn = lsn;
                refs.push(Ref { lsn, thread: w.thread, seq });
            }
            w.next = Some(first + chunk.lsns.len() as u64);
        }
        if let Some(done) = walk.take() {
            self.end_walk(threads, &ids, done, &mut refs);
        }
        // Threads without any chunk: their tail must start at first_seq.
        let walked: BTreeSet<usize> = refs.iter().map(|r| r.thread).collect();
        for (i, id) in ids.iter().enumerate() {
            if !walked.contains(&i) {
                let first_seq = threads[*id].record.first_seq.0;
                let done = Walk { thread: i, next: Some(first_seq), last_lsn: 0 };
                self.end_walk(threads, &ids, done, &mut refs);
            }
        }
        refs.sort_unstable_by_key(|r| r.lsn);
        Ok(refs)
    }

    /// Checks a walked thread's chunks end where its tail starts, then adds the tail.
    fn end_walk(&mut self, threads: &Threads, ids: &[&ThreadId], walk: Walk, refs: &mut Vec<Ref>) {
        let id = ids[walk.thread];
        let stored = &threads[id];
        let tail_start = stored.tail_start();
        if let Some(next) = walk.next
            && next != tail_start
        {
            let detail = if next < tail_start {
                format!("seq gap: seqs {next}..{tail_start} are in no chunk")
            } else {
                format!("the chunks reach seq {}, past the tail's start {tail_start}", next - 1)
            };
            self.problem(table::SEQ_INDEX, Some(id), Some(next.min(tail_start)), detail);
        }
        let mut last_lsn = walk.last_lsn;
        for (seq, &lsn) in (tail_start..).zip(&stored.tail) {
            if lsn <= last_lsn {
                let detail = format!("tail lsn {lsn} not above the previous {last_lsn}");
                self.problem(table::THREADS, Some(id), Some(seq), detail);
            }
            last_lsn = lsn;
            refs.push(Ref { lsn, thread: walk.thread, seq });
        }
    }

    /// Walks the log's frames against the sorted seq-index entries, both ways; returns the
    /// highest lsn seen.
    fn events(&mut self, threads: &Threads, refs: &[Ref]) -> Result<u64, Error> {
        let op = storage("verify events");
        let ids: Vec<&ThreadId> = threads.keys().collect();
        let mut log = Log { threads, ids: &ids, payloads: self.open(PAYLOADS)?, refs, next: 0 };
        let (mut max_lsn, mut held_to) = (0, 0);
        for entry in self.open(EVENTS)?.iter().map_err(&op)? {
            let (key, value) = entry.map_err(&op)?;
            let key = key.value();
            max_lsn = max_lsn.max(key);
            let frame = match super::log::decode_frame_at(key, value.value()) {
                Ok(frame) => frame,
                Err(e) => {
                    // The index entries up to its key are taken as the damaged frame's own: one
                    // problem, named after the entry at its key when there is one.
                    let own = log.take_through(key);
                    self.report.events += own.len().max(1) as u64;
                    let owner = own.iter().find(|r| r.lsn == key).map(|r| (ids[r.thread], r.seq));
                    let (thread, seq) = (owner.map(|o| o.0), owner.map(|o| Seq(o.1)));
                    self.record_error(codec::locate(e, thread, seq))?;
                    held_to = key;
                    continue;
                }
            };
            if let Some(first) = frame.first()
                && first.bookmark.lsn.0 <= held_to
            {
                let detail = format!("the frame under lsn {key} overlaps lsns up to {held_to}");
                let seq = Some(first.bookmark.seq.0);
                self.problem(table::EVENTS, Some(&first.thread), seq, detail);
            }
            held_to = held_to.max(key);
            for event in frame {
                self.logged(&mut log, event)?;
            }
        }
        for r in log.take_through(u64::MAX) {
            log.missing(self, r);
        }
        Ok(max_lsn)
    }

    /// Checks one event of the log against the seq index (`log.refs`, walked in lsn order) and
    /// its thread, correlation and payload.
    fn logged(&mut self, log: &mut Log<'_>, event: crate::event::Event) -> Result<(), Error> {
        let op = storage("verify events");
        let lsn = event.bookmark.lsn.0;
        self.report.events += 1;
        for r in log.take_through(lsn - 1) {
            log.missing(self, r);
        }
        let Some((r, twins)) = log.take_through(lsn).split_first() else {
            let detail = "an event no thread's seq index holds".to_string();
            self.problem(table::EVENTS, Some(&event.thread), Some(event.bookmark.seq.0), detail);
            return Ok(());
        };
        let id = log.ids[r.thread];
        for twin in twins {
            let detail = format!("lsn {lsn} is indexed again, as ({id}, {})", r.seq);
            self.problem(table::SEQ_INDEX, Some(log.ids[twin.thread]), Some(twin.seq), detail);
        }
        if let Err(e) = check_event_at(id, r.seq, lsn, &event) {
            return self.record_error(e);
        }
        let last = log.threads[id].record.last;
        if last.is_some_and(|b| b.seq.0 == r.seq) && last != Some(event.bookmark) {
            let detail = "last bookmark differs from the last event".to_string();
            self.problem(table::THREADS, Some(id), Some(r.seq), detail);
        }
        let payloads = &log.payloads;
        if let Some(c) = correlation::of(&event, |p| super::read::payload_in(payloads, p)) {
            self.correlated.insert((c, lsn), (id.clone(), r.seq));
        }
        if let Some(p) = event.payload
            && log.payloads.get(&p.hash).map_err(&op)?.is_none()
        {
            self.problem(table::PAYLOADS, Some(id), Some(r.seq), format!("missing payload {p}"));
        }
        Ok(())
    }

    /// Scans checkpoints and their snapshots; returns the highest id seen and every decodable
    /// checkpoint (the index check's).
    fn checkpoints(&mut self, threads: &Threads) -> Result<(u64, Infos), Error> {
        let op = storage("verify checkpoints");
        let tables = CheckpointTables { index: self.open(INDEX)?, events: self.open(EVENTS)? };
        let mut infos = Infos::new();
        let mut max_id = 0;
        for entry in tables.index.range(kind_range(CHECKPOINT_ROW)).map_err(&op)? {
            let (key, value) = entry.map_err(&op)?;
            let Some(Row::Checkpoint(id)) = Row::decode(key.value()) else {
                let detail = format!("invalid key {:02x?}", key.value());
                self.problem(table::CHECKPOINTS, None, None, detail);
                continue;
            };
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
            self.snapshot_of(&tables, id, &info)?;
            self.covered(&tables, threads, id, &info)?;
            infos.insert(id, info);
        }
        self.orphan_snapshots(&tables, &infos)?;
        Ok((max_id, infos))
    }

    /// Checks that checkpoint `id` (`info`) has its snapshot, of its id and length.
    fn snapshot_of(
        &mut self,
        tables: &CheckpointTables,
        id: u64,
        info: &CheckpointInfo,
    ) -> Result<(), Error> {
        let thread = Some(&info.thread);
        match rows::snapshot_frame(&tables.index, CheckpointId(id))? {
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
        Ok(())
    }

    /// Checks that checkpoint `id` (`info`) covers an event of its thread that exists (or was
    /// pruned).
    fn covered(
        &mut self,
        tables: &CheckpointTables,
        threads: &Threads,
        id: u64,
        info: &CheckpointInfo,
    ) -> Result<(), Error> {
        let thread = Some(&info.thread);
        match threads.get(&info.thread) {
            None => self.problem(
                table::CHECKPOINTS,
                thread,
                Some(id),
                "checkpoint of a thread with no record".into(),
            ),
            Some(StoredThread { record, .. }) => {
                let covers = info.covers.seq;
                if record.last.is_none_or(|b| b.seq < covers) {
                    self.problem(
                        table::CHECKPOINTS,
                        thread,
                        Some(id),
                        format!("covers seq {covers} past the thread's last"),
                    );
                } else if covers >= record.first_seq {
                    let stored = super::log::event_at(&tables.events, info.covers.lsn.0);
                    let matches = stored
                        .ok()
                        .flatten()
                        .is_some_and(|e| e.bookmark == info.covers && e.thread == info.thread);
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
        Ok(())
    }

    /// Reports the snapshots that no checkpoint of `infos` accounts for.
    fn orphan_snapshots(&mut self, tables: &CheckpointTables, infos: &Infos) -> Result<(), Error> {
        let op = storage("verify checkpoints");
        for entry in tables.index.range(kind_range(SNAPSHOT_ROW)).map_err(&op)? {
            let (key, _) = entry.map_err(&op)?;
            let Some(Row::Snapshot(id)) = Row::decode(key.value()) else {
                let detail = format!("invalid key {:02x?}", key.value());
                self.problem(table::SNAPSHOTS, None, None, detail);
                continue;
            };
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
        Ok(())
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

    /// The correlation index against the events that carry a correlation id, both ways.
    fn correlations(&mut self) -> Result<(), Error> {
        let op = storage("verify correlations");
        let mut expected = std::mem::take(&mut self.correlated);
        for entry in self.open(CORRELATIONS)?.iter().map_err(&op)? {
            let (key, value) = entry.map_err(&op)?;
            let (correlation, lsn) = key.value();
            let entry = match super::correlations::entry_at(correlation, lsn, value.value()) {
                Ok(entry) => entry,
                Err(e) => {
                    expected.remove(&(correlation.to_owned(), lsn));
                    self.record_error(e)?;
                    continue;
                }
            };
            match expected.remove(&(entry.correlation.clone(), lsn)) {
                Some((thread, seq)) if thread == entry.thread && seq == entry.seq => {}
                Some((thread, seq)) => self.problem(
                    table::CORRELATIONS,
                    Some(&entry.thread),
                    Some(entry.seq),
                    format!(
                        "entry ({correlation:?}, lsn {lsn}) names ({}, {}), the event is ({thread}, \
                         {seq})",
                        entry.thread, entry.seq
                    ),
                ),
                None => self.problem(
                    table::CORRELATIONS,
                    Some(&entry.thread),
                    Some(entry.seq),
                    format!(
                        "entry ({correlation:?}, lsn {lsn}) points at no event carrying that \
                         correlation id"
                    ),
                ),
            }
        }
        for ((correlation, lsn), (thread, seq)) in expected {
            let detail = format!("the event at lsn {lsn} carries {correlation:?} but has no entry");
            self.problem(table::CORRELATIONS, Some(&thread), Some(seq), detail);
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
            Ok(MetaState::Cairn(counters, _)) => {
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
