//! A proptest model test: random sequences of appends across threads, checkpoints, deletes,
//! prunes, whole-thread deletes (after which a thread's id starts again at seq 1) and reopens, run against the store and an in-memory model; everything read back must
//! equal the model. The seed is fixed, so the run is deterministic; proptest prints the failing
//! sequence (shrunk) if one fails.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::collections::BTreeMap;
use std::path::Path;

use cairn_storage::{
    Batch, CheckpointFilter, CheckpointId, CheckpointKind, Error, Lsn, Page, RedbStore, Seq, Store,
};
use proptest::prelude::*;
use proptest::test_runner::{Config, RngSeed};

use crate::common::*;

#[derive(Debug, Clone)]
pub(crate) enum Op {
    Append { thread: u8, events: u8 },
    Checkpoint { thread: u8 },
    Delete { pick: u8 },
    Prune { thread: u8, pick: u8 },
    DeleteThread { thread: u8, force: bool },
    Reopen,
}

pub(crate) fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        // Mostly small appends; some long ones, so threads fill seq-index chunks (32 events) and
        // prunes cut through chunks and tails.
        5 => (0..4u8, prop_oneof![4 => 1..4u8, 1 => 20..50u8])
            .prop_map(|(thread, events)| Op::Append { thread, events }),
        2 => (0..4u8).prop_map(|thread| Op::Checkpoint { thread }),
        1 => any::<u8>().prop_map(|pick| Op::Delete { pick }),
        1 => (0..4u8, any::<u8>()).prop_map(|(thread, pick)| Op::Prune { thread, pick }),
        1 => (0..4u8, prop_oneof![3 => Just(true), 1 => Just(false)])
            .prop_map(|(thread, force)| Op::DeleteThread { thread, force }),
        1 => Just(Op::Reopen),
    ]
}

/// (seq, lsn, summary) of an event.
type ModelEvent = (u64, u64, String);

#[derive(Default)]
pub(crate) struct Model {
    /// thread -> (first_seq, last_seq, kept events).
    threads: BTreeMap<String, (u64, u64, Vec<ModelEvent>)>,
    /// checkpoint id -> (thread, covered seq).
    checkpoints: BTreeMap<u64, (String, u64)>,
    last_lsn: u64,
    last_checkpoint: u64,
    /// Distinct summaries, so a wrong event cannot pass for a right one.
    counter: u64,
}

fn name(thread: u8) -> String {
    format!("thread-{thread}")
}

pub(crate) fn apply(store: &impl Store, model: &mut Model, op: &Op) {
    match op {
        Op::Append { thread, events } => {
            let t = name(*thread);
            let mut batch = Batch::default();
            if !model.threads.contains_key(&t) {
                batch.threads.push(thread_record(&t));
                model.threads.insert(t.clone(), (1, 0, Vec::new()));
            }
            let (_, last, log) = model.threads.get_mut(&t).expect("inserted");
            for _ in 0..*events {
                model.counter += 1;
                model.last_lsn += 1;
                *last += 1;
                let seq = *last;
                let mut e = event(&t, seq);
                e.summary = format!("#{}", model.counter);
                log.push((seq, model.last_lsn, e.summary.clone()));
                batch.events.push(e);
            }
            append(store, batch);
        }
        Op::Checkpoint { thread } => {
            let t = name(*thread);
            let batch = Batch {
                checkpoints: vec![checkpoint(&t, CheckpointKind::Periodic, &["m"])],
                ..Batch::default()
            };
            let result = store.append(batch).expect("queued").wait_blocking();
            match model.threads.get(&t) {
                None => assert!(matches!(result, Err(Error::UnknownThread(_))), "{result:?}"),
                Some(&(_, last, _)) => match last {
                    0 => assert!(matches!(result, Err(Error::Invalid { .. })), "{result:?}"),
                    seq => {
                        let ids = result.expect("checkpoint").checkpoints;
                        assert_eq!(ids.len(), 1);
                        // A file counts ids one by one; a shared store takes them from
                        // transaction ids: rising, not dense. The model keeps the store's.
                        if store.shared().is_none() {
                            assert_eq!(ids[0], CheckpointId(model.last_checkpoint + 1));
                        } else {
                            assert!(ids[0].0 > model.last_checkpoint, "ids rise: {ids:?}");
                        }
                        model.last_checkpoint = ids[0].0;
                        model.checkpoints.insert(ids[0].0, (t, seq));
                    }
                },
            }
        }
        Op::Delete { pick } => {
            // Pick an existing checkpoint most of the time, a missing one otherwise.
            let ids: Vec<u64> = model.checkpoints.keys().copied().collect();
            let id =
                ids.get(*pick as usize % (ids.len() + 1)).copied().unwrap_or(1_000 + *pick as u64);
            let existed = store
                .delete_checkpoint(CheckpointId(id))
                .expect("queued")
                .wait_blocking()
                .expect("delete");
            assert_eq!(existed, model.checkpoints.remove(&id).is_some());
        }
        Op::Prune { thread, pick } => {
            let t = name(*thread);
            let own: Vec<(u64, u64)> = model
                .checkpoints
                .iter()
                .filter(|(_, (owner, _))| *owner == t)
                .map(|(id, (_, seq))| (*id, *seq))
                .collect();
            let Some(&(keep, covers)) = own.get(*pick as usize % own.len().max(1)) else {
                return;
            };
            store
                .prune(&tid(&t), CheckpointId(keep))
                .expect("queued")
                .wait_blocking()
                .expect("prune");
            model.checkpoints.retain(|id, (owner, _)| *owner != t || *id >= keep);
            let (first, _, log) = model.threads.get_mut(&t).expect("thread of a checkpoint");
            if covers >= *first {
                *first = covers + 1;
                log.retain(|e| e.0 > covers);
            }
        }
        Op::DeleteThread { thread, force } => {
            // The model's threads never finish: a delete without force is refused.
            let t = name(*thread);
            let options = cairn_storage::DeleteOptions { force: *force };
            let result = store.delete_thread(&tid(&t), options).expect("queued").wait_blocking();
            match (model.threads.get(&t), force) {
                (None, _) => assert!(matches!(result, Ok(None)), "{result:?}"),
                (Some(_), false) => {
                    assert!(matches!(result, Err(Error::Unfinished { .. })), "{result:?}");
                }
                (Some((_, _, log)), true) => {
                    let deleted = result.expect("delete").expect("it existed");
                    let own = model.checkpoints.values().filter(|(o, _)| *o == t).count();
                    assert_eq!(
                        (deleted.events, deleted.checkpoints),
                        (log.len() as u64, own as u64)
                    );
                    model.threads.remove(&t);
                    model.checkpoints.retain(|_, (owner, _)| *owner != t);
                }
            }
        }
        Op::Reopen => {}
    }
}

pub(crate) fn compare(store: &impl Store, model: &Model) {
    let lsn = numbering(store, model);
    let mut all = Vec::new();
    for (t, (first, last, log)) in &model.threads {
        let id = tid(t);
        let read = store.read_since(&id, Seq(first - 1), 1000).wait().expect("read");
        let got: Vec<_> = read
            .iter()
            .map(|e| (e.bookmark.seq.0, lsn(e.bookmark.lsn.0), e.summary.clone()))
            .collect();
        assert_eq!(&got, log, "thread {t}");
        if *first > 1 {
            assert!(matches!(store.read_since(&id, Seq(0), 1).wait(), Err(Error::Pruned { .. })));
        }
        let record = store.thread(&id).wait().expect("read").expect("thread");
        assert_eq!(record.first_seq, Seq(*first));
        assert_eq!(record.last.map_or(0, |b| b.seq.0), *last);
        if let Some(&(seq, at, _)) = log.last() {
            assert_eq!(record.last.map(|b| (b.seq.0, lsn(b.lsn.0))), Some((seq, at)));
        }
        let latest = store
            .latest_checkpoint_at_or_before(&id, Seq(u64::MAX))
            .wait()
            .expect("latest")
            .map(|c| c.id.0);
        let expected =
            model.checkpoints.iter().filter(|(_, (o, _))| o == t).map(|(id, _)| *id).max();
        assert_eq!(latest, expected, "latest checkpoint of {t}");
        all.extend(log.iter().map(|e| (e.1, e.2.clone())));
    }
    all.sort();
    let feed: Vec<_> = store
        .read_all_since(Lsn(0), 10_000)
        .wait()
        .expect("feed")
        .into_iter()
        .map(|e| (lsn(e.bookmark.lsn.0), e.summary))
        .collect();
    assert_eq!(feed, all);
    let listed: Vec<u64> = store
        .list_checkpoints(&CheckpointFilter::default(), Page { limit: 10_000, offset: 0 })
        .wait()
        .expect("list")
        .into_iter()
        .map(|c| c.id.0)
        .collect();
    assert_eq!(listed, model.checkpoints.keys().rev().copied().collect::<Vec<_>>());
    let threads: Vec<String> = store
        .list_threads(&cairn_storage::ThreadFilter::default(), Page { limit: 100, offset: 0 })
        .wait()
        .expect("list threads")
        .into_iter()
        .map(|r| r.id.to_string())
        .collect();
    assert_eq!(threads, model.threads.keys().cloned().collect::<Vec<_>>(), "deleted ones gone");
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
}

/// How the store's lsns read as the model's. A file counts them one by one, as the model does:
/// the same numbers. A shared store takes them from transaction ids (sparse, rising with each
/// thread's seqs): the store's n-th smallest stands for the model's n-th smallest, so any
/// difference of order still fails the comparison.
fn numbering<S: Store>(store: &S, model: &Model) -> impl Fn(u64) -> u64 + use<S> {
    let exclusive = store.shared().is_none();
    let mut stored: Vec<u64> = store
        .read_all_since(Lsn(0), 10_000)
        .wait()
        .expect("feed")
        .iter()
        .map(|e| e.bookmark.lsn.0)
        .collect();
    let mut modelled: Vec<u64> =
        model.threads.values().flat_map(|(_, _, log)| log.iter().map(|e| e.1)).collect();
    stored.sort_unstable();
    modelled.sort_unstable();
    let map: std::collections::HashMap<u64, u64> = stored.into_iter().zip(modelled).collect();
    move |n: u64| if exclusive { n } else { map.get(&n).copied().unwrap_or(u64::MAX) }
}

fn run(path: &Path, ops: &[Op]) {
    let mut store = RedbStore::open(path, fast()).expect("open");
    let mut model = Model::default();
    for op in ops {
        apply(&store, &mut model, op);
        if matches!(op, Op::Reopen) {
            store.close().expect("close");
            store = RedbStore::open_existing(path, fast()).expect("reopen");
            compare(&store, &model);
        }
    }
    compare(&store, &model);
    store.close().expect("close");
}

proptest! {
    #![proptest_config(Config {
        cases: 40,
        rng_seed: RngSeed::Fixed(0xCA12_2024),
        failure_persistence: None,
        ..Config::default()
    })]

    #[test]
    fn the_store_matches_the_model(ops in proptest::collection::vec(op(), 1..40)) {
        let (_dir, path) = temp_db();
        run(&path, &ops);
    }
}
