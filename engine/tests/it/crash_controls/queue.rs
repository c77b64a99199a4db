//! Queue cases of the controls proptest: some threads start on queue [`QUEUE`] (a key, a
//! priority, maybe a dedup key) under a small global and per-key limit; some are cancelled or
//! deleted while they wait in line; a thread holding a dedup key is asked for again under
//! another id while it is parked (the answer must be the holder, and nothing written).
//!
//! Judged from the log and the store, never from the engine's memory: each queued thread runs
//! from its first `Running` status event to its terminal one (lsn order over every thread's
//! log); at no lsn may more run than the global limit, or than the per-key limit within a key.
//! Once every thread has ended, the queue counts nothing running or waiting (and `verify`,
//! in `leftovers`, finds its counts equal to its members).

use std::collections::BTreeMap;

use cairn::StartOptions;
use cairn::storage::{QueueLimits, Store};
use proptest::prelude::*;

use super::{Facts, Plan};

/// The queue of the generated cases.
pub(super) const QUEUE: &str = "q";

/// The queue's limits in a case (small, so that they bind).
#[derive(Debug, Clone, Copy)]
pub(super) struct Limits {
    pub(super) global: u32,
    pub(super) per_key: u32,
}

impl Limits {
    pub(super) fn queue_limits(self) -> QueueLimits {
        QueueLimits {
            concurrency_max: Some(self.global),
            per_key_max: Some(self.per_key),
            ..QueueLimits::default()
        }
    }
}

pub(super) fn limits() -> impl Strategy<Value = Limits> {
    (1u32..=2, 1u32..=2).prop_map(|(global, per_key)| Limits { global, per_key })
}

/// How one thread starts on the queue.
#[derive(Debug, Clone, Copy)]
pub(super) struct Queued {
    pub(super) key: u8,
    pub(super) priority: u8,
    /// Holds dedup key `d<t>` (its own: every thread is created), probed once it parks.
    pub(super) dedup: bool,
    /// If its driver's first look finds it still in line: cancelled there (deleted, forced,
    /// when its plan deletes it).
    pub(super) in_line: bool,
}

pub(super) fn queued() -> impl Strategy<Value = Option<Queued>> {
    prop::option::weighted(
        0.5,
        (0u8..2, 0u8..3, prop::bool::weighted(0.5), prop::bool::weighted(0.3))
            .prop_map(|(key, priority, dedup, in_line)| Queued { key, priority, dedup, in_line }),
    )
}

/// The start options of thread `t` (`base` carries its id and budgets).
pub(super) fn options(base: StartOptions, q: Option<Queued>, t: usize) -> StartOptions {
    let Some(q) = q else { return base };
    let base = base.on_queue(QUEUE).key(format!("k{}", q.key)).priority(q.priority);
    if q.dedup { base.dedup(dedup_key(t)) } else { base }
}

pub(super) fn dedup_key(t: usize) -> String {
    format!("d{t}")
}

/// The id the dedup probe of thread `t` asks a start for (which must not be created).
pub(super) fn probe_id(t: usize) -> String {
    format!("dup-{t}")
}

/// The most queued threads running at once, in all and per key, over the logs of `facts`.
pub(super) fn concurrency(plan: &Plan, facts: &[Option<Facts>]) -> (usize, BTreeMap<u8, usize>) {
    // (lsn, +1 starts / -1 ends, key)
    let mut edges: Vec<(u64, i64, u8)> = Vec::new();
    for (t, f) in facts.iter().enumerate() {
        let (Some(q), Some(f)) = (plan.threads[t].queued, f) else { continue };
        if let Some((from, to)) = f.ran {
            edges.push((from, 1, q.key));
            edges.push((to, -1, q.key));
        }
    }
    // At one lsn an end comes before a start (an lsn belongs to one thread's event anyway).
    edges.sort_by_key(|(lsn, d, _)| (*lsn, *d));
    let (mut now, mut max) = (0i64, 0usize);
    let mut per_key: BTreeMap<u8, (i64, usize)> = BTreeMap::new();
    for (_, d, key) in edges {
        now += d;
        max = max.max(now as usize);
        let k = per_key.entry(key).or_default();
        k.0 += d;
        k.1 = k.1.max(k.0 as usize);
    }
    (max, per_key.into_iter().map(|(k, (_, m))| (k, m)).collect())
}

/// What is wrong with the limits in `facts`, and with the queue's counts once every thread
/// ended (`ended`).
pub(super) fn problems(
    plan: &Plan,
    facts: &[Option<Facts>],
    store: &dyn Store,
    ended: bool,
) -> Vec<String> {
    let mut out = Vec::new();
    let (global, per_key) = concurrency(plan, facts);
    if global > plan.queue.global as usize {
        out.push(format!("{global} queued threads ran at once, limit {}", plan.queue.global));
    }
    if let Some((k, n)) = per_key.iter().find(|(_, n)| **n > plan.queue.per_key as usize) {
        out.push(format!("{n} threads of key k{k} ran at once, limit {}", plan.queue.per_key));
    }
    if ended {
        for q in store.queues().wait().unwrap() {
            if q.running != 0 || q.waiting != 0 || !q.keys.is_empty() {
                out.push(format!("every thread ended, and queue {} still counts {q:?}", q.name));
            }
        }
    }
    out
}
