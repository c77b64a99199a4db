//! The thread search index (format v5, `docs/search.md`): `list_threads` and
//! `list_threads_after` with labels and a status answer exactly what a scan of every record
//! answers, in the same order and pages, while labels and statuses change and threads are
//! deleted; verify finds a stale entry; a v4 file is migrated at open; a filter of several
//! labels answers the same whatever their order, at the cost of its rarest label; and the cost
//! of a filter over 100,000 threads (`SEARCH_BENCH=1`).

use cairn_storage::{
    Batch, Catalog, DeleteOptions, Maintenance, Page, Store, ThreadFilter, ThreadId, ThreadStatus,
};
use redb::ReadableTable;

use crate::common::*;
use crate::raw;

use crate::raw::{INDEX, Part, index_key};

/// The `index` key of thread `thread`'s label `k` = `v`.
fn label_key(k: &str, v: &str, thread: &str) -> Vec<u8> {
    index_key(5, &[Part::Str(k), Part::Str(v), Part::Raw(thread.as_bytes())])
}

/// Thread `s-NN`: customer c-(NN % 3), tier gold for every fifth, paused for every even one.
fn searchable(i: usize) -> cairn_storage::ThreadRecord {
    let mut record = thread_record(&format!("s-{i:02}"));
    record.labels.insert("customer".into(), format!("c-{}", i % 3));
    if i.is_multiple_of(5) {
        record.labels.insert("tier".into(), "gold".into());
    }
    if i.is_multiple_of(2) {
        record.status = ThreadStatus::Paused;
    }
    record
}

fn filter(status: Option<ThreadStatus>, labels: &[(&str, &str)]) -> ThreadFilter {
    let mut f = ThreadFilter { status, ..ThreadFilter::default() };
    for (k, v) in labels {
        f = f.label(*k, *v);
    }
    f
}

fn ids(records: &[cairn_storage::ThreadRecord]) -> Vec<String> {
    records.iter().map(|r| r.id.to_string()).collect()
}

/// Every way of listing `filter` answers what filtering a scan of all records answers.
fn same_as_scan<S: Store>(store: &S, f: &ThreadFilter) {
    let all = store.list_threads(&ThreadFilter::default(), Page { limit: 1_000, offset: 0 });
    let want: Vec<String> = all
        .wait()
        .unwrap()
        .into_iter()
        .filter(|r| f.matches(r))
        .map(|r| r.id.to_string())
        .collect();
    let listed = store.list_threads(f, Page { limit: 1_000, offset: 0 }).wait().unwrap();
    assert_eq!(ids(&listed), want, "{f:?}");
    let paged = store.list_threads(f, Page { limit: 2, offset: 1 }).wait().unwrap();
    assert_eq!(ids(&paged), want.iter().skip(1).take(2).cloned().collect::<Vec<_>>(), "{f:?}");
    let mut walked = Vec::new();
    let mut after: Option<ThreadId> = None;
    loop {
        let page = store.list_threads_after(f, after.as_ref(), 2).wait().unwrap();
        walked.extend(ids(&page));
        match page.last() {
            Some(last) if page.len() == 2 => after = Some(last.id.clone()),
            _ => break,
        }
    }
    assert_eq!(walked, want, "{f:?} by cursor");
}

/// The contract, on any backend.
pub fn search_contract<S: Store>(store: &S) {
    let threads = (0..30).map(searchable).collect();
    append(store, Batch { threads, ..Batch::default() });
    let filters = [
        filter(None, &[("customer", "c-1")]),
        filter(None, &[("customer", "c-0"), ("tier", "gold")]),
        filter(None, &[("tier", "gold"), ("customer", "c-0")]),
        filter(Some(ThreadStatus::Paused), &[]),
        filter(Some(ThreadStatus::Paused), &[("customer", "c-2")]),
        filter(Some(ThreadStatus::Created), &[("tier", "gold")]),
        filter(None, &[("customer", "nobody")]),
        filter(Some(ThreadStatus::Failed), &[]),
    ];
    let check = || filters.iter().for_each(|f| same_as_scan(store, f));
    check();
    let gold = store.list_threads(&filters[1], Page { limit: 100, offset: 0 }).wait().unwrap();
    assert_eq!(ids(&gold), ["s-00", "s-15"]);
    // Labels and statuses change: the index follows every write.
    let mut moved = searchable(3);
    moved.labels.insert("customer".into(), "c-2".into());
    moved.labels.insert("tier".into(), "gold".into());
    let mut plain = searchable(5);
    plain.labels.remove("tier");
    plain.status = ThreadStatus::Failed;
    let mut paused = searchable(1);
    paused.status = ThreadStatus::Paused;
    append(store, Batch { threads: vec![moved, plain, paused], ..Batch::default() });
    check();
    let failed = store.list_threads(&filters[7], Page { limit: 100, offset: 0 }).wait().unwrap();
    assert_eq!(ids(&failed), ["s-05"]);
    // A deleted thread leaves the index.
    for id in ["s-00", "s-05"] {
        store
            .delete_thread(&tid(id), DeleteOptions { force: true })
            .unwrap()
            .wait_blocking()
            .unwrap();
    }
    check();
    let gold = store.list_threads(&filters[1], Page { limit: 100, offset: 0 }).wait().unwrap();
    assert_eq!(ids(&gold), ["s-15"]);
    let report = store.verify().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
}

/// Thread `o-NNN` of `n`: `common=yes` on all, `mid=m` on every third, `rare=r` on ten of
/// them (every `n / 10 + 1`th), paused for every even one.
fn ordered(i: usize, n: usize) -> cairn_storage::ThreadRecord {
    let mut record = thread_record(&format!("o-{i:06}"));
    record.labels.insert("common".into(), "yes".into());
    if i.is_multiple_of(3) {
        record.labels.insert("mid".into(), "m".into());
    }
    if i.is_multiple_of(n / 10 + 1) {
        record.labels.insert("rare".into(), "r".into());
    }
    if i.is_multiple_of(2) {
        record.status = ThreadStatus::Paused;
    }
    record
}

/// Appends threads `ordered(0..n)`, a thousand a batch.
fn append_ordered<S: Store>(store: &S, n: usize) {
    for start in (0..n).step_by(1_000) {
        let threads = (start..(start + 1_000).min(n)).map(|i| ordered(i, n)).collect();
        append(store, Batch { threads, ..Batch::default() });
    }
}

/// Every order of the labels of a filter answers the same threads in the same order and
/// pages (whichever label a backend walks).
pub fn label_order_contract<S: Store>(store: &S) {
    append_ordered(store, 600);
    let labels = [("common", "yes"), ("mid", "m"), ("rare", "r")];
    let orders = [[0, 1, 2], [0, 2, 1], [1, 0, 2], [1, 2, 0], [2, 0, 1], [2, 1, 0]];
    for status in [None, Some(ThreadStatus::Paused)] {
        for pair in [[0, 2], [2, 0], [0, 1], [1, 0], [1, 2], [2, 1]] {
            same_as_scan(store, &filter(status, &pair.map(|i| labels[i])));
        }
        let mut answers = Vec::new();
        for order in orders {
            let f = filter(status, &order.map(|i| labels[i]));
            same_as_scan(store, &f);
            let page = Page { limit: 2, offset: 1 };
            answers.push(ids(&store.list_threads(&f, page).wait().unwrap()));
        }
        assert!(answers.windows(2).all(|w| w[0] == w[1]), "{answers:?}");
        // All three: o-000000, o-000183, o-000366, o-000549; paused: the even ones.
        assert_eq!(answers[0].len(), if status.is_none() { 2 } else { 1 }, "{answers:?}");
    }
}

/// The best of five times of a page of 100 of a filter whose first label is on every one of
/// `n` threads and whose second on ten of them, and of the same filter the other way round.
pub fn label_order_times<S: Store>(
    store: &S,
    n: usize,
) -> (std::time::Duration, std::time::Duration) {
    append_ordered(store, n);
    let page = Page { limit: 100, offset: 0 };
    let time = |f: &ThreadFilter| {
        let started = std::time::Instant::now();
        let found = store.list_threads(f, page).wait().unwrap();
        assert_eq!(found.len(), 10);
        started.elapsed()
    };
    let common = filter(None, &[("common", "yes"), ("rare", "r")]);
    let rare = filter(None, &[("rare", "r"), ("common", "yes")]);
    // The best of seven each, taken in turns, so that a busy spell of the machine falls on
    // both orders alike.
    let (mut common_first, mut rare_first) = (std::time::Duration::MAX, std::time::Duration::MAX);
    for _ in 0..7 {
        common_first = common_first.min(time(&common));
        rare_first = rare_first.min(time(&rare));
    }
    (common_first, rare_first)
}

/// Reports the times of [`label_order_times`] and checks the common-first filter costs about
/// what the rare-first one does: both walk the rare label.
fn check_label_order_times<S: Store>(store: &S, backend: &str) {
    let n = if std::env::var("SEARCH_BENCH").is_ok_and(|v| v == "1") { 100_000 } else { 5_000 };
    let (common_first, rare_first) = label_order_times(store, n);
    eprintln!(
        "SEARCH backend={backend} threads={n} labels=common,rare common_first_ms={:.2} \
         rare_first_ms={:.2}",
        common_first.as_secs_f64() * 1e3,
        rare_first.as_secs_f64() * 1e3
    );
    let bound = rare_first * 3 + std::time::Duration::from_millis(2);
    assert!(
        common_first < bound,
        "common first {common_first:?}, rare first {rare_first:?}: not from the rarest label"
    );
}

#[test]
fn a_filter_answers_the_same_whatever_the_order_of_its_labels() {
    let (_dir, _path, store) = open_fast();
    label_order_contract(&store);
    let (_dir, _path, store) = open_fast();
    check_label_order_times(&store, "redb");
}

#[test]
fn the_redb_index_answers_what_a_scan_answers() {
    let (_dir, _path, store) = open_fast();
    search_contract(&store);
}

#[test]
fn verify_reports_stale_and_missing_index_entries() {
    let (_dir, path, store) = open_fast();
    append(&store, Batch { threads: vec![searchable(1), searchable(2)], ..Batch::default() });
    store.close().expect("close");
    raw::write(&path, |txn| {
        let mut index = txn.open_table(INDEX).expect("index");
        index.insert(label_key("customer", "c-9", "s-01").as_slice(), &[][..]).expect("stale");
        let missing = label_key("customer", "c-2", "s-02");
        assert!(index.remove(missing.as_slice()).expect("missing").is_some());
        let failed = index_key(4, &[Part::Raw(&[ThreadStatus::Failed as u8]), Part::Raw(b"s-01")]);
        index.insert(failed.as_slice(), &[][..]).expect("stale");
    });
    let store = cairn_storage::RedbStore::open(&path, fast()).expect("open");
    let report = store.verify().unwrap();
    let found: Vec<(&str, Option<String>)> = report
        .problems
        .iter()
        .map(|p| (p.table, p.thread.as_ref().map(|t| t.to_string())))
        .collect();
    assert_eq!(
        found,
        [
            ("index", Some("s-01".into())),
            ("index", Some("s-01".into())),
            ("index", Some("s-02".into())),
        ],
        "{:?}",
        report.problems
    );
    // The index narrows only: a stale entry never lists a thread that does not match.
    let stale = filter(None, &[("customer", "c-9")]);
    assert!(store.list_threads(&stale, Page { limit: 10, offset: 0 }).wait().unwrap().is_empty());
    // An entry of a thread with no record fails the listing closed, naming the index.
    store.close().expect("close");
    raw::write(&path, |txn| {
        let mut index = txn.open_table(INDEX).expect("index");
        index.insert(label_key("customer", "c-9", "ghost").as_slice(), &[][..]).expect("orphan");
    });
    let store = cairn_storage::RedbStore::open(&path, fast()).expect("open");
    let listed = store.list_threads(&stale, Page { limit: 10, offset: 0 }).wait();
    assert!(
        matches!(listed, Err(cairn_storage::Error::Corrupted { table: "index", .. })),
        "{listed:?}"
    );
    let report = store.verify().unwrap();
    assert!(report.problems.iter().any(|p| p.detail.contains("ghost")), "{:?}", report.problems);
}

/// Ranges longer than the choice steps through (`CHOOSE_STEPS_MAX`, 4,096): a label and a
/// status that every one of 5,000 threads has, with a third that only some have, list what a
/// scan lists, by page and by cursor.
#[test]
fn dense_ranges_list_what_a_scan_lists() {
    let (_dir, _path, store) = open_fast();
    for start in (0..5_000).step_by(1_000) {
        let threads = (start..start + 1_000)
            .map(|i| {
                let mut r = thread_record(&format!("d-{i:05}"));
                r.labels.insert("env".into(), "prod".into());
                if i % 7 == 3 {
                    r.labels.insert("team".into(), "a".into());
                }
                r
            })
            .collect();
        append(&store, Batch { threads, ..Batch::default() });
    }
    same_as_scan_paged(&store, &filter(Some(ThreadStatus::Created), &[("env", "prod")]), 5_000);
    same_as_scan_paged(&store, &filter(None, &[("env", "prod"), ("team", "a")]), 714);
    same_as_scan_paged(&store, &filter(Some(ThreadStatus::Created), &[("team", "a")]), 714);
}

fn same_as_scan_paged<S: Store>(store: &S, f: &ThreadFilter, expected: usize) {
    let all = store.list_threads(&ThreadFilter::default(), Page { limit: 10_000, offset: 0 });
    let want: Vec<String> = all
        .wait()
        .unwrap()
        .into_iter()
        .filter(|r| f.matches(r))
        .map(|r| r.id.to_string())
        .collect();
    assert_eq!(want.len(), expected);
    let listed = store.list_threads(f, Page { limit: 10_000, offset: 0 }).wait().unwrap();
    assert_eq!(ids(&listed), want);
    let middle = store.list_threads(f, Page { limit: 100, offset: 600 }).wait().unwrap();
    assert_eq!(ids(&middle), want.iter().skip(600).take(100).cloned().collect::<Vec<_>>());
    let mut walked = Vec::new();
    let mut after: Option<ThreadId> = None;
    loop {
        let page = store.list_threads_after(f, after.as_ref(), 1_000).wait().unwrap();
        walked.extend(ids(&page));
        match page.last() {
            Some(last) if page.len() == 1_000 => after = Some(last.id.clone()),
            _ => break,
        }
    }
    assert_eq!(walked, want);
}

#[test]
fn a_v4_file_is_migrated_at_open() {
    let (_dir, path) = temp_db();
    let store = cairn_storage::RedbStore::open(&path, fast()).expect("open");
    append(&store, Batch { threads: (0..12).map(searchable).collect(), ..Batch::default() });
    store.close().expect("close");
    raw::write(&path, |txn| {
        raw::rows_to_v6_tables(txn);
        txn.delete_table(INDEX).expect("delete");
        let mut meta = txn.open_table(raw::META).expect("meta");
        meta.insert("format_version", 4u16.to_le_bytes().as_slice()).expect("version 4");
    });
    assert_eq!(raw::format_version(&path), 4);
    let gold = filter(None, &[("tier", "gold")]);
    let before = std::fs::read(&path).expect("read");
    let snapshot = cairn_storage::RedbStore::open_read_only(&path).expect("read-only open of v4");
    let listed = snapshot.list_threads(&gold, Page { limit: 10, offset: 0 }).wait().unwrap();
    assert_eq!(ids(&listed), ["s-00", "s-05", "s-10"]);
    assert!(snapshot.verify().expect("verify").is_clean());
    drop(snapshot);
    assert_eq!(std::fs::read(&path).expect("read"), before, "the file is untouched");
    let store = cairn_storage::RedbStore::open(&path, fast()).expect("the v4 file opens");
    let listed = store.list_threads(&gold, Page { limit: 10, offset: 0 }).wait().unwrap();
    assert_eq!(ids(&listed), ["s-00", "s-05", "s-10"]);
    let report = store.verify().unwrap();
    assert!(report.is_clean(), "{:?}", report.problems);
    store.close().expect("close");
    assert_eq!(raw::format_version(&path), cairn_storage::FORMAT_VERSION, "through every version");
}

/// Creates `n` threads (10 of them customer=c-9) in batches, then times the label filter
/// through the index, and what it cost before format v5: every record read (10,000 a page, in
/// id order) and matched against the labels. Returns (scan, index).
pub fn measure<S: Store>(store: &S, n: usize) -> (std::time::Duration, std::time::Duration) {
    let every = n / 10;
    for start in (0..n).step_by(1_000) {
        let threads = (start..(start + 1_000).min(n))
            .map(|i| {
                let mut r = thread_record(&format!("b-{i:06}"));
                r.labels.insert("customer".into(), format!("x-{}", i % 1_000));
                if i.is_multiple_of(every) {
                    r.labels.insert("customer".into(), "c-9".into());
                }
                r
            })
            .collect();
        append(store, Batch { threads, ..Batch::default() });
    }
    let page = Page { limit: 100, offset: 0 };
    let by_label = filter(None, &[("customer", "c-9")]);
    let index = || store.list_threads(&by_label, page).wait().unwrap();
    let scan = || {
        let (mut found, mut after) = (Vec::new(), None::<ThreadId>);
        loop {
            let all = ThreadFilter::default();
            let page = store.list_threads_after(&all, after.as_ref(), 10_000).wait().unwrap();
            after = page.last().map(|r| r.id.clone());
            let done = page.len() < 10_000;
            found.extend(page.into_iter().filter(|r| by_label.labels_match(r)));
            if done {
                return found;
            }
        }
    };
    let best = |list: &dyn Fn() -> Vec<cairn_storage::ThreadRecord>| {
        let mut times = Vec::new();
        for _ in 0..3 {
            let started = std::time::Instant::now();
            let found = list();
            times.push(started.elapsed());
            assert_eq!(ids(&found), ids(&index()));
            assert_eq!(found.len(), 10);
        }
        times.into_iter().min().expect("three runs")
    };
    (best(&scan), best(&index))
}

#[test]
fn a_label_filter_over_many_threads_costs_its_matches() {
    let n = if std::env::var("SEARCH_BENCH").is_ok_and(|v| v == "1") { 100_000 } else { 5_000 };
    let (_dir, _path, store) = open_fast();
    let (scan, index) = measure(&store, n);
    eprintln!(
        "SEARCH backend=redb threads={n} matches=10 scan_ms={:.2} index_ms={:.2}",
        scan.as_secs_f64() * 1e3,
        index.as_secs_f64() * 1e3
    );
    assert!(index < scan, "the index ({index:?}) is no faster than a scan ({scan:?})");
}

#[cfg(feature = "postgres")]
mod pg {
    use cairn_storage::{Catalog, Durability, Maintenance, Page, PgStore, ThreadFilter};
    use cairn_storage_testkit::pg_cluster::Cluster;

    use super::{check_label_order_times, label_order_contract};
    use super::{filter, ids, measure, search_contract, searchable};

    /// Several labels in any order answer the same; the listing starts from the rarest.
    #[test]
    fn a_postgres_filter_starts_from_its_rarest_label() {
        let Some(cluster) = Cluster::start("search_pg_label_order") else { return };
        let store = PgStore::connect(&cluster.new_database(), Durability::Immediate).unwrap();
        label_order_contract(&store);
        let store = PgStore::connect(&cluster.new_database(), Durability::Immediate).unwrap();
        check_label_order_times(&store, "postgres");
    }
    use crate::common::append;

    #[test]
    fn the_postgres_label_index_answers_what_a_scan_answers() {
        let Some(cluster) = Cluster::start("search_pg_contract") else { return };
        let store = PgStore::connect(&cluster.new_database(), Durability::Immediate).unwrap();
        search_contract(&store);
    }

    /// A stale label row and a wrong status column are reported; a format-4 database (no label
    /// table) is filled at connect and moved to format 5, by one of two stores connecting.
    #[test]
    fn postgres_verify_and_the_v4_migration() {
        let Some(cluster) = Cluster::start("search_pg_verify_migrate") else { return };
        let url = cluster.new_database();
        let store = PgStore::connect(&url, Durability::Immediate).unwrap();
        let batch = cairn_storage::Batch {
            threads: (0..12).map(searchable).collect(),
            ..cairn_storage::Batch::default()
        };
        append(&store, batch);
        let mut sql = postgres::Client::connect(&url, postgres::NoTls).unwrap();
        sql.batch_execute(
            "INSERT INTO cairn_thread_labels VALUES ('s-01', 'stale', 'yes'); \
             UPDATE cairn_threads SET status = 'failed' WHERE id = 's-02'; \
             DELETE FROM cairn_thread_labels WHERE thread = 's-03'",
        )
        .unwrap();
        let report = store.verify().unwrap();
        let found: Vec<(&str, String)> = report
            .problems
            .iter()
            .map(|p| (p.table, p.thread.as_ref().map(ToString::to_string).unwrap_or_default()))
            .collect();
        assert_eq!(
            found,
            [
                ("threads_by_label", "s-01".into()),
                ("threads_by_label", "s-03".into()),
                ("threads_by_status", "s-02".into())
            ],
            "{:?}",
            report.problems
        );
        drop(store);
        sql.batch_execute(
            "DROP TABLE cairn_thread_labels; \
             UPDATE cairn_threads SET status = 'paused' WHERE id = 's-02'; \
             UPDATE cairn_meta SET value = 4 WHERE key = 'format_version'",
        )
        .unwrap();
        let (a, b) = std::thread::scope(|s| {
            let one = s.spawn(|| PgStore::connect(&url, Durability::Immediate).unwrap());
            let two = s.spawn(|| PgStore::connect(&url, Durability::Immediate).unwrap());
            (one.join().unwrap(), two.join().unwrap())
        });
        drop(b);
        let gold = filter(None, &[("tier", "gold")]);
        let listed = a.list_threads(&gold, Page { limit: 10, offset: 0 }).wait().unwrap();
        assert_eq!(ids(&listed), ["s-00", "s-05", "s-10"]);
        let report = a.verify().unwrap();
        assert!(report.is_clean(), "{:?}", report.problems);
        let format: i64 = sql
            .query_one("SELECT value FROM cairn_meta WHERE key = 'format_version'", &[])
            .unwrap()
            .get(0);
        assert_eq!(format, i64::from(cairn_storage::PG_FORMAT_VERSION));
        let all = a.list_threads(&ThreadFilter::default(), Page { limit: 100, offset: 0 });
        assert_eq!(all.wait().unwrap().len(), 12);
    }

    #[test]
    fn a_label_filter_over_many_threads_on_postgres() {
        let Some(cluster) = Cluster::start("search_pg_measure") else { return };
        let n = if std::env::var("SEARCH_BENCH").is_ok_and(|v| v == "1") { 100_000 } else { 5_000 };
        let store = PgStore::connect(&cluster.new_database(), Durability::Immediate).unwrap();
        let (scan, index) = measure(&store, n);
        eprintln!(
            "SEARCH backend=postgres threads={n} matches=10 scan_ms={:.2} index_ms={:.2}",
            scan.as_secs_f64() * 1e3,
            index.as_secs_f64() * 1e3
        );
        assert!(index < scan, "the index ({index:?}) is no faster than a scan ({scan:?})");
    }
}

/// A damaged thread record does not keep a v4 file from opening: the migration leaves it out
/// of the index, the other threads are listed through it, and verify names the damaged one.
#[test]
fn a_damaged_record_is_left_out_of_the_v4_migration() {
    let (_dir, path) = temp_db();
    let store = cairn_storage::RedbStore::open(&path, fast()).expect("open");
    append(&store, Batch { threads: (0..6).map(searchable).collect(), ..Batch::default() });
    store.close().expect("close");
    raw::write(&path, |txn| {
        raw::rows_to_v6_tables(txn);
        txn.delete_table(INDEX).expect("delete");
        let mut threads = txn.open_table(raw::THREADS).expect("threads");
        let mut bytes = threads.get("s-05").expect("get").expect("s-05").value().to_vec();
        let last = bytes.len() - 1;
        bytes[last] ^= 0xff;
        threads.insert("s-05", bytes.as_slice()).expect("damage");
        let mut meta = txn.open_table(raw::META).expect("meta");
        meta.insert("format_version", 4u16.to_le_bytes().as_slice()).expect("version 4");
    });
    let store = cairn_storage::RedbStore::open(&path, fast()).expect("the v4 file opens");
    let gold = filter(None, &[("tier", "gold")]);
    let listed = store.list_threads(&gold, Page { limit: 10, offset: 0 }).wait().unwrap();
    assert_eq!(ids(&listed), ["s-00"]);
    let report = store.verify().unwrap();
    let tables: Vec<&str> = report.problems.iter().map(|p| p.table).collect();
    assert_eq!(tables, ["threads"], "{:?}", report.problems);
    store.close().expect("close");
    assert_eq!(raw::format_version(&path), cairn_storage::FORMAT_VERSION, "through every version");
}
