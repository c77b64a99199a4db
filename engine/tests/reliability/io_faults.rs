//! T6/T7: I/O errors and a full disk.
//!
//! Simulated: a workflow whose tool results (256 KiB each) make the database file grow is
//! faulted at every op with a transient I/O error, a persistent one and a failed fsync, and at
//! every op where the file grows with a full disk. Each fired fault must reach the engine as a
//! storage error (a full disk as `storage::Error::DiskFull`), nothing may be
//! acknowledged that the durable image lacks, and after the fault clears and the file is
//! reopened nothing acknowledged is lost and the workflow finishes with the uninterrupted result.
//!
//! Real: the same workflow on a real file in a 2 MiB tmpfs (we mount one; skipped with the
//! reason where the machine does not allow it) runs into ENOSPC; the tmpfs is then grown, the
//! engine reopened, and the same must hold. Then the same without a restart: the engine's store
//! reopens its file by itself once the tmpfs has room, and the engine finishes the thread.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;

use cairn::storage::{Durability, Options, RedbStore, Seq, ThreadId};
use cairn::{Engine, StartOptions, ThreadStatus};
use cairn_storage_testkit::fault::CrashModel;
use cairn_testkit::{CrashCase, CrashHarness, Effects, RecordingStore, applies};

use crate::env::report;
use crate::workflows::{Ledger, bulky};

fn harness() -> (CrashHarness, Effects) {
    let fx = Effects::new();
    let harness = CrashHarness::new(&bulky(&fx), Ledger::default()).expect("input").effects(&fx);
    (harness, fx)
}

#[test]
fn t6_t7_io_errors_and_disk_full_simulated() {
    let (harness, _fx) = harness();
    let reference = harness.reference().expect("uninterrupted run");
    let models = [
        CrashModel::IoErrorTransient,
        CrashModel::IoErrorPersistent,
        CrashModel::FailedSync,
        CrashModel::DiskFull,
    ];
    let mut parts = Vec::new();
    let (mut cases, mut fired, mut typed, mut not_typed, mut full_typed, mut full_fired) =
        (0u64, 0u64, 0u64, 0u64, 0u64, 0u64);
    let mut summary = cairn_testkit::Summary::default();
    for model in models {
        let ops = applies(model, &reference.ops, reference.start_len);
        parts.push(format!("{model}={}", ops.len()));
        for op in ops {
            let report = harness.check(&CrashCase::at(op, model)).expect("case");
            cases += 1;
            if report.fired && report.error.is_some() {
                fired += 1;
                typed += u64::from(report.untyped_errors == 0);
                not_typed += report.untyped_errors;
                if model == CrashModel::DiskFull {
                    full_fired += 1;
                    full_typed += report.disk_full_typed;
                }
            }
            summary.add(report);
        }
    }
    report(&format!(
        "RELIABILITY T6_T7_simulated cases={cases} faults_reaching_engine={fired} typed={typed} \
         untyped={not_typed} disk_full={full_fired} disk_full_typed={full_typed} lost_acked={} \
         acked_not_durable={} diverged={} repeated_effects={} hung={} panics={} ops={} \
         growth_points={} per_model=[{}]",
        summary.lost_acked,
        summary.acked_not_durable,
        summary.diverged,
        summary.repeated_effects,
        summary.hung,
        summary.panics,
        reference.ops.len(),
        applies(CrashModel::DiskFull, &reference.ops, reference.start_len).len(),
        parts.join(","),
    ));
    assert!(summary.is_clean(), "{}", summary.failure_report(10));
    assert!(fired > 100, "faults must reach the engine in most cases, got {fired}");
    assert_eq!(not_typed, 0);
    assert!(full_fired > 0, "the workload must grow the file");
    assert_eq!(full_typed, full_fired, "every full disk must be reported as such");
}

/// A tmpfs mounted for the test, unmounted on drop.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    fn mount(size: &str) -> Result<Tmpfs, String> {
        let dir = tempfile::tempdir().map_err(|e| e.to_string())?;
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={size}"), "tmpfs"])
            .arg(dir.path())
            .output()
            .map_err(|e| format!("mount not runnable: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "mount -t tmpfs failed: {}",
                String::from_utf8_lossy(&out.stderr).trim().replace(' ', "_")
            ));
        }
        Ok(Tmpfs { dir })
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    fn resize(&self, size: &str) -> bool {
        Command::new("mount")
            .args(["-o", &format!("remount,size={size}")])
            .arg(self.path())
            .status()
            .is_ok_and(|s| s.success())
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount").arg(self.dir.path()).status();
    }
}

async fn open(path: &PathBuf, fx: &Effects) -> (Arc<RecordingStore>, Engine) {
    let options = Options { durability: Durability::Immediate, ..Options::default() };
    let store = RedbStore::open(path, options).expect("open the database");
    let rec = Arc::new(RecordingStore::new(Arc::new(store)));
    let engine = Engine::with_store(rec.clone())
        .workflow(&bulky(fx))
        .seed(0x00C0_FFEE)
        .open()
        .await
        .expect("engine");
    (rec, engine)
}

/// What the tmpfs tests start from: a 2 MiB tmpfs, the uninterrupted run, the database's path
/// on the tmpfs, fresh effects and a two-worker runtime.
struct OnTmpfs {
    tmpfs: Tmpfs,
    reference: Arc<cairn_testkit::Reference>,
    path: PathBuf,
    fx: Effects,
    runtime: tokio::runtime::Runtime,
}

/// [`OnTmpfs`], or `None` (reported as `RELIABILITY {name} skipped=1` with the reason) where
/// no tmpfs can be mounted.
fn on_a_tmpfs(name: &str) -> Option<OnTmpfs> {
    let tmpfs = match Tmpfs::mount("2m") {
        Ok(t) => t,
        Err(reason) => {
            report(&format!("RELIABILITY {name} skipped=1 reason={reason}"));
            return None;
        }
    };
    let (harness, _) = harness();
    let reference = harness.reference().expect("uninterrupted run");
    let path = tmpfs.path().join("cairn.db");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    Some(OnTmpfs { tmpfs, reference, path, fx: Effects::new(), runtime })
}

#[test]
fn t7_disk_full_on_a_real_tmpfs() {
    let Some(OnTmpfs { tmpfs, reference, path, fx, runtime }) = on_a_tmpfs("T7_tmpfs") else {
        return;
    };
    let id = ThreadId::new("crash-test").expect("id");
    let (error, acked) = runtime.block_on(async {
        let (rec, engine) = open(&path, &fx).await;
        let handle =
            engine.start_json("bulky", Ledger::default(), StartOptions::id("crash-test")).await;
        if let Ok(handle) = &handle {
            tokio::select! {
                _ = handle.finished() => {}
                () = rec.failed() => {}
            }
        }
        engine.crash().await;
        rec.settle().await;
        (rec.failure(), rec.acked_events())
    });
    let error = error.expect("the 2 MiB tmpfs must fill up");
    let enospc = matches!(error, cairn::storage::Error::DiskFull { .. });
    assert!(enospc, "a full disk is reported as Error::DiskFull, got {error}");
    assert!(tmpfs.resize("64m"), "remount the tmpfs larger");
    let (status, output, lost) = runtime.block_on(async {
        let (rec, engine) = open(&path, &fx).await;
        let handle = engine
            .start_json("bulky", Ledger::default(), StartOptions::id("crash-test"))
            .await
            .expect("start after the disk was freed");
        let outcome = handle.finished().await.expect("finishes");
        let events = rec
            .inner()
            .read_since(&id, Seq(0), cairn::storage::limits::READ_LIMIT_MAX)
            .wait()
            .expect("read the log");
        let lost = acked.iter().filter(|a| !events.contains(a)).count();
        engine.shutdown().await;
        (outcome.status, outcome.output, lost)
    });
    report(&format!(
        "RELIABILITY T7_tmpfs skipped=0 size=2m acked_before_full={} enospc_typed={} lost_acked={lost} \
         finished={} equal_to_uninterrupted={}",
        acked.len(),
        u8::from(enospc),
        u8::from(status == ThreadStatus::Completed),
        u8::from(output == reference.outcome.output),
    ));
    assert_eq!(lost, 0);
    assert!(!acked.is_empty(), "some steps are acknowledged before the disk fills");
    assert_eq!(status, ThreadStatus::Completed);
    assert_eq!(output, reference.outcome.output);
}

/// The issue-38 scenario on a real full disk, without a restart: an engine on a 2 MiB tmpfs runs
/// into ENOSPC; a wait begun before the failure ends at once with `DiskFull`; once the tmpfs is
/// grown, the same engine (no reopen by the caller) reopens its file by itself and finishes the
/// thread with the uninterrupted result, nothing acknowledged lost, each node completed once.
#[test]
fn t7_a_full_tmpfs_heals_without_a_restart() {
    use std::time::{Duration, Instant};

    use cairn::storage::EventKind;
    let Some(OnTmpfs { tmpfs, reference, path, fx, runtime }) = on_a_tmpfs("T7_heal") else {
        return;
    };
    runtime.block_on(async {
        let (rec, engine) = open(&path, &fx).await;
        let handle = engine
            .start_json("bulky", Ledger::default(), StartOptions::id("crash-test"))
            .await
            .expect("start");
        let waiter = tokio::spawn(async move { (handle.finished().await, Instant::now()) });
        rec.failed().await;
        let failed_at = Instant::now();
        let (waited, ended_at) = tokio::time::timeout(Duration::from_secs(10), waiter)
            .await
            .expect("the wait ends")
            .expect("the waiter");
        let error = waited.expect_err("the 2 MiB tmpfs must fill up");
        let typed = matches!(error, cairn::Error::Storage(cairn::storage::Error::DiskFull { .. }));
        assert!(typed, "a full disk is reported as DiskFull, got {error}");
        let wait_ms = ended_at.saturating_duration_since(failed_at).as_millis();
        assert!(wait_ms < 2_000, "the wait ended {wait_ms} ms after the failure");

        assert!(tmpfs.resize("64m"), "remount the tmpfs larger");
        let grown = Instant::now();
        let mut refusals = rec.inner().refusals().expect("a file store says when it refuses");
        let outcome = tokio::time::timeout(Duration::from_secs(60), async {
            loop {
                refusals.wait_for(Option::is_none).await.expect("the store is open");
                match engine.await_result("crash-test", Duration::from_secs(60)).await {
                    Ok(Some(outcome)) => return outcome,
                    Ok(None) => panic!("not finished within 60 s"),
                    Err(e) => assert!(matches!(e, cairn::Error::Storage(_)), "{e:?}"),
                }
            }
        })
        .await
        .expect("the engine comes back within 60 s of the tmpfs growing");
        let healed_ms = grown.elapsed().as_millis();
        let id = ThreadId::new("crash-test").expect("id");
        let events = rec
            .inner()
            .read_since(&id, Seq(0), cairn::storage::limits::READ_LIMIT_MAX)
            .await
            .expect("the log");
        let lost = rec.acked_events().iter().filter(|a| !events.contains(a)).count();
        let mut completed = std::collections::BTreeMap::<String, usize>::new();
        for e in events.iter().filter(|e| e.kind == EventKind::NodeCompleted) {
            *completed.entry(e.node.clone().unwrap_or_default()).or_default() += 1;
        }
        let clean = rec.inner().verify().expect("verify").is_clean();
        report(&format!(
            "RELIABILITY T7_heal skipped=0 size=2m wait_after_failure_ms={wait_ms} \
             healed_after_growth_ms={healed_ms} lost_acked={lost} finished={} \
             equal_to_uninterrupted={} nodes_completed_once={} verify_clean={}",
            u8::from(outcome.status == ThreadStatus::Completed),
            u8::from(outcome.output == reference.outcome.output),
            u8::from(completed.values().all(|n| *n == 1)),
            u8::from(clean),
        ));
        assert_eq!(lost, 0);
        assert_eq!(outcome.status, ThreadStatus::Completed);
        assert_eq!(outcome.output, reference.outcome.output);
        assert!(completed.values().all(|n| *n == 1), "{completed:?}");
        assert!(clean);
        engine.shutdown().await;
    });
}
