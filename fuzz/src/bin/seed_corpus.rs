//! Writes the `record_decode` seed corpus: one valid framed record of every kind, so the fuzzer
//! starts past the CRC instead of having to discover a valid frame by chance.
//!
//! `cargo run --bin seed_corpus` (from `fuzz/`); `scripts/fuzz.sh` runs it when the corpus is empty.

use std::collections::BTreeMap;
use std::path::Path;

use cairn_storage::{
    Bookmark, CheckpointId, CheckpointInfo, CheckpointKind, CheckpointMeta, Event, EventKind,
    EventStatus, KeyCounts, LockRecord, Lsn, PayloadRef, QueueLimits, QueueMember, QueueState,
    RateLimit, Seq, SeqChunk, Signal, ThreadId, ThreadRecord, WorkflowRef, codec,
};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("corpus/record_decode");
    std::fs::create_dir_all(&dir)?;
    let thread = ThreadId::new("seed-thread")?;
    let workflow = WorkflowRef { id: "seed".into(), version: 1, fingerprint: "fp".into() };
    let bookmark = Bookmark { seq: Seq(3), lsn: Lsn(9), at_ms: 1_000 };
    let event = Event {
        bookmark,
        thread: thread.clone(),
        kind: EventKind::ToolCalled,
        node: Some("fetch".into()),
        status: EventStatus::Info,
        summary: "called fetch".into(),
        payload: Some(PayloadRef::of(b"payload")),
        data: br#"{"url":"https://example.invalid"}"#.to_vec(),
        correlation: None,
    };
    let mut record = ThreadRecord::new(thread.clone(), workflow.clone(), 5);
    record.last = Some(bookmark);
    record.labels.insert("tenant".into(), "acme".into());
    let chunk = SeqChunk { thread: thread.clone(), first_seq: 1, lsns: vec![2, 5, 9] };
    let info = CheckpointInfo {
        id: CheckpointId(2),
        thread,
        workflow,
        covers: bookmark,
        created_at_ms: 7,
        kind: CheckpointKind::Node,
        snapshot_len: 4,
        meta: CheckpointMeta {
            creator: "seed".into(),
            description: "seed checkpoint".into(),
            tags: vec!["a".into()],
            custom: BTreeMap::from([("k".to_string(), "v".to_string())]),
        },
    };
    let lock =
        LockRecord { name: "res".into(), owner: "me".into(), acquired_at_ms: 1, expires_at_ms: 2 };
    let signal = Signal {
        thread: ThreadId::new("t-1")?,
        n: 3,
        name: "pay".into(),
        at_ms: 1_700_000_000_000,
        data: b"30".to_vec(),
    };
    // The event again at the next seq and lsn: a batch frame of two (record kind 12).
    let next = Event {
        bookmark: Bookmark { seq: Seq(4), lsn: Lsn(10), ..bookmark },
        ..event.clone()
    };
    let limits = QueueLimits {
        concurrency_max: Some(4),
        per_key_max: Some(2),
        rate: Some(RateLimit { starts: 10, period_ms: 60_000 }),
        ..QueueLimits::default()
    };
    let mut queue = QueueState::new("reports".into(), limits);
    queue.running = 1;
    queue.waiting = 2;
    queue.last_ticket = 3;
    queue.admitted = 1;
    queue.recent = vec![1_000];
    queue.keys.insert("acme".into(), KeyCounts { running: 1, waiting: 2, served_at: 1 });
    let member = QueueMember {
        thread: ThreadId::new("t-2")?,
        queue: "reports".into(),
        key: "acme".into(),
        rank: 7,
        dedup: Some("daily".into()),
        admitted_at_ms: None,
        batch_of: Vec::new(),
    };
    let seeds = [
        ("event", codec::encode_event(&event)?),
        ("event_batch", codec::encode_event_batch(&[event.clone(), next])?),
        ("thread", codec::encode_thread(&record)?),
        ("checkpoint", codec::encode_checkpoint(&info)?),
        ("snapshot", codec::encode_snapshot(CheckpointId(2), b"snap")?),
        ("lock", codec::encode_lock(&lock)?),
        ("seq_chunk", codec::encode_seq_chunk(&chunk)?),
        ("signal", codec::encode_signal(&signal)?),
        ("queue", codec::encode_queue(&queue)?),
        ("queue_member", codec::encode_queue_member(&member)?),
        ("queue_flow", codec::encode_queue(&flow_queue()?)?),
        ("queue_fair", codec::encode_queue(&fair_queue())?),
        (
            "queue_member_batch",
            codec::encode_queue_member(&QueueMember {
                batch_of: vec![ThreadId::new("t-3")?, ThreadId::new("t-4")?],
                ..member.clone()
            })?,
        ),
    ];
    for (name, bytes) in seeds {
        std::fs::write(dir.join(format!("seed-{name}")), bytes)?;
    }
    Ok(())
}

/// A queue record with the trailer's fairness part (`storage/src/queue_wire.rs`).
fn fair_queue() -> QueueState {
    let fair = cairn_storage::Fairness::new(1, [("gold".to_owned(), 3)]);
    let limits = QueueLimits { fairness: Some(fair), ..QueueLimits::default() };
    let mut queue = QueueState::new("fair".into(), limits);
    queue.fair.pass.insert("gold".into(), 240_240_000);
    queue.fair.floor = 0;
    queue
}

/// A queue record with the flow-control trailer (`storage/src/queue_wire.rs`).
fn flow_queue() -> Result<QueueState, Box<dyn std::error::Error>> {
    let limits = QueueLimits {
        rate_per_key: Some(RateLimit { starts: 2, period_ms: 1_000 }),
        rate_drops: true,
        batch_max: Some(3),
        batch_window_ms: Some(500),
        ..QueueLimits::default()
    };
    let mut queue = QueueState::new("flow".into(), limits);
    queue.key_recent.insert("acme".into(), vec![900, 950]);
    let members = vec![ThreadId::new("t-5")?];
    queue.batching.insert("acme".into(), cairn_storage::Batching { members, since_ms: 900 });
    Ok(queue)
}
