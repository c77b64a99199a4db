//! Two real processes: this test binary re-runs itself as a child that writes (holding the
//! file's exclusive lock), while the parent opens read-only snapshots and checks them.

use cairn_storage::{Maintenance, ThreadLog};
use std::io::{BufRead, BufReader, Write};
use std::process::{Command, Stdio};

use cairn_storage::{Error, Options, RedbStore, Seq};

use crate::common::*;

const CHILD_ENV: &str = "CAIRN_TWO_PROCESS_DB";
const CHILD_BATCHES: u64 = 300;

#[test]
fn a_second_process_reads_snapshots_while_the_first_writes() {
    let (_dir, path) = temp_db();
    let exe = std::env::current_exe().expect("test binary");
    let mut child = Command::new(exe)
        .args([
            "two_process::child_writer",
            "--exact",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &path)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("spawn the writer process");
    let stdout = child.stdout.take().expect("child stdout");
    let mut checked = 0;
    let mut locked_seen = false;
    let mut lines = BufReader::new(stdout).lines();
    for line in lines.by_ref() {
        let line = line.expect("child output");
        if let Some(acked) = line.strip_prefix("ACK ") {
            let acked: u64 = acked.parse().expect("ack count");
            // Check at a few points while the child keeps writing.
            if acked.is_multiple_of(60) {
                check_snapshot(&path, acked);
                checked += 1;
                if !locked_seen {
                    assert!(matches!(RedbStore::open(&path, fast()), Err(Error::Locked)));
                    locked_seen = true;
                }
            }
        } else if line == "DONE" {
            check_snapshot(&path, CHILD_BATCHES);
            let stdin = child.stdin.as_mut().expect("child stdin");
            stdin.write_all(b"stop\n").expect("tell the child to stop");
            break;
        }
    }
    // Drain the child's remaining output (its test harness report) so it never hits a closed pipe.
    lines.for_each(drop);
    let status = child.wait().expect("child exit");
    assert!(status.success(), "writer process failed: {status}");
    assert!(checked >= 3 && locked_seen, "too few checks while the writer ran: {checked}");
    // After the writer closed, a writable open works and sees everything.
    let store = RedbStore::open_existing(&path, fast()).expect("open after the writer");
    assert_eq!(
        store.read_since(&tid("t"), Seq(0), 1000).wait().expect("read").len() as u64,
        CHILD_BATCHES
    );
}

/// A snapshot holds at least the `acked` events acknowledged before it was taken, each exactly
/// as written, with no gaps, and verifies clean.
fn check_snapshot(path: &std::path::Path, acked: u64) {
    let snapshot = RedbStore::open_read_only(path).expect("read-only snapshot");
    let events = snapshot.read_since(&tid("t"), Seq(0), 1000).wait().expect("read");
    assert!(
        events.len() as u64 >= acked,
        "snapshot has {} events, {acked} were acked",
        events.len()
    );
    for (i, e) in events.iter().enumerate() {
        let expected = event("t", i as u64 + 1);
        assert_eq!(
            (e.bookmark.seq.0, &e.summary, &e.data),
            (i as u64 + 1, &expected.summary, &expected.data)
        );
    }
    let report = snapshot.verify().expect("verify");
    assert!(report.is_clean(), "{:?}", report.problems);
}

/// The writer process (run by the test above, not on its own).
#[test]
#[ignore = "helper process for a_second_process_reads_snapshots_while_the_first_writes"]
fn child_writer() {
    let Some(path) = std::env::var_os(CHILD_ENV) else {
        panic!("run only as the child of a_second_process_reads_snapshots_while_the_first_writes");
    };
    let store = RedbStore::open(&path, Options::default()).expect("child open");
    create_thread(&store, "t", 0);
    let mut out = std::io::stdout();
    for n in 1..=CHILD_BATCHES {
        events(&store, "t", 1);
        writeln!(out, "ACK {n}").and_then(|()| out.flush()).expect("report ack");
    }
    writeln!(out, "DONE").and_then(|()| out.flush()).expect("report done");
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).expect("wait for the parent");
    store.close().expect("child close");
}
