//! T5 regressions: every checked-in corpus input and crash artifact of this suite's fuzz targets
//! (`bundle_import`, `dsl_builder`, `snapshot_decode`), replayed through exactly the code the
//! fuzzer runs; every bundle the reader accepts is also imported into a database and exported
//! again.

use std::path::Path;

#[path = "fuzz_checks/bundle_import.rs"]
mod bundle_import;
#[path = "fuzz_checks/dsl_builder.rs"]
mod dsl_builder;
#[path = "fuzz_checks/snapshot_decode.rs"]
mod snapshot_decode;

use crate::env::report;

fn fuzz_dir() -> std::path::PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz")
}

/// The target's corpus files, then its crash artifacts, each in name order.
fn inputs(target: &str) -> Vec<Vec<u8>> {
    let root = fuzz_dir();
    let mut out = Vec::new();
    for dir in [root.join("corpus").join(target), root.join("artifacts").join(target)] {
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut files: Vec<_> = entries.filter_map(Result::ok).map(|e| e.path()).collect();
        files.sort();
        for file in files.into_iter().filter(|f| f.is_file()) {
            out.push(std::fs::read(&file).expect("read a corpus file"));
        }
    }
    out
}

#[test]
fn t5_fuzz_corpus_replays() {
    let dsl = inputs("dsl_builder");
    let snap = inputs("snapshot_decode");
    for input in &dsl {
        dsl_builder::check(input);
    }
    for input in &snap {
        snapshot_decode::check(input);
    }
    let bundles = inputs("bundle_import");
    let accepted: Vec<_> = bundles.iter().filter_map(|input| bundle_import::check(input)).collect();
    // The checked-in seeds are real exports; crash artifacts are mutated ones, whose state need
    // not follow from their events.
    let seeds =
        std::fs::read_dir(fuzz_dir().join("corpus/bundle_import")).map_or(0, Iterator::count);
    let imported = import_all(&accepted, seeds);
    report(&format!(
        "RELIABILITY T5_corpus dsl_builder_inputs={} snapshot_decode_inputs={} \
         bundle_import_inputs={} bundles_accepted={} bundles_imported={imported} panics=0",
        dsl.len(),
        snap.len(),
        bundles.len(),
        accepted.len(),
    ));
    assert!(
        !dsl.is_empty() && !snap.is_empty() && !bundles.is_empty(),
        "the corpora are checked in"
    );
    assert_eq!(imported, accepted.len(), "every accepted bundle imports");
    assert!(dsl.iter().any(|d| dsl_builder::builds(d)), "some dsl_builder seed builds a workflow");
}

/// Imports each bundle into a fresh database that knows the seed workflow, then exports it
/// again: a bundle the reader accepts is written whole (import fails only on storage errors),
/// and the first `real` (real exports, not redacted) come back with the same events and state.
/// Returns how many imported.
fn import_all(bundles: &[cairn_tools::debug::Bundle], real: usize) -> usize {
    let runtime =
        tokio::runtime::Builder::new_current_thread().enable_all().build().expect("runtime");
    runtime.block_on(async {
        let wf = bundle_import::workflow();
        let mut imported = 0;
        for (i, bundle) in bundles.iter().enumerate() {
            let (builder, _clock) = cairn_testkit::deterministic_engine(1).expect("engine");
            let engine = builder
                .workflow(&wf)
                .recovery(cairn::RecoveryPolicy::Park)
                .open()
                .await
                .expect("open");
            let id = cairn_tools::Operator::new(&engine)
                .import_bundle(bundle)
                .await
                .expect("an accepted bundle imports");
            imported += 1;
            let again = cairn_tools::Operator::new(&engine)
                .export_bundle(id.as_str(), &cairn_tools::debug::ExportOptions::default())
                .await;
            if i < real && bundle.metadata.redaction.secrets == 0 {
                let again = again.expect("the imported thread exports");
                assert_eq!(again.events, bundle.events, "events survive import and export");
                assert_eq!(again.state, bundle.state, "state survives import and export");
            }
            engine.shutdown().await;
        }
        imported
    })
}

/// Writes the seed corpora (run by hand: `CAIRN_REL_WRITE_CORPUS=1 cargo test -p cairn
/// --test reliability t5_write_seed_corpus -- --ignored`).
#[test]
#[ignore = "writes the seed corpora; run by hand"]
fn t5_write_seed_corpus() {
    if std::env::var("CAIRN_REL_WRITE_CORPUS").is_err() {
        return;
    }
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("../fuzz/corpus");
    let write = |target: &str, name: String, bytes: &[u8]| {
        let dir = root.join(target);
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::write(dir.join(name), bytes).expect("write");
    };
    // A valid linear workflow, a fan-out with a join, a route, and a few invalid shapes.
    let dsl: [&[u8]; 6] = [
        &[1, 0, 0, 0, 2, 5, 0, 2, 0, 6],
        &[1, 0, 0, 0, 0, 1, 0, 2, 2, 5, 0, 3, 0, 2, 1, 2, 4, 2, 1, 2, 3, 0, 3, 2, 3, 6],
        &[2, 1, 0, 0, 0, 1, 2, 5, 0, 5, 0, 2, 1, 6, 7, 0, 3, 2, 1, 6],
        &[0, 7, 0, 7, 2, 7, 6],
        &[1, 0, 8, 0, 9, 1, 2, 5, 0, 2, 0, 1, 2, 1, 6, 10, 2, 11, 2, 0, 1],
        &[1, 0, 1, 0, 15, 3, 2, 5, 0, 2, 0, 6, 6, 0, 2, 1, 6],
    ];
    for (i, bytes) in dsl.iter().enumerate() {
        write("dsl_builder", format!("seed-{i}"), bytes);
    }
    for (i, snapshot) in snapshot_decode::seed_snapshots().iter().enumerate() {
        write("snapshot_decode", format!("snapshot-{i}"), snapshot);
    }
    for (i, body) in snapshot_decode::seed_bodies().iter().enumerate() {
        write("snapshot_decode", format!("body-{i}"), body);
    }
    for (i, bundle) in bundle_import::seed_bundles().iter().enumerate() {
        write("bundle_import", format!("bundle-{i}"), bundle);
    }
}
