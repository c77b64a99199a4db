//! The fingerprint is a stable function of the structure, and of nothing else.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use cairn_dsl::{Budgets, END, Fingerprint, NodeOutput, NodePolicy, RetryPolicy, START, Workflow};

use crate::common::{S, add_one, builder, kitchen_sink, noop};

fn linear(policy: NodePolicy) -> Workflow<S> {
    builder("w")
        .node_with("a", noop, policy)
        .node("b", noop)
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap()
}

/// The documented encoding, written out independently for START -> a -> b -> END with default
/// policies: the implementation must hash exactly these bytes.
#[test]
fn matches_the_documented_encoding() {
    let mut bytes: Vec<u8> = Vec::new();
    let u32le = |b: &mut Vec<u8>, v: u32| b.extend_from_slice(&v.to_le_bytes());
    let u64le = |b: &mut Vec<u8>, v: u64| b.extend_from_slice(&v.to_le_bytes());
    bytes.extend_from_slice(b"cairn-dsl/workflow-fingerprint/v1");
    u32le(&mut bytes, 1);
    bytes.push(b'w'); // id
    u32le(&mut bytes, 1); // version
    bytes.extend_from_slice(&[0; 5]); // five budgets, all None
    u64le(&mut bytes, 0.8_f64.to_bits()); // warn_fraction
    u32le(&mut bytes, 0); // permissions
    bytes.extend_from_slice(&[0, 0]); // checkpoint policy
    u32le(&mut bytes, 2); // nodes
    for name in [b'a', b'b'] {
        u32le(&mut bytes, 1);
        bytes.push(name);
        bytes.push(1); // task
        u32le(&mut bytes, 1); // max_attempts
        u64le(&mut bytes, 0); // initial backoff
        u64le(&mut bytes, 0); // max backoff
        u64le(&mut bytes, 1.0_f64.to_bits()); // multiplier
        u64le(&mut bytes, 0.0_f64.to_bits()); // jitter
        u32le(&mut bytes, 0); // non-retryable codes
        bytes.push(0); // timeout
        bytes.extend_from_slice(&[0, 0]); // checkpoint_after, phase
        u32le(&mut bytes, 0); // tags
        u32le(&mut bytes, 1); // node version
        bytes.push(0); // max_visits
    }
    for target in [0, 1, u32::MAX] {
        // START -> a, a -> b, b -> END: one edge, no route, no gotos.
        u32le(&mut bytes, 1);
        u32le(&mut bytes, target);
        bytes.push(0);
        u32le(&mut bytes, 0);
    }
    bytes.extend_from_slice(&[0, 0]); // no joins
    let expected = blake3::hash(&bytes).to_hex().to_string();
    assert_eq!(linear(NodePolicy::default()).fingerprint().to_hex(), expected);
}

/// Fixed values: if one changes, every recorded thread would see its workflow as changed.
/// Change them only together with the encoding's version in `fingerprint.rs`.
#[test]
fn fixed_values() {
    assert_eq!(
        linear(NodePolicy::default()).fingerprint().to_hex(),
        "ec8b8d4e0438709cf70cf6d73d716a568eebdeea332578f2fac0ca23c5477824"
    );
    assert_eq!(
        kitchen_sink().fingerprint().to_hex(),
        "888762aafc941e23df8112ba5b5d407a500c506238b36c07ddf41b6fdd11283a"
    );
}

#[test]
fn rebuilding_gives_the_same_fingerprint() {
    assert_eq!(kitchen_sink().fingerprint(), kitchen_sink().fingerprint());
    // Handler code is not part of the structure (the node version stands for it).
    let other_code = builder("w")
        .node("a", add_one)
        .node("b", |_s, _ctx| async { Ok(NodeOutput::update(9)) })
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", END)
        .build()
        .unwrap();
    assert_eq!(other_code.fingerprint(), linear(NodePolicy::default()).fingerprint());
}

#[test]
fn declaration_order_of_sets_does_not_matter() {
    let tags = |a: &str, b: &str| NodePolicy::default().tag(a).tag(b);
    assert_eq!(linear(tags("x", "y")).fingerprint(), linear(tags("y", "x")).fingerprint());
    let perms = |p: [&str; 2]| {
        builder("w").node("a", noop).edge(START, "a").edge("a", END).permissions(p).build().unwrap()
    };
    assert_eq!(perms(["net", "fs"]).fingerprint(), perms(["fs", "net"]).fingerprint());
    let edges = |first: &str, second: &str| {
        builder("w")
            .node("a", noop)
            .node("b", noop)
            .edge(START, "a")
            .edge(first, second)
            .edge("a", "b")
            .edge("b", END)
            .edge("a", END)
            .build()
            .unwrap()
    };
    assert_eq!(edges("a", END).fingerprint(), edges("a", "b").fingerprint());
}

#[test]
fn every_structural_change_changes_it() {
    let base = *linear(NodePolicy::default()).fingerprint();
    let variants: Vec<(&str, Fingerprint)> = vec![
        ("node version", *linear(NodePolicy::default().version(2)).fingerprint()),
        ("tag", *linear(NodePolicy::default().tag("t")).fingerprint()),
        ("timeout", *linear(NodePolicy::default().timeout_ms(5)).fingerprint()),
        ("retry", *linear(NodePolicy::default().retry(RetryPolicy::fixed(2, 10))).fingerprint()),
        (
            "jitter",
            *linear(NodePolicy::default().retry(RetryPolicy::none().jitter(0.5))).fingerprint(),
        ),
        ("checkpoint after", *linear(NodePolicy::default().checkpoint_after(true)).fingerprint()),
        ("phase", *linear(NodePolicy::default().phase(true)).fingerprint()),
        ("max visits", *linear(NodePolicy::default().max_visits(3)).fingerprint()),
        (
            "workflow version",
            *Workflow::<S>::builder("w", 2)
                .node("a", noop)
                .node("b", noop)
                .edge(START, "a")
                .edge("a", "b")
                .edge("b", END)
                .build()
                .unwrap()
                .fingerprint(),
        ),
        (
            "id",
            *builder("v")
                .node("a", noop)
                .node("b", noop)
                .edge(START, "a")
                .edge("a", "b")
                .edge("b", END)
                .build()
                .unwrap()
                .fingerprint(),
        ),
        (
            "node order",
            *builder("w")
                .node("b", noop)
                .node("a", noop)
                .edge(START, "a")
                .edge("a", "b")
                .edge("b", END)
                .build()
                .unwrap()
                .fingerprint(),
        ),
        (
            "extra edge",
            *builder("w")
                .node("a", noop)
                .node("b", noop)
                .edge(START, "a")
                .edge("a", "b")
                .edge("a", END)
                .edge("b", END)
                .build()
                .unwrap()
                .fingerprint(),
        ),
        (
            "edge became route",
            *builder("w")
                .node("a", noop)
                .node("b", noop)
                .edge(START, "a")
                .route("a", |_: &S| "b", ["b"])
                .edge("b", END)
                .build()
                .unwrap()
                .fingerprint(),
        ),
        (
            "edge became goto",
            *builder("w")
                .node("a", noop)
                .node("b", noop)
                .edge(START, "a")
                .gotos("a", ["b"])
                .edge("b", END)
                .build()
                .unwrap()
                .fingerprint(),
        ),
        (
            "budget",
            *builder("w")
                .node("a", noop)
                .node("b", noop)
                .edge(START, "a")
                .edge("a", "b")
                .edge("b", END)
                .budgets(Budgets::default().max_steps(9))
                .build()
                .unwrap()
                .fingerprint(),
        ),
        (
            "map node",
            *builder("w")
                .map("a", |_: &S| vec![1], noop)
                .node("b", noop)
                .edge(START, "a")
                .edge("a", "b")
                .edge("b", END)
                .build()
                .unwrap()
                .fingerprint(),
        ),
    ];
    let mut seen = vec![("base", base)];
    for (what, f) in variants {
        for (other, g) in &seen {
            assert_ne!(f, *g, "{what} and {other} have the same fingerprint");
        }
        seen.push((what, f));
    }
}

#[test]
fn a_changed_child_changes_the_parent() {
    let parent = |child_version: u32| {
        let child = Workflow::<S>::builder("c", 1)
            .node_with("x", noop, NodePolicy::default().version(child_version))
            .edge(START, "x")
            .edge("x", END)
            .build()
            .unwrap();
        builder("p")
            .subgraph("sub", child, |s: &S| s.clone(), |c: &S| c.0)
            .edge(START, "sub")
            .edge("sub", END)
            .build()
            .unwrap()
    };
    assert_eq!(parent(1).fingerprint(), parent(1).fingerprint());
    assert_ne!(parent(1).fingerprint(), parent(2).fingerprint());
}

#[test]
fn text_forms_round_trip() {
    let f = *kitchen_sink().fingerprint();
    let hex = f.to_string();
    assert_eq!(hex.len(), 64);
    assert!(hex.chars().all(|c| c.is_ascii_hexdigit() && !c.is_ascii_uppercase()));
    assert_eq!(hex.parse::<Fingerprint>().unwrap(), f);
    assert_eq!(hex.to_uppercase().parse::<Fingerprint>().unwrap(), f);
    let json = serde_json::to_value(f).unwrap();
    assert_eq!(json, serde_json::Value::String(hex.clone()));
    assert_eq!(serde_json::from_value::<Fingerprint>(json).unwrap(), f);
    for bad in ["", "0", &hex[1..], &format!("{}g", &hex[1..])] {
        assert!(bad.parse::<Fingerprint>().is_err(), "{bad:?}");
    }
    assert!(serde_json::from_value::<Fingerprint>(serde_json::json!("zz")).is_err());
}
