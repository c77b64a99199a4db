//! Whatever an engine accepts it runs (issue 38 items 1 and 2), for each engine the command
//! line starts that stays up (`cairn serve`, `cairn worker --addr`) and each way a thread comes
//! in: written while no engine held the file (`cairn start`, created or queued), posted to the
//! endpoint's start route (the route the web view's start form posts to), on a queue or not,
//! and `cairn start` through the endpoint. Every one of them completes; the queue counts each
//! thread it admitted. (An application's engine: `it::accepted`.)

use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};

use crate::harness::{Spawned, copy, demo_db, on, tempdir};

/// The engines: their arguments before `--db`.
const ENGINES: [&[&str]; 2] = [&["serve", "--json"], &["worker", "--addr", "127.0.0.1:0"]];

/// A research question's input.
const INPUT: &str = r#"{"question":"what does an engine accept?"}"#;

/// How long a thread may take to complete once its engine is up (a hang guard: the result
/// commands return as soon as it completes).
const WAIT_SECS: &str = "60";

#[test]
fn serve_and_worker_run_every_thread_they_accept_created_queued_or_posted() {
    for engine in ENGINES {
        let dir = tempdir();
        let db = copy(demo_db(), dir.path());
        on(&db, &["queue", "define", "q1", "--concurrency", "2"]).expect(0);
        // Written while no engine holds the file: created, and queued.
        let offline = on(&db, &["start", "research-agent", "--input", INPUT, "--id", "offline"]);
        assert!(offline.expect(0).stdout.contains("written created"), "not written created");
        let queued = ["start", "research-agent", "--input", INPUT, "--id", "offline-q"];
        on(&db, &[&queued[..], &["--queue", "q1", "--json"]].concat()).expect(0);
        // Admitted at once while its queue has room (written created), else queued.
        let status = status_of(&db, "offline-q");
        assert!(["created", "queued"].contains(&status.as_str()), "offline-q: {status}");

        // On a queue whose rate is spent by its first start, the second waits in line: said.
        on(&db, &["queue", "define", "hourly", "--rate", "1/1h"]).expect(0);
        let hourly = |id| [&queued[..5], &[id, "--queue", "hourly"]].concat();
        on(&db, &hourly("hourly-1")).expect(0);
        let second = on(&db, &hourly("hourly-2")).expect(0).stdout;
        let said = "hourly-2: written queued (in line on queue hourly)";
        assert!(second.starts_with(said), "{second}");
        // `show` says what `threads` lists: queued (it said created, the log's status).
        assert_eq!(status_of(&db, "hourly-2"), "queued");

        let db_arg = db.to_str().expect("utf-8");
        let server =
            Spawned::start(&[engine, &["--db", db_arg]].concat(), Duration::from_secs(240));
        // Each result command waits for the endpoint, then for the thread.
        for thread in ["offline", "offline-q", "hourly-1"] {
            completed(&db, thread, engine);
        }
        let endpoint =
            cairn_tools::serve::discovery::find(&db).expect("announcement").expect("announced");
        let token = std::fs::read_to_string(&endpoint.token_file).expect("token");
        let url = format!("http://{}/api/workflows/research-agent/threads", endpoint.address);
        for (id, queue) in [("posted", None), ("posted-q", Some("q1"))] {
            let mut body = json!({"input": serde_json::from_str::<Value>(INPUT).unwrap()});
            body["id"] = id.into();
            if let Some(queue) = queue {
                body["queue"] = queue.into();
            }
            let answer = ureq::post(&url)
                .header("Authorization", &format!("Bearer {}", token.trim()))
                .header("Content-Type", "application/json")
                .send(body.to_string())
                .expect("the start route answers");
            assert_eq!(answer.status(), 201, "{engine:?}: {id}");
        }
        let through = ["start", "research-agent", "--input", INPUT, "--id", "cli"];
        on(&db, &[&through[..], &["--json"]].concat()).expect(0);
        on(&db, &[&through[..5], &["cli-q", "--queue", "q1", "--json"]].concat()).expect(0);
        for thread in ["posted", "posted-q", "cli", "cli-q"] {
            completed(&db, thread, engine);
        }
        let pid = endpoint.pid.to_string();
        let killed = std::process::Command::new("kill").args(["-TERM", &pid]).status().unwrap();
        assert!(killed.success());
        assert_eq!(server.wait(), 0, "{engine:?} stops on SIGTERM");

        // From the file, with the engine gone: all six completed, three admitted from the queue.
        for thread in ["offline", "offline-q", "hourly-1", "posted", "posted-q", "cli", "cli-q"] {
            assert_eq!(status_of(&db, thread), "completed", "{engine:?}: {thread}");
        }
        // Its queue's rate holds it an hour: it still waits, as said.
        assert_eq!(status_of(&db, "hourly-2"), "queued", "{engine:?}");
        let list = on(&db, &["queue", "list", "--json"]).expect(0).json();
        let q1 = list.as_array().unwrap().iter().find(|q| q["name"] == "q1").expect("q1");
        assert_eq!((q1["waiting"].clone(), q1["admitted"].clone()), (0.into(), 3.into()), "{q1}");
    }
}

/// Waits for `thread`'s result through the engine's endpoint: it completed.
#[track_caller]
fn completed(db: &Path, thread: &str, engine: &[&str]) {
    let run = on(db, &["result", thread, "--wait", WAIT_SECS, "--json"]);
    assert_eq!(run.code, 0, "{engine:?}: {thread} did not complete: {run:#?}");
    assert_eq!(run.json()["status"], "completed", "{engine:?}: {thread}");
}

/// `thread`'s status, from `cairn show`.
fn status_of(db: &Path, thread: &str) -> String {
    let shown = on(db, &["show", thread, "--json"]).expect(0).json();
    shown["status"].as_str().unwrap_or_else(|| panic!("no status in {shown}")).to_owned()
}
