//! T12 format fixtures: database files written by each released format version are checked in
//! under `tests/fixtures/v<N>/` and must open, replay and resume forever.
//!
//! Each fixture directory holds `cairn.db.gz` (a database the engine wrote with the canonical
//! workflows: completed threads, one with human input and a durable timer, and one left waiting
//! for input, from v3 with three signals in its inbox that it never asks for) and `manifest.json` (what the file must replay to, and hashes that pin the format).
//! The test, for every fixture:
//! - opens a copy and restores every thread at every seq; the final states, statuses and event
//!   counts must equal the manifest;
//! - re-encodes every stored record with today's codec and every event body and checkpoint
//!   snapshot with today's engine types: the bytes must be the ones in the file (`record_hash`),
//!   so a changed encoding cannot pass unnoticed;
//! - delivers the pending input to the waiting thread and runs it to the recorded end;
//! - checks that `docs/format.md`'s version log still has the fixture's row, word for word.
//!
//! And for the build: `FORMAT_VERSION` must be the last row of the version log and must have a
//! fixture. A format change therefore needs a new fixture (`CAIRN_REL_WRITE_FIXTURE=1 cargo
//! test -p cairn --test reliability t12_write_fixture -- --ignored`) and a
//! new version-log row; without them this test fails.

use cairn::storage::{Maintenance, ThreadLog};
use std::collections::BTreeMap;
use std::io::{Read as _, Write as _};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cairn::clock::Clock as _;
use cairn::storage::{
    CheckpointFilter, Durability, FORMAT_VERSION, Lsn, Options, Page, RedbStore, Store, ThreadId,
    codec,
};
use cairn::thread_ctx::{Snapshot, Waiting};
use cairn::{Engine, StartOptions, ThreadStatus};
use cairn_testkit::{CLOCK_START_MS, Effects, ManualClock, runner_released};
use serde_json::{Value, json};

use crate::env::report;
use crate::workflows::{Ledger, fan_out, human_timer, linear};

fn fixtures_dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/fixtures")
}

fn format_md() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/format.md");
    std::fs::read_to_string(path).expect("docs/format.md")
}

/// The rows of the version log (§ "Version log" of docs/format.md): version -> the text of its
/// last row (a version revised before release has a second row, "1 (revised before release)").
fn version_log(md: &str) -> BTreeMap<u16, String> {
    let section = md.split("Version log").nth(1).unwrap_or("");
    section
        .lines()
        .filter_map(|line| {
            let cells: Vec<&str> = line.split('|').map(str::trim).collect();
            let cell = cells.get(1)?;
            let digits: String = cell.chars().take_while(char::is_ascii_digit).collect();
            let version = digits.parse::<u16>().ok()?;
            Some((version, line.trim().to_owned()))
        })
        .collect()
}

fn engine_builder(store: Arc<dyn Store>, clock: &ManualClock) -> cairn::EngineBuilder {
    let fx = Effects::new();
    Engine::with_store(store)
        .workflow(&linear(&fx))
        .workflow(&fan_out(&fx))
        .workflow(&human_timer(&fx))
        .seed(12)
        .clock(Arc::new(clock.clone()))
        .checkpoint_every(Some(2), None)
        // Every seq of a fixture restores: no history pass prunes what checkpoints cover.
        .prune_history(false)
}

fn digest(value: &Value) -> String {
    blake3::hash(value.to_string().as_bytes()).to_hex()[..16].to_owned()
}

const THREADS: [(&str, &str, &[&str]); 4] = [
    ("fx-linear", "linear-tools", &[]),
    ("fx-fan-out", "fan-out-join", &[]),
    ("fx-approved", "approval-timer", &["yes", "go"]),
    ("fx-waiting", "approval-timer", &["yes"]),
];

/// Answers the inputs and moves the clock until the thread ends or runs out of answers.
async fn drive(engine: &Engine, clock: &ManualClock, id: &str, answers: &[&str]) -> ThreadStatus {
    let handle = engine.thread(id).await.expect("thread");
    let tid = ThreadId::new(id).expect("id");
    let mut given = 0;
    loop {
        let outcome = handle.wait().await.expect("wait");
        if matches!(outcome.status, ThreadStatus::WaitingInput | ThreadStatus::Sleeping) {
            runner_released(engine, &tid).await;
        }
        match outcome.status {
            // Woken (input delivered, timer fired) and not yet parked again.
            ThreadStatus::Running | ThreadStatus::Created => tokio::task::yield_now().await,
            ThreadStatus::WaitingInput if given < answers.len() => {
                // The runner that parked the thread may still hold it for a moment.
                let mut tries = 0;
                while let Err(e) = engine.send_input(id, answers[given]).await {
                    tries += 1;
                    assert!(tries < 100_000, "input to {id} refused: {e}");
                    tokio::task::yield_now().await;
                }
                given += 1;
            }
            ThreadStatus::Sleeping => {
                let wf = engine.workflow_of(&tid).await.expect("workflow");
                let ctx = cairn::blocking::restore(engine.store().as_ref(), &wf, &tid, None)
                    .expect("restore");
                match ctx.meta.waiting {
                    Some(Waiting::Timer { until_ms, .. }) if until_ms > clock.now_ms() => {
                        clock.set_ms(until_ms);
                    }
                    _ => tokio::task::yield_now().await,
                }
            }
            status => return status,
        }
    }
}

/// Everything a fixture pins, computed from a database.
fn inspect(store: &dyn Store) -> (String, bool, BTreeMap<String, Value>) {
    let mut hasher = blake3::Hasher::new();
    let mut bodies_roundtrip = true;
    let events = store.read_all_since(Lsn(0), 10_000).wait().expect("events");
    for event in &events {
        hasher.update(&codec::encode_event(event).expect("encode event"));
        let record = cairn::blocking::decode(store, event.clone()).expect("decode body");
        let bytes = match (&event.payload, event.data.is_empty()) {
            (Some(r), true) => store.payload(r).wait().expect("payload"),
            _ => event.data.clone(),
        };
        // Bodies before format v6 are JSON, since then binary: each re-encodes in its form.
        let again = if bytes.first() == Some(&cairn_core::codec::BINARY_V1) {
            cairn_core::codec::encode_body(&record.body).expect("encode body")
        } else {
            serde_json::to_vec(&record.body).expect("encode body")
        };
        bodies_roundtrip &= again == bytes;
    }
    let filter = CheckpointFilter::default();
    for info in
        store.list_checkpoints(&filter, Page { limit: 1_000, offset: 0 }).wait().expect("list")
    {
        let checkpoint = store.checkpoint(info.id).wait().expect("read").expect("exists");
        hasher.update(&codec::encode_checkpoint(&info).expect("encode checkpoint"));
        hasher.update(&codec::encode_snapshot(info.id, &checkpoint.snapshot).expect("encode"));
        let snapshot: Snapshot = serde_json::from_slice(&checkpoint.snapshot).expect("snapshot");
        bodies_roundtrip &= serde_json::to_vec(&snapshot).expect("encode") == checkpoint.snapshot;
    }
    let mut threads = BTreeMap::new();
    for (id, _, _) in THREADS {
        let tid = ThreadId::new(id).expect("id");
        let record = store.thread(&tid).wait().expect("thread").expect("exists");
        hasher.update(&codec::encode_thread(&record).expect("encode thread"));
        // The signal inbox (format v3; none in older fixtures, which hash as before).
        for signal in store.signals(&tid, 0, 1_000).wait().expect("signals") {
            hasher.update(&codec::encode_signal(&signal).expect("encode signal"));
        }
        let fx = Effects::new();
        let wf = if id.contains("linear") {
            linear(&fx).erase()
        } else if id.contains("fan") {
            fan_out(&fx).erase()
        } else {
            human_timer(&fx).erase()
        };
        let last = store.last_bookmark(&tid).wait().expect("last").expect("events").seq.0;
        // Every seq restores (checkpoint + tail), and the last gives the recorded state.
        let mut state = Value::Null;
        for seq in 1..=last {
            let ctx = cairn::blocking::restore(store, &wf, &tid, Some(seq))
                .unwrap_or_else(|e| panic!("{id} does not restore at seq {seq}: {e}"));
            assert_eq!(ctx.meta.seq, seq, "{id} restored to the wrong seq");
            state = ctx.snapshot().expect("snapshot").state;
        }
        threads.insert(
            id.to_owned(),
            json!({ "status": record.status.as_str(), "events": last, "state": digest(&state) }),
        );
    }
    (hasher.finalize().to_hex().to_string(), bodies_roundtrip, threads)
}

/// Writes `tests/fixtures/v<FORMAT_VERSION>/` (run by hand when the format changes).
#[test]
#[ignore = "writes a fixture; run by hand when the format version changes"]
fn t12_write_fixture() {
    if std::env::var("CAIRN_REL_WRITE_FIXTURE").is_err() {
        return;
    }
    let dir = fixtures_dir().join(format!("v{FORMAT_VERSION}"));
    assert!(!dir.exists(), "{} exists: fixtures are never rewritten", dir.display());
    let work = tempfile::tempdir().expect("temp dir");
    let db = work.path().join("cairn.db");
    let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("rt");
    let final_after_input = runtime.block_on(async {
        let options = Options { durability: Durability::Immediate, ..Options::default() };
        let store = Arc::new(RedbStore::open(&db, options).expect("create"));
        let clock = ManualClock::new(CLOCK_START_MS);
        let engine = engine_builder(store.clone(), &clock).open().await.expect("engine");
        for (i, (id, wf, answers)) in THREADS.iter().enumerate() {
            let input = Ledger { entries: vec![format!("fixture {i}")], sum: i as u64 };
            engine.start_json(wf, input, StartOptions::id(*id)).await.expect("start");
            drive(&engine, &clock, id, answers).await;
        }
        // Kind-9 records in the file (format v3): signals the waiting thread has not asked for.
        for (name, value) in
            [("note", json!({"k": 1})), ("note", json!("two")), ("other", json!(3))]
        {
            engine.signal("fx-waiting", name, value).await.expect("signal");
        }
        engine.shutdown().await;
        drop(engine);
        let (_, _, threads) = inspect(store.as_ref());
        Arc::try_unwrap(store).expect("sole owner").close().expect("close");
        // What the waiting thread ends as once it gets its answer (on a scratch copy).
        let copy = work.path().join("copy.db");
        std::fs::copy(&db, &copy).expect("copy");
        let store = Arc::new(RedbStore::open(&copy, Options::default()).expect("open copy"));
        let engine = engine_builder(store.clone(), &clock).open().await.expect("engine");
        drive(&engine, &clock, "fx-waiting", &["go"]).await;
        let out = engine.thread("fx-waiting").await.expect("t").outcome().await.expect("outcome");
        engine.shutdown().await;
        (threads, out.output.map(|o| digest(&o)))
    });
    let store = RedbStore::open_read_only(&db).expect("read");
    let (record_hash, roundtrip, threads) = inspect(&store);
    assert!(roundtrip, "bodies must re-encode to their stored bytes");
    assert_eq!(threads, final_after_input.0);
    let log = version_log(&format_md());
    let row = log.get(&FORMAT_VERSION).expect("a version-log row for this format version");
    let manifest = json!({
        "format_version": FORMAT_VERSION,
        "version_log_row": row,
        "record_hash": record_hash,
        "threads": threads,
        "waiting_thread_after_input": final_after_input.1,
    });
    std::fs::create_dir_all(&dir).expect("mkdir");
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    gz.write_all(&std::fs::read(&db).expect("read db")).expect("gzip");
    std::fs::write(dir.join("cairn.db.gz"), gz.finish().expect("gzip")).expect("write db");
    let text = serde_json::to_string_pretty(&manifest).expect("json") + "\n";
    std::fs::write(dir.join("manifest.json"), text).expect("write manifest");
}

/// Unzips fixture `dir`'s database into `work`; returns its path.
fn unzip_fixture(dir: &Path, work: &Path) -> PathBuf {
    let db = work.join("cairn.db");
    let mut bytes = Vec::new();
    flate2::read::GzDecoder::new(
        std::fs::File::open(dir.join("cairn.db.gz")).expect("cairn.db.gz"),
    )
    .read_to_end(&mut bytes)
    .expect("gunzip");
    std::fs::write(&db, bytes).expect("write db");
    db
}

/// The v5 fixture (one log record an event) migrates to v6 (batch frames) at open, and every
/// record reads back identical: the hash of every event, thread record, checkpoint and signal
/// re-encoded is the one its manifest pinned when v5 wrote it, and each thread's events read by
/// seq are the feed's.
#[test]
fn t12_the_v5_fixture_migrates_to_v6_event_for_event() {
    let dir = fixtures_dir().join("v5");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).expect("manifest"))
            .expect("manifest is JSON");
    let work = tempfile::tempdir().expect("temp dir");
    let db = unzip_fixture(&dir, work.path());
    for store in [
        RedbStore::open_read_only(&db).expect("a read-only copy migrates"),
        RedbStore::open(&db, Options::default()).expect("the v5 fixture opens"),
    ] {
        let report_ = store.verify().expect("verify");
        assert!(report_.is_clean(), "{:?}", report_.problems);
        let (hash, _, _) = inspect(&store);
        assert_eq!(Some(hash.as_str()), manifest["record_hash"].as_str(), "a record changed");
        let feed = store.read_all_since(Lsn(0), 10_000).wait().expect("feed");
        let mut read = 0;
        for (id, _, _) in THREADS {
            let tid = ThreadId::new(id).expect("id");
            let mine: Vec<_> = feed.iter().filter(|e| e.thread == tid).cloned().collect();
            let by_seq =
                store.read_since(&tid, cairn::storage::Seq(0), 10_000).wait().expect("read");
            assert_eq!(by_seq, mine, "{id}");
            read += mine.len();
        }
        assert_eq!(read, feed.len(), "every event is one of the fixture's threads'");
    }
}

#[test]
fn t12_fixtures_open_and_replay_forever() {
    let md = format_md();
    let log = version_log(&md);
    let mut versions = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(fixtures_dir())
        .expect("tests/fixtures exists")
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with('v'))
        .collect();
    entries.sort_by_key(std::fs::DirEntry::file_name);
    let (mut threads_checked, mut seqs_restored) = (0u64, 0u64);
    for entry in entries {
        let dir = entry.path();
        let manifest: Value = serde_json::from_slice(
            &std::fs::read(dir.join("manifest.json")).expect("manifest.json"),
        )
        .expect("manifest is JSON");
        let version = u16::try_from(manifest["format_version"].as_u64().expect("version"))
            .expect("a u16 version");
        versions.push(version);
        assert_eq!(
            log.get(&version).map(String::as_str),
            manifest["version_log_row"].as_str(),
            "docs/format.md's version-log row for v{version} changed or went missing"
        );
        let work = tempfile::tempdir().expect("temp dir");
        let db = unzip_fixture(&dir, work.path());
        let store = RedbStore::open(&db, Options::default()).expect("the fixture opens");
        let report_ = store.verify().expect("verify");
        assert!(report_.is_clean(), "v{version} fixture: {:?}", report_.problems);
        let (hash, roundtrip, threads) = inspect(&store);
        assert!(roundtrip, "v{version}: stored bodies no longer re-encode to the same bytes");
        if version == FORMAT_VERSION {
            assert_eq!(
                hash,
                manifest["record_hash"].as_str().unwrap_or(""),
                "the record encoding changed: bump the format version, add its version-log row \
                 in docs/format.md and a fixture (see tests/reliability/fixtures.rs)"
            );
        }
        for (id, want) in manifest["threads"].as_object().expect("threads") {
            assert_eq!(threads.get(id), Some(want), "v{version}: thread {id} replays differently");
            threads_checked += 1;
            seqs_restored += want["events"].as_u64().unwrap_or(0);
        }
        // The waiting thread resumes and ends as recorded.
        let runtime = tokio::runtime::Builder::new_multi_thread().enable_all().build().expect("rt");
        let after = runtime.block_on(async {
            let store: Arc<dyn Store> = Arc::new(store);
            let clock = ManualClock::new(CLOCK_START_MS);
            let engine = engine_builder(store, &clock).open().await.expect("engine");
            let status = drive(&engine, &clock, "fx-waiting", &["go"]).await;
            let out =
                engine.thread("fx-waiting").await.expect("t").outcome().await.expect("outcome");
            engine.shutdown().await;
            (status, out.output.map(|o| digest(&o)))
        });
        assert_eq!(after.0, ThreadStatus::Completed);
        assert_eq!(
            after.1.as_deref(),
            manifest["waiting_thread_after_input"].as_str(),
            "v{version}: the waiting thread resumes to another end"
        );
    }
    let newest = log.keys().max().copied().unwrap_or(0);
    report(&format!(
        "RELIABILITY T12_fixtures versions={versions:?} threads={threads_checked} \
         seqs_restored={seqs_restored} format_version={FORMAT_VERSION} version_log_newest={newest}"
    ));
    assert_eq!(newest, FORMAT_VERSION, "the version log's newest row is the build's format");
    assert!(
        versions.contains(&FORMAT_VERSION),
        "no fixture for format v{FORMAT_VERSION}: write one (see tests/reliability/fixtures.rs)"
    );
}
