//! Message tracing (`Engine::trace`): a session's messages across its sub-workflow threads,
//! by correlation id, between two parties, in a time range, and up a chain of parent ids.

use cairn::storage::ThreadLog;
use std::sync::Arc;

use cairn::dsl::{Ctx, Message, NodeOutput, Workflow};
use cairn::{END, START, StartOptions, ThreadStatus};
use cairn_tools::debug::{TraceQuery, TraceScope};

use crate::common::{Tally, db, engine_on};
use cairn_tools::serve::Serve as _;

fn say(ctx: &Ctx, from: &str, to: &str, corr: &str, id: &str, parent: Option<&str>) {
    let mut m = Message::new(from, format!("{from} to {to}")).to(to).correlation_id(corr).id(id);
    if let Some(p) = parent {
        m = m.parent(p);
    }
    ctx.message(m);
}

fn session() -> Workflow<Tally> {
    session_with(Arc::new(|| ()))
}

/// The session workflow, calling `after_ask` when its first node has spoken (before the child
/// thread starts): a test moves a manual clock there.
pub(crate) fn session_with(after_ask: Arc<dyn Fn() + Send + Sync>) -> Workflow<Tally> {
    let child = Workflow::<Tally>::builder("planning", 1)
        .node("plan", |_s: Arc<Tally>, ctx: Ctx| async move {
            say(&ctx, "planner", "coder", "c1", "m2", Some("m1"));
            Ok(NodeOutput::update((1, "plan".to_owned())))
        })
        .edge(START, "plan")
        .edge("plan", END)
        .build()
        .unwrap();
    Workflow::<Tally>::builder("session", 1)
        .node("ask", move |_s: Arc<Tally>, ctx: Ctx| {
            let after_ask = after_ask.clone();
            async move {
                say(&ctx, "user", "planner", "c1", "m1", None);
                after_ask();
                Ok(NodeOutput::update((1, "ask".to_owned())))
            }
        })
        .subgraph("plan", child, |s: &Tally| s.clone(), |_done: &Tally| (0, String::new()))
        .node("code", |_s: Arc<Tally>, ctx: Ctx| async move {
            say(&ctx, "coder", "planner", "c1", "m3", Some("m2"));
            say(&ctx, "coder", "ops", "c2", "m4", None);
            Ok(NodeOutput::update((1, "code".to_owned())))
        })
        .edge(START, "ask")
        .edge("ask", "plan")
        .edge("plan", "code")
        .edge("code", END)
        .build()
        .unwrap()
}

#[tokio::test]
async fn a_sessions_messages_by_correlation_parties_time_and_chain() {
    let (_d, path) = db();
    let wf = session();
    let engine = engine_on(&path, &[&wf], None).await;
    for id in ["s1", "s2"] {
        let t = engine.start_json("session", Tally::default(), StartOptions::id(id)).await.unwrap();
        assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
    }
    let ids = async |query: &TraceQuery| -> Vec<(String, String)> {
        let found = cairn_tools::Operator::new(&engine).trace(query).await.unwrap();
        found.into_iter().map(|m| (m.thread, m.message.id.unwrap_or_default())).collect()
    };
    let s1 = || TraceQuery::new(TraceScope::Threads(vec!["s1".into()]));

    // By correlation id, across the session's child thread, in the order written.
    let c1 = TraceQuery { correlation_id: Some("c1".into()), ..s1() };
    let found = ids(&c1).await;
    let threads: Vec<&str> = found.iter().map(|(t, _)| t.as_str()).collect();
    let msgs: Vec<&str> = found.iter().map(|(_, m)| m.as_str()).collect();
    assert_eq!(msgs, ["m1", "m2", "m3"]);
    assert_eq!(threads[0], "s1");
    assert!(threads[1].starts_with("s1/plan@"), "{threads:?}");
    assert_eq!(threads[2], "s1");
    // The store-wide scope sees both sessions.
    let everywhere = TraceQuery { scope: TraceScope::All, ..c1.clone() };
    assert_eq!(ids(&everywhere).await.len(), 6);

    // Between two parties, either way.
    let between = TraceQuery { between: Some(("planner".into(), "coder".into())), ..s1() };
    let msgs: Vec<String> = ids(&between).await.into_iter().map(|(_, m)| m).collect();
    assert_eq!(msgs, ["m2", "m3"]);

    // Up a chain of parent ids, first message first.
    let chain = TraceQuery { chain_to: Some("m3".into()), ..s1() };
    let msgs: Vec<String> = ids(&chain).await.into_iter().map(|(_, m)| m).collect();
    assert_eq!(msgs, ["m1", "m2", "m3"]);

    // In a time range.
    let all = cairn_tools::Operator::new(&engine).trace(&s1()).await.unwrap();
    let (first, last) = (all[0].at_ms, all[all.len() - 1].at_ms);
    let within = TraceQuery { from_ms: Some(first), to_ms: Some(last), ..s1() };
    assert_eq!(ids(&within).await.len(), 4);
    let after = TraceQuery { from_ms: Some(last + 1), ..s1() };
    assert!(ids(&after).await.is_empty());
    let before = TraceQuery { to_ms: Some(first.saturating_sub(1)), ..s1() };
    assert!(ids(&before).await.is_empty());

    let unknown = TraceQuery::new(TraceScope::Threads(vec!["nobody".into()]));
    assert!(matches!(
        cairn_tools::Operator::new(&engine).trace(&unknown).await,
        Err(cairn::Error::UnknownThread(_))
    ));
    engine.shutdown().await;
}

/// Many threads talk without a correlation id, one session does: a trace by that id across the
/// whole store reads only its messages, through the correlation index. A scan of the log reads
/// every event (thousands here), which the bound below refuses.
#[tokio::test]
async fn a_store_wide_trace_by_correlation_id_reads_only_the_messages_carrying_it() {
    use cairn::Durability;
    use cairn::storage::{Options, RedbStore, Store};
    use cairn_testkit::RecordingStore;

    let (_d, path) = db();
    let redb = RedbStore::open(&path, Options::default().with_durability(Durability::None));
    let store = Arc::new(RecordingStore::new(Arc::new(redb.unwrap())));
    let noisy = Workflow::<Tally>::builder("noisy", 1)
        .node("talk", |_s: Arc<Tally>, ctx: Ctx| async move {
            for i in 0..20 {
                ctx.message(Message::new("bot", format!("noise {i}")).correlation_id("other"));
            }
            Ok(NodeOutput::update((1, "talk".to_owned())))
        })
        .edge(START, "talk")
        .edge("talk", END)
        .build()
        .unwrap();
    let wf = session();
    let as_dyn: Arc<dyn Store> = store.clone();
    let engine = cairn::Engine::with_store(as_dyn).workflow(&wf).workflow(&noisy).seed(3);
    let engine = engine.open().await.unwrap();
    for i in 0..60 {
        let t = engine.start_json("noisy", Tally::default(), StartOptions::id(format!("n{i}")));
        assert_eq!(t.await.unwrap().finished().await.unwrap().status, ThreadStatus::Completed);
    }
    let t = engine.start_json("session", Tally::default(), StartOptions::id("s")).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
    let total = store.read_all_since(cairn::storage::Lsn(0), 10_000).wait().unwrap().len() as u64;

    let before = store.events_read();
    let query =
        TraceQuery { correlation_id: Some("c1".into()), ..TraceQuery::new(TraceScope::All) };
    let found = cairn_tools::Operator::new(&engine).trace(&query).await.unwrap();
    let read = store.events_read() - before;
    let ids: Vec<String> = found.iter().map(|m| m.message.id.clone().unwrap_or_default()).collect();
    assert_eq!(ids, ["m1", "m2", "m3"]);
    eprintln!("RELIABILITY trace_by_index events_total={total} events_read={read}");
    assert!(total > 1_500, "the store holds many unrelated events: {total}");
    assert_eq!(read, 3, "only the three messages carrying c1 are read, of {total}");
    // With a time range the index entries filter before any event is read: only the messages
    // of that millisecond (m2's; a fast run can write a neighbour in the same one).
    let at = found[1].at_ms;
    let in_window = found.iter().filter(|m| m.at_ms == at).count();
    let window = TraceQuery { from_ms: Some(at), to_ms: Some(at), ..query.clone() };
    let before = store.events_read();
    let traced = cairn_tools::Operator::new(&engine).trace(&window).await.unwrap();
    assert_eq!(traced.len(), in_window);
    assert_eq!(store.events_read() - before, in_window as u64, "{in_window} in the window");
    engine.shutdown().await;
}

/// `GET /api/trace/{id}` answers the messages carrying the id across every thread, through the
/// correlation index, in the order written.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_endpoint_traces_a_correlation_id_across_threads() {
    let (_d, path) = db();
    let wf = session();
    let (engine, server) = cairn::Engine::builder(&path)
        .workflow(&wf)
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    for id in ["s1", "s2"] {
        let t = engine.start_json("session", Tally::default(), StartOptions::id(id)).await.unwrap();
        assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
    }
    let get = |id: &'static str| {
        let url = format!("http://{}/api/trace/{id}", server.addr());
        tokio::task::spawn_blocking(move || {
            let agent: ureq::Agent =
                ureq::Agent::config_builder().http_status_as_error(false).build().into();
            let mut resp = agent.get(&url).call().unwrap();
            assert_eq!(resp.status().as_u16(), 200);
            let text = resp.body_mut().read_to_string().unwrap();
            serde_json::from_str::<serde_json::Value>(&text).unwrap()
        })
    };
    let c1 = get("c1").await.unwrap();
    let messages = c1["messages"].as_array().unwrap();
    let threads: Vec<&str> = messages.iter().map(|m| m["thread"].as_str().unwrap()).collect();
    assert_eq!(messages.len(), 6, "{c1}");
    assert_eq!((threads[0], threads[5]), ("s1", "s2"), "{threads:?}");
    let lsns: Vec<u64> = messages.iter().map(|m| m["lsn"].as_u64().unwrap()).collect();
    assert!(lsns.windows(2).all(|w| w[0] < w[1]), "{lsns:?}");
    assert_eq!(get("c2").await.unwrap()["messages"].as_array().unwrap().len(), 2);
    assert!(get("nobody").await.unwrap()["messages"].as_array().unwrap().is_empty());
    engine.shutdown().await;
}

/// Seed 004's session debugging: a chain stepped through with the state of each message's
/// thread right after it (across the child thread), the session as it stood at a time (the root
/// and the thread it started), and who talked to whom.
#[tokio::test]
async fn a_chain_steps_through_states_and_a_session_stands_at_a_time() {
    let (_d, path) = db();
    let wf = session();
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("session", Tally::default(), StartOptions::id("s1")).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);
    let op = cairn_tools::Operator::new(&engine);
    let s1 = || TraceQuery::new(TraceScope::Threads(vec!["s1".into()]));

    // The chain m1 -> m2 -> m3: each message with its thread's state right after it (the node
    // that wrote it has not returned its update yet).
    let chain = TraceQuery { chain_to: Some("m3".into()), ..s1() };
    let steps = op.replay_chain(&chain).await.unwrap();
    let seen: Vec<(&str, u64)> = steps
        .iter()
        .map(|s| {
            (s.message.message.id.as_deref().unwrap(), s.state.state["total"].as_u64().unwrap())
        })
        .collect();
    assert_eq!(seen, [("m1", 0), ("m2", 1), ("m3", 1)], "ask's 1 is in before plan and code");
    assert!(steps[1].state.thread.starts_with("s1/plan@"), "m2's state is the child's");
    assert!(steps.iter().all(|s| s.state.seq == s.message.seq));
    assert!(matches!(op.replay_chain(&s1()).await, Err(cairn::Error::Invalid(_))));

    // The session at its end: the root and its child, each with its final state; before its
    // first event, neither had one.
    let end = op.state_at("s1", None).await.unwrap().meta.updated_at_ms;
    let then = op.session_state_at_time("s1", end).await.unwrap();
    assert_eq!(then.len(), 2);
    assert_eq!((then[0].thread.as_str(), then[0].parent.as_deref()), ("s1", None));
    assert_eq!(then[1].parent.as_deref(), Some("s1"));
    let totals: Vec<u64> =
        then.iter().map(|t| t.state.as_ref().unwrap().state["total"].as_u64().unwrap()).collect();
    assert_eq!(totals, [2, 2], "the root: ask and code; the child: the root's 1 and plan's");
    let created = op.state_at("s1", Some(1)).await.unwrap().meta.created_at_ms;
    let before = op.session_state_at_time("s1", created - 1).await.unwrap();
    assert_eq!(before.len(), 1, "the child had not started: {before:?}");
    assert_eq!((before[0].thread.as_str(), &before[0].state), ("s1", &None));

    // Who talked to whom.
    let graph = cairn_tools::debug::InteractionGraph::of(&op.trace(&s1()).await.unwrap());
    let edges: Vec<(&str, &str, u64)> =
        graph.edges.iter().map(|e| (e.from.as_str(), e.to.as_str(), e.messages)).collect();
    let expected = [
        ("coder", "ops", 1),
        ("coder", "planner", 1),
        ("planner", "coder", 1),
        ("user", "planner", 1),
    ];
    assert_eq!(edges, expected);
    assert_eq!(graph.parties, ["coder", "ops", "planner", "user"]);
    engine.shutdown().await;
}
