//! Durability modes, observed beneath redb on the fault-injection disk: what is on the durable
//! image (what survives a power loss) when an append is acknowledged.

use cairn_storage::{Append, Durability, Options, RedbStore, Seq, ThreadLog};

use crate::common::*;

#[test]
fn the_store_reports_its_mode() {
    for durability in
        [Durability::Immediate, Durability::Periodic { interval_ms: 5 }, Durability::None]
    {
        let (_dir, path) = temp_db();
        let store =
            RedbStore::open(&path, Options::default().with_durability(durability)).expect("open");
        assert_eq!(store.durability(), durability);
    }
}

#[test]
fn a_non_durable_mode_is_made_durable_by_close() {
    let (_dir, path) = temp_db();
    let store =
        RedbStore::open(&path, Options::default().with_durability(Durability::None)).expect("open");
    create_thread(&store, "t", 3);
    store.close().expect("close");
    let store = RedbStore::open_existing(&path, Options::default()).expect("reopen");
    assert_eq!(store.read_since(&tid("t"), Seq(0), 10).wait().expect("read").len(), 3);
}

mod beneath_redb {

    use cairn_storage::{
        Append, Backend, Batch, Durability, Error, Maintenance, Options, RedbStore, Seq, ThreadLog,
    };
    use cairn_storage_testkit::fault::{FaultBackend, FaultController, OpKind};

    use crate::common::*;

    fn open(durability: Durability) -> (RedbStore, FaultController) {
        let backend = FaultBackend::new();
        let controller = backend.controller();
        let store =
            RedbStore::with_backend(backend, Options::default().with_durability(durability))
                .expect("open");
        (store, controller)
    }

    /// Event count of thread `t` in a store reopened from `image`.
    fn events_in(image: Vec<u8>) -> Option<usize> {
        let store = RedbStore::with_backend(FaultBackend::from_image(image), Options::default())
            .expect("reopen");
        match store.read_since(&tid("t"), Seq(0), 1000).wait() {
            Ok(events) => Some(events.len()),
            Err(Error::UnknownThread(_)) => None,
            Err(other) => panic!("read: {other}"),
        }
    }

    #[test]
    fn immediate_acknowledges_only_what_is_durable() {
        let (store, disk) = open(Durability::Immediate);
        create_thread(&store, "t", 2);
        assert_eq!(events_in(disk.durable_image()), Some(2));
        events(&store, "t", 3);
        assert_eq!(events_in(disk.durable_image()), Some(5));
    }

    #[test]
    fn none_loses_unsynced_batches_whole_never_in_part() {
        let (store, disk) = open(Durability::Immediate);
        create_thread(&store, "t", 2);
        drop(store);
        let (store, disk2) = {
            let backend = FaultBackend::from_image(disk.durable_image());
            let controller = backend.controller();
            let store = RedbStore::with_backend(
                backend,
                Options::default().with_durability(Durability::None),
            )
            .expect("reopen");
            (store, controller)
        };
        events(&store, "t", 3);
        events(&store, "t", 4);
        // Acknowledged but not durable: a power loss now keeps only the first two events, and
        // never part of a batch.
        assert_eq!(events_in(disk2.durable_image()), Some(2));
        // The live image (a process crash: the page cache survives) holds either nothing or whole
        // batches: 2, 5 or 9 events.
        let live = events_in(disk2.live_image());
        assert!(matches!(live, Some(2 | 5 | 9)), "{live:?}");
        store.close().expect("close");
        assert_eq!(events_in(disk2.durable_image()), Some(9));
    }

    /// Periodic durability on a clock moved by hand, without a sleep: an append is not durable
    /// before the interval has passed since the last durable commit, and is once it has (the
    /// writer flushes by itself when its interval passes; `tick` asks it to look now).
    #[test]
    fn periodic_flushes_once_its_interval_has_passed_on_the_writers_clock() {
        let backend = FaultBackend::new();
        let disk = backend.controller();
        let clock = std::sync::Arc::new(cairn_storage::ManualClock::new());
        let hour = 3_600_000;
        let options =
            Options::default().with_durability(Durability::Periodic { interval_ms: hour });
        let store =
            RedbStore::with_backend_and_clock(backend, options, clock.clone()).expect("open");
        // More than an interval since open: this first commit is durable.
        clock.advance_ms(hour);
        create_thread(&store, "t", 1);
        assert_eq!(events_in(disk.durable_image()), Some(1));
        disk.record_ops(true);
        events(&store, "t", 1);
        store.tick().expect("tick");
        assert_eq!(events_in(disk.durable_image()), Some(1), "acknowledged, not yet durable");
        clock.advance_ms(hour - 1);
        store.tick().expect("tick");
        assert_eq!(events_in(disk.durable_image()), Some(1), "a millisecond early");
        assert!(!disk.ops().contains(&OpKind::Sync), "no flush before it is due");
        clock.advance_ms(1);
        store.tick().expect("tick");
        assert_eq!(events_in(disk.durable_image()), Some(2), "flushed once due");
        assert!(disk.ops().contains(&OpKind::Sync));
        drop(store);
    }

    /// A lone caller's hand-over under Periodic durability is committed on the caller's thread
    /// (answered before `append_all` returns, not durable yet), and the writer's thread, which
    /// was idle with nothing to flush, learns of it: the commit is durable about an interval
    /// later, with no other write or tick to wake the writer.
    #[test]
    fn periodic_flushes_a_hand_over_committed_by_its_caller() {
        let backend = FaultBackend::new();
        let disk = backend.controller();
        let interval = std::time::Duration::from_secs(1);
        let options = Options::default()
            .with_durability(Durability::Periodic { interval_ms: interval.as_millis() as u64 });
        let store = RedbStore::with_backend(backend, options).expect("open");
        // An interval after open, the first commit is durable; the writer then rests with
        // nothing to flush (a group's answers go out once it rests).
        std::thread::sleep(interval);
        create_thread(&store, "t", 1);
        assert_eq!(events_in(disk.durable_image()), Some(1));
        let batch = |seq| Batch { events: vec![event("t", seq)], ..Batch::default() };
        let mut batches = vec![batch(2), batch(3)];
        for p in store.append_all(&mut batches) {
            // Polled once, with nobody to wake: answered already.
            let mut cx = std::task::Context::from_waker(std::task::Waker::noop());
            let answer = std::pin::pin!(p.wait()).as_mut().poll(&mut cx);
            let std::task::Poll::Ready(answer) = answer else {
                panic!("a lone hand-over was not committed before append_all returned")
            };
            answer.expect("appended");
        }
        let started = std::time::Instant::now();
        while events_in(disk.durable_image()) != Some(3) {
            assert!(
                started.elapsed() < std::time::Duration::from_secs(10),
                "the hand-over committed by its caller was never flushed"
            );
            std::thread::sleep(std::time::Duration::from_millis(20));
        }
        drop(store);
    }

    #[test]
    fn a_failed_commit_poisons_the_store_until_reopened() {
        use cairn_storage_testkit::fault::{CrashModel, Fault};
        let (store, disk) = open(Durability::Immediate);
        create_thread(&store, "t", 1);
        disk.arm(Fault::at(disk.mutations(), CrashModel::IoErrorPersistent));
        let failed = store
            .append(cairn_storage::Batch { events: vec![event("t", 2)], ..Default::default() });
        let failed = failed.expect("queued").wait_blocking();
        assert!(matches!(failed, Err(Error::Storage { .. })), "{failed:?}");
        let after = store
            .append(cairn_storage::Batch { events: vec![event("t", 3)], ..Default::default() });
        assert!(matches!(after, Err(Error::Poisoned { .. })), "{after:?}");
        // Reads still work on what was committed.
        assert_eq!(store.read_since(&tid("t"), Seq(0), 10).wait().expect("read").len(), 1);
        drop(store);
        let store = RedbStore::with_backend(
            FaultBackend::from_image(disk.crash_image()),
            Options::default(),
        )
        .expect("reopen repairs");
        assert_eq!(events(&store, "t", 1).bookmarks[0].seq, Seq(2));
        assert!(store.verify().expect("verify").is_clean());
    }

    #[test]
    fn a_full_disk_is_a_typed_error_from_commits_and_opens() {
        // A commit that needs the file to grow on a full disk: DiskFull, then Poisoned.
        let (store, disk) = open(Durability::Immediate);
        create_thread(&store, "t", 1);
        disk.set_capacity(Some(disk.live_image().len() as u64));
        let big = cairn_storage::Batch {
            events: (2..200).map(|n| event("t", n)).collect(),
            payloads: vec![vec![7u8; 8 << 20]],
            ..Default::default()
        };
        let full = store.append(big).expect("queued").wait_blocking();
        assert!(matches!(full, Err(Error::DiskFull { .. })), "{full:?}");
        assert!(full.is_err_and(|e| !e.is_transient()), "permanent until space is freed");
        let after = store
            .append(cairn_storage::Batch { events: vec![event("t", 2)], ..Default::default() });
        assert!(matches!(after, Err(Error::Poisoned { .. })), "{after:?}");
        drop(store);
        // Space is freed: a reopen has everything acknowledged and accepts the next append.
        disk.set_capacity(None);
        let store = RedbStore::with_backend(
            FaultBackend::from_image(disk.crash_image()),
            Options::default(),
        )
        .expect("reopen");
        assert_eq!(events(&store, "t", 1).bookmarks[0].seq, Seq(2));

        // Creating a database on a full disk.
        let backend = FaultBackend::new();
        backend.controller().set_capacity(Some(0));
        let created = RedbStore::with_backend(backend, Options::default());
        assert!(matches!(created, Err(Error::DiskFull { .. })), "{created:?}");
    }

    /// A store that may reopen its database does so by itself once the disk has room: the
    /// refusal names the full disk and is watched; after `clear`, writes are taken again
    /// (everything acknowledged is there, the failed write is not), and the file verifies.
    #[test]
    fn a_full_disk_poisons_the_store_until_it_reopens_itself() {
        let backend = FaultBackend::new();
        let disk = backend.controller();
        let store = RedbStore::with_reopening_backend(backend, Options::default()).expect("open");
        create_thread(&store, "t", 1);
        let mut refusals = store.refusals().expect("a file store says when it refuses writes");
        disk.set_capacity(Some(disk.live_image().len() as u64));
        let big = cairn_storage::Batch {
            events: (2..200).map(|n| event("t", n)).collect(),
            payloads: vec![vec![7u8; 8 << 20]],
            ..Default::default()
        };
        let full = store.append(big).expect("queued").wait_blocking();
        assert!(matches!(full, Err(Error::DiskFull { .. })), "{full:?}");
        let after = store
            .append(cairn_storage::Batch { events: vec![event("t", 2)], ..Default::default() });
        let Err(Error::Poisoned { cause }) = &after else { panic!("{after:?}") };
        assert!(matches!(**cause, Error::DiskFull { .. }), "{cause:?}");
        assert!(after.unwrap_err().to_string().contains("poisoned by: disk full during"));
        assert!(refusals.borrow_and_update().is_some(), "the refusal is published");
        let database = store.database().expect("a failed commit is reported");
        assert!(!database.writable && database.reachable, "{database:?}");
        // Reads go on meanwhile.
        assert_eq!(store.read_since(&tid("t"), Seq(0), 10).wait().expect("read").len(), 1);

        disk.clear();
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        runtime.block_on(async {
            let cleared = refusals.wait_for(Option::is_none);
            tokio::time::timeout(std::time::Duration::from_secs(30), cleared)
                .await
                .expect("the store reopens within 30 s of the disk having room")
                .expect("open");
        });
        assert_eq!(events(&store, "t", 1).bookmarks[0].seq, Seq(2), "the failed write is absent");
        assert!(store.database().is_some_and(|d| d.writable));
        assert!(store.verify().expect("verify").is_clean());
    }
}
