//! One table row per validation rule: a minimal definition and the exact problem list.

use cairn_dsl::limits::{
    FAN_OUT_MAX, JOIN_SOURCES_MAX, NAME_BYTES_MAX, NODES_MAX, PERMISSIONS_MAX, SUBGRAPH_DEPTH_MAX,
};
use cairn_dsl::{Budgets, CheckpointPolicy, END, NodePolicy, Problem, RetryPolicy, START};

use crate::common::{S, builder, noop};
use cairn_dsl::WorkflowBuilder;

fn s(x: &str) -> String {
    x.to_owned()
}

/// START -> a -> END, the smallest valid workflow, to add one mistake to.
fn linear() -> WorkflowBuilder<S> {
    builder("w").node("a", noop).edge(START, "a").edge("a", END)
}

fn problems(b: WorkflowBuilder<S>) -> Vec<Problem> {
    match b.build() {
        Ok(_) => Vec::new(),
        Err(e) => e.problems,
    }
}

fn check(name: &str, b: WorkflowBuilder<S>, expected: Vec<Problem>) {
    let found = problems(b);
    assert_eq!(found, expected, "case {name}");
}

#[test]
fn the_smallest_workflow_is_valid() {
    assert!(linear().build().is_ok());
}

#[test]
fn names() {
    check("empty", builder("w"), vec![Problem::Empty]);
    check("duplicate", linear().node("a", noop), vec![Problem::DuplicateNode(s("a"))]);
    check(
        "duplicate reported once",
        linear().node("a", noop).node("a", noop),
        vec![Problem::DuplicateNode(s("a"))],
    );
    check("reserved end", linear().node(END, noop), vec![Problem::ReservedName(s(END))]);
    check("reserved start", linear().node(START, noop), vec![Problem::ReservedName(s(START))]);
    check(
        "reserved prefix",
        linear().node("__mine", noop),
        vec![Problem::ReservedName(s("__mine"))],
    );
    check(
        "empty name",
        builder("w").node("", noop).edge(START, "").edge("", END),
        vec![Problem::InvalidName { name: s(""), detail: s("empty") }],
    );
    let long = "x".repeat(NAME_BYTES_MAX + 1);
    check(
        "long name",
        builder("w").node(long.as_str(), noop).edge(START, long.as_str()).edge(long.as_str(), END),
        vec![Problem::InvalidName {
            name: long.clone(),
            detail: format!(
                "{} bytes exceed NAME_BYTES_MAX ({NAME_BYTES_MAX})",
                NAME_BYTES_MAX + 1
            ),
        }],
    );
    check(
        "control character",
        builder("w").node("a\nb", noop).edge(START, "a\nb").edge("a\nb", END),
        vec![Problem::InvalidName { name: s("a\nb"), detail: s("contains control characters") }],
    );
    check(
        "empty workflow id",
        cairn_dsl::Workflow::<S>::builder("", 1).node("a", noop).edge(START, "a").edge("a", END),
        vec![Problem::InvalidName { name: s(""), detail: s("empty") }],
    );
}

#[test]
fn signal_declarations() {
    check(
        "a signal declared twice",
        linear().signal::<u32>("paid").signal::<String>("paid"),
        vec![Problem::DuplicateSignal(s("paid"))],
    );
    check(
        "an empty signal name",
        linear().signal::<u32>(""),
        vec![Problem::InvalidName { name: s(""), detail: s("empty") }],
    );
    // Declarations are not part of the fingerprint: adding one blocks no running thread.
    let plain = linear().build().unwrap();
    let declared = linear().signal::<u32>("paid").build().unwrap();
    assert_eq!(plain.fingerprint(), declared.fingerprint());
    let none = serde_json::json!({"any": "thing"});
    assert_eq!(plain.as_dyn().check_signal("whatever", &none), Ok(()), "none declared: any");
    assert_eq!(declared.as_dyn().check_signal("paid", &serde_json::json!(3)), Ok(()));
}

#[test]
fn unknown_names() {
    check(
        "edge to undeclared",
        linear().edge("a", "ghost"),
        vec![Problem::UnknownTarget { from: s("a"), to: s("ghost") }],
    );
    check(
        "route to undeclared",
        linear().route("a", |_: &S| END, [END, "ghost"]),
        vec![Problem::UnknownTarget { from: s("a"), to: s("ghost") }],
    );
    check(
        "goto to undeclared",
        linear().gotos("a", ["ghost"]),
        vec![Problem::UnknownTarget { from: s("a"), to: s("ghost") }],
    );
    check(
        "edge from undeclared",
        linear().edge("ghost", "a"),
        vec![Problem::UnknownNode { name: s("ghost"), context: s("edge") }],
    );
    check(
        "route from undeclared",
        linear().route("ghost", |_: &S| "a", ["a"]),
        vec![Problem::UnknownNode { name: s("ghost"), context: s("route") }],
    );
    check(
        "gotos of undeclared",
        linear().gotos("ghost", ["a"]),
        vec![Problem::UnknownNode { name: s("ghost"), context: s("gotos") }],
    );
    check(
        "loop bound of undeclared",
        linear().loop_bound("ghost", 3),
        vec![Problem::UnknownNode { name: s("ghost"), context: s("loop_bound") }],
    );
    check(
        "join of undeclared",
        linear().join(["a"], "ghost"),
        vec![Problem::UnknownNode { name: s("ghost"), context: s("join") }],
    );
    check(
        "join waiting for undeclared",
        builder("w")
            .node("a", noop)
            .node("m", noop)
            .edge(START, "a")
            .join(["a", "ghost"], "m")
            .edge("m", END),
        vec![Problem::UnknownNode { name: s("ghost"), context: s("join") }],
    );
}

#[test]
fn impossible_edges() {
    check(
        "edge out of END",
        linear().edge(END, "a"),
        vec![Problem::InvalidEdge { from: s(END), to: s("a"), detail: s("nothing leaves END") }],
    );
    check(
        "edge into START",
        linear().edge("a", START),
        vec![Problem::InvalidEdge {
            from: s("a"),
            to: s(START),
            detail: s("nothing may lead into START"),
        }],
    );
    check(
        "gotos from START",
        linear().gotos(START, ["a"]),
        vec![Problem::InvalidEdge {
            from: s(START),
            to: s("a"),
            detail: s("START runs no code, so it cannot choose gotos"),
        }],
    );
    check(
        "gotos from a map node",
        builder("w")
            .map("m", |s: &S| vec![s.0], noop)
            .edge(START, "m")
            .edge("m", END)
            .gotos("m", [END]),
        vec![Problem::InvalidEdge {
            from: s("m"),
            to: s(END),
            detail: s("a map node cannot choose gotos"),
        }],
    );
    check(
        "gotos from a sub-workflow node",
        builder("w")
            .subgraph("sub", crate::common::child(), |s: &S| s.clone(), |c: &S| c.0)
            .edge(START, "sub")
            .edge("sub", END)
            .gotos("sub", [END]),
        vec![Problem::InvalidEdge {
            from: s("sub"),
            to: s(END),
            detail: s("a sub-workflow node cannot choose gotos"),
        }],
    );
    check(
        "two routes",
        linear().route("a", |_: &S| END, [END]).route("a", |_: &S| END, [END]),
        vec![Problem::DuplicateRoute(s("a"))],
    );
    check(
        "route without targets",
        linear().route("a", |_: &S| END, Vec::<String>::new()),
        vec![Problem::NoTargets(s("a"))],
    );
    check(
        "gotos without targets",
        linear().gotos("a", Vec::<String>::new()),
        vec![Problem::NoTargets(s("a"))],
    );
}

#[test]
fn reachability() {
    check(
        "no entry",
        builder("w").node("a", noop).edge("a", END),
        vec![Problem::NoEntry, Problem::Unreachable(s("a"))],
    );
    check(
        "unreachable",
        linear().node("b", noop).edge("b", END),
        vec![Problem::Unreachable(s("b"))],
    );
    check("dead end", linear().node("b", noop).edge("a", "b"), vec![Problem::NoPathToEnd(s("b"))]);
    check(
        "a node with nothing at all",
        linear().node("b", noop),
        vec![Problem::Unreachable(s("b")), Problem::NoPathToEnd(s("b"))],
    );
    check(
        "route from START is an entry",
        builder("w").node("a", noop).route(START, |_: &S| "a", ["a"]).edge("a", END),
        vec![],
    );
    check(
        "gotos count as paths",
        builder("w")
            .node("a", noop)
            .node("b", noop)
            .edge(START, "a")
            .gotos("a", ["b"])
            .edge("b", END),
        vec![],
    );
}

#[test]
fn cycles() {
    let looping = || {
        builder("w").node("a", noop).node("b", noop).edge(START, "a").edge("a", "b").route(
            "b",
            |_: &S| END,
            ["a", END],
        )
    };
    check(
        "unbounded two-node cycle",
        looping(),
        vec![Problem::UnboundedCycle(vec![s("a"), s("b")])],
    );
    check("bounded on a", looping().loop_bound("a", 3), vec![]);
    check("bounded on b", looping().loop_bound("b", 3), vec![]);
    check(
        "bounded by policy",
        builder("w")
            .node_with("a", noop, NodePolicy::default().max_visits(2))
            .edge(START, "a")
            .route("a", |_: &S| END, ["a", END]),
        vec![],
    );
    check(
        "unbounded self-loop",
        linear().route("a", |_: &S| END, ["a", END]),
        vec![Problem::UnboundedCycle(vec![s("a")])],
    );
    check("goto cycle", linear().gotos("a", ["a"]), vec![Problem::UnboundedCycle(vec![s("a")])]);
    check(
        "two cycles, one bounded",
        builder("w")
            .node("a", noop)
            .node("b", noop)
            .edge(START, "a")
            .route("a", |_: &S| "b", ["a", "b"])
            .route("b", |_: &S| END, ["b", END])
            .loop_bound("a", 2),
        vec![Problem::UnboundedCycle(vec![s("b")])],
    );
}

fn diamond() -> WorkflowBuilder<S> {
    builder("w")
        .node("f", noop)
        .node("x", noop)
        .node("y", noop)
        .node("m", noop)
        .edge(START, "f")
        .join(["x", "y"], "m")
        .edge("m", END)
}

#[test]
fn joins() {
    check("static fan-out satisfies a join", diamond().fan_out("f", ["x", "y"]), vec![]);
    check(
        "route alternatives cannot all arrive",
        diamond().route("f", |_: &S| "x", ["x", "y"]),
        vec![Problem::UnsatisfiableJoin { join: s("m"), branches: vec![s("x"), s("y")] }],
    );
    check(
        "goto alternatives cannot all arrive",
        diamond().gotos("f", ["x", "y"]),
        vec![Problem::UnsatisfiableJoin { join: s("m"), branches: vec![s("x"), s("y")] }],
    );
    check(
        "a branch behind the join deadlocks",
        builder("w")
            .node("a", noop)
            .node("c", noop)
            .node("m", noop)
            .edge(START, "a")
            .join(["a", "c"], "m")
            .fan_out("m", ["c", END])
            .loop_bound("c", 2),
        vec![Problem::UnsatisfiableJoin { join: s("m"), branches: vec![s("a"), s("c")] }],
    );
    check(
        "a longer branch still arrives",
        diamond().node("x2", noop).fan_out("f", ["x2", "y"]).edge("x2", "x"),
        vec![],
    );
    check(
        "entered from a node that is not a branch",
        diamond().fan_out("f", ["x", "y"]).node("z", noop).edge("f", "z").edge("z", "m"),
        vec![Problem::InvalidJoin {
            join: s("m"),
            detail: s("entered from \"z\", which is not one of its branches"),
        }],
    );
    check(
        "entered from START",
        diamond().fan_out("f", ["x", "y"]).edge(START, "m"),
        vec![Problem::InvalidJoin {
            join: s("m"),
            detail: s("entered from START, which is not one of its branches"),
        }],
    );
    check(
        "declared twice",
        diamond().fan_out("f", ["x", "y"]).join(["x"], "m"),
        vec![Problem::InvalidJoin {
            join: s("m"),
            detail: s("declared twice; list all its branches in one join"),
        }],
    );
    check(
        "no branches",
        linear().join(Vec::<String>::new(), "a"),
        vec![Problem::InvalidJoin { join: s("a"), detail: s("a join needs at least one branch") }],
    );
    check(
        "waits for itself",
        linear().join(["a"], "a"),
        vec![Problem::InvalidJoin { join: s("a"), detail: s("a join cannot wait for itself") }],
    );
    check(
        "START is not a branch",
        linear().join([START], "a"),
        vec![Problem::InvalidJoin { join: s("a"), detail: format!("{START} cannot be a branch") }],
    );
    check(
        "END is not a join",
        linear().join(["a"], END),
        vec![Problem::InvalidJoin { join: s(END), detail: s("START and END cannot be joins") }],
    );
}

#[test]
fn policies_and_settings() {
    check(
        "zero attempts",
        builder("w")
            .node_with("a", noop, NodePolicy::default().retry(RetryPolicy::exponential(0, 1, 2)))
            .edge(START, "a")
            .edge("a", END),
        vec![Problem::PolicyOutOfRange {
            node: s("a"),
            detail: s("retry.max_attempts is 0; it must be at least 1"),
        }],
    );
    check(
        "backoff inverted, multiplier below one",
        builder("w")
            .node_with(
                "a",
                noop,
                NodePolicy::default().retry(RetryPolicy::exponential(2, 50, 10).multiplier(0.5)),
            )
            .edge(START, "a")
            .edge("a", END),
        vec![
            Problem::PolicyOutOfRange {
                node: s("a"),
                detail: s("retry.initial_backoff_ms 50 exceeds retry.max_backoff_ms 10"),
            },
            Problem::PolicyOutOfRange {
                node: s("a"),
                detail: s("retry.multiplier 0.5 is outside 1.0..=100"),
            },
        ],
    );
    check(
        "zero loop bound",
        linear().loop_bound("a", 0),
        vec![Problem::PolicyOutOfRange {
            node: s("a"),
            detail: s("max_visits is 0; the node could never run"),
        }],
    );
    check(
        "warn fraction",
        linear().budgets(Budgets::default().warn_fraction(1.5)),
        vec![Problem::SettingOutOfRange {
            detail: s("budgets.warn_fraction 1.5 is outside (0.0, 1.0]"),
        }],
    );
    check(
        "zero checkpoint interval",
        linear().checkpoint_every(CheckpointPolicy { every_steps: Some(0), every_ms: None }),
        vec![Problem::SettingOutOfRange {
            detail: s("checkpoint.every_steps is 0; use None to disable"),
        }],
    );
    check(
        "empty permission",
        linear().permissions([""]),
        vec![Problem::InvalidName { name: s(""), detail: s("empty") }],
    );
}

#[test]
fn limits() {
    let mut many = builder("w").edge(START, "n0");
    for i in 0..=NODES_MAX {
        many = many.node(format!("n{i}"), noop).edge(format!("n{i}"), END);
    }
    many = many.fan_out(START, (1..=NODES_MAX).map(|i| format!("n{i}")));
    let found = problems(many);
    assert!(found.contains(&Problem::LimitExceeded {
        limit: "NODES_MAX",
        subject: s("w"),
        value: NODES_MAX as u64 + 1,
        max: NODES_MAX as u64,
    }));

    let mut wide = linear().fan_out("a", (0..=FAN_OUT_MAX).map(|i| format!("t{i}")));
    for i in 0..=FAN_OUT_MAX {
        wide = wide.node(format!("t{i}"), noop).edge(format!("t{i}"), END);
    }
    check(
        "fan-out",
        wide,
        vec![Problem::LimitExceeded {
            limit: "FAN_OUT_MAX",
            subject: s("a"),
            value: FAN_OUT_MAX as u64 + 2,
            max: FAN_OUT_MAX as u64,
        }],
    );

    let mut nested = linear().build().expect("valid");
    for level in 1..=SUBGRAPH_DEPTH_MAX {
        nested = builder("w")
            .subgraph("sub", nested, |s: &S| s.clone(), |c: &S| c.0)
            .edge(START, "sub")
            .edge("sub", END)
            .build()
            .unwrap_or_else(|e| panic!("depth {level}: {e}"));
    }
    assert_eq!(nested.as_dyn().depth(), SUBGRAPH_DEPTH_MAX);
    check(
        "sub-workflow depth",
        builder("w")
            .subgraph("too_deep", nested, |s: &S| s.clone(), |c: &S| c.0)
            .edge(START, "too_deep")
            .edge("too_deep", END),
        vec![Problem::LimitExceeded {
            limit: "SUBGRAPH_DEPTH_MAX",
            subject: s("too_deep"),
            value: SUBGRAPH_DEPTH_MAX as u64 + 1,
            max: SUBGRAPH_DEPTH_MAX as u64,
        }],
    );

    let branches: Vec<String> = (0..=JOIN_SOURCES_MAX).map(|i| format!("j{i}")).collect();
    let mut wide_join =
        builder("w").node("m", noop).edge("m", END).fan_out(START, branches.clone());
    for b in &branches {
        wide_join = wide_join.node(b.as_str(), noop);
    }
    let found = problems(wide_join.join(branches, "m"));
    assert!(found.contains(&Problem::LimitExceeded {
        limit: "JOIN_SOURCES_MAX",
        subject: s("m"),
        value: JOIN_SOURCES_MAX as u64 + 1,
        max: JOIN_SOURCES_MAX as u64,
    }));

    check(
        "permissions",
        linear().permissions((0..=PERMISSIONS_MAX).map(|i| format!("p{i}"))),
        vec![Problem::LimitExceeded {
            limit: "PERMISSIONS_MAX",
            subject: s("w"),
            value: PERMISSIONS_MAX as u64 + 1,
            max: PERMISSIONS_MAX as u64,
        }],
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let err = builder("w")
        .node("a", noop)
        .node("a", noop)
        .node_with("b", noop, NodePolicy::default().timeout_ms(0))
        .edge(START, "a")
        .edge("a", "ghost")
        .edge("a", "b")
        .route("b", |_: &S| "a", ["a", END])
        .build()
        .unwrap_err();
    assert_eq!(
        err.problems,
        vec![
            Problem::DuplicateNode(s("a")),
            Problem::UnknownTarget { from: s("a"), to: s("ghost") },
            Problem::PolicyOutOfRange {
                node: s("b"),
                detail: s("timeout_ms is 0; use None for no timeout"),
            },
            Problem::UnboundedCycle(vec![s("a"), s("b")]),
        ]
    );
    let message = err.to_string();
    assert!(message.contains("\"ghost\"") && message.contains("\"b\""), "{message}");
}
