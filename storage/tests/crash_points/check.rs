//! Checking a reopened image against what was acknowledged and what was in flight.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use cairn_storage::{Append, Catalog, Maintenance, ThreadLog};
use std::collections::BTreeMap;

use cairn_storage::limits::READ_LIMIT_MAX;
use cairn_storage::{Batch, Event, EventKind, Lsn, RedbStore, Seq};

use super::workload::{Expected, THREADS, event, expected_of, thread};

/// The result of checking one reopened image.
#[derive(Debug, Default)]
pub(crate) struct Check {
    pub(crate) lost_acked: u64,
    pub(crate) partial: bool,
    pub(crate) wrong_data: u64,
    /// Whether each unacknowledged batch landed, in the order given.
    pub(crate) landed: Vec<bool>,
    pub(crate) problems: Vec<String>,
}

/// Reads every event of every workload thread, `UnknownThread` meaning none yet.
pub(crate) fn stored_events(store: &RedbStore) -> Result<Vec<Event>, cairn_storage::Error> {
    let mut all = Vec::new();
    for t in 0..THREADS.len() {
        match store.read_since(&thread(t), Seq(0), READ_LIMIT_MAX).wait() {
            Ok(events) => all.extend(events),
            Err(cairn_storage::Error::UnknownThread(_)) => {}
            Err(e) => return Err(e),
        }
    }
    Ok(all)
}

pub(crate) fn check(store: &RedbStore, must: &[&Expected], maybe: &[&Expected]) -> Check {
    let mut out = Check::default();
    let stored = match stored_events(store) {
        Ok(events) => events,
        Err(e) => {
            out.problems.push(format!("read failed: {e}"));
            out.lost_acked += must.iter().map(|b| b.events.len() as u64).sum::<u64>();
            return out;
        }
    };
    let key = |e: &Event| (e.thread.as_str().to_owned(), e.bookmark.seq);
    let stored_by_key: BTreeMap<_, _> = stored.iter().map(|e| (key(e), e)).collect();

    // Acknowledged: every event present and equal.
    for event in must.iter().flat_map(|b| &b.events) {
        match stored_by_key.get(&key(event)) {
            Some(found) if *found == event => {}
            Some(found) => {
                out.lost_acked += 1;
                out.problems.push(format!("acked event differs: want {event:?}, found {found:?}"));
            }
            None => {
                out.lost_acked += 1;
                out.problems.push(format!("acked event lost: {event:?}"));
            }
        }
    }
    for ckpt in must.iter().flat_map(|b| &b.checkpoints) {
        match store.checkpoint(ckpt.id).wait() {
            Ok(Some(found)) if found == *ckpt => {}
            other => {
                out.lost_acked += 1;
                out.problems.push(format!("acked checkpoint {} wrong: {other:?}", ckpt.id));
            }
        }
    }
    for (r, payload) in must.iter().flat_map(|b| &b.payloads) {
        match store.payload(r).wait() {
            Ok(found) if found == *payload => {}
            other => {
                out.lost_acked += 1;
                out.problems.push(format!("acked payload {r} wrong: {:?}", other.map(|p| p.len())));
            }
        }
    }

    // In flight: each unacknowledged batch wholly present or wholly absent.
    let mut allowed: Vec<&Event> = must.iter().flat_map(|b| &b.events).collect();
    for batch in maybe {
        let mut present_pieces = Vec::new();
        for event in &batch.events {
            present_pieces.push(stored_by_key.get(&key(event)).is_some_and(|f| *f == event));
        }
        for ckpt in &batch.checkpoints {
            present_pieces.push(
                matches!(store.checkpoint(ckpt.id).wait(), Ok(Some(found)) if found == *ckpt),
            );
        }
        let landed = present_pieces.first().copied().unwrap_or(false);
        if present_pieces.iter().any(|&p| p != landed) {
            out.partial = true;
            out.problems.push(format!("in-flight batch partially present: {present_pieces:?}"));
        }
        if landed {
            for (r, payload) in &batch.payloads {
                if !matches!(store.payload(r).wait(), Ok(found) if found == *payload) {
                    out.partial = true;
                    out.problems.push(format!("in-flight batch landed without payload {r}"));
                }
            }
            allowed.extend(&batch.events);
        }
        out.landed.push(landed);
    }

    // Nothing else: every stored event is an expected one.
    let allowed: BTreeMap<_, _> = allowed.into_iter().map(|e| (key(e), e)).collect();
    for event in &stored {
        if allowed.get(&key(event)) != Some(&event) {
            out.wrong_data += 1;
            out.problems.push(format!("unexpected event stored: {event:?}"));
        }
    }

    // Seqs gap-free per thread, and the global feed holds exactly the same events in lsn order.
    let mut per_thread: BTreeMap<&str, Vec<u64>> = BTreeMap::new();
    for event in &stored {
        per_thread.entry(event.thread.as_str()).or_default().push(event.bookmark.seq.0);
    }
    for (t, seqs) in &per_thread {
        if seqs.iter().copied().ne(1..=seqs.len() as u64) {
            out.problems.push(format!("thread {t} seqs not gap-free: {seqs:?}"));
        }
    }
    match store.read_all_since(Lsn(0), READ_LIMIT_MAX).wait() {
        Ok(feed) => {
            let mut by_lsn = stored.clone();
            by_lsn.sort_by_key(|e| e.bookmark.lsn);
            if feed != by_lsn {
                out.problems.push(format!(
                    "global feed disagrees with per-thread reads ({} vs {} events)",
                    feed.len(),
                    by_lsn.len()
                ));
            }
        }
        Err(e) => out.problems.push(format!("read_all_since failed: {e}")),
    }
    match store.verify() {
        Ok(report) if report.is_clean() => {}
        Ok(report) => out.problems.push(format!("verify: {:?}", report.problems)),
        Err(e) => out.problems.push(format!("verify failed: {e}")),
    }
    out
}

/// Appends one more event to thread 0 on a reopened store and checks it lands at the next seq.
/// Returns what it must look like if the append was acknowledged.
pub(crate) fn continue_after_recovery(
    store: &RedbStore,
    problems: &mut Vec<String>,
) -> Option<Expected> {
    let t0 = thread(0);
    let last = match store.last_bookmark(&t0).wait() {
        Ok(last) => last,
        Err(e) => {
            problems.push(format!("last_bookmark after recovery: {e}"));
            return None;
        }
    };
    let Some(last) = last else {
        // Thread 0 does not exist yet (the crash came before its creation was acknowledged).
        return None;
    };
    let new = event(0, EventKind::Recovered, 999, 77);
    let batch = Batch { events: vec![new], ..Batch::default() };
    match store.append(batch.clone()).and_then(|p| p.wait_blocking()) {
        Ok(appended) => {
            let bookmark = appended.bookmarks[0];
            if bookmark.seq.0 != last.seq.0 + 1 {
                problems.push(format!("append after recovery got {bookmark}, last was {last}"));
            }
            Some(expected_of(&batch, &appended, store))
        }
        Err(e) => {
            problems.push(format!("append after recovery failed: {e}"));
            None
        }
    }
}
