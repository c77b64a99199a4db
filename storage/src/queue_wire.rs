//! The stored layout of the queue records (`docs/format.md` §2.5): the format-v4 body, then,
//! only when a queue uses flow control or fairness weights (or a member is a batch run), a
//! trailer; then, only when a queue's fairness weights differ, its fairness part.
//!
//! ```text
//! queue record body (kind 10)          member record body (kind 11)
//! ───────────────────────────          ────────────────────────────
//! v4 body (QueueV4, postcard)          v4 body (MemberV4, postcard)
//! [ TRAILER_V1: u8 = 1                 [ TRAILER_V1: u8 = 1
//!   QueueTrailer (postcard)              MemberTrailer (postcard) ]
//!   [ FAIRNESS_V1: u8 = 2
//!     FairTrailer (postcard) ] ]
//! ```
//!
//! A queue whose fairness weights all equal their default admits by round robin (`queue_fair.rs`)
//! and is stored without the fairness part: its definition is kept only when it matters.
//!
//! A record without the trailer is a v4 record, byte for byte, and decodes with the trailer's
//! defaults (no flow control): records written before flow control existed read forever and
//! the storage format version did not change. A trailer with another tag byte is
//! [`crate::Error::Corrupted`], as are bytes after it. The codec (`codec.rs`) does the
//! postcard encoding; this file only shapes the records.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use crate::ids::ThreadId;
use crate::queue::{
    Batching, Debounced, FairState, Fairness, KeyCounts, QueueLimits, QueueMember, QueueState,
    RateLimit,
};

/// The tag byte that opens a trailer (the first trailer layout; never reused).
pub(crate) const TRAILER_V1: u8 = 1;

/// The tag byte that opens a queue trailer's fairness part (never reused).
pub(crate) const FAIRNESS_V1: u8 = 2;

/// The fairness part of a queue record: the weights and the stride scheduler's passes.
#[derive(Serialize, Deserialize, Default, PartialEq, Eq)]
pub(crate) struct FairTrailer {
    default_weight: u32,
    weights: BTreeMap<String, u32>,
    pass: BTreeMap<String, u64>,
    floor: u64,
}

/// A queue's v4 limits, as stored.
#[derive(Serialize, Deserialize)]
pub(crate) struct LimitsV4 {
    concurrency_max: Option<u32>,
    per_key_max: Option<u32>,
    rate: Option<RateLimit>,
}

/// A queue's v4 body.
#[derive(Serialize, Deserialize)]
pub(crate) struct QueueV4 {
    name: String,
    limits: LimitsV4,
    running: u64,
    waiting: u64,
    last_ticket: u64,
    admitted: u64,
    recent: Vec<u64>,
    keys: BTreeMap<String, KeyCounts>,
}

/// The flow-control part of a queue record.
#[derive(Serialize, Deserialize, Default, PartialEq, Eq)]
pub(crate) struct QueueTrailer {
    rate_per_key: Option<RateLimit>,
    rate_drops: bool,
    debounce_ms: Option<u64>,
    batch_max: Option<u32>,
    batch_window_ms: Option<u64>,
    key_recent: BTreeMap<String, Vec<u64>>,
    debounced: BTreeMap<String, Debounced>,
    batching: BTreeMap<String, Batching>,
}

/// A member's v4 body.
#[derive(Serialize, Deserialize)]
pub(crate) struct MemberV4 {
    thread: ThreadId,
    queue: String,
    key: String,
    rank: u64,
    dedup: Option<String>,
    admitted_at_ms: Option<u64>,
}

/// The trailer of a batch run's member record.
#[derive(Serialize, Deserialize, Default, PartialEq, Eq)]
pub(crate) struct MemberTrailer {
    batch_of: Vec<ThreadId>,
}

/// A queue split into its v4 body, its trailer (`None`: the v4 record, no trailer) and the
/// trailer's fairness part (`None`: none; `Some` comes with a trailer).
pub(crate) fn split_queue(q: &QueueState) -> (QueueV4, Option<QueueTrailer>, Option<FairTrailer>) {
    let l = &q.limits;
    let v4 = QueueV4 {
        name: q.name.clone(),
        limits: LimitsV4 {
            concurrency_max: l.concurrency_max,
            per_key_max: l.per_key_max,
            rate: l.rate,
        },
        running: q.running,
        waiting: q.waiting,
        last_ticket: q.last_ticket,
        admitted: q.admitted,
        recent: q.recent.clone(),
        keys: q.keys.clone(),
    };
    let trailer = QueueTrailer {
        rate_per_key: l.rate_per_key,
        rate_drops: l.rate_drops,
        debounce_ms: l.debounce_ms,
        batch_max: l.batch_max,
        batch_window_ms: l.batch_window_ms,
        key_recent: q.key_recent.clone(),
        debounced: q.debounced.clone(),
        batching: q.batching.clone(),
    };
    let fair = q.weighted().map(|f| FairTrailer {
        default_weight: f.default_weight,
        weights: f.weights.clone(),
        pass: q.fair.pass.clone(),
        floor: q.fair.floor,
    });
    let trailer = (trailer != QueueTrailer::default() || fair.is_some()).then_some(trailer);
    (v4, trailer, fair)
}

/// A queue from its v4 body, its trailer and its fairness part (defaults when absent).
pub(crate) fn join_queue(
    v4: QueueV4,
    trailer: QueueTrailer,
    fair: Option<FairTrailer>,
) -> QueueState {
    let (fairness, state) = match fair {
        Some(f) => (
            Some(Fairness { default_weight: f.default_weight, weights: f.weights }),
            FairState { pass: f.pass, floor: f.floor },
        ),
        None => (None, FairState::default()),
    };
    QueueState {
        name: v4.name,
        limits: QueueLimits {
            concurrency_max: v4.limits.concurrency_max,
            per_key_max: v4.limits.per_key_max,
            rate: v4.limits.rate,
            rate_per_key: trailer.rate_per_key,
            rate_drops: trailer.rate_drops,
            debounce_ms: trailer.debounce_ms,
            batch_max: trailer.batch_max,
            batch_window_ms: trailer.batch_window_ms,
            fairness,
        },
        running: v4.running,
        waiting: v4.waiting,
        last_ticket: v4.last_ticket,
        admitted: v4.admitted,
        recent: v4.recent,
        keys: v4.keys,
        key_recent: trailer.key_recent,
        debounced: trailer.debounced,
        batching: trailer.batching,
        fair: state,
    }
}

/// A member split into its v4 body and its trailer (`None`: not a batch run).
pub(crate) fn split_member(m: &QueueMember) -> (MemberV4, Option<MemberTrailer>) {
    let v4 = MemberV4 {
        thread: m.thread.clone(),
        queue: m.queue.clone(),
        key: m.key.clone(),
        rank: m.rank,
        dedup: m.dedup.clone(),
        admitted_at_ms: m.admitted_at_ms,
    };
    let trailer = (!m.batch_of.is_empty()).then(|| MemberTrailer { batch_of: m.batch_of.clone() });
    (v4, trailer)
}

/// A member from its v4 body and its trailer (defaults when absent).
pub(crate) fn join_member(v4: MemberV4, trailer: MemberTrailer) -> QueueMember {
    QueueMember {
        thread: v4.thread,
        queue: v4.queue,
        key: v4.key,
        rank: v4.rank,
        dedup: v4.dedup,
        admitted_at_ms: v4.admitted_at_ms,
        batch_of: trailer.batch_of,
    }
}

/// What a decoded queue's trailer must keep to (untrusted bytes): `None` when it does.
pub(crate) fn check_queue(q: &QueueState) -> Option<String> {
    let waiting: usize = q.batching.values().map(|b| b.members.len()).sum();
    if waiting > crate::limits::QUEUE_BATCH_WAITING_MAX {
        return Some(format!("{waiting} starts wait for a batch, past QUEUE_BATCH_WAITING_MAX"));
    }
    if q.limits.check().is_err() {
        return Some("its limits are not valid".into());
    }
    if q.fair.pass.len() > crate::limits::QUEUE_KEYS_MAX {
        return Some("more fairness passes than QUEUE_KEYS_MAX".into());
    }
    None
}

#[cfg(test)]
mod tests {
    use crate::codec;
    use crate::ids::ThreadId;
    use crate::queue::{Batching, Debounced, QueueLimits, QueueMember, QueueState, RateLimit};

    fn tid(s: &str) -> ThreadId {
        ThreadId::new(s).expect("id")
    }

    #[test]
    fn a_queue_without_flow_control_is_the_v4_record_byte_for_byte() {
        let limits = QueueLimits { concurrency_max: Some(2), ..QueueLimits::default() };
        let q = QueueState::new("q".into(), limits);
        let bytes = codec::encode_queue(&q).expect("encode");
        // The v4 body: name, limits (3 options), 4 counters, recent, keys; nothing after.
        let v4 =
            crate::codec::encode(crate::frame::RecordKind::Queue, &super::split_queue(&q).0, 64)
                .expect("v4");
        assert_eq!(bytes, v4);
        assert_eq!(codec::decode_queue(&bytes).expect("decode"), q);
    }

    #[test]
    fn the_flow_control_trailer_round_trips_and_refuses_a_bad_tag() {
        let limits = QueueLimits {
            rate_per_key: Some(RateLimit { starts: 3, period_ms: 10 }),
            rate_drops: true,
            debounce_ms: Some(50),
            ..QueueLimits::default()
        };
        let mut q = QueueState::new("q".into(), limits);
        q.key_recent.insert("k".into(), vec![1, 2]);
        q.debounced.insert("k".into(), Debounced { thread: tid("t"), due_ms: 60 });
        let bytes = codec::encode_queue(&q).expect("encode");
        assert_eq!(codec::decode_queue(&bytes).expect("decode"), q);
        let mut batching = QueueState::new(
            "b".into(),
            QueueLimits { batch_max: Some(2), ..QueueLimits::default() },
        );
        batching.batching.insert("".into(), Batching { members: vec![tid("a")], since_ms: 4 });
        let bytes = codec::encode_queue(&batching).expect("encode");
        assert_eq!(codec::decode_queue(&bytes).expect("decode"), batching);
        // The tag byte after the v4 body, rewritten (and the CRC with it): refused.
        let v4_len = codec::encode(crate::frame::RecordKind::Queue, &super::split_queue(&q).0, 64)
            .expect("v4")
            .len()
            - crate::frame::CRC_LEN;
        let mut body = bytes_of(&codec::encode_queue(&q).expect("encode"));
        body[v4_len - crate::frame::HEADER_LEN] = 9;
        let reframed = reframe(crate::frame::RecordKind::Queue, &body);
        assert!(codec::decode_queue(&reframed).is_err());
        let member = QueueMember {
            thread: tid("run"),
            queue: "b".into(),
            key: String::new(),
            rank: 1,
            dedup: None,
            admitted_at_ms: None,
            batch_of: vec![tid("a"), tid("b")],
        };
        let bytes = codec::encode_queue_member(&member).expect("encode");
        assert_eq!(codec::decode_queue_member(&bytes).expect("decode"), member);
    }

    #[test]
    fn weights_that_do_not_differ_write_the_old_bytes_and_weights_that_do_round_trip() {
        use crate::queue::Fairness;
        let flow = QueueLimits { debounce_ms: Some(50), ..QueueLimits::default() };
        let q = QueueState::new("q".into(), flow.clone());
        // The bytes a v7 build wrote: the v4 body and the flow-control trailer, nothing after.
        let (v4, trailer, fair) = super::split_queue(&q);
        assert!(fair.is_none());
        let old = (v4, super::TRAILER_V1, trailer.expect("a trailer"));
        let old = crate::codec::encode(crate::frame::RecordKind::Queue, &old, 64).expect("old");
        assert_eq!(codec::encode_queue(&q).expect("encode"), old, "no weights: the old bytes");
        let decoded = codec::decode_queue(&old).expect("an old record reads");
        assert_eq!((decoded.limits.fairness, decoded.fair.pass.len()), (None, 0));
        // Equal weights: round robin, stored as no weights at all.
        let equal = Fairness::new(2, [("a".to_owned(), 2)]);
        let limits = QueueLimits { fairness: Some(equal), ..flow.clone() };
        let eq = QueueState::new("q".into(), limits);
        assert_eq!(codec::encode_queue(&eq).expect("encode"), old);
        let plain = QueueState::new("q".into(), QueueLimits::default());
        let unweighted = QueueLimits {
            fairness: Some(Fairness::new(1, [("a".to_owned(), 1)])),
            ..QueueLimits::default()
        };
        let plain_eq = QueueState::new("q".into(), unweighted);
        assert_eq!(codec::encode_queue(&plain_eq).ok(), codec::encode_queue(&plain).ok());
        // Weights that differ: the fairness part, with the passes, read back whole; a queue
        // without flow control gets the (default) trailer before it.
        for base in [QueueLimits::default(), flow] {
            let fair = Fairness::new(1, [("gold".to_owned(), 3)]);
            let mut w = QueueState::new("q".into(), QueueLimits { fairness: Some(fair), ..base });
            w.fair.served("gold", 3);
            w.fair.served("free", 1);
            let bytes = codec::encode_queue(&w).expect("encode");
            assert_eq!(codec::decode_queue(&bytes).expect("decode"), w);
            // The fairness part's tag rewritten: refused.
            let mut body = bytes_of(&bytes);
            let len = body.len();
            let fair_len = crate::codec::encode(
                crate::frame::RecordKind::Queue,
                &super::split_queue(&w).2.expect("fair"),
                64,
            )
            .expect("fair")
            .len()
                - crate::frame::HEADER_LEN
                - crate::frame::CRC_LEN;
            body[len - fair_len - 1] = 7;
            let reframed = reframe(crate::frame::RecordKind::Queue, &body);
            assert!(codec::decode_queue(&reframed).is_err());
        }
        // A weight out of range does not decode as a queue (untrusted bytes).
        let bad = Fairness::new(1, [("gold".to_owned(), 0), ("x".to_owned(), 2)]);
        let q = QueueState::new(
            "q".into(),
            QueueLimits { fairness: Some(bad), ..QueueLimits::default() },
        );
        let bytes = codec::encode_queue(&q).expect("encode");
        assert!(codec::decode_queue(&bytes).is_err());
    }

    fn bytes_of(framed: &[u8]) -> Vec<u8> {
        crate::frame::decode(framed, crate::frame::RecordKind::Queue).expect("frame").to_vec()
    }

    fn reframe(kind: crate::frame::RecordKind, body: &[u8]) -> Vec<u8> {
        let mut out = crate::frame::begin(kind, body.len());
        out.extend_from_slice(body);
        crate::frame::finish(out)
    }
}
