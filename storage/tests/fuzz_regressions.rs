//! Replays the fuzz corpus and every saved crash input through the `record_decode` check, so the
//! default test suite guards what fuzzing found even on machines that never run the fuzzer.
//!
//! The check is compiled from the very file the fuzz target uses (`fuzz/src/record_decode.rs`).

#[path = "../../fuzz/src/record_decode.rs"]
mod record_decode;

use std::path::{Path, PathBuf};

fn files_under(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else { return out };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            out.extend(files_under(&path));
        } else if path.is_file() {
            out.push(path);
        }
    }
    out.sort();
    out
}

#[test]
fn corpus_and_artifacts_replay_without_panics() {
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz");
    let corpus = files_under(&fuzz.join("corpus/record_decode"));
    let artifacts = files_under(&fuzz.join("artifacts"));
    assert!(!corpus.is_empty(), "the record_decode corpus is checked in under fuzz/corpus/");
    for path in corpus.iter().chain(&artifacts) {
        let data = std::fs::read(path).expect("read corpus file");
        record_decode::check(&data);
    }
}

#[test]
fn corpus_holds_valid_records_of_every_kind() {
    // A corpus of only garbage would exercise nothing past the CRC; the seeds are real records.
    let fuzz = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus/record_decode");
    let mut kinds = std::collections::BTreeSet::new();
    for path in files_under(&fuzz) {
        let data = std::fs::read(&path).expect("read corpus file");
        for kind in cairn_storage::frame::RecordKind::ALL {
            if cairn_storage::frame::decode(&data, *kind).is_ok() {
                kinds.insert(kind.to_repr());
            }
        }
    }
    assert_eq!(kinds.len(), cairn_storage::frame::RecordKind::ALL.len(), "kinds seeded: {kinds:?}");
}
