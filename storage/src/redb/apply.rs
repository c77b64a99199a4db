//! Writing a planned batch (`crate::plan`) into the group's redb write transaction. An error
//! here leaves the transaction half-written, so the writer aborts the whole group and poisons
//! the store.

use ::redb::ReadableTable;

use super::read::{lock_in, storage};
use super::rows::Row;
use super::tables::{Counters, Tables};
use crate::batch::Appended;
use crate::codec::{self, StoredThread};
use crate::error::Error;
use crate::ids::ThreadId;
use crate::lock::LockRecord;
use crate::plan::{Plan, PlanState};

/// Writes a plan. Any error leaves the transaction half-written: the caller must abort it.
pub(crate) fn apply(
    tables: &mut Tables<'_, '_>,
    counters: &mut Counters,
    mut plan: Plan,
) -> Result<Appended, Error> {
    let op = storage("append");
    let mut last_lsn = counters.last_lsn;
    for event in &plan.log {
        // Only a bug breaks this: plan assigns lsns upward from the counter, which starts above
        // the log's last key.
        let lsn = event.bookmark.lsn.0;
        assert!(lsn > last_lsn, "lsn {lsn} not above {last_lsn}");
        last_lsn = lsn;
    }
    // Framed at the group's end, a frame per run of a thread's events across its batches.
    tables.stage_events(&mut plan.log);
    for (correlation, lsn, framed) in &plan.correlations {
        tables
            .correlations()?
            .insert((correlation.as_str(), *lsn), framed.as_slice())
            .map_err(&op)?;
    }
    for (thread, first_seq, framed) in &plan.chunks {
        tables
            .seq_index()?
            .insert((thread.as_str(), *first_seq), framed.as_slice())
            .map_err(&op)?;
    }
    // Written once per group, before the commit (`Tables::write_staged_threads`).
    for id in std::mem::take(&mut plan.dirty_threads) {
        if let Some(Some(stored)) = plan.threads.remove(&id).map(|s| *s) {
            tables.stage_thread(id, stored);
        }
    }
    for (info, info_frame, snapshot_frame) in &plan.checkpoints {
        let (id, index) = (info.id.0, tables.index()?);
        index.insert(Row::Checkpoint(id).key().as_slice(), info_frame.as_slice()).map_err(&op)?;
        index.insert(Row::Snapshot(id).key().as_slice(), snapshot_frame.as_slice()).map_err(&op)?;
        tables.index_checkpoint(info)?;
    }
    for (r, bytes) in &plan.payloads {
        tables.payloads()?.insert(&r.hash, bytes.as_slice()).map_err(&op)?;
    }
    for (thread, n, framed) in &plan.signals {
        tables.signals()?.insert((thread.as_str(), *n), framed.as_slice()).map_err(&op)?;
    }
    for (name, lock) in &plan.locks {
        match lock {
            Some(lock) => {
                let framed = codec::encode_lock(lock)?;
                tables.locks()?.insert(name.as_str(), framed.as_slice()).map_err(&op)?;
            }
            None => {
                tables.locks()?.remove(name.as_str()).map_err(&op)?;
            }
        }
    }
    tables.write_queues(&plan.queue_writes)?;
    *counters = plan.counters;
    Ok(plan.appended)
}

impl PlanState for Tables<'_, '_> {
    fn frames_events(&self) -> bool {
        false
    }

    fn stored_thread(&mut self, id: &ThreadId) -> Result<Option<StoredThread>, Error> {
        self.latest_thread(id)
    }

    fn lock(&mut self, name: &str) -> Result<Option<LockRecord>, Error> {
        lock_in(&*self.locks()?, name)
    }

    fn lock_names(&mut self, _owner: &str) -> Result<Vec<String>, Error> {
        let mut names = Vec::new();
        for entry in self.locks()?.iter().map_err(storage("read locks"))? {
            let (key, _) = entry.map_err(storage("read locks"))?;
            names.push(key.value().to_string());
        }
        Ok(names)
    }

    fn payload_exists(&mut self, hash: &[u8; 32]) -> Result<bool, Error> {
        Ok(self.payloads()?.get(hash).map_err(storage("read payload"))?.is_some())
    }

    fn last_signal(&mut self, thread: &ThreadId) -> Result<u64, Error> {
        super::signals::last_in(&*self.signals()?, thread)
    }

    fn find_signal(
        &mut self,
        thread: &ThreadId,
        name: &str,
        data: &[u8],
    ) -> Result<Option<u64>, Error> {
        super::signals::find_in(&*self.signals()?, thread, name, data)
    }
}
