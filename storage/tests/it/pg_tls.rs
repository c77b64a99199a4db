//! TLS to PostgreSQL (feature `tls`): a cluster that takes TCP connections over TLS only, a
//! certificate authority and a server certificate made by `openssl` for the test. A store whose
//! URL says `sslmode=require` with the authority's certificate connects, and every one of its
//! connections is encrypted; a plain connection is refused by the server; a certificate from
//! another authority is refused by the store.

use cairn_storage::{Append, ThreadLog};
use std::path::Path;
use std::process::Command;

use cairn_storage::{Batch, Durability, PgStore, Seq};
use cairn_storage_testkit::pg_cluster::Cluster;

use crate::common::*;

/// The keepalive timers, in seconds to their next probe, of the server's established TCP
/// connections on 127.0.0.1:`port` (`/proc/net/tcp`: timer 2 is the keepalive timer, counted in
/// clock ticks of 1/100 s).
fn server_keepalive_timers(port: u16) -> Vec<f64> {
    let table = std::fs::read_to_string("/proc/net/tcp").expect("/proc/net/tcp");
    let local = format!("0100007F:{port:04X}");
    table
        .lines()
        .skip(1)
        .filter_map(|line| {
            let f: Vec<&str> = line.split_whitespace().collect();
            let (timer, when) = f.get(5)?.split_once(':')?;
            let established = f.get(3) == Some(&"01") && f.get(1) == Some(&local.as_str());
            let ticks = u64::from_str_radix(when, 16).ok()?;
            (established && timer == "02").then(|| ticks as f64 / 100.0)
        })
        .collect()
}

/// Runs `openssl` with `args` in `dir`.
fn openssl(dir: &Path, args: &[&str]) -> Result<(), String> {
    let out = Command::new("openssl").args(args).current_dir(dir).output();
    match out {
        Ok(o) if o.status.success() => Ok(()),
        Ok(o) => Err(String::from_utf8_lossy(&o.stderr).into_owned()),
        Err(e) => Err(format!("openssl: {e}")),
    }
}

/// A certificate authority `name`.pem / `name`.key.
fn authority(dir: &Path, name: &str) -> Result<(), String> {
    let (key, pem) = (format!("{name}.key"), format!("{name}.pem"));
    let subject = format!("/CN=cairn test {name}");
    openssl(
        dir,
        &[
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2", "-keyout", &key, "-out",
            &pem, "-subj", &subject,
        ],
    )
}

/// A server certificate for 127.0.0.1 signed by authority `ca`: server.crt / server.key.
fn server_cert(dir: &Path, ca: &str) -> Result<(), String> {
    std::fs::write(dir.join("ext"), "subjectAltName=IP:127.0.0.1\nbasicConstraints=CA:FALSE\n")
        .map_err(|e| e.to_string())?;
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "rsa:2048",
            "-nodes",
            "-keyout",
            "server.key",
            "-out",
            "server.csr",
            "-subj",
            "/CN=127.0.0.1",
        ],
    )?;
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "server.csr",
            "-CA",
            &format!("{ca}.pem"),
            "-CAkey",
            &format!("{ca}.key"),
            "-CAcreateserial",
            "-out",
            "server.crt",
            "-days",
            "2",
            "-extfile",
            "ext",
        ],
    )
}

#[test]
fn a_store_over_tls_verifies_the_server_and_encrypts_every_connection() {
    let dir = tempfile::tempdir().unwrap();
    let made = authority(dir.path(), "ca")
        .and_then(|()| authority(dir.path(), "other"))
        .and_then(|()| server_cert(dir.path(), "ca"));
    if let Err(why) = made {
        assert!(std::env::var("CI").is_err(), "certificates for the TLS test: {why}");
        eprintln!("SKIPPED a_store_over_tls: no certificates ({why})");
        return;
    }
    let Some(cluster) = Cluster::start_tls(
        "a_store_over_tls",
        &dir.path().join("server.crt"),
        &dir.path().join("server.key"),
    ) else {
        return;
    };
    let tcp = cluster.tls_url("postgres").expect("a TLS cluster has a TCP url");
    let ca = dir.path().join("ca.pem");
    let url = format!("{tcp}?sslmode=require&sslrootcert={}", ca.display());
    let store = PgStore::connect(&url, Durability::Immediate).expect("connects over TLS");
    create_thread(&store, "t", 2);
    let appended = store.append(Batch { events: vec![event("t", 3)], ..Batch::default() });
    assert_eq!(appended.unwrap().wait_blocking().unwrap().bookmarks[0].seq, Seq(3));
    assert_eq!(store.read_since(&tid("t"), Seq(0), 10).wait().unwrap().len(), 3);

    // Every connection of the store (writer, readers, listener) is encrypted.
    let mut admin = postgres::Client::connect(&cluster.url("postgres"), postgres::NoTls).unwrap();
    let row = admin
        .query_one(
            "SELECT count(*) FILTER (WHERE s.ssl), count(*) FROM pg_stat_ssl s \
             JOIN pg_stat_activity a USING (pid) WHERE a.application_name LIKE 'cairn-%'",
            &[],
        )
        .unwrap();
    let (encrypted, all): (i64, i64) = (row.get(0), row.get(1));
    assert!(all >= 6, "writer, four readers, listener: {all}");
    assert_eq!(encrypted, all, "every connection of the store is over TLS");

    // The server's side of each connection probes a silent client after the store's keepalive
    // idle (15 s), not the operating system's default (hours): a session the network cut in
    // the middle of a request ends, and its row locks with it.
    let port: u16 = tcp.rsplit(':').next().and_then(|p| p.split('/').next()?.parse().ok()).unwrap();
    let timers = server_keepalive_timers(port);
    // A socket with data in flight shows its retransmission timer instead, for that moment.
    assert!(!timers.is_empty(), "no keepalive timer on the server's sockets of the store");
    assert!(timers.iter().all(|&s| s <= 15.0), "keepalive timers in seconds: {timers:?}");

    // Plain TCP: the server refuses it.
    let plain = PgStore::connect(&tcp, Durability::Immediate).map(drop);
    assert!(plain.is_err(), "a plain connection over TCP is refused");
    // A server certificate from another authority: the store refuses it.
    let other =
        format!("{tcp}?sslmode=require&sslrootcert={}", dir.path().join("other.pem").display());
    let refused = PgStore::connect(&other, Durability::Immediate).map(drop).unwrap_err();
    assert!(refused.to_string().contains("certificate"), "{refused}");
    // A root certificate file that does not exist is a clear error.
    let missing = format!("{tcp}?sslmode=require&sslrootcert=/nonexistent/ca.pem");
    let error = PgStore::connect(&missing, Durability::Immediate).map(drop).unwrap_err();
    assert!(error.to_string().contains("sslrootcert"), "{error}");
}
