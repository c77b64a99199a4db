//! T4 corruption of a database file written by the engine: bit flips, bursts and torn tails in
//! event and checkpoint records. Every case must be detected (by `Maintenance::verify` and by
//! `cairn verify`, which exits 3 and names the record), and no read through the store or the
//! engine's restore may return anything but the original data.
//!
//! The database holds two canonical workflows' threads (tool calls, checkpoints every two
//! steps). Each record's framed bytes are found in the file image by encoding the record as
//! stored and scanning for it; a case damages every place the bytes occur (so the live copy is
//! hit whatever stale copies redb keeps), writes the image to a file, and reads it back.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use cairn::storage::{Maintenance, ThreadLog};
use std::process::Command;
use std::sync::Arc;
use std::time::Instant;

use cairn::storage::{
    CheckpointFilter, Durability, Error, Lsn, Options, Page, RedbStore, Seq, Store, ThreadId, codec,
};
use cairn::{Engine, StartOptions};
use cairn_storage_testkit::fault::FaultBackend;
use cairn_testkit::{Effects, deterministic_engine};
use serde_json::Value;

use crate::env::{report, seed, size};
use crate::workflows::{Ledger, fan_out, linear};

/// A record to damage: where it lives and how to read it back.
enum Target {
    Event { thread: ThreadId, seq: u64 },
    Checkpoint { id: cairn::storage::CheckpointId, thread: ThreadId },
}

struct Written {
    image: Vec<u8>,
    /// (framed bytes, target) per record.
    records: Vec<(Vec<u8>, Target)>,
    /// Each thread's final state as the clean file restores it.
    states: Vec<(ThreadId, Value)>,
}

fn options() -> Options {
    Options { durability: Durability::Immediate, ..Options::default() }
}

fn write_database() -> Written {
    let backend = FaultBackend::new();
    let controller = backend.controller();
    let store = Arc::new(RedbStore::with_backend(backend, options()).expect("create"));
    let fx = Effects::new();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
    runtime.block_on(async {
        let (_, clock) = deterministic_engine(1).expect("clock");
        let engine = Engine::with_store(store.clone())
            .workflow(&linear(&fx))
            .workflow(&fan_out(&fx))
            .seed(7)
            .clock(Arc::new(clock))
            .checkpoint_every(Some(2), None)
            .open()
            .await
            .expect("engine");
        for (i, wf) in ["linear-tools", "fan-out-join", "linear-tools"].iter().enumerate() {
            let input = Ledger { entries: vec![format!("corrupt {i}")], sum: i as u64 };
            let h = engine
                .start_json(wf, input, StartOptions::id(format!("t4-{i}")))
                .await
                .expect("start");
            h.output::<Ledger>().await.expect("finishes");
        }
        engine.shutdown().await;
    });
    let mut records = Vec::new();
    let events = store.read_all_since(Lsn(0), 10_000).wait().expect("events");
    let image = controller.durable_image();
    for frame in log_frames(&image, &events) {
        // A damaged frame is named (by verify, and a read of it) at its last event.
        let last = frame.last().expect("a frame holds events");
        let target = Target::Event { thread: last.thread.clone(), seq: last.bookmark.seq.0 };
        records.push((codec::encode_event_batch(frame).expect("encode"), target));
    }
    for info in store
        .list_checkpoints(&CheckpointFilter::default(), Page { limit: 1_000, offset: 0 })
        .wait()
        .expect("checkpoints")
    {
        let checkpoint = store.checkpoint(info.id).wait().expect("read").expect("exists");
        let framed = codec::encode_checkpoint(&info).expect("encode");
        let snapshot = codec::encode_snapshot(info.id, &checkpoint.snapshot).expect("encode");
        records.push((framed, Target::Checkpoint { id: info.id, thread: info.thread.clone() }));
        records.push((snapshot, Target::Checkpoint { id: info.id, thread: info.thread.clone() }));
    }
    let states = (0..3)
        .map(|i| {
            let thread = ThreadId::new(format!("t4-{i}")).expect("id");
            (thread.clone(), final_state(store.as_ref(), &thread, i).expect("clean restore"))
        })
        .collect();
    Arc::try_unwrap(store).expect("sole owner").close().expect("close");
    Written { image: controller.durable_image(), records, states }
}

/// A thread's restored final state as JSON.
fn final_state(store: &dyn Store, thread: &ThreadId, i: usize) -> Result<Value, cairn::Error> {
    let fx = Effects::new();
    let wf = if i.is_multiple_of(2) { linear(&fx).erase() } else { fan_out(&fx).erase() };
    let ctx = cairn::blocking::restore(store, &wf, thread, None)?;
    Ok(ctx.snapshot()?.state)
}

/// The log's batch frames (format v6: a run of one thread's events each), found in `image` by
/// cutting the feed `events` into the slices whose encoding the image holds: from each event, the
/// shortest run from it that is a frame (a frame's header holds its length, so a shorter run's
/// encoding is never part of a longer one's).
fn log_frames<'e>(
    image: &[u8],
    events: &'e [cairn::storage::Event],
) -> Vec<&'e [cairn::storage::Event]> {
    let mut frames = Vec::new();
    let mut rest = events;
    while !rest.is_empty() {
        let len = (1..=rest.len())
            .find(|&n| {
                codec::encode_event_batch(&rest[..n])
                    .is_ok_and(|framed| !occurrences(image, &framed).is_empty())
            })
            .expect("every event is in a frame of the image");
        let (frame, tail) = rest.split_at(len);
        frames.push(frame);
        rest = tail;
    }
    frames
}

fn occurrences(haystack: &[u8], needle: &[u8]) -> Vec<usize> {
    haystack
        .windows(needle.len())
        .enumerate()
        .filter(|(_, w)| *w == needle)
        .map(|(i, _)| i)
        .collect()
}

struct Rng(u64);

impl Rng {
    fn below(&mut self, n: u64) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0 % n.max(1)
    }
}

#[derive(Default)]
struct Counts {
    cases: u64,
    event_cases: u64,
    checkpoint_cases: u64,
    flips: u64,
    bursts: u64,
    torn: u64,
    detected: u64,
    verify_missed: u64,
    /// `cairn verify` exited 3 (damage found).
    cli_damage: u64,
    /// ... and its report named the damaged record.
    cli_named: u64,
    /// `cairn verify` exited 4 (the file does not open: redb's own structures were hit).
    cli_unopenable: u64,
    read_errors: u64,
    wrong_data: u64,
    unopenable: u64,
    /// Checkpoint cases whose damaged file still opened.
    checkpoint_opened: u64,
    /// ... in which the engine's restore still gave the original state.
    restored_past_checkpoint_damage: u64,
}

/// Damages `framed` (a copy): a single bit, a burst of up to 32 bits, or a torn tail (the last
/// bytes zeroed, as a write cut short over a zero-filled page leaves them).
fn damage(framed: &[u8], kind: u64, rng: &mut Rng) -> Vec<u8> {
    let mut out = framed.to_vec();
    let bits = framed.len() as u64 * 8;
    match kind {
        0 => {
            let bit = rng.below(bits);
            out[(bit / 8) as usize] ^= 1 << (bit % 8);
        }
        1 => {
            let len = 2 + rng.below(31);
            let start = rng.below(bits - len);
            for bit in [start, start + len - 1]
                .into_iter()
                .chain((start + 1..start + len - 1).filter(|_| rng.below(2) == 0))
            {
                out[(bit / 8) as usize] ^= 1 << (bit % 8);
            }
        }
        _ => {
            let cut = 1 + rng.below((framed.len() as u64 / 2).max(1));
            let from = framed.len() - cut as usize;
            out[from..].fill(0);
            if out == framed {
                // The tail was zeros already: tear one byte earlier, with ones.
                out[from.saturating_sub(1)] ^= 0xFF;
            }
        }
    }
    out
}

/// Runs `cairn verify --json` on the image: (exit code, whether a problem names the target).
fn cli_verify(image: &[u8], target: &Target) -> (Option<i32>, bool) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("damaged.db");
    std::fs::write(&path, image).expect("write image");
    let out = Command::new(crate::env::cairn_bin())
        .args(["verify", "--json", "--db"])
        .arg(&path)
        .output()
        .expect("run cairn verify");
    let named = serde_json::from_slice::<Value>(&out.stdout).ok().is_some_and(|doc| {
        doc["problems"].as_array().is_some_and(|problems| problems.iter().any(|p| names(p, target)))
    });
    (out.status.code(), named)
}

fn names(problem: &Value, target: &Target) -> bool {
    match target {
        Target::Event { thread, seq } => {
            problem["thread"].as_str() == Some(thread.as_str())
                && problem["seq"].as_u64() == Some(*seq)
        }
        Target::Checkpoint { id, .. } => problem["seq"].as_u64() == Some(id.0),
    }
}

/// Reads the damaged record back through the store and the engine's restore: an error, or the
/// original, never anything else. Returns (detected by a read, wrong data seen, verify reported,
/// the thread restored to its original state despite the damage).
fn read_back(
    image: Vec<u8>,
    target: &Target,
    written: &Written,
) -> Option<(bool, bool, bool, bool)> {
    let store = RedbStore::with_backend(FaultBackend::from_image(image), options()).ok()?;
    let clean = || {
        RedbStore::with_backend(FaultBackend::from_image(written.image.clone()), options())
            .expect("clean image opens")
    };
    let (mut read_error, mut wrong, mut restored) = (false, false, false);
    match target {
        Target::Event { thread, seq } => {
            match store.read_range(thread, Seq(*seq), Seq(*seq)).wait() {
                Ok(found) => {
                    wrong |= found
                        != clean().read_range(thread, Seq(*seq), Seq(*seq)).wait().expect("clean")
                }
                Err(_) => read_error = true,
            }
        }
        Target::Checkpoint { id, .. } => match store.checkpoint(*id).wait() {
            Ok(found) => wrong |= found != clean().checkpoint(*id).wait().expect("clean"),
            Err(_) => read_error = true,
        },
    }
    let thread = match target {
        Target::Event { thread, .. } | Target::Checkpoint { thread, .. } => thread,
    };
    if let Some((i, (_, want))) = written.states.iter().enumerate().find(|(_, (t, _))| t == thread)
    {
        match final_state(&store, thread, i) {
            Ok(state) => {
                wrong |= state != *want;
                restored = state == *want;
            }
            Err(_) => read_error = true,
        }
    }
    let verify = match store.verify() {
        Ok(found) => !found.is_clean(),
        Err(Error::Corrupted { .. } | Error::Storage { .. }) => true,
        Err(_) => false,
    };
    let _ = store.close();
    Some((read_error, wrong, verify, restored))
}

#[test]
fn t4_corruption_of_engine_records() {
    let started = Instant::now();
    let total = size("CAIRN_REL_CORRUPTIONS", 1_000);
    let mut rng = Rng(seed("CAIRN_REL_T4_SEED", 0x0C02_20F7) | 1);
    let written = write_database();
    let mut counts = Counts::default();
    let mut failures = Vec::new();
    let located: Vec<(&Vec<u8>, &Target, Vec<usize>)> = written
        .records
        .iter()
        .map(|(framed, target)| (framed, target, occurrences(&written.image, framed)))
        .collect();
    for (framed, _, places) in &located {
        assert!(!places.is_empty(), "a record of {} bytes not found in the image", framed.len());
    }
    let (events, checkpoints): (Vec<usize>, Vec<usize>) =
        (0..located.len()).partition(|&i| matches!(located[i].1, Target::Event { .. }));
    assert!(!checkpoints.is_empty(), "the database holds checkpoints");
    for case in 0..total {
        // Half the cases hit event records, half checkpoint records (info or snapshot).
        let pool = if case % 2 == 0 { &events } else { &checkpoints };
        let (framed, target, places) = &located[pool[rng.below(pool.len() as u64) as usize]];
        let kind = (case / 2) % 3;
        let damaged = damage(framed, kind, &mut rng);
        let mut image = written.image.clone();
        for &at in places {
            image[at..at + framed.len()].copy_from_slice(&damaged);
        }
        counts.cases += 1;
        match target {
            Target::Event { .. } => counts.event_cases += 1,
            Target::Checkpoint { .. } => counts.checkpoint_cases += 1,
        }
        match kind {
            0 => counts.flips += 1,
            1 => counts.bursts += 1,
            _ => counts.torn += 1,
        }
        let label = format!(
            "case {case} ({} in {} places)",
            ["flip", "burst", "torn tail"][kind as usize],
            places.len()
        );
        let store_detected = match read_back(image.clone(), target, &written) {
            None => {
                counts.unopenable += 1;
                true
            }
            Some((read_error, wrong, verify, restored)) => {
                counts.read_errors += u64::from(read_error);
                if matches!(target, Target::Checkpoint { .. }) {
                    // A damaged checkpoint costs time, never data: restore falls back to an
                    // older one (or the log) and must give the original state.
                    counts.checkpoint_opened += 1;
                    counts.restored_past_checkpoint_damage += u64::from(restored);
                    if !restored {
                        failures.push(format!("{label}: a damaged checkpoint stopped restore"));
                    }
                }
                if wrong {
                    counts.wrong_data += 1;
                    failures.push(format!("{label}: wrong data returned"));
                }
                if !verify {
                    counts.verify_missed += 1;
                    failures.push(format!("{label}: Store::verify missed it"));
                }
                verify
            }
        };
        let (code, named) = cli_verify(&image, target);
        match code {
            Some(3) => counts.cli_damage += 1,
            Some(4) => counts.cli_unopenable += 1,
            other => failures.push(format!("{label}: cairn verify exited {other:?}, not 3 or 4")),
        }
        counts.cli_named += u64::from(named);
        if code == Some(3) && !named {
            failures.push(format!("{label}: cairn verify did not name the damaged record"));
        }
        if store_detected && matches!(code, Some(3 | 4)) {
            counts.detected += 1;
        }
    }
    report(&format!(
        "RELIABILITY T4_corruption cases={} events={} checkpoints={} flips={} bursts={} torn_tails={} records={} \
         detected={} verify_missed={} cli_damage={} cli_named={} cli_unopenable={} \
         read_errors={} wrong_data={} unopenable={} checkpoint_cases_opened={} \
         restored_past_checkpoint_damage={} secs={:.1}",
        counts.cases,
        counts.event_cases,
        counts.checkpoint_cases,
        counts.flips,
        counts.bursts,
        counts.torn,
        located.len(),
        counts.detected,
        counts.verify_missed,
        counts.cli_damage,
        counts.cli_named,
        counts.cli_unopenable,
        counts.read_errors,
        counts.wrong_data,
        counts.unopenable,
        counts.checkpoint_opened,
        counts.restored_past_checkpoint_damage,
        started.elapsed().as_secs_f64()
    ));
    assert!(
        failures.is_empty(),
        "{} failures:\n{}",
        failures.len(),
        failures[..failures.len().min(20)].join("\n")
    );
    assert_eq!(counts.detected, counts.cases, "every damage detected");
    assert_eq!(counts.wrong_data, 0);
}
