//! What `verify` checks of the queue tables, on either backend: each backend reads its rows
//! (decoding them, which reports a bad record itself) and hands them here. Checked: every member
//! belongs to a stored queue, is listed as waiting exactly when it is not admitted, and has its
//! dedup key indexed; every waiting and dedup entry has its member; each queue's counts (in
//! all and per key, running and waiting) are those of its members; and every start its record
//! holds for flow control (debounced, gathering for a batch) is a waiting member of its key.

use std::collections::{BTreeMap, BTreeSet};

use crate::codec::{self, table};
use crate::error::Error;
use crate::ids::ThreadId;
use crate::queue::{QueueMember, QueueState};
use crate::store::Problem;

/// Decodes the queue stored under `name` and checks it against it (`under`, for the error: a
/// redb "key", a PostgreSQL "row").
pub(crate) fn queue_under(under: &str, name: &str, bytes: &[u8]) -> Result<QueueState, Error> {
    let q = codec::decode_queue(bytes)?;
    let mismatch = (q.name != name).then(|| format!("{under} {name} holds queue {}", q.name));
    codec::key_agrees(mismatch, table::QUEUES, None, None)?;
    Ok(q)
}

/// Decodes the member stored under `thread` and checks it against it (`under` as above).
pub(crate) fn member_under(under: &str, thread: &str, bytes: &[u8]) -> Result<QueueMember, Error> {
    let id = ThreadId::new(thread).ok();
    let m = codec::decode_queue_member(bytes).map_err(|e| codec::locate(e, id.as_ref(), None))?;
    let mismatch = (m.thread.as_str() != thread)
        .then(|| format!("{under} {thread} holds the member record of {}", m.thread));
    codec::key_agrees(mismatch, table::QUEUE_MEMBERS, id.as_ref(), None)?;
    Ok(m)
}

/// The decoded rows of the four queue tables.
#[derive(Default)]
pub(crate) struct QueueRows {
    /// Queue records by name.
    pub(crate) queues: BTreeMap<String, QueueState>,
    pub(crate) members: Vec<QueueMember>,
    /// Waiting-index entries `(queue, key, rank, thread)`.
    pub(crate) waiting: BTreeSet<(String, String, u64, String)>,
    /// Dedup-index entries `(queue, dedup, thread)`.
    pub(crate) dedup: BTreeSet<(String, String, String)>,
}

/// Pushes what is wrong with `rows` onto `problems`.
pub(crate) fn check(rows: &QueueRows, problems: &mut Vec<Problem>) {
    let mut problem = |table: &'static str, thread: Option<ThreadId>, detail: String| {
        problems.push(Problem { table, thread, seq: None, detail });
    };
    let members: BTreeSet<&str> = rows.members.iter().map(|m| m.thread.as_str()).collect();
    // (queue, key) -> (running, waiting) counted from the members.
    let mut counted: BTreeMap<(&str, &str), (u64, u64)> = BTreeMap::new();
    for m in &rows.members {
        if !rows.queues.contains_key(&m.queue) {
            let detail = format!("queue {} does not exist", m.queue);
            problem(table::QUEUE_MEMBERS, Some(m.thread.clone()), detail);
        }
        let entry = (m.queue.clone(), m.key.clone(), m.rank, m.thread.to_string());
        let listed = rows.waiting.contains(&entry);
        let c = counted.entry((m.queue.as_str(), m.key.as_str())).or_default();
        if m.admitted_at_ms.is_some() {
            c.0 += 1;
            if listed {
                let detail = "an admitted thread is still listed as waiting".to_string();
                problem(table::QUEUE_WAITING, Some(m.thread.clone()), detail);
            }
        } else {
            c.1 += 1;
            if !listed {
                let detail = "a waiting thread is not listed as waiting".to_string();
                problem(table::QUEUE_WAITING, Some(m.thread.clone()), detail);
            }
        }
        if let Some(d) = &m.dedup
            && !rows.dedup.contains(&(m.queue.clone(), d.clone(), m.thread.to_string()))
        {
            let detail = format!("dedup key {d} is not indexed");
            problem(table::QUEUE_DEDUP, Some(m.thread.clone()), detail);
        }
    }
    for (_, _, _, thread) in &rows.waiting {
        if !members.contains(thread.as_str()) {
            let detail = "a waiting entry without its member".to_string();
            problem(table::QUEUE_WAITING, ThreadId::new(thread.as_str()).ok(), detail);
        }
    }
    for (_, _, thread) in &rows.dedup {
        if !members.contains(thread.as_str()) {
            let detail = "a dedup entry without its member".to_string();
            problem(table::QUEUE_DEDUP, ThreadId::new(thread.as_str()).ok(), detail);
        }
    }
    for q in rows.queues.values() {
        let (mut running, mut waiting) = (0, 0);
        // Keys the record counts and keys its members are in: either side may lack one.
        let mut keys: BTreeSet<&str> = q.keys.keys().map(String::as_str).collect();
        keys.extend(counted.keys().filter(|(queue, _)| *queue == q.name).map(|(_, k)| *k));
        for key in keys {
            let (r, w) = counted.get(&(q.name.as_str(), key)).copied().unwrap_or_default();
            running += r;
            waiting += w;
            let k = q.keys.get(key).copied().unwrap_or_default();
            if (k.running, k.waiting) != (r, w) {
                let detail = format!(
                    "queue {} key {key:?} counts {} running / {} waiting, its members {r} / {w}",
                    q.name, k.running, k.waiting
                );
                problem(table::QUEUES, None, detail);
            }
        }
        check_flow(q, &rows.members, &mut problem);
        if (q.running, q.waiting) != (running, waiting) {
            let detail = format!(
                "queue {} counts {} running / {} waiting, its members {running} / {waiting}",
                q.name, q.running, q.waiting
            );
            problem(table::QUEUES, None, detail);
        }
    }
}

/// The starts `q`'s record holds for flow control are waiting members of `q` under their key.
fn check_flow(
    q: &QueueState,
    members: &[QueueMember],
    problem: &mut impl FnMut(&'static str, Option<ThreadId>, String),
) {
    let debounced = q.debounced.iter().map(|(k, d)| (k, &d.thread, "debounced"));
    let gathering =
        q.batching.iter().flat_map(|(k, b)| b.members.iter().map(move |t| (k, t, "gathering")));
    for (key, thread, what) in debounced.chain(gathering) {
        let waits = members.iter().any(|m| {
            &m.thread == thread && m.queue == q.name && &m.key == key && m.admitted_at_ms.is_none()
        });
        if !waits {
            let detail = format!(
                "queue {} holds {thread} as {what} under key {key:?}, not waiting there",
                q.name
            );
            problem(table::QUEUES, Some(thread.clone()), detail);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queue::{Debounced, QueueLimits};

    #[test]
    fn a_debounced_start_that_is_not_a_waiting_member_is_reported() {
        let limits = QueueLimits { debounce_ms: Some(10), ..QueueLimits::default() };
        let mut q = QueueState::new("q".into(), limits);
        let thread = ThreadId::new("gone").expect("id");
        q.debounced.insert("k".into(), Debounced { thread: thread.clone(), due_ms: 5 });
        let rows = QueueRows { queues: [("q".to_string(), q)].into(), ..QueueRows::default() };
        let mut problems = Vec::new();
        check(&rows, &mut problems);
        assert_eq!(problems.len(), 1, "{problems:?}");
        assert_eq!(problems[0].thread.as_ref(), Some(&thread));
        assert!(problems[0].detail.contains("debounced"), "{problems:?}");
    }
}
