//! Bad input: a missing file, a file that is not a Cairn database, a locked file, bad ids.
//! Each is a clear error, never a panic, and nothing is written.

use cairn_storage::{Append, ThreadLog};
use cairn_storage::{Error, Options, RedbStore, ThreadId};

use crate::common::*;

#[test]
fn a_missing_file_is_not_found_and_not_created() {
    let (_dir, path) = temp_db();
    assert!(
        matches!(RedbStore::open_existing(&path, fast()), Err(Error::NotFound(p)) if p == path)
    );
    assert!(matches!(RedbStore::open_read_only(&path), Err(Error::NotFound(_))));
    assert!(!path.exists());
}

#[test]
fn files_that_are_not_cairn_databases_are_refused_untouched() {
    let (_dir, path) = temp_db();
    let cases: Vec<Vec<u8>> = vec![
        b"hello, I am a text file\n".to_vec(),
        vec![0u8; 10_000],
        b"redb".to_vec(),
        (0..100_000u32).map(|n| (n.wrapping_mul(2_654_435_761) >> 13) as u8).collect(),
    ];
    for bytes in cases {
        std::fs::write(&path, &bytes).expect("write");
        for result in [
            RedbStore::open(&path, fast()).map(drop),
            RedbStore::open_existing(&path, fast()).map(drop),
            RedbStore::open_read_only(&path).map(drop),
        ] {
            assert!(matches!(result, Err(Error::NotCairn { .. })), "{result:?}");
        }
        assert_eq!(std::fs::read(&path).expect("read"), bytes, "the file was written to");
    }
}

#[test]
fn another_applications_redb_file_is_refused_untouched() {
    let (_dir, path) = temp_db();
    {
        let db = redb::Database::create(&path).expect("create");
        let txn = db.begin_write().expect("write");
        {
            let table: redb::TableDefinition<'_, &str, u64> = redb::TableDefinition::new("theirs");
            txn.open_table(table).expect("table").insert("k", 1).expect("insert");
        }
        txn.commit().expect("commit");
    }
    let before = std::fs::read(&path).expect("read");
    let result = RedbStore::open(&path, fast());
    assert!(matches!(result, Err(Error::NotCairn { .. })), "{result:?}");
    assert!(matches!(RedbStore::open_read_only(&path), Err(Error::NotCairn { .. })));
    assert_eq!(std::fs::read(&path).expect("read"), before);
    // An empty redb file (no tables) is not adopted by open_existing either.
    let (_dir2, empty) = temp_db();
    drop(redb::Database::create(&empty).expect("create"));
    assert!(matches!(RedbStore::open_existing(&empty, fast()), Err(Error::NotCairn { .. })));
}

#[test]
fn the_pre_release_v1_layout_is_refused_untouched() {
    // Before release, v1 keyed events by (thread, seq); such a file has Cairn's meta table but an
    // events table of another key type.
    let (_dir, path) = temp_db();
    {
        let db = redb::Database::create(&path).expect("create");
        let txn = db.begin_write().expect("write");
        {
            let mut meta = txn.open_table(crate::raw::META).expect("meta");
            meta.insert("magic", b"CAIRNDB".as_slice()).expect("magic");
            meta.insert("format_version", 1u16.to_le_bytes().as_slice()).expect("version");
            let old: redb::TableDefinition<'_, (&str, u64), &[u8]> =
                redb::TableDefinition::new("events");
            txn.open_table(old).expect("old events").insert(("t", 1), b"x".as_slice()).expect("x");
        }
        txn.commit().expect("commit");
    }
    let before = std::fs::read(&path).expect("read");
    for result in
        [RedbStore::open(&path, fast()).map(drop), RedbStore::open_read_only(&path).map(drop)]
    {
        assert!(
            matches!(&result, Err(Error::NotCairn { detail }) if detail.contains("pre-release")),
            "{result:?}"
        );
    }
    assert_eq!(std::fs::read(&path).expect("read"), before);
}

/// A zero-length file is not a database: every open leaves it as it is (it used to be
/// replaced by a new database, whatever it was: a placeholder, `/dev/null`), and only the
/// explicit `initialise` makes a database of it.
#[test]
fn an_empty_file_is_left_alone_until_initialised_and_create_refuses_existing_data() {
    let (_dir, path) = temp_db();
    std::fs::write(&path, b"").expect("write");
    for open in [RedbStore::open, RedbStore::create, RedbStore::open_existing] {
        let refused = open(&path, fast());
        assert!(matches!(refused, Err(Error::NotCairn { .. })), "{refused:?}");
    }
    assert!(matches!(RedbStore::open_read_only(&path), Err(Error::NotCairn { .. })));
    assert_eq!(std::fs::metadata(&path).expect("still there").len(), 0, "left as it was");
    let store = RedbStore::initialise(&path, fast()).expect("initialise an empty file");
    create_thread(&store, "t", 1);
    store.close().expect("close");
    assert!(matches!(RedbStore::create(&path, fast()), Err(Error::Invalid { .. })));
    let (_dir2, fresh) = temp_db();
    RedbStore::create(&fresh, fast()).expect("create").close().expect("close");
}

#[test]
fn a_locked_file_is_refused_while_read_only_snapshots_still_work() {
    let (_dir, path) = temp_db();
    let store = RedbStore::open(&path, Options::default()).expect("open");
    create_thread(&store, "t", 2);
    assert!(matches!(RedbStore::open(&path, fast()), Err(Error::Locked)));
    assert!(matches!(RedbStore::open_existing(&path, fast()), Err(Error::Locked)));
    let snapshot = RedbStore::open_read_only(&path).expect("snapshot beside the writer");
    assert_eq!(
        snapshot.read_since(&tid("t"), cairn_storage::Seq(0), 10).wait().expect("read").len(),
        2
    );
    let refused =
        snapshot.append(cairn_storage::Batch { events: vec![event("t", 3)], ..Default::default() });
    assert!(matches!(refused, Err(Error::ReadOnly)));
    // The writer is unaffected by the snapshot.
    events(&store, "t", 1);
    store.close().expect("close");
    RedbStore::open(&path, fast()).expect("open after close");
}

#[test]
fn a_file_no_writer_holds_is_read_in_place_and_a_held_one_is_refused_up_front() {
    let (dir, path) = temp_db();
    let store = RedbStore::open(&path, Options::default()).expect("open");
    create_thread(&store, "t", 2);
    assert!(matches!(RedbStore::open_read_only_in_place(&path), Err(Error::Locked)));
    // A copy taken while the writer runs was not shut down cleanly: redb may not repair it in
    // place, so it is read as a snapshot.
    let unclean = dir.path().join("unclean.db");
    std::fs::copy(&path, &unclean).expect("copy");
    let repaired = RedbStore::open_read_only_in_place(&unclean).expect("read as a snapshot");
    assert_eq!(
        repaired.read_since(&tid("t"), cairn_storage::Seq(0), 10).wait().expect("read").len(),
        2
    );
    store.close().expect("close");
    let before = std::fs::read(&path).expect("bytes");
    let reader = RedbStore::open_read_only_in_place(&path).expect("in place");
    assert_eq!(
        reader.read_since(&tid("t"), cairn_storage::Seq(0), 10).wait().expect("read").len(),
        2
    );
    let refused =
        reader.append(cairn_storage::Batch { events: vec![event("t", 3)], ..Default::default() });
    assert!(matches!(refused, Err(Error::ReadOnly)));
    // Its shared lock keeps a writer out until it is dropped.
    assert!(matches!(RedbStore::open(&path, fast()), Err(Error::Locked)));
    drop(reader);
    assert_eq!(std::fs::read(&path).expect("bytes"), before, "nothing written");
    RedbStore::open(&path, fast()).expect("open after the reader");
}

#[test]
fn bad_ids_are_errors() {
    assert!(matches!(ThreadId::new(""), Err(Error::Invalid { .. })));
    assert!(matches!(ThreadId::new("a\u{0}b"), Err(Error::Invalid { .. })));
    assert!(matches!(
        ThreadId::new("x".repeat(129)),
        Err(Error::LimitExceeded { limit: "THREAD_ID_BYTES_MAX", value: 129, max: 128 })
    ));
    assert!(ThreadId::new("x".repeat(128)).is_ok());
    assert!(serde_json::from_str::<ThreadId>("\"\"").is_err());
}
