//! A COMMIT cut off by a server crash, whose transaction id the restarted server gives out
//! again: `txid_status` then answers `committed` for the other transaction, and a writer that
//! trusted it would acknowledge events that are not in the log. The writer resolves by its
//! commit mark instead (`pg/resolve.rs`): the group counts as lost, runs again, and what it
//! acknowledges is in the log.

use std::time::Duration;

use cairn_storage::{Append, Batch, Durability, PgStore, Seq, ThreadLog};
use cairn_storage_testkit::pg_cluster::Cluster;
use cairn_storage_testkit::pg_proxy::Proxy;

use crate::common::*;

/// Commits transactions on `admin` until one takes the 32-bit transaction id `xid` again (or
/// `tries` have not): whether one did.
fn take_xid_again(admin: &mut postgres::Client, xid: u32, tries: usize) -> bool {
    admin.batch_execute("CREATE TABLE IF NOT EXISTS filler (n bigint)").unwrap();
    for _ in 0..tries {
        let mut tx = admin.transaction().unwrap();
        let taken: i64 = tx.query_one("SELECT txid_current()", &[]).unwrap().get(0);
        tx.execute("INSERT INTO filler VALUES (1)", &[]).unwrap();
        tx.commit().unwrap();
        if taken as u64 & 0xFFFF_FFFF == u64::from(xid) {
            return true;
        }
    }
    false
}

#[test]
fn a_transaction_id_reused_after_a_crash_does_not_acknowledge_a_lost_group() {
    let Some(cluster) = Cluster::start("a_reused_xid_is_not_a_commit") else { return };
    let url = cluster.new_database();
    // The WAL writer flushes every 200 ms by default: a group's records flushed before the
    // crash keep its id from being given out again. Ten seconds keep the window open.
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    admin.batch_execute("ALTER SYSTEM SET wal_writer_delay = '10s'").unwrap();
    admin.batch_execute("SELECT pg_reload_conf()").unwrap();
    let proxy = Proxy::start(&cluster).expect("proxy");
    let store = PgStore::connect(&proxy.url(&url), Durability::Immediate).expect("connect");
    create_thread(&store, "t", 1);

    // The writer's group reaches its COMMIT, which the proxy keeps from the server.
    let held = proxy.hold_next_commit("cairn-writer");
    let pending = store.append(Batch { events: vec![event("t", 2)], ..Batch::default() }).unwrap();
    assert!(held.wait_reached(Duration::from_secs(10)), "the writer's COMMIT reached the proxy");
    let row = admin
        .query_one(
            "SELECT backend_xid::text::bigint FROM pg_stat_activity \
             WHERE application_name = 'cairn-writer' AND backend_xid IS NOT NULL",
            &[],
        )
        .unwrap();
    let xid = u32::try_from(row.get::<_, i64>(0)).unwrap();
    drop(admin);

    // The server crashes with the group uncommitted; restarted, it gives its id out again.
    cluster.restart().expect("restart");
    let mut admin = postgres::Client::connect(&url, postgres::NoTls).unwrap();
    assert!(take_xid_again(&mut admin, xid, 50), "transaction id {xid} was not given out again");
    // What the lost group's status now says (a fresh cluster: epoch 0).
    let status: Option<String> =
        admin.query_one("SELECT txid_status($1)", &[&i64::from(xid)]).unwrap().get(0);
    assert_eq!(status.as_deref(), Some("committed"), "the status is the other transaction's");

    // The COMMIT goes on to a connection the crash closed: the writer resolves the group.
    held.release();
    let appended = pending.wait_blocking().expect("the group ran again and committed");
    let seq = appended.bookmarks[0].seq;
    let stored = store.read_since(&tid("t"), Seq(0), 10).wait().expect("read");
    assert!(
        stored.iter().any(|e| e.bookmark.seq == seq && e.data == event("t", 2).data),
        "the acknowledged event (seq {}) is in the log: {:?}",
        seq.0,
        stored.iter().map(|e| e.bookmark.seq.0).collect::<Vec<_>>()
    );
    assert_eq!(stored.len(), 2, "the event once");
    assert!(cairn_storage::Maintenance::verify(&store).unwrap().is_clean());
}
