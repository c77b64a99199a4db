//! `cairn emit` (issue 43 item 4): on a file no engine holds it writes the subscribers' threads
//! `created` (the demo's research-agent subscribes to `question.asked`), once per event id; a
//! name nobody subscribes to starts nothing (exit 0); bad usage exits 2; through `cairn serve`
//! the serving engine runs the thread.

use crate::harness::{demo_db, on, tempdir};
use crate::start::{Killer, serve, stop};

const PAYLOAD: &str = r#"{"question":"What is a lease?"}"#;

#[test]
fn cairn_emit_writes_each_subscriber_once_per_event_id_and_through_serve_runs_it() {
    let dir = tempdir();
    let db = dir.path().join("emit.db");
    std::fs::copy(demo_db(), &db).expect("copy the demo database");
    let emit = ["emit", "question.asked", "--id", "q-1", "--payload", PAYLOAD];
    let written = on(&db, &emit).expect(0);
    let line = "event:q-1/research-agent: started (research-agent), written";
    assert!(written.stdout.contains(line), "{}", written.stdout);
    let shown = on(&db, &["show", "event:q-1/research-agent", "--json"]).expect(0).json();
    assert_eq!(shown["status"], "created", "left for an engine: {shown}");
    let mut json = emit.to_vec();
    json.push("--json");
    let again = on(&db, &json).expect(0).json();
    assert_eq!(again["threads"][0]["created"], false, "once per event id: {again}");
    assert_eq!(again["through"], "database", "{again}");
    let nobody = on(&db, &["emit", "nobody.listens", "--id", "q-1"]).expect(0);
    assert!(nobody.stdout.contains("no workflow subscribes"), "{}", nobody.stdout);
    // Bad usage: an empty id, a payload that is not JSON or not an input of the subscriber.
    on(&db, &["emit", "question.asked", "--id", "", "--payload", PAYLOAD]).expect(2);
    on(&db, &["emit", "question.asked", "--id", "q-2", "--payload", "nope"]).expect(2);
    on(&db, &["emit", "question.asked", "--id", "q-2", "--payload", "5"]).expect(2);
    on(&db, &["show", "event:q-2/research-agent"]).expect(1);

    let (server, _address, pid) = serve(&db);
    let guard = Killer(pid);
    let through =
        on(&db, &["emit", "question.asked", "--id", "q-3", "--payload", PAYLOAD, "--json"]);
    let through = through.expect(0).json();
    assert_eq!(
        (&through["through"], &through["threads"][0]["created"]),
        (&"endpoint".into(), &true.into())
    );
    let waited = on(&db, &["result", "event:q-3/research-agent", "--wait", "60", "--json"]);
    assert_eq!(waited.expect(0).json()["status"], "completed");
    stop(server, guard);
}
