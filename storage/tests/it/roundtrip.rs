//! Round trips of every record through the store and the codec, and the read API's edges.

use cairn_storage::{Catalog, Maintenance, ThreadLog};
use std::collections::BTreeMap;

use cairn_storage::codec;
use cairn_storage::limits::READ_LIMIT_MAX;
use cairn_storage::{
    Batch, Bookmark, CheckpointFilter, CheckpointId, CheckpointInfo, CheckpointKind,
    CheckpointMeta, Error, Event, EventKind, EventStatus, Lease, LockOp, LockRecord, Lsn, NewEvent,
    Page, PayloadRef, RedbStore, Seq, SeqChunk, ThreadRecord, ThreadStatus,
};

use crate::common::*;

#[test]
fn event_round_trips_with_every_field() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "t", 0);
    let payload = b"a big tool output".to_vec();
    let new = NewEvent {
        thread: tid("t"),
        kind: EventKind::ToolReturned,
        node: Some("fetch".into()),
        status: EventStatus::Warning,
        summary: "tool returned ✓".into(),
        payload: Some(PayloadRef::of(&payload)),
        data: vec![0, 1, 2, 255],
        at_ms: 77,
        correlation: None,
    };
    let batch =
        Batch { events: vec![new.clone()], payloads: vec![payload.clone()], ..Batch::default() };
    let appended = append(&store, batch);
    let bookmark = appended.bookmarks[0];
    assert_eq!(bookmark, Bookmark { seq: Seq(1), lsn: Lsn(1), at_ms: 77 });
    assert_eq!(appended.payloads, vec![PayloadRef::of(&payload)]);
    let read = store.read_since(&tid("t"), Seq(0), 10).wait().expect("read");
    let expected = Event {
        bookmark,
        thread: new.thread,
        kind: new.kind,
        node: new.node,
        status: new.status,
        summary: new.summary,
        payload: new.payload,
        data: new.data,
        correlation: None,
    };
    assert_eq!(read, vec![expected.clone()]);
    assert_eq!(store.read_all_since(Lsn(0), 10).wait().expect("feed"), vec![expected]);
    assert_eq!(store.payload(&PayloadRef::of(&payload)).wait().expect("payload"), payload);
    assert_eq!(store.last_bookmark(&tid("t")).wait().expect("last"), Some(bookmark));
}

#[test]
fn thread_record_round_trips_and_store_fields_are_the_stores() {
    let (_dir, _path, store) = open_fast();
    let mut record = thread_record("t");
    record.status = ThreadStatus::Running;
    record.labels = BTreeMap::from([("team".into(), "a".into()), ("env".into(), "prod".into())]);
    record.parent = Some((tid("origin"), Seq(4)));
    record.summary = vec![9, 8, 7];
    // Caller-provided store fields are ignored.
    record.last = Some(Bookmark { seq: Seq(99), lsn: Lsn(99), at_ms: 0 });
    record.first_seq = Seq(50);
    record.lease = Some(Lease { owner: "intruder".into(), expires_at_ms: u64::MAX });
    let appended = append(
        &store,
        Batch { threads: vec![record.clone()], events: vec![event("t", 1)], ..Batch::default() },
    );
    let stored = store.thread(&tid("t")).wait().expect("read").expect("present");
    let mut expected = record;
    expected.last = Some(appended.bookmarks[0]);
    expected.first_seq = Seq(1);
    expected.lease = None;
    assert_eq!(stored, expected);
    assert_eq!(store.thread(&tid("nobody")).wait().expect("read"), None);
}

#[test]
fn checkpoint_round_trips_with_metadata_and_snapshot() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "t", 3);
    let mut new = checkpoint("t", CheckpointKind::Phase, &["a", "b"]);
    new.snapshot = (0..=255u8).cycle().take(100_000).collect();
    let appended = append(&store, Batch { checkpoints: vec![new.clone()], ..Batch::default() });
    let id = appended.checkpoints[0];
    assert_eq!(id, CheckpointId(1));
    let stored = store.checkpoint(id).wait().expect("read").expect("present");
    assert_eq!(stored.snapshot, new.snapshot);
    assert_eq!(stored.meta, new.meta);
    assert_eq!(stored.kind, CheckpointKind::Phase);
    assert_eq!(stored.covers.seq, Seq(3));
    assert_eq!(stored.workflow, new.workflow);
    let infos =
        store.list_checkpoints(&CheckpointFilter::default(), Page::default()).wait().expect("list");
    assert_eq!(infos.len(), 1);
    assert_eq!(infos[0].snapshot_len, 100_000);
    assert_eq!(infos[0].clone().with_snapshot(new.snapshot.clone()), stored);
    assert!(store.checkpoint_exists(id).wait().expect("exists"));
    assert!(!store.checkpoint_exists(CheckpointId(2)).wait().expect("exists"));
}

#[test]
fn payloads_are_content_addressed_and_idempotent() {
    let (_dir, _path, store) = open_fast();
    let bytes = vec![42u8; 10_000];
    let a =
        append(&store, Batch { payloads: vec![bytes.clone(), bytes.clone()], ..Batch::default() });
    let b = append(&store, Batch { payloads: vec![bytes.clone()], ..Batch::default() });
    assert_eq!(a.payloads[0], a.payloads[1]);
    assert_eq!(a.payloads[0], b.payloads[0]);
    assert_eq!(store.payload(&a.payloads[0]).wait().expect("read"), bytes);
    let missing = PayloadRef::of(b"never stored");
    assert!(
        matches!(store.payload(&missing).wait(), Err(Error::MissingPayload(r)) if r == missing)
    );
    assert_eq!(store.verify().expect("verify").payloads, 1);
}

#[test]
fn lock_round_trips() {
    let (_dir, _path, store) = open_fast();
    let op = LockOp::Acquire { name: "file:/a".into(), owner: "w1".into(), now_ms: 10, ttl_ms: 5 };
    append(&store, Batch { locks: vec![op], ..Batch::default() });
    let expected = LockRecord {
        name: "file:/a".into(),
        owner: "w1".into(),
        acquired_at_ms: 10,
        expires_at_ms: 15,
    };
    assert_eq!(store.locks().wait().expect("locks"), vec![expected]);
}

#[test]
fn seqs_per_thread_and_lsns_across_threads() {
    let (_dir, _path, store) = open_fast();
    let batch = Batch {
        threads: vec![thread_record("a"), thread_record("b")],
        events: vec![event("a", 1), event("b", 1), event("a", 2)],
        ..Batch::default()
    };
    let appended = append(&store, batch);
    let got: Vec<_> = appended.bookmarks.iter().map(|b| (b.seq.0, b.lsn.0)).collect();
    assert_eq!(got, vec![(1, 1), (1, 2), (2, 3)]);
    let appended = events(&store, "b", 2);
    let got: Vec<_> = appended.bookmarks.iter().map(|b| (b.seq.0, b.lsn.0)).collect();
    assert_eq!(got, vec![(2, 4), (3, 5)]);
    let feed = store.read_all_since(Lsn(0), 100).wait().expect("feed");
    let order: Vec<_> = feed.iter().map(|e| (e.thread.to_string(), e.bookmark.seq.0)).collect();
    let expect = [("a", 1), ("b", 1), ("a", 2), ("b", 2), ("b", 3)];
    assert_eq!(order, expect.map(|(t, s)| (t.to_string(), s)).to_vec());
    assert_eq!(store.read_all_since(Lsn(3), 1).wait().expect("feed")[0].bookmark.lsn, Lsn(4));
    assert_eq!(store.last_lsn(), Lsn(5));
}

#[test]
fn reads_since_are_exclusive_ranges_inclusive_and_limits_hold() {
    let (_dir, _path, store) = open_fast();
    create_thread(&store, "t", 10);
    let seqs = |events: Vec<Event>| events.iter().map(|e| e.bookmark.seq.0).collect::<Vec<_>>();
    let t = tid("t");
    assert_eq!(seqs(store.read_since(&t, Seq(7), 100).wait().expect("read")), vec![8, 9, 10]);
    assert_eq!(seqs(store.read_since(&t, Seq(0), 2).wait().expect("read")), vec![1, 2]);
    assert_eq!(seqs(store.read_since(&t, Seq(10), 5).wait().expect("read")), Vec::<u64>::new());
    assert_eq!(seqs(store.read_since(&t, Seq(3), 0).wait().expect("read")), Vec::<u64>::new());
    assert_eq!(seqs(store.read_range(&t, Seq(3), Seq(5)).wait().expect("range")), vec![3, 4, 5]);
    assert_eq!(seqs(store.read_range(&t, Seq(9), Seq(20)).wait().expect("range")), vec![9, 10]);
    assert_eq!(
        seqs(store.read_range(&t, Seq(5), Seq(4)).wait().expect("range")),
        Vec::<u64>::new()
    );
    assert!(matches!(
        store.read_since(&tid("none"), Seq(0), 1).wait(),
        Err(Error::UnknownThread(_))
    ));
    assert!(matches!(
        store.read_since(&t, Seq(0), READ_LIMIT_MAX + 1).wait(),
        Err(Error::LimitExceeded { limit: "READ_LIMIT_MAX", .. })
    ));
    assert!(matches!(
        store.read_range(&t, Seq(1), Seq(READ_LIMIT_MAX as u64 + 1)).wait(),
        Err(Error::LimitExceeded { limit: "READ_LIMIT_MAX", .. })
    ));
}

#[test]
fn everything_survives_a_reopen() {
    let (_dir, path, store) = open_fast();
    create_thread(&store, "t", 5);
    append(
        &store,
        Batch {
            checkpoints: vec![checkpoint("t", CheckpointKind::Manual, &["x"])],
            ..Batch::default()
        },
    );
    let before = store.read_since(&tid("t"), Seq(0), 100).wait().expect("read");
    store.close().expect("close");
    let store = RedbStore::open_existing(&path, fast()).expect("reopen");
    assert_eq!(store.read_since(&tid("t"), Seq(0), 100).wait().expect("read"), before);
    assert!(store.checkpoint(CheckpointId(1)).wait().expect("read").is_some());
    let next = events(&store, "t", 1);
    assert_eq!(next.bookmarks[0].seq, Seq(6));
    assert_eq!(next.bookmarks[0].lsn, Lsn(6));
    let report = store.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
    assert_eq!((report.threads, report.events, report.checkpoints), (1, 6, 1));
}

/// Fixed records whose encodings pin format v1: if one of these changes, the format changed and
/// needs a new version (docs/format.md), plus a decoder for the old bytes.
mod golden {
    use super::*;

    fn golden_event() -> Event {
        Event {
            bookmark: Bookmark { seq: Seq(3), lsn: Lsn(300), at_ms: 1_700_000_000_000 },
            thread: tid("t-1"),
            kind: EventKind::NodeCompleted,
            node: Some("n".into()),
            status: EventStatus::Success,
            summary: "ok".into(),
            payload: Some(PayloadRef { hash: [7; 32], len: 9 }),
            data: vec![1, 2],
            correlation: None,
        }
    }

    fn golden_thread() -> ThreadRecord {
        let mut record = ThreadRecord::new(tid("t-1"), workflow("w"), 5);
        record.last = Some(Bookmark { seq: Seq(3), lsn: Lsn(300), at_ms: 6 });
        record.labels.insert("k".into(), "v".into());
        record.lease = Some(Lease { owner: "o".into(), expires_at_ms: 9 });
        record.parent = Some((tid("p"), Seq(2)));
        record.summary = vec![0xAB];
        record
    }

    fn golden_checkpoint() -> CheckpointInfo {
        CheckpointInfo {
            id: CheckpointId(4),
            thread: tid("t-1"),
            workflow: workflow("w"),
            covers: Bookmark { seq: Seq(3), lsn: Lsn(300), at_ms: 6 },
            created_at_ms: 7,
            kind: CheckpointKind::Node,
            snapshot_len: 2,
            meta: CheckpointMeta {
                creator: "c".into(),
                description: "d".into(),
                tags: vec!["x".into()],
                custom: BTreeMap::from([("a".into(), "b".into())]),
            },
        }
    }

    fn golden_lock() -> LockRecord {
        LockRecord { name: "l".into(), owner: "o".into(), acquired_at_ms: 1, expires_at_ms: 2 }
    }

    fn golden_seq_chunk() -> SeqChunk {
        SeqChunk { thread: tid("t-1"), first_seq: 33, lsns: vec![298, 300, 301] }
    }

    fn hex(bytes: &[u8]) -> String {
        bytes.iter().map(|b| format!("{b:02x}")).collect()
    }

    #[test]
    fn v1_encodings_are_pinned() {
        let cases = [
            ("event", hex(&codec::encode_event(&golden_event()).expect("encode")), GOLDEN_EVENT),
            (
                "thread",
                hex(&codec::encode_thread(&golden_thread()).expect("encode")),
                GOLDEN_THREAD,
            ),
            (
                "checkpoint",
                hex(&codec::encode_checkpoint(&golden_checkpoint()).expect("encode")),
                GOLDEN_CHECKPOINT,
            ),
            (
                "snapshot",
                hex(&codec::encode_snapshot(CheckpointId(4), &[5, 6]).expect("encode")),
                GOLDEN_SNAPSHOT,
            ),
            ("lock", hex(&codec::encode_lock(&golden_lock()).expect("encode")), GOLDEN_LOCK),
            (
                "seq chunk",
                hex(&codec::encode_seq_chunk(&golden_seq_chunk()).expect("encode")),
                GOLDEN_SEQ_CHUNK,
            ),
        ];
        for (name, got, want) in cases {
            assert_eq!(got, want, "{name} encoding changed");
        }
    }

    #[test]
    fn v1_fixtures_decode_forever() {
        let bytes = |h: &str| -> Vec<u8> {
            (0..h.len())
                .step_by(2)
                .map(|i| u8::from_str_radix(&h[i..i + 2], 16).expect("hex"))
                .collect()
        };
        assert_eq!(codec::decode_event(&bytes(GOLDEN_EVENT)).expect("event"), golden_event());
        assert_eq!(codec::decode_thread(&bytes(GOLDEN_THREAD)).expect("thread"), golden_thread());
        assert_eq!(
            codec::decode_checkpoint(&bytes(GOLDEN_CHECKPOINT)).expect("cp"),
            golden_checkpoint()
        );
        assert_eq!(
            codec::decode_snapshot(&bytes(GOLDEN_SNAPSHOT)).expect("snap"),
            (CheckpointId(4), vec![5, 6])
        );
        assert_eq!(codec::decode_lock(&bytes(GOLDEN_LOCK)).expect("lock"), golden_lock());
        assert_eq!(
            codec::decode_seq_chunk(&bytes(GOLDEN_SEQ_CHUNK)).expect("chunk"),
            golden_seq_chunk()
        );
    }

    fn golden_correlation() -> cairn_storage::CorrelationEntry {
        cairn_storage::CorrelationEntry {
            correlation: "c-1".into(),
            lsn: 300,
            thread: tid("t-1"),
            seq: 3,
            at_ms: 1_700_000_000_000,
        }
    }

    /// Format v2's record kinds: 7 (the golden event with a correlation id: the kind-1 body,
    /// then the id) and 8 (a correlation-index entry).
    #[test]
    fn v2_encodings_are_pinned_and_decode_forever() {
        let event = Event { correlation: Some("c-1".into()), ..golden_event() };
        let framed = codec::encode_event(&event).expect("encode");
        assert_eq!(hex(&framed), GOLDEN_CORRELATED_EVENT, "kind 7 encoding changed");
        assert_eq!(codec::decode_event(&framed).expect("decode"), event);
        let entry = codec::encode_correlation(&golden_correlation()).expect("encode");
        assert_eq!(hex(&entry), GOLDEN_CORRELATION, "kind 8 encoding changed");
        assert_eq!(codec::decode_correlation(&entry).expect("decode"), golden_correlation());
    }

    #[test]
    fn v3_encodings_are_pinned_and_decode_forever() {
        let signal = cairn_storage::Signal {
            thread: cairn_storage::ThreadId::new("t-1").expect("id"),
            n: 3,
            name: "pay".into(),
            at_ms: 1_700_000_000_000,
            data: b"30".to_vec(),
        };
        let framed = codec::encode_signal(&signal).expect("encode");
        assert_eq!(hex(&framed), GOLDEN_SIGNAL, "kind 9 encoding changed");
        assert_eq!(codec::decode_signal(&framed).expect("decode"), signal);
        for bit in 0..framed.len() * 8 {
            let mut flipped = framed.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let result = codec::decode_signal(&flipped);
            assert!(
                matches!(result, Err(Error::Corrupted { table: "signals", .. })),
                "bit {bit}: {result:?}"
            );
        }
    }

    /// Format v6's record kind 12: the golden event and the next one (with a correlation id) as
    /// one batch frame: thread, first seq and first lsn once, then each event's other fields.
    #[test]
    fn v6_batch_frame_is_pinned_and_decodes_forever() {
        let next = Event {
            bookmark: Bookmark { seq: Seq(4), lsn: Lsn(301), at_ms: 1_700_000_000_001 },
            payload: None,
            data: vec![3],
            correlation: Some("c-1".into()),
            ..golden_event()
        };
        let run = [golden_event(), next];
        let framed = codec::encode_event_batch(&run).expect("encode");
        assert_eq!(hex(&framed), GOLDEN_EVENT_BATCH, "kind 12 encoding changed");
        assert_eq!(codec::decode_event_batch(&framed).expect("decode"), run);
        for bit in 0..framed.len() * 8 {
            let mut flipped = framed.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let result = codec::decode_event_batch(&flipped);
            assert!(
                matches!(result, Err(Error::Corrupted { table: "events", .. })),
                "bit {bit}: {result:?}"
            );
        }
    }

    #[test]
    fn decoders_refuse_every_single_bit_flip_of_a_real_record() {
        let framed = codec::encode_event(&golden_event()).expect("encode");
        for bit in 0..framed.len() * 8 {
            let mut flipped = framed.clone();
            flipped[bit / 8] ^= 1 << (bit % 8);
            let result = codec::decode_event(&flipped);
            assert!(
                matches!(result, Err(Error::Corrupted { table: "events", .. })),
                "bit {bit}: {result:?}"
            );
        }
    }

    const GOLDEN_CORRELATED_EVENT: &str = "01073e00000003ac0280d095ffbc3103742d310401016e01026f6b0107070707070707070707070707070707070707070707070707070707070707070902010203632d315201e090";
    const GOLDEN_CORRELATION: &str = "01081100000003632d31ac0203742d310380d095ffbc31d87ba637";
    const GOLDEN_EVENT: &str = "01013a00000003ac0280d095ffbc3103742d310401016e01026f6b0107070707070707070707070707070707070707070707070707070707070707070902010265a6dbe2";
    // The last byte of the body (00) is the empty seq-index tail (added to v1 before release).
    const GOLDEN_THREAD: &str = "01022500000003742d310177010466702d770105050103ac02060101016b017601016f090101700201ab00ba012961";
    const GOLDEN_SEQ_CHUNK: &str = "01060a00000003742d312103aa0202014ef73277";
    const GOLDEN_CHECKPOINT: &str =
        "0103200000000403742d310177010466702d7703ac0206070302016301640101780101610162eed9fbac";
    const GOLDEN_SNAPSHOT: &str = "01040400000004020506f74e1ccd";
    const GOLDEN_SIGNAL: &str = "01091200000003742d31030370617980d095ffbc310233309ba297a3";
    const GOLDEN_EVENT_BATCH: &str = "010c5200000003742d3103ac020280d095ffbc310401016e01026f6b010707070707070707070707070707070707070707070707070707070707070707090201020081d095ffbc310401016e01026f6b0001030103632d31e059ca77";
    const GOLDEN_LOCK: &str = "010506000000016c016f0102f9a48507";
}
