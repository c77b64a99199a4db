//! `cairn query`: a workflow's read-only query on a thread of the demo database.

use crate::harness::{demo_db, on};

#[test]
fn query_answers_from_a_threads_state_and_names_what_is_wrong() {
    let db = demo_db();
    let all = on(db, &["query", "demo-1", "findings"]).expect(0).json();
    let findings = all.as_array().expect("an array");
    assert_eq!(findings.len(), 2, "{all}");
    let web = on(db, &["query", "demo-1", "findings_about", "web"]).expect(0).json();
    assert_eq!(web.as_array().expect("an array").len(), 1, "{web}");
    assert!(web[0].as_str().unwrap().starts_with("web result"), "{web}");
    let quoted = on(db, &["query", "demo-1", "findings_about", "\"docs\""]).expect(0).json();
    assert!(quoted[0].as_str().unwrap().starts_with("docs result"), "{quoted}");
    let unknown = on(db, &["query", "demo-1", "budget"]).expect(2);
    assert!(unknown.stderr.contains("findings, findings_about"), "{}", unknown.stderr);
    let bad = on(db, &["query", "demo-1", "findings_about", "{oops"]).expect(2);
    assert!(bad.stderr.contains("not JSON"), "{}", bad.stderr);
    on(db, &["query", "no-such-thread", "findings"]).expect(1);
}
