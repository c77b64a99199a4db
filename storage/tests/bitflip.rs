//! Corruption of stored records: every flipped bit is an error naming the record, never data.
//!
//! Two levels, one summary line:
//! - codec: every framed record kind (events of several sizes, a batch frame, a thread record, checkpoint
//!   metadata, a snapshot, a lock, a seq-index chunk) with every single bit flipped, and bursts of 2 to 32 bits
//!   (first and last bit of the burst flipped, the bits between seeded) at every start bit. A
//!   32-bit CRC over header and body detects all of them, so every decode must fail.
//! - file: a real database image written through `RedbStore` on a `FaultBackend`; the framed
//!   bytes of an event or a checkpoint record are located by scanning the image, bits inside them
//!   are flipped (at every place the bytes occur, so the live copy is hit whatever stale copies
//!   redb keeps), the image is reopened and the record read back through the `Store` API. The
//!   read must fail, either with `Error::Corrupted` naming the table, thread and seq/id, or with
//!   a storage error from redb (if redb checks the page first); `verify()` must report it too.
//!   Returning any data other than the original is `wrong_data`.
//!
//! A second test flips bits anywhere in the used pages of the image, redb's own structures
//! included, and reads the whole store back: never wrong data, and never a panic. redb 4.5 panics
//! on some damaged pages; the store catches those at its boundary and returns
//! `Error::Corrupted { table: "redb", .. }` (counted as `redb_panics_caught`). A panic that
//! escapes the store, on any thread, is counted as `redb_panics` and must be zero.

use cairn_storage::{Append, Maintenance, ThreadLog};
use std::collections::BTreeMap;
use std::io::Write as _;
use std::sync::Once;
use std::sync::atomic::{AtomicU64, Ordering};

use cairn_storage::{
    Batch, Bookmark, Checkpoint, CheckpointId, CheckpointInfo, CheckpointKind, CheckpointMeta,
    Durability, Error, Event, EventKind, EventStatus, LockRecord, Lsn, NewCheckpoint, NewEvent,
    Options, RedbStore, Seq, SeqChunk, ThreadId, ThreadRecord, WorkflowRef, codec,
};
use cairn_storage_testkit::fault::FaultBackend;

/// Panics that reached the process's panic hook: those that escaped the store, on any thread.
static ESCAPED_PANICS: AtomicU64 = AtomicU64::new(0);

/// Installs the counting hook. Every test calls this before it opens a store, so the hook sits
/// beneath the store's own (installed on the store's first guarded call), which swallows only
/// the panics it turns into errors and passes every other panic down to this one.
fn count_escaped_panics() {
    static INSTALL: Once = Once::new();
    INSTALL.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            ESCAPED_PANICS.fetch_add(1, Ordering::Relaxed);
            previous(info);
        }));
    });
}

/// Deterministic xorshift bytes, so records are distinctive and runs repeatable.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn bytes(&mut self, len: usize) -> Vec<u8> {
        (0..len).map(|_| self.next().to_le_bytes()[0]).collect()
    }
}

fn workflow() -> WorkflowRef {
    WorkflowRef { id: "bitflip".into(), version: 2, fingerprint: "fp-bitflip".into() }
}

fn thread(n: usize) -> ThreadId {
    ThreadId::new(format!("flip-thread-{n}")).expect("valid id")
}

fn sample_event(rng: &mut Rng, seq: u64, data_len: usize) -> Event {
    Event {
        bookmark: Bookmark { seq: Seq(seq), lsn: Lsn(seq + 100), at_ms: 1_700_000_000_000 + seq },
        thread: thread(0),
        kind: EventKind::ToolReturned,
        node: Some("fetch".into()),
        status: EventStatus::Success,
        summary: format!("tool returned #{seq}"),
        payload: None,
        data: rng.bytes(data_len),
        correlation: None,
    }
}

#[derive(Default)]
struct Counts {
    cases: u64,
    detected: u64,
    wrong_data: u64,
}

/// A decoder under test: `Ok(true)` if it decoded back to the original, `Ok(false)` if it
/// decoded to something else, `Err` if it refused the bytes.
type Decode<'a> = Box<dyn Fn(&[u8]) -> Result<bool, Error> + 'a>;

fn flip_bits(bytes: &mut [u8], bits: impl IntoIterator<Item = usize>) {
    for bit in bits {
        bytes[bit / 8] ^= 1 << (bit % 8);
    }
}

/// The bits a burst of `len` bits starting at `start` flips: both ends, and seeded ones between.
fn burst(start: usize, len: usize, rng: &mut Rng) -> Vec<usize> {
    let mut bits = vec![start, start + len - 1];
    for bit in start + 1..start + len - 1 {
        if rng.next().is_multiple_of(2) {
            bits.push(bit);
        }
    }
    bits
}

/// A batch frame of three events (record kind 12): `event` at seqs 1..=3.
fn batch_case(event: &Event) -> (&'static str, Vec<u8>, Decode<'static>) {
    let run: Vec<Event> = (1..=3u64)
        .map(|n| Event {
            bookmark: Bookmark { seq: Seq(n), lsn: Lsn(40 + n), ..event.bookmark },
            ..event.clone()
        })
        .collect();
    let framed = codec::encode_event_batch(&run).expect("encode");
    (
        "event_batch",
        framed,
        Box::new(move |b: &[u8]| codec::decode_event_batch(b).map(|e| e == run)),
    )
}

fn codec_level(counts: &mut Counts, failures: &mut Vec<String>) {
    let mut rng = Rng(0x00C0_FFEE);
    let event_small = sample_event(&mut rng, 1, 0);
    let event_mid = sample_event(&mut rng, 2, 180);
    let event_big = sample_event(&mut rng, 3, 1_500);
    let mut record = ThreadRecord::new(thread(0), workflow(), 5);
    record.labels.insert("tenant".into(), "acme".into());
    record.last = Some(event_mid.bookmark);
    record.summary = rng.bytes(40);
    let info = CheckpointInfo {
        id: CheckpointId(7),
        thread: thread(0),
        workflow: workflow(),
        covers: event_mid.bookmark,
        created_at_ms: 99,
        kind: CheckpointKind::Phase,
        snapshot_len: 600,
        meta: CheckpointMeta {
            creator: "engine".into(),
            description: "after phase 2".into(),
            tags: vec!["phase".into(), "nightly".into()],
            custom: BTreeMap::from([("k".to_string(), "v".to_string())]),
        },
    };
    let snapshot = rng.bytes(600);
    let lock = LockRecord {
        name: "inventory".into(),
        owner: "runner-7".into(),
        acquired_at_ms: 1,
        expires_at_ms: 60_001,
    };

    let chunk =
        SeqChunk { thread: thread(0), first_seq: 33, lsns: (0..32).map(|n| 40 + 3 * n).collect() };
    let mut cases: Vec<(&str, Vec<u8>, Decode<'_>)> = Vec::new();
    for (name, event) in
        [("event_small", &event_small), ("event_mid", &event_mid), ("event_big", &event_big)]
    {
        let framed = codec::encode_event(event).expect("encode");
        cases.push((name, framed, Box::new(move |b| codec::decode_event(b).map(|e| e == *event))));
    }
    cases.push(batch_case(&event_mid));
    let framed = codec::encode_thread(&record).expect("encode");
    cases.push(("thread", framed, Box::new(|b| codec::decode_thread(b).map(|r| r == record))));
    let framed = codec::encode_checkpoint(&info).expect("encode");
    cases.push((
        "checkpoint",
        framed,
        Box::new(|b| codec::decode_checkpoint(b).map(|c| c == info)),
    ));
    let framed = codec::encode_snapshot(info.id, &snapshot).expect("encode");
    cases.push((
        "snapshot",
        framed,
        Box::new(|b| codec::decode_snapshot(b).map(|(id, s)| id == info.id && s == snapshot)),
    ));
    let framed = codec::encode_lock(&lock).expect("encode");
    cases.push(("lock", framed, Box::new(|b| codec::decode_lock(b).map(|l| l == lock))));
    let framed = codec::encode_seq_chunk(&chunk).expect("encode");
    cases.push(("seq_chunk", framed, Box::new(|b| codec::decode_seq_chunk(b).map(|c| c == chunk))));

    for (name, framed, decode) in &cases {
        assert_eq!(decode(framed).ok(), Some(true), "{name}: the clean record decodes");
        let bits = framed.len() * 8;
        for len in 1..=32usize {
            // Single bits at every position; bursts at every start for small records and with a
            // stride for the big ones (a burst's detection does not depend on where it starts,
            // only its length, for a CRC; the stride keeps the test fast).
            let stride = if len == 1 || bits < 4_000 { 1 } else { 7 };
            for start in (0..=bits - len).step_by(stride) {
                let mut damaged = framed.clone();
                flip_bits(&mut damaged, burst_or_single(start, len, &mut rng));
                counts.cases += 1;
                match decode(&damaged) {
                    Err(_) => counts.detected += 1,
                    Ok(same) => {
                        counts.wrong_data += 1;
                        failures.push(format!(
                            "codec {name}: {len}-bit burst at bit {start} decoded (equal to original: {same})"
                        ));
                    }
                }
            }
        }
    }
}

fn burst_or_single(start: usize, len: usize, rng: &mut Rng) -> Vec<usize> {
    if len == 1 { vec![start] } else { burst(start, len, rng) }
}

/// What a real database holds, with the framed bytes of each record to damage.
struct Written {
    image: Vec<u8>,
    events: Vec<Event>,
    checkpoints: Vec<Checkpoint>,
}

fn write_database() -> Written {
    let backend = FaultBackend::new();
    let controller = backend.controller();
    let options = Options { durability: Durability::Immediate, ..Options::default() };
    let store = RedbStore::with_backend(backend, options).expect("create");
    let mut rng = Rng(0xB17F_11B5);
    let threads = (0..3).map(|t| ThreadRecord::new(thread(t), workflow(), 1)).collect();
    store
        .append(Batch { threads, ..Batch::default() })
        .and_then(|p| p.wait_blocking())
        .expect("threads");
    let mut events = Vec::new();
    let mut checkpoints = Vec::new();
    for round in 0..4u64 {
        let new_events: Vec<NewEvent> = (0..3)
            .map(|t| NewEvent {
                thread: thread(t),
                kind: EventKind::NodeCompleted,
                node: Some(format!("node-{round}")),
                status: EventStatus::Success,
                summary: format!("round {round} thread {t}"),
                payload: None,
                // Sizes from tiny to several hundred bytes, so records sit in different pages.
                data: rng.bytes(16 + 150 * (round as usize) + 40 * t),
                at_ms: 10 * round,
                correlation: None,
            })
            .collect();
        let snapshot_len = [300, 2_000, 6_000, 900][round as usize];
        let checkpoint = NewCheckpoint {
            thread: thread(round as usize % 3),
            workflow: workflow(),
            kind: CheckpointKind::Periodic,
            snapshot: rng.bytes(snapshot_len),
            meta: CheckpointMeta {
                tags: vec![format!("round-{round}")],
                ..CheckpointMeta::default()
            },
            created_at_ms: 10 * round + 1,
        };
        let batch =
            Batch { events: new_events.clone(), checkpoints: vec![checkpoint], ..Batch::default() };
        let appended = store.append(batch).and_then(|p| p.wait_blocking()).expect("append");
        for (new, bookmark) in new_events.into_iter().zip(appended.bookmarks) {
            events.push(Event {
                bookmark,
                thread: new.thread,
                kind: new.kind,
                node: new.node,
                status: new.status,
                summary: new.summary,
                payload: new.payload,
                data: new.data,
                correlation: None,
            });
        }
        for id in appended.checkpoints {
            checkpoints.push(store.checkpoint(id).wait().expect("read").expect("saved"));
        }
    }
    assert!(store.verify().expect("verify").is_clean());
    store.close().expect("close");
    Written { image: controller.durable_image(), events, checkpoints }
}

/// Every offset where `needle` occurs in `haystack`.
fn occurrences(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    haystack
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

/// How one damaged read ended.
enum Outcome {
    /// `Error::Corrupted` naming the right record.
    Named,
    /// `Error::Corrupted` naming something else: still detected, but the location is wrong.
    Misnamed(String),
    /// redb refused first (open or read error).
    Redb,
    /// The read returned the original record (the flipped copy was not the one read).
    Original,
    /// The read returned something else.
    Wrong(String),
}

#[derive(Default)]
struct FileCounts {
    cases: u64,
    named: u64,
    by_redb: u64,
    original: u64,
    wrong: u64,
    verify_missed: u64,
}

/// Reads the target record back from a damaged image.
fn read_back(image: Vec<u8>, target: &Target<'_>) -> (Outcome, bool) {
    let options = Options { durability: Durability::Immediate, ..Options::default() };
    let Ok(store) = RedbStore::with_backend(FaultBackend::from_image(image), options) else {
        return (Outcome::Redb, true);
    };
    let outcome = match target {
        Target::Event(event) => {
            match store.read_range(&event.thread, event.bookmark.seq, event.bookmark.seq).wait() {
                Ok(found) if found.as_slice() == std::slice::from_ref(*event) => Outcome::Original,
                Ok(found) => Outcome::Wrong(format!("{found:?}")),
                Err(Error::Corrupted { table, thread: Some(t), seq: Some(s), .. })
                    if table == codec::table::EVENTS
                        && t == event.thread
                        && s == event.bookmark.seq =>
                {
                    Outcome::Named
                }
                Err(e @ Error::Corrupted { .. }) => Outcome::Misnamed(e.to_string()),
                Err(_) => Outcome::Redb,
            }
        }
        Target::Checkpoint(checkpoint) => match store.checkpoint(checkpoint.id).wait() {
            Ok(Some(found)) if found == **checkpoint => Outcome::Original,
            Ok(found) => Outcome::Wrong(format!("{found:?}")),
            Err(Error::Corrupted { table, seq: Some(s), .. })
                if (table == codec::table::CHECKPOINTS || table == codec::table::SNAPSHOTS)
                    && s.0 == checkpoint.id.0 =>
            {
                Outcome::Named
            }
            Err(e @ Error::Corrupted { .. }) => Outcome::Misnamed(e.to_string()),
            Err(_) => Outcome::Redb,
        },
    };
    let verify_reports = match store.verify() {
        Ok(report) => !report.is_clean(),
        Err(_) => true,
    };
    let _ = store.close();
    (outcome, verify_reports)
}

enum Target<'a> {
    Event(&'a Event),
    Checkpoint(&'a Checkpoint),
}

fn file_level(counts: &mut FileCounts, failures: &mut Vec<String>) {
    let written = write_database();
    let mut rng = Rng(0xF11E);
    let mut targets: Vec<(String, Vec<Vec<u8>>, Target<'_>)> = Vec::new();
    for event in &written.events {
        // Each batch holds one event of each thread: each event is a batch frame of one.
        let framed = codec::encode_event_batch(std::slice::from_ref(event)).expect("encode");
        targets.push((
            format!("event {} seq {}", event.thread, event.bookmark.seq),
            vec![framed],
            Target::Event(event),
        ));
    }
    for checkpoint in &written.checkpoints {
        let info = CheckpointInfo {
            id: checkpoint.id,
            thread: checkpoint.thread.clone(),
            workflow: checkpoint.workflow.clone(),
            covers: checkpoint.covers,
            created_at_ms: checkpoint.created_at_ms,
            kind: checkpoint.kind,
            snapshot_len: checkpoint.snapshot.len() as u64,
            meta: checkpoint.meta.clone(),
        };
        let framed_info = codec::encode_checkpoint(&info).expect("encode");
        let framed_snapshot =
            codec::encode_snapshot(checkpoint.id, &checkpoint.snapshot).expect("encode");
        targets.push((
            format!("checkpoint {}", checkpoint.id),
            vec![framed_info, framed_snapshot],
            Target::Checkpoint(checkpoint),
        ));
    }
    for (name, records, target) in &targets {
        for framed in records {
            let places = occurrences(&written.image, framed);
            assert!(!places.is_empty(), "{name}: framed record not found in the image");
            let bits = framed.len() * 8;
            // 60 single-bit flips and 40 bursts per record, at seeded positions.
            for case in 0..100 {
                let len = if case < 60 { 1 } else { 2 + (rng.next() % 31) as usize };
                let start = (rng.next() % (bits - len + 1) as u64) as usize;
                let flips = burst_or_single(start, len, &mut rng);
                let mut image = written.image.clone();
                for &place in &places {
                    flip_bits(&mut image[place..place + framed.len()], flips.iter().copied());
                }
                counts.cases += 1;
                let (outcome, verify_reports) = read_back(image, target);
                match outcome {
                    Outcome::Named => counts.named += 1,
                    Outcome::Redb => counts.by_redb += 1,
                    Outcome::Original => {
                        counts.original += 1;
                        failures.push(format!("{name}: {len}-bit flip at {start} went unread"));
                    }
                    Outcome::Misnamed(e) => {
                        counts.wrong += 1;
                        failures.push(format!("{name}: flip at {start} reported elsewhere: {e}"));
                    }
                    Outcome::Wrong(found) => {
                        counts.wrong += 1;
                        failures
                            .push(format!("{name}: flip at {start} returned wrong data {found}"));
                    }
                }
                if !verify_reports {
                    counts.verify_missed += 1;
                    failures.push(format!("{name}: verify() missed a {len}-bit flip at {start}"));
                }
            }
        }
    }
}

#[test]
fn every_flipped_bit_is_detected() {
    count_escaped_panics();
    let mut codec_counts = Counts::default();
    let mut failures = Vec::new();
    codec_level(&mut codec_counts, &mut failures);
    let mut file = FileCounts::default();
    file_level(&mut file, &mut failures);
    let cases = codec_counts.cases + file.cases;
    let detected = codec_counts.detected + file.named + file.by_redb;
    let wrong_data = codec_counts.wrong_data + file.wrong;
    // Written to the stderr handle directly so the line reaches the CI log (see crash_points.rs).
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(
        stderr,
        "RELIABILITY bitflip cases={cases} detected={detected} wrong_data={wrong_data} \
         codec_cases={} file_cases={} file_named_by_cairn={} file_by_redb={} file_unread={} \
         verify_missed={}",
        codec_counts.cases, file.cases, file.named, file.by_redb, file.original, file.verify_missed
    );
    for failure in failures.iter().take(20) {
        let _ = writeln!(stderr, "  {failure}");
    }
    drop(stderr);
    assert!(failures.is_empty(), "{} failures (first 20 above)", failures.len());
    assert_eq!(detected, cases);
    assert_eq!(wrong_data, 0);
    assert!(file.cases >= 1_000, "at least 1,000 file-image injections");
}

/// How a whole-store read of a damaged image went, compared with what was written.
#[derive(Default)]
struct AnywhereCounts {
    cases: u64,
    /// Everything read back equal and complete (the flip hit unused or stale bytes).
    intact: u64,
    /// An error (open, read or verify) reported the damage.
    detected: u64,
    /// Some record read back differs from what was written.
    wrong_data: u64,
    /// Reads succeeded with records missing and neither the reads nor `verify()` complained.
    silent_omissions: u64,
    /// An error from a panic inside redb that the store caught (`Corrupted`, table "redb").
    caught: u64,
    /// A panic escaped the store (caught by the test on this thread, or seen by the hook).
    panics: u64,
}

/// Reads every event and checkpoint of a damaged image and classifies the outcome.
fn read_everything(image: Vec<u8>, written: &Written) -> Result<Outcome2, Error> {
    let options = Options { durability: Durability::Immediate, ..Options::default() };
    let store = RedbStore::with_backend(FaultBackend::from_image(image), options)?;
    let mut complete = true;
    for t in 0..3 {
        let want: Vec<&Event> = written.events.iter().filter(|e| e.thread == thread(t)).collect();
        let found = store.read_since(&thread(t), Seq(0), 1_000).wait()?;
        for event in &found {
            if !want.contains(&event) {
                return Ok(Outcome2::Wrong(format!("{event:?}")));
            }
        }
        complete &= found.len() == want.len();
    }
    for checkpoint in &written.checkpoints {
        match store.checkpoint(checkpoint.id).wait()? {
            Some(found) if found == *checkpoint => {}
            Some(found) => return Ok(Outcome2::Wrong(format!("{found:?}"))),
            None => complete = false,
        }
    }
    let clean = store.verify()?.is_clean();
    let _ = store.close();
    Ok(match (complete, clean) {
        (true, true) => Outcome2::Intact,
        (_, false) => Outcome2::Reported,
        (false, true) => Outcome2::Omitted,
    })
}

enum Outcome2 {
    Intact,
    Reported,
    Omitted,
    Wrong(String),
}

/// Flips bits anywhere in the used pages of a real image, redb's own structures included (page
/// headers, branch keys, the allocator state), and reads the whole store back. Our CRCs cannot
/// protect redb's structures, so an error from redb, or from the store's key/record and
/// continuity checks, is the expected outcome; data that differs from what was written never is.
#[test]
fn flips_anywhere_in_the_image_never_return_wrong_data() {
    const PAGE: usize = 4096;
    count_escaped_panics();
    let escaped_before = ESCAPED_PANICS.load(Ordering::Relaxed);
    let written = write_database();
    let used: Vec<usize> = (0..written.image.len() / PAGE)
        .filter(|p| written.image[p * PAGE..(p + 1) * PAGE].iter().any(|&b| b != 0))
        .collect();
    let mut rng = Rng(0xA11_F11B);
    let mut counts = AnywhereCounts::default();
    let mut failures = Vec::new();
    // `CAIRN_BITFLIP_ANYWHERE_CASES` runs a longer sweep by hand (the default keeps CI fast).
    let cases = std::env::var("CAIRN_BITFLIP_ANYWHERE_CASES")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(600);
    for _ in 0..cases {
        let page = used[(rng.next() % used.len() as u64) as usize];
        let bit = page * PAGE * 8 + (rng.next() % (PAGE as u64 * 8)) as usize;
        let mut image = written.image.clone();
        flip_bits(&mut image, [bit]);
        counts.cases += 1;
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            read_everything(image, &written)
        }));
        match outcome {
            Err(_) => {
                counts.panics += 1;
                failures.push(format!("bit {bit}: a panic escaped the store"));
            }
            Ok(Err(Error::Corrupted { table: "redb", .. })) => {
                counts.caught += 1;
                counts.detected += 1;
            }
            Ok(Err(_)) | Ok(Ok(Outcome2::Reported)) => counts.detected += 1,
            Ok(Ok(Outcome2::Intact)) => counts.intact += 1,
            Ok(Ok(Outcome2::Omitted)) => {
                counts.silent_omissions += 1;
                failures.push(format!("bit {bit}: records missing, no error, verify clean"));
            }
            Ok(Ok(Outcome2::Wrong(found))) => {
                counts.wrong_data += 1;
                failures.push(format!("bit {bit}: wrong data returned: {found}"));
            }
        }
    }
    // Panics on other threads (the store's writer) never reach `catch_unwind` here; the hook
    // sees them (an escape in the other test of this binary, running alongside, counts too: it
    // is just as much a failure).
    let escaped = ESCAPED_PANICS.load(Ordering::Relaxed) - escaped_before;
    counts.panics = counts.panics.max(escaped);
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(
        stderr,
        "RELIABILITY bitflip_anywhere cases={} intact={} detected={} wrong_data={} \
         silent_omissions={} redb_panics={} redb_panics_caught={} used_pages={}",
        counts.cases,
        counts.intact,
        counts.detected,
        counts.wrong_data,
        counts.silent_omissions,
        counts.panics,
        counts.caught,
        used.len()
    );
    for failure in failures.iter().take(20) {
        let _ = writeln!(stderr, "  {failure}");
    }
    drop(stderr);
    assert_eq!(counts.wrong_data, 0, "never wrong data");
    assert_eq!(counts.panics, 0, "no panic escapes the store");
    assert!(counts.caught > 0, "the sweep must reach redb's panics (else it tests nothing new)");
    assert!(counts.detected > 0, "some flips must land in live structures");
}

/// How writing to a damaged image went.
#[derive(Default)]
struct WriteCounts {
    cases: u64,
    /// The damaged image did not open (an error, as it should be when redb's state is hit).
    refused_open: u64,
    /// Every append committed (the flip hit unused or stale bytes, or bytes a commit rewrites).
    committed: u64,
    /// An append was rejected (planning met a corrupt record; nothing changed, nothing poisoned).
    rejected: u64,
    /// A commit failed with an error.
    failed: u64,
    /// Of those, a panic inside redb during the commit, caught by the writer.
    caught: u64,
    /// After a failed commit, a later append was not refused with `Poisoned`.
    not_poisoned: u64,
    /// `close()` did not return (the writer thread died) or a panic escaped.
    panics: u64,
}

/// Appends to every thread of a damaged image, twice, then closes.
fn write_everything(image: Vec<u8>, counts: &mut WriteCounts) {
    let options = Options { durability: Durability::Immediate, ..Options::default() };
    let Ok(store) = RedbStore::with_backend(FaultBackend::from_image(image), options) else {
        counts.refused_open += 1;
        return;
    };
    let mut failure: Option<Error> = None;
    let mut rejected = false;
    for round in 0..2u64 {
        for t in 0..3 {
            let event = NewEvent {
                thread: thread(t),
                kind: EventKind::Progress,
                node: None,
                status: EventStatus::Info,
                summary: format!("after the flip, round {round}"),
                payload: None,
                data: vec![0xAB; 64],
                at_ms: 1_000 + round,
                correlation: None,
            };
            let result = store
                .append(Batch { events: vec![event], ..Batch::default() })
                .and_then(|p| p.wait_blocking());
            match result {
                Ok(_) if failure.is_some() => counts.not_poisoned += 1,
                Ok(_) => {}
                Err(Error::Poisoned { .. }) if failure.is_some() => {}
                Err(_) if failure.is_some() => counts.not_poisoned += 1,
                // A failed commit: an I/O-level error, or a panic inside redb caught by the writer.
                Err(e @ (Error::Storage { .. } | Error::Corrupted { table: "redb", .. })) => {
                    counts.caught += u64::from(matches!(e, Error::Corrupted { .. }));
                    failure = Some(e);
                }
                // A rejected batch (planning met a corrupt record) changes nothing, poisons nothing.
                Err(_) => rejected = true,
            }
        }
    }
    counts.rejected += u64::from(rejected);
    if failure.is_some() {
        counts.failed += 1;
    } else if !rejected {
        counts.committed += 1;
    }
    // `close` joins the writer thread: it returns only if the writer survived.
    let _ = store.close();
}

/// Flips a bit anywhere in the used pages, then writes: a panic inside redb during a commit is
/// caught by the writer, which poisons the store (every later append is `Poisoned`) and stays
/// alive to close it; nothing escapes.
#[test]
fn flips_anywhere_then_writes_never_panic() {
    const PAGE: usize = 4096;
    count_escaped_panics();
    let escaped_before = ESCAPED_PANICS.load(Ordering::Relaxed);
    let written = write_database();
    let used: Vec<usize> = (0..written.image.len() / PAGE)
        .filter(|p| written.image[p * PAGE..(p + 1) * PAGE].iter().any(|&b| b != 0))
        .collect();
    let mut rng = Rng(0x5EED_F11B);
    let mut counts = WriteCounts::default();
    let cases = std::env::var("CAIRN_BITFLIP_ANYWHERE_CASES")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(1_000);
    for _ in 0..cases {
        let page = used[(rng.next() % used.len() as u64) as usize];
        let bit = page * PAGE * 8 + (rng.next() % (PAGE as u64 * 8)) as usize;
        let mut image = written.image.clone();
        flip_bits(&mut image, [bit]);
        counts.cases += 1;
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            write_everything(image, &mut counts)
        }));
        if outcome.is_err() {
            counts.panics += 1;
        }
    }
    let escaped = ESCAPED_PANICS.load(Ordering::Relaxed) - escaped_before;
    counts.panics = counts.panics.max(escaped);
    let mut stderr = std::io::stderr().lock();
    let _ = writeln!(
        stderr,
        "RELIABILITY bitflip_then_write cases={} refused_open={} committed={} rejected={} \
         failed={} redb_panics_caught={} not_poisoned={} redb_panics={}",
        counts.cases,
        counts.refused_open,
        counts.committed,
        counts.rejected,
        counts.failed,
        counts.caught,
        counts.not_poisoned,
        counts.panics
    );
    drop(stderr);
    assert_eq!(counts.panics, 0, "no panic escapes the store, on any thread");
    assert_eq!(counts.not_poisoned, 0, "a failed commit poisons the store");
    assert!(counts.caught > 0, "the sweep must reach redb panicking inside a commit");
}
