//! Recovery strategies in the definition: a fallback must be a declared goto, a workflow's
//! default reaches the nodes without their own, and only a set strategy changes the fingerprint.

use cairn_dsl::{END, NodeOutput, NodePolicy, Problem, Recovery, Replace, START, Workflow};

fn build(
    policy: NodePolicy,
    default: Option<Recovery>,
    gotos: bool,
) -> Result<Workflow<Replace<u32>>, cairn_dsl::BuildError> {
    let mut b = Workflow::<Replace<u32>>::builder("rec", 1)
        .node_with("a", |s, _ctx| async move { Ok(NodeOutput::update(s.0 + 1)) }, policy)
        .node("b", |s, _ctx| async move { Ok(NodeOutput::update(s.0 + 10)) })
        .edge(START, "a")
        .edge("a", END)
        .edge("b", END);
    if gotos {
        b = b.gotos("a", ["b"]);
    }
    if let Some(r) = default {
        b = b.on_failure(r);
    }
    b.build()
}

#[test]
fn a_fallback_must_be_one_of_the_nodes_gotos() {
    let fallback = NodePolicy::default().on_failure(Recovery::Fallback("b".into()));
    assert!(build(fallback.clone(), None, true).is_ok());
    let err = build(fallback, None, false).unwrap_err();
    assert!(
        err.problems.iter().any(|p| matches!(p, Problem::PolicyOutOfRange { node, detail }
            if node == "a" && detail.contains("not one of its gotos"))),
        "{err}"
    );
    let missing = NodePolicy::default().on_failure(Recovery::Fallback("nowhere".into()));
    assert!(build(missing, None, true).is_err());
}

#[test]
fn the_workflow_default_reaches_nodes_without_their_own_and_the_fingerprint_sees_it() {
    let plain = build(NodePolicy::default(), None, true).unwrap();
    let abandon = build(NodePolicy::default(), Some(Recovery::Abandon), true).unwrap();
    let nodes = abandon.as_dyn().nodes();
    assert!(nodes.iter().all(|n| n.policy.on_failure == Recovery::Abandon));
    // A node's own strategy wins over the default.
    let own = NodePolicy::default().on_failure(Recovery::Escalate);
    let mixed = build(own, Some(Recovery::Abandon), true).unwrap();
    assert_eq!(mixed.as_dyn().nodes()[0].policy.on_failure, Recovery::Escalate);
    assert_eq!(mixed.as_dyn().nodes()[1].policy.on_failure, Recovery::Abandon);
    assert_ne!(plain.fingerprint(), abandon.fingerprint());
    assert_ne!(abandon.fingerprint(), mixed.fingerprint());
    // Fail is the default: stating it changes nothing.
    let stated = build(NodePolicy::default().on_failure(Recovery::Fail), None, true).unwrap();
    assert_eq!(plain.fingerprint(), stated.fingerprint());
}
