//! Unit tests of the simulated disk: each crash model's image, counters, and a real redb on top.

use std::io::ErrorKind;

use ::redb::{ReadableDatabase, StorageBackend, TableDefinition};

use super::disk::SplitMix64;
use super::*;

const SECTOR: usize = 512;

/// A backend with `synced` durable, then `unsynced` written at `offset` without a sync.
fn disk_with(synced: &[u8], offset: u64, unsynced: &[u8]) -> (FaultBackend, FaultController) {
    let backend = FaultBackend::new();
    let controller = backend.controller();
    backend.write(0, synced).unwrap();
    backend.sync_data().unwrap();
    backend.write(offset, unsynced).unwrap();
    (backend, controller)
}

fn read_all(backend: &FaultBackend) -> Vec<u8> {
    let mut out = vec![0; usize::try_from(backend.len().unwrap()).unwrap()];
    backend.read(0, &mut out).unwrap();
    out
}

#[test]
fn writes_and_reads_like_a_file() {
    let backend = FaultBackend::new();
    assert_eq!(backend.len().unwrap(), 0);
    backend.write(4, b"abc").unwrap();
    assert_eq!(read_all(&backend), b"\0\0\0\0abc");
    backend.set_len(2).unwrap();
    backend.set_len(5).unwrap();
    assert_eq!(read_all(&backend), b"\0\0\0\0\0", "regrown bytes are zero");
    let mut past_end = [0u8; 4];
    let err = backend.read(3, &mut past_end).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::UnexpectedEof);
}

#[test]
fn counts_mutations_and_reads_separately() {
    let backend = FaultBackend::new();
    let controller = backend.controller();
    controller.record_ops(true);
    backend.set_len(8).unwrap();
    backend.write(0, b"x").unwrap();
    let mut one = [0u8; 1];
    backend.read(0, &mut one).unwrap();
    backend.sync_data().unwrap();
    let _ = backend.len().unwrap();
    assert_eq!(controller.mutations(), 3);
    assert_eq!(controller.reads(), 1);
    assert_eq!(
        controller.ops(),
        vec![
            OpKind::SetLen { from: 0, to: 8 },
            OpKind::Write { offset: 0, len: 1 },
            OpKind::Read { offset: 0, len: 1 },
            OpKind::Sync,
        ]
    );
}

#[test]
fn sync_makes_writes_and_regrowth_durable() {
    let backend = FaultBackend::new();
    let controller = backend.controller();
    backend.write(0, &[7; 16]).unwrap();
    backend.sync_data().unwrap();
    // Shrink and regrow: the durable image must see zeros, not the old sevens.
    backend.set_len(4).unwrap();
    backend.set_len(16).unwrap();
    assert_eq!(controller.durable_image(), vec![7; 16]);
    backend.sync_data().unwrap();
    let mut expected = vec![7; 4];
    expected.extend([0; 12]);
    assert_eq!(controller.durable_image(), expected);
    assert_eq!(controller.crash_image(), expected);
}

#[test]
fn kill_keeps_every_issued_write_and_nothing_after() {
    let (backend, controller) = disk_with(b"old!", 0, b"new!");
    controller.arm(Fault::at(3, CrashModel::Kill));
    let err = backend.write(4, b"late").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::Other);
    assert!(controller.is_dead());
    assert!(backend.sync_data().is_err(), "dead backend refuses later ops");
    assert!(backend.read(0, &mut [0u8; 1]).is_err());
    assert_eq!(controller.crash_image(), b"new!");
    let fired = controller.fired().unwrap();
    assert_eq!(fired.trigger, Trigger::Mutation(3));
    assert_eq!(fired.model, CrashModel::Kill);
}

#[test]
fn lose_unsynced_keeps_only_the_durable_image() {
    let (backend, controller) = disk_with(b"old!", 2, b"new!!!");
    controller.arm(Fault::at(3, CrashModel::LoseUnsynced));
    assert!(backend.sync_data().is_err());
    assert_eq!(controller.crash_image(), b"old!", "extension lost too");
}

#[test]
fn torn_write_lands_a_sector_prefix_on_the_durable_image() {
    let synced = vec![0xAA; 4 * SECTOR];
    let mut seen_cuts = std::collections::BTreeSet::new();
    for seed in 0..64 {
        let (backend, controller) = disk_with(&synced, 0, &[0xBB; 8]); // lost: not the faulting op
        controller.arm(Fault::at(3, CrashModel::TornWrite).with_seed(seed));
        // A write from the middle of sector 0 to the middle of sector 3.
        let offset = 100;
        let data = vec![0xCC; 3 * SECTOR];
        assert!(backend.write(offset, &data).is_err());
        let image = controller.crash_image();
        assert_eq!(image.len(), synced.len());
        assert_eq!(&image[..100], &synced[..100], "unsynced write elsewhere lost");
        let landed = image[100..].iter().take_while(|&&b| b == 0xCC).count();
        let cut = 100 + landed;
        assert!(
            [100, SECTOR, 2 * SECTOR, 3 * SECTOR, 100 + 3 * SECTOR].contains(&cut),
            "cut {cut} is not a sector boundary or an end"
        );
        assert!(image[cut..].iter().all(|&b| b == 0xAA), "after the cut: old data");
        seen_cuts.insert(cut);

        let again = {
            let (backend, controller) = disk_with(&synced, 0, &[0xBB; 8]);
            controller.arm(Fault::at(3, CrashModel::TornWrite).with_seed(seed));
            assert!(backend.write(offset, &data).is_err());
            controller.crash_image()
        };
        assert_eq!(again, image, "same seed, same image");
    }
    assert_eq!(seen_cuts.len(), 5, "every cut point reachable: {seen_cuts:?}");
}

#[test]
fn torn_write_drops_bytes_past_the_durable_length() {
    let (backend, controller) = disk_with(&[1; SECTOR], 0, &[]);
    // Find a seed that lands the whole write, which extends the file by one sector.
    let seed = (0..).find(|&s| SplitMix64::new(s).below(3) == 2).unwrap();
    controller.arm(Fault::at(controller.mutations(), CrashModel::TornWrite).with_seed(seed));
    assert!(backend.write(256, &[2; SECTOR]).is_err());
    let image = controller.crash_image();
    assert_eq!(image.len(), SECTOR, "the extension was never synced");
    assert!(image[256..].iter().all(|&b| b == 2));
}

#[test]
fn torn_write_at_a_non_write_is_lose_unsynced() {
    let (backend, controller) = disk_with(b"old!", 0, b"new!");
    controller.arm(Fault::at(3, CrashModel::TornWrite));
    assert!(backend.set_len(100).is_err());
    assert_eq!(controller.crash_image(), b"old!");
}

#[test]
fn reordered_applies_each_unsynced_write_whole_or_not_at_all() {
    let mut seen = std::collections::BTreeSet::new();
    for seed in 0..32 {
        let (backend, controller) = disk_with(b"aaaabbbb", 0, b"AAAA");
        backend.write(4, b"BBBB").unwrap();
        backend.write(0, b"CC").unwrap(); // overwrites part of the first write
        backend.write(8, b"tail").unwrap(); // past the durable length: dropped
        controller
            .arm(Fault::at(controller.mutations(), CrashModel::ReorderedUnsynced).with_seed(seed));
        assert!(backend.sync_data().is_err());
        let image = controller.crash_image();
        assert_eq!(image.len(), 8);
        let first = match &image[..4] {
            b"aaaa" => "-",
            b"AAAA" => "A",
            b"CCaa" => "C",
            b"CCAA" => "AC",
            other => panic!("seed {seed}: impossible prefix {other:?}"),
        };
        let second = match &image[4..] {
            b"bbbb" => "-",
            b"BBBB" => "B",
            other => panic!("seed {seed}: impossible suffix {other:?}"),
        };
        seen.insert((first, second));
    }
    assert_eq!(seen.len(), 8, "every subset reachable: {seen:?}");
}

#[test]
fn garbage_scrambles_exactly_the_unsynced_written_bytes() {
    let synced = vec![0u8; 3 * SECTOR];
    let (backend, controller) = disk_with(&synced, 10, &[0u8; SECTOR]);
    controller.arm(Fault::at(3, CrashModel::GarbageUnsynced).with_seed(7));
    assert!(backend.sync_data().is_err());
    let image = controller.crash_image();
    assert!(image[..10].iter().all(|&b| b == 0), "before the write: untouched");
    assert!(image[10 + SECTOR..].iter().all(|&b| b == 0), "after: untouched");
    let scrambled = image[10..10 + SECTOR].iter().filter(|&&b| b != 0).count();
    assert!(scrambled > SECTOR / 2, "garbage, not the written zeros");

    let (backend, controller) = disk_with(&synced, 10, &[0u8; SECTOR]);
    controller.arm(Fault::at(3, CrashModel::GarbageUnsynced).with_seed(7));
    assert!(backend.sync_data().is_err());
    assert_eq!(controller.crash_image(), image, "seeded");
}

#[test]
fn failed_sync_fires_at_the_first_sync_from_the_trigger() {
    let (backend, controller) = disk_with(b"old!", 0, b"new!");
    controller.arm(Fault::at(2, CrashModel::FailedSync));
    backend.write(0, b"more").unwrap(); // mutation 3: not a sync, proceeds
    assert!(controller.fired().is_none());
    assert!(backend.sync_data().is_err()); // mutation 4
    let fired = controller.fired().unwrap();
    assert_eq!(fired.trigger, Trigger::Mutation(4));
    assert_eq!(fired.op, OpKind::Sync);
    assert!(controller.is_dead());
    assert_eq!(controller.crash_image(), b"old!");
}

#[test]
fn transient_error_fails_one_op_only() {
    let (backend, controller) = disk_with(b"old!", 0, b"new!");
    controller.arm(Fault::at(3, CrashModel::IoErrorTransient));
    assert!(backend.write(0, b"lost").is_err());
    assert_eq!(read_all(&backend), b"new!", "failed op did nothing");
    backend.sync_data().unwrap();
    assert!(!controller.is_dead());
    assert_eq!(controller.crash_image(), b"new!");
}

#[test]
fn transient_error_on_a_read() {
    let (backend, controller) = disk_with(b"data", 0, b"");
    controller.arm(Fault::at_read(1, CrashModel::IoErrorTransient));
    let mut buf = [0u8; 4];
    backend.read(0, &mut buf).unwrap();
    assert!(backend.read(0, &mut buf).is_err());
    backend.read(0, &mut buf).unwrap();
    assert_eq!(&buf, b"data");
}

#[test]
fn persistent_error_fails_everything_until_cleared() {
    let (backend, controller) = disk_with(b"old!", 0, b"new!");
    controller.arm(Fault::at(3, CrashModel::IoErrorPersistent));
    assert!(backend.sync_data().is_err());
    assert!(backend.write(0, b"x").is_err());
    assert!(backend.read(0, &mut [0u8; 1]).is_err());
    assert_eq!(controller.crash_image(), b"old!");
    controller.clear();
    backend.sync_data().unwrap();
    assert_eq!(controller.crash_image(), b"new!");
}

#[test]
fn disk_full_refuses_growth_but_not_overwrites() {
    let (backend, controller) = disk_with(b"0123", 0, b"");
    controller.arm(Fault::at(controller.mutations(), CrashModel::DiskFull));
    let err = backend.set_len(8).unwrap_err();
    assert_eq!(err.kind(), ErrorKind::StorageFull);
    let err = backend.write(2, b"xyz").unwrap_err();
    assert_eq!(err.kind(), ErrorKind::StorageFull);
    backend.write(1, b"ab").unwrap();
    backend.sync_data().unwrap();
    assert_eq!(controller.crash_image(), b"0ab3");
    controller.clear();
    backend.set_len(8).unwrap();
}

#[test]
fn explicit_capacity() {
    let backend = FaultBackend::new();
    let controller = backend.controller();
    controller.set_capacity(Some(4));
    backend.write(0, b"1234").unwrap();
    assert_eq!(backend.write(4, b"5").unwrap_err().kind(), ErrorKind::StorageFull);
    controller.set_capacity(None);
    backend.write(4, b"5").unwrap();
}

#[test]
fn from_image_starts_fresh_and_can_crash_again() {
    let backend = FaultBackend::from_image(b"disk".to_vec());
    let controller = backend.controller();
    assert_eq!(controller.mutations(), 0);
    assert_eq!(controller.durable_image(), b"disk");
    controller.arm(Fault::at(1, CrashModel::LoseUnsynced));
    backend.write(0, b"DISK").unwrap();
    assert!(backend.sync_data().is_err());
    assert_eq!(controller.crash_image(), b"disk");
}

const TABLE: TableDefinition<'_, u64, &[u8]> = TableDefinition::new("t");

fn commit(db: &::redb::Database, key: u64) -> Result<(), ::redb::Error> {
    let txn = db.begin_write()?;
    {
        let mut table = txn.open_table(TABLE)?;
        table.insert(key, [key as u8; 300].as_slice())?;
    }
    txn.commit()?;
    Ok(())
}

/// redb on the backend: every model at every mutation of a small workload leaves an image that
/// reopens with each acknowledged commit intact (garbage may instead fail to open).
#[test]
fn redb_survives_every_model_at_every_mutation() {
    let clean = FaultBackend::new();
    let counter = clean.controller();
    {
        let db = ::redb::Database::builder().create_with_backend(clean).unwrap();
        for key in 0..4 {
            commit(&db, key).unwrap();
        }
    }
    let total = counter.mutations();
    assert!(total > 8, "a workload of {total} mutations is too small");
    let mut cases = 0;
    for op in 0..total {
        for model in CrashModel::ALL {
            let backend = FaultBackend::new();
            let controller = backend.controller();
            controller.arm(Fault::at(op, model).with_seed(op));
            let mut acked = Vec::new();
            if let Ok(db) = ::redb::Database::builder().create_with_backend(backend) {
                for key in 0..4 {
                    if commit(&db, key).is_err() {
                        break;
                    }
                    acked.push(key);
                }
            }
            cases += 1;
            let reopened = ::redb::Database::builder()
                .create_with_backend(FaultBackend::from_image(controller.crash_image()));
            let db = match reopened {
                Ok(db) => db,
                Err(_) if !model.within_redb_contract() => continue,
                Err(e) if acked.is_empty() => {
                    // Crashed while creating: no commit was acknowledged, an error is fine.
                    let _ = e;
                    continue;
                }
                Err(e) => panic!("{model} at {op}: reopen failed: {e}"),
            };
            let txn = db.begin_read().unwrap();
            let Ok(table) = txn.open_table(TABLE) else {
                assert!(acked.is_empty(), "{model} at {op}: table lost");
                continue;
            };
            for key in &acked {
                let value = table.get(key).unwrap().unwrap();
                assert_eq!(value.value(), [*key as u8; 300], "{model} at {op}");
            }
        }
    }
    assert_eq!(cases, total * CrashModel::ALL.len() as u64);
}
