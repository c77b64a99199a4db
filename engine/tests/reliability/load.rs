//! T8 load: 200 threads of 50 steps each run concurrently on one database (Immediate
//! durability, group commit), crashed three times at random moments under rotating crash
//! models, recovered each time from what the disk held. At the end: every acknowledged event is
//! there, every thread's seqs are gap-free, no step is recorded twice, every thread finished
//! (liveness), and each thread's final state equals its solo run.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::event::Body;
use cairn::storage::{Durability, Event, Options, RedbStore, Store, ThreadId};
use cairn::{Ctx, END, Engine, NodeOutput, START, StartOptions, State, Workflow};
use cairn_storage_testkit::fault::{CrashModel, Fault, FaultBackend};
use cairn_testkit::{RecordingStore, deterministic_engine};
use serde::{Deserialize, Serialize};

use crate::env::{report, seed, size};

const STEPS: u32 = 50;

#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
struct Counter {
    input: u64,
    steps: u32,
    hash: u64,
}

impl State for Counter {
    type Update = u64;

    fn apply(&mut self, value: u64) {
        self.steps += 1;
        self.hash = self.hash.wrapping_mul(0x100_0000_01B3).wrapping_add(value);
    }
}

fn workflow() -> Workflow<Counter> {
    Workflow::<Counter>::builder("load", 1)
        .node("step", |s: Arc<Counter>, ctx: Ctx| async move {
            let mut value = s.input.wrapping_mul(u64::from(s.steps) + 7) ^ ctx.random_u64();
            if s.steps.is_multiple_of(10) {
                value ^= ctx
                    .tool("lookup", (s.input, s.steps), |(a, b): (u64, u32), _| async move {
                        Ok(a.rotate_left(b) ^ 0xABCD)
                    })
                    .await?;
            }
            Ok(NodeOutput::update(value))
        })
        .edge(START, "step")
        .route("step", |s: &Counter| if s.steps >= STEPS { END } else { "step" }, ["step", END])
        .loop_bound("step", STEPS)
        .build()
        .expect("load workflow")
}

fn input(i: u64) -> Counter {
    Counter { input: i * 7919 + 1, ..Counter::default() }
}

fn id(i: u64) -> String {
    format!("load-{i:04}")
}

const SEED: u64 = 0x10AD;

/// Each thread alone, one after the other, on a fresh in-memory engine.
async fn solo_runs(threads: u64) -> BTreeMap<String, serde_json::Value> {
    let (builder, _clock) = deterministic_engine(SEED).expect("engine");
    let engine = builder.workflow(&workflow()).concurrency(1).open().await.expect("open");
    let mut out = BTreeMap::new();
    for i in 0..threads {
        let h = engine.start_json("load", input(i), StartOptions::id(id(i))).await.expect("start");
        let state: serde_json::Value = h.output().await.expect("solo output");
        out.insert(id(i), state);
    }
    engine.shutdown().await;
    out
}

async fn open(image: Option<Vec<u8>>) -> (FaultBackend, Arc<RecordingStore>, Engine) {
    let backend = image.map_or_else(FaultBackend::new, FaultBackend::from_image);
    let options = Options { durability: Durability::Immediate, ..Options::default() };
    let store = RedbStore::with_backend(backend.clone(), options).expect("reopen");
    let rec = Arc::new(RecordingStore::new(Arc::new(store)));
    let (_, clock) = deterministic_engine(SEED).expect("clock");
    let engine = Engine::with_store(rec.clone())
        .workflow(&workflow())
        .seed(SEED)
        .clock(Arc::new(clock))
        .concurrency(64)
        .open()
        .await
        .expect("engine");
    (backend, rec, engine)
}

/// Starts (idempotently) every thread and waits until all finish or the store fails.
async fn run_all(engine: &Engine, rec: &RecordingStore, threads: u64) -> bool {
    let mut handles = Vec::new();
    for i in 0..threads {
        match engine.start_json("load", input(i), StartOptions::id(id(i))).await {
            Ok(h) => handles.push(h),
            Err(_) => return false,
        }
    }
    let all = futures::future::join_all(handles.iter().map(|h| h.finished()));
    tokio::select! {
        results = all => results.iter().all(Result::is_ok),
        () = rec.failed() => false,
    }
}

#[test]
fn t8_load_with_crashes() {
    let started = Instant::now();
    let threads = size("CAIRN_REL_LOAD_THREADS", 200);
    let crashes = size("CAIRN_REL_LOAD_CRASHES", 3);
    let mut rng = seed("CAIRN_REL_LOAD_SEED", 0x5EED_10AD);
    let mut next = move || {
        rng = rng.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = rng;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z ^ (z >> 27)
    };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let expected = runtime.block_on(solo_runs(threads));
    let models = [
        CrashModel::Kill,
        CrashModel::LoseUnsynced,
        CrashModel::TornWrite,
        CrashModel::ReorderedUnsynced,
    ];
    let total_appends_estimate = threads * u64::from(STEPS);
    let mut acked: Vec<Event> = Vec::new();
    let mut image = None;
    let mut fired = 0;
    let phase_limit = Duration::from_secs(300);
    let finished = runtime.block_on(async {
        for crash in 0..=crashes {
            let (backend, rec, engine) = open(image.take()).await;
            let controller = backend.controller();
            let last = crash == crashes;
            if !last {
                // Crash after a random share of the remaining work has been acknowledged.
                let after = next() % (total_appends_estimate / (2 * (crashes + 1))).max(1) + 1;
                let model = models[(crash % 4) as usize];
                let rec2 = rec.clone();
                let seed = next();
                tokio::spawn(async move {
                    let mut appends = rec2.watch_appends();
                    let _ = appends.wait_for(|n| *n >= after).await;
                    controller.arm(Fault::at(controller.mutations(), model).with_seed(seed));
                });
            }
            let done = tokio::time::timeout(phase_limit, run_all(&engine, &rec, threads))
                .await
                .unwrap_or(false);
            if done && last {
                engine.shutdown().await;
                rec.settle().await;
                acked.extend(rec.acked_events());
                return Some(rec);
            }
            engine.crash().await;
            rec.settle().await;
            acked.extend(rec.acked_events());
            fired += u64::from(backend.controller().fired().is_some());
            image = Some(backend.controller().crash_image());
            assert!(!last, "the final phase did not finish: {:?}", rec.failure());
        }
        None
    });
    let rec = finished.expect("all threads finish");
    let store = rec.inner();
    let (mut gaps, mut duplicates, mut diverged, mut unfinished, mut events) = (0, 0, 0, 0, 0u64);
    let mut found: BTreeMap<(String, u64), Event> = BTreeMap::new();
    for i in 0..threads {
        let thread = ThreadId::new(id(i)).expect("id");
        let log = read_thread(store.as_ref(), &thread);
        events += log.len() as u64;
        for (n, e) in log.iter().enumerate() {
            if e.bookmark.seq.0 != n as u64 + 1 {
                gaps += 1;
            }
        }
        let mut steps = Vec::new();
        for e in &log {
            if let Ok(rec) = cairn::blocking::decode(store.as_ref(), e.clone())
                && let Body::StepCompleted { step, .. } = rec.body
            {
                steps.push(step);
            }
        }
        let mut sorted = steps.clone();
        sorted.dedup();
        duplicates += steps.len() - sorted.len();
        if steps.windows(2).any(|w| w[0] >= w[1]) {
            duplicates += 1;
        }
        for e in log {
            found.insert((e.thread.to_string(), e.bookmark.seq.0), e);
        }
        let record = store.thread(&thread).wait().expect("read").expect("thread exists");
        if record.status != cairn::ThreadStatus::Completed {
            unfinished += 1;
        }
    }
    let engine_outputs = runtime.block_on(async {
        let (_, clock) = deterministic_engine(SEED).expect("clock");
        let engine = Engine::with_store(rec.inner().clone())
            .workflow(&workflow())
            .seed(SEED)
            .clock(Arc::new(clock))
            .recovery(cairn::RecoveryPolicy::Park)
            .open()
            .await
            .expect("engine");
        let mut out = BTreeMap::new();
        for i in 0..threads {
            let handle = engine.thread(&id(i)).await.expect("thread");
            let outcome = handle.outcome().await.expect("outcome");
            out.insert(id(i), outcome.output.unwrap_or_default());
        }
        engine.shutdown().await;
        out
    });
    for (thread, state) in &expected {
        if engine_outputs.get(thread) != Some(state) {
            diverged += 1;
        }
    }
    let lost = acked
        .iter()
        .filter(|a| found.get(&(a.thread.to_string(), a.bookmark.seq.0)) != Some(a))
        .count();
    let verify = store.verify().expect("verify");
    report(&format!(
        "RELIABILITY T8_load threads={threads} steps={STEPS} crashes={crashes} fired={fired} \
         events={events} acked_events={} lost_acked={lost} gaps={gaps} duplicates={duplicates} \
         diverged={diverged} unfinished={unfinished} verify_problems={} secs={:.1}",
        acked.len(),
        verify.problems.len(),
        started.elapsed().as_secs_f64()
    ));
    assert_eq!((lost, gaps, duplicates, diverged, unfinished), (0, 0, 0, 0, 0));
    assert!(verify.is_clean(), "{:?}", verify.problems);
    assert_eq!(fired, crashes, "every planned crash must happen");
}

fn read_thread(store: &dyn Store, thread: &ThreadId) -> Vec<Event> {
    let mut out: Vec<Event> = Vec::new();
    loop {
        let after = out.last().map_or(cairn::Seq(0), |e| e.bookmark.seq);
        let batch = store
            .read_since(thread, after, cairn::storage::limits::READ_LIMIT_MAX)
            .wait()
            .expect("read a thread");
        if batch.is_empty() {
            return out;
        }
        out.extend(batch);
    }
}
