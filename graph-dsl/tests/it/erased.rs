//! The engine's view: routing, joins, state codec, erased handlers, maps and sub-workflows.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use cairn_dsl::{
    DynNodeKind, DynState, END, NextTarget, NodeError, NodeOutput, Replace, RouteError, START,
    StateError, Target, Workflow, downcast_state,
};
use futures::executor::block_on;
use serde_json::{Value, json};

use crate::common::{S, ScriptedContext, builder, kitchen_sink, noop};

fn state(wf: &cairn_dsl::DynWorkflow, v: Value) -> Box<dyn DynState> {
    wf.state_from_json(&v).expect("state decodes")
}

fn node(wf: &cairn_dsl::DynWorkflow, name: &str) -> usize {
    wf.node_id(name).expect("declared")
}

#[test]
fn the_engine_can_share_everything_across_threads() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<cairn_dsl::DynWorkflow>();
    send_sync::<Workflow<S>>();
    send_sync::<cairn_dsl::Ctx>();
    send_sync::<cairn_dsl::ToolCtx>();
    send_sync::<Box<dyn DynState>>();
    send_sync::<cairn_dsl::BuildError>();
    send_sync::<NodeError>();
}

#[test]
fn ids_follow_declaration_order_and_settings_are_kept() {
    let wf = kitchen_sink().erase();
    let names: Vec<&str> = wf.nodes().iter().map(|n| n.name.as_str()).collect();
    assert_eq!(
        names,
        ["plan", "search", "read", "merge", "summarise", "deep", "check", "revise", "router"]
    );
    assert_eq!(wf.node_id("merge"), Some(3));
    assert_eq!(wf.node_id("nope"), None);
    assert_eq!(wf.entry(), [0]);
    assert_eq!(wf.budgets().max_steps, Some(100));
    assert_eq!(
        wf.permissions().iter().map(String::as_str).collect::<Vec<_>>(),
        ["fs:write", "net"]
    );
    assert_eq!(wf.checkpoint_policy().every_steps, Some(10));
    assert_eq!(wf.nodes()[7].policy.max_visits, Some(5), "loop_bound sets the policy");
    assert_eq!(wf.nodes()[1].policy.retry.max_attempts, 3);
    assert_eq!(
        wf.nodes().iter().map(|n| n.kind.label()).collect::<Vec<_>>(),
        ["task", "task", "task", "task", "map", "subgraph", "task", "task", "task"]
    );
}

#[test]
fn static_edges_fan_out_in_declaration_order() {
    let wf = kitchen_sink().erase();
    let s = state(&wf, json!(0));
    assert_eq!(wf.start(&*s).unwrap(), [NextTarget::Node(0)]);
    assert_eq!(
        wf.next(node(&wf, "plan"), &*s, &[]).unwrap(),
        [NextTarget::Node(1), NextTarget::Node(2)]
    );
    assert_eq!(wf.join_sources(node(&wf, "merge")), Some(&[1, 2][..]));
    assert_eq!(wf.join_sources(node(&wf, "plan")), None);
    assert_eq!(wf.join_sources(99), None);
}

#[test]
fn routes_follow_the_state_and_reject_undeclared_names() {
    let wf = kitchen_sink().erase();
    let check = node(&wf, "check");
    let low = state(&wf, json!(1));
    let high = state(&wf, json!(9));
    assert_eq!(wf.next(check, &*low, &[]).unwrap(), [NextTarget::Node(node(&wf, "revise"))]);
    assert_eq!(wf.next(check, &*high, &[]).unwrap(), [NextTarget::Node(node(&wf, "router"))]);

    let wf = builder("w")
        .node("a", noop)
        .edge(START, "a")
        .route("a", |s: &S| if s.0 == 0 { END } else { "elsewhere" }, [END])
        .build()
        .unwrap()
        .erase();
    assert_eq!(wf.next(0, &*state(&wf, json!(0)), &[]).unwrap(), [NextTarget::End]);
    assert_eq!(
        wf.next(0, &*state(&wf, json!(1)), &[]),
        Err(RouteError::UndeclaredRoute { node: "a".into(), returned: "elsewhere".into() })
    );
}

#[test]
fn edges_and_route_combine_deduplicated_with_end_last() {
    let wf = builder("w")
        .node("a", noop)
        .node("b", noop)
        .node("c", noop)
        .edge(START, "a")
        .fan_out("a", [END, "c", "b"])
        .route("a", |_: &S| "b", ["b", "c"])
        .edge("b", END)
        .edge("c", END)
        .build()
        .unwrap()
        .erase();
    let s = state(&wf, json!(0));
    assert_eq!(
        wf.next(0, &*s, &[]).unwrap(),
        [NextTarget::Node(1), NextTarget::Node(2), NextTarget::End]
    );
    assert_eq!(wf.successors(0), [NextTarget::Node(1), NextTarget::Node(2), NextTarget::End]);
}

#[test]
fn gotos_replace_edges_and_must_be_declared() {
    let wf = kitchen_sink().erase();
    let router = node(&wf, "router");
    let s = state(&wf, json!(0));
    assert_eq!(
        wf.next(router, &*s, &[Target::End, "plan".into(), Target::End]).unwrap(),
        [NextTarget::Node(0), NextTarget::End]
    );
    assert_eq!(
        wf.next(router, &*s, &["check".into()]),
        Err(RouteError::UndeclaredGoto { node: "router".into(), target: "check".into() })
    );
    assert_eq!(
        wf.next(router, &*s, &[]),
        Err(RouteError::MissingGoto { node: "router".into() }),
        "a gotos-only node must choose"
    );
    assert_eq!(
        wf.next(node(&wf, "plan"), &*s, &[Target::End]),
        Err(RouteError::UndeclaredGoto { node: "plan".into(), target: END.into() })
    );
    assert_eq!(wf.next(99, &*s, &[]), Err(RouteError::UnknownNode(99)));
}

#[test]
fn state_codec_round_trips_and_rejects_foreign_json() {
    let wf = kitchen_sink().erase();
    let mut s = state(&wf, json!(5));
    s.apply_json(&json!(8)).unwrap();
    assert_eq!(s.to_json().unwrap(), json!(8));
    assert!(matches!(wf.state_from_json(&json!("five")), Err(StateError::Codec { .. })));
    assert!(matches!(s.apply_json(&json!([1])), Err(StateError::Codec { .. })));
    assert_eq!(s.to_json().unwrap(), json!(8), "a rejected update changes nothing");
    assert_eq!(downcast_state::<S>(&*s), Some(&Replace(8)));
    assert_eq!(downcast_state::<Replace<String>>(&*s), None);
}

#[test]
fn clones_share_until_written() {
    let wf = kitchen_sink().erase();
    let original = state(&wf, json!(1));
    let mut copy = original.clone();
    let before: *const S = downcast_state::<S>(&*original).unwrap();
    assert!(std::ptr::eq(before, downcast_state::<S>(&*copy).unwrap()), "shared");
    copy.apply_json(&json!(2)).unwrap();
    assert_eq!(original.to_json().unwrap(), json!(1));
    assert_eq!(copy.to_json().unwrap(), json!(2));
}

fn handler(wf: &cairn_dsl::DynWorkflow, name: &str) -> cairn_dsl::DynHandler {
    match &wf.nodes()[node(wf, name)].kind {
        DynNodeKind::Task(h) | DynNodeKind::Map { handler: h, .. } => Arc::clone(h),
        DynNodeKind::Subgraph { .. } => panic!("{name} is a sub-workflow"),
    }
}

#[test]
fn handlers_get_the_shared_snapshot_and_return_json_updates() {
    let seen: Arc<Mutex<Option<Arc<S>>>> = Arc::default();
    let keep = Arc::clone(&seen);
    let wf = builder("w")
        .node("a", move |s: Arc<S>, _ctx| {
            *keep.lock().unwrap() = Some(Arc::clone(&s));
            async move { Ok(NodeOutput::update(s.0 * 10).goto(END)) }
        })
        .edge(START, "a")
        .gotos("a", [END])
        .build()
        .unwrap()
        .erase();
    let s = state(&wf, json!(4));
    let (_, ctx) = ScriptedContext::new().ctx();
    let out = block_on(handler(&wf, "a")(&*s, ctx)).unwrap();
    assert_eq!(out, NodeOutput { update: Some(json!(40)), goto: vec![Target::End] });
    let snapshot = seen.lock().unwrap().clone().unwrap();
    assert!(std::ptr::eq(&*snapshot, downcast_state::<S>(&*s).unwrap()), "no copy of the state");
}

#[test]
fn handler_errors_pass_through_and_bad_updates_are_codec_errors() {
    #[derive(Clone, serde::Serialize, serde::Deserialize)]
    struct Odd;
    impl cairn_dsl::State for Odd {
        // A map with non-string keys cannot become JSON.
        type Update = BTreeMap<(u8, u8), u8>;
        fn apply(&mut self, _: Self::Update) {}
    }
    let wf = Workflow::<Odd>::builder("w", 1)
        .node("bad_update", |_s, _ctx| async { Ok(NodeOutput::update([((1, 2), 3)].into())) })
        .node("fails", |_s, _ctx| async { Err(NodeError::fatal("no").with_code("x")) })
        .edge(START, "bad_update")
        .edge("bad_update", "fails")
        .edge("fails", END)
        .build()
        .unwrap()
        .erase();
    let s = state(&wf, json!(null));
    let (_, ctx) = ScriptedContext::new().ctx();
    let err = block_on(handler(&wf, "bad_update")(&*s, ctx.clone())).unwrap_err();
    assert!(matches!(err, NodeError::Codec { .. }), "{err:?}");
    let err = block_on(handler(&wf, "fails")(&*s, ctx)).unwrap_err();
    assert_eq!(err.code(), Some("x"));
}

/// A state implemented outside this crate (as an engine test might): handlers decode it.
#[derive(Debug, Clone)]
struct JsonState(Value);

impl DynState for JsonState {
    fn to_json(&self) -> Result<Value, StateError> {
        Ok(self.0.clone())
    }
    fn apply_json(&mut self, update: &Value) -> Result<(), StateError> {
        self.0 = update.clone();
        Ok(())
    }
    fn clone_box(&self) -> Box<dyn DynState> {
        Box::new(self.clone())
    }
    fn as_any(&self) -> &dyn std::any::Any {
        self
    }
    fn shared_any(&self) -> Arc<dyn std::any::Any + Send + Sync> {
        Arc::new(self.clone())
    }
}

#[test]
fn foreign_states_are_decoded_through_json() {
    let wf = kitchen_sink().erase();
    let (_, ctx) = ScriptedContext::new().ctx();
    let out = block_on(handler(&wf, "plan")(&JsonState(json!(2)), ctx.clone())).unwrap();
    assert_eq!(out.update, Some(json!(3)));
    let err = block_on(handler(&wf, "plan")(&JsonState(json!("two")), ctx)).unwrap_err();
    assert!(matches!(err, NodeError::Codec { .. }));
    assert_eq!(
        wf.next(node(&wf, "check"), &JsonState(json!(9)), &[]).unwrap(),
        [NextTarget::Node(node(&wf, "router"))]
    );
    assert!(matches!(
        wf.next(node(&wf, "check"), &JsonState(json!([])), &[]),
        Err(RouteError::State(StateError::Codec { .. }))
    ));
}

#[test]
fn map_items_come_from_the_state_and_are_bounded() {
    let wf = builder("w")
        .map("m", |s: &S| (0..s.0).map(|i| json!({ "i": i })).collect(), noop)
        .edge(START, "m")
        .edge("m", END)
        .build()
        .unwrap()
        .erase();
    let DynNodeKind::Map { items, .. } = &wf.nodes()[0].kind else {
        panic!("a map node");
    };
    assert_eq!(items(&*state(&wf, json!(2))).unwrap(), [json!({"i": 0}), json!({"i": 1})]);
    let too_many = cairn_dsl::limits::MAP_ITEMS_MAX as u64 + 1;
    assert_eq!(
        items(&*state(&wf, json!(too_many))),
        Err(StateError::LimitExceeded {
            limit: "items of one map node",
            value: too_many,
            max: cairn_dsl::limits::MAP_ITEMS_MAX as u64,
        })
    );
}

#[test]
fn sub_workflows_map_state_both_ways() {
    let child = Workflow::<Replace<String>>::builder("child", 3)
        .node("shout", |s, _ctx| async move { Ok(NodeOutput::update(s.0.to_uppercase())) })
        .edge(START, "shout")
        .edge("shout", END)
        .build()
        .unwrap();
    let wf = builder("parent")
        .subgraph(
            "sub",
            child,
            |s: &S| Replace(format!("n{}", s.0)),
            |c: &Replace<String>| c.0.len() as u32,
        )
        .edge(START, "sub")
        .edge("sub", END)
        .build()
        .unwrap()
        .erase();
    let DynNodeKind::Subgraph { child, input, output } = &wf.nodes()[0].kind else {
        panic!("a sub-workflow node");
    };
    assert_eq!((child.id(), child.version()), ("child", 3));
    let child_input = input(&*state(&wf, json!(12))).unwrap();
    assert_eq!(child_input, json!("n12"));
    let child_state = child.state_from_json(&child_input).unwrap();
    assert_eq!(child_state.to_json().unwrap(), json!("n12"));
    assert_eq!(output(&json!("abcd")).unwrap(), json!(4));
    assert!(matches!(output(&json!(5)), Err(StateError::Codec { .. })));
}
