//! Fuzz check `dsl_builder`: arbitrary bytes become a sequence of workflow-builder operations
//! (nodes, maps, sub-workflows, edges, fan-outs, joins, routes, gotos, loop bounds, policies,
//! budgets, checkpoint policies) over a small alphabet of names, `START`, `END` and odd names.
//! Building must return a workflow or a `BuildError`, never panic; a built workflow has the same
//! fingerprint when built again from the same operations, renders as DOT and Mermaid, and routes
//! from `START` without panicking.
//!
//! Shared by the fuzz target (`fuzz/fuzz_targets/dsl_builder.rs`) and the corpus replay in the
//! reliability suite, so both run exactly this code.

use std::sync::Arc;

use cairn::dsl::{CheckpointPolicy, NodePolicy, RetryPolicy};
use cairn::{END, NodeOutput, Replace, START, Workflow};

/// Most operations read from one input (keeps every input fast).
const OPS_MAX: usize = 96;

const NAMES: [&str; 10] = ["a", "b", "c", "d", "e", START, END, "", "a b", "ü-∂"];

struct Bytes<'a>(std::slice::Iter<'a, u8>);

impl Bytes<'_> {
    fn byte(&mut self) -> Option<u8> {
        self.0.next().copied()
    }

    fn name(&mut self) -> &'static str {
        NAMES[usize::from(self.byte().unwrap_or(0)) % NAMES.len()]
    }

    fn names(&mut self) -> Vec<&'static str> {
        let n = usize::from(self.byte().unwrap_or(0) % 5);
        (0..n).map(|_| self.name()).collect()
    }

    fn small(&mut self) -> u32 {
        u32::from(self.byte().unwrap_or(0) % 8)
    }
}

fn policy(bytes: &mut Bytes<'_>) -> NodePolicy {
    let flags = bytes.byte().unwrap_or(0);
    let mut p = NodePolicy::default();
    if flags & 1 != 0 {
        p = p.retry(RetryPolicy::exponential(bytes.small(), u64::from(bytes.small()), 100));
    }
    if flags & 2 != 0 {
        p = p.timeout_ms(u64::from(bytes.small()));
    }
    p.checkpoint_after(flags & 4 != 0).phase(flags & 8 != 0).version(bytes.small())
}

fn build(data: &[u8]) -> Result<Workflow<Replace<u64>>, cairn::dsl::BuildError> {
    let mut bytes = Bytes(data.iter());
    let version = bytes.small();
    let mut b = Workflow::<Replace<u64>>::builder(bytes.name(), version);
    for _ in 0..OPS_MAX {
        let Some(op) = bytes.byte() else { break };
        b = match op % 12 {
            0 => b.node(bytes.name(), |s: Arc<Replace<u64>>, _ctx| async move {
                Ok(NodeOutput::update(s.0 + 1))
            }),
            1 => b.node_with(
                bytes.name(),
                |_s: Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(0)) },
                policy(&mut bytes),
            ),
            2 => b.edge(bytes.name(), bytes.name()),
            3 => {
                let from = bytes.name();
                b.fan_out(from, bytes.names())
            }
            4 => {
                let sources = bytes.names();
                b.join(sources, bytes.name())
            }
            5 => {
                let from = bytes.name();
                let targets = bytes.names();
                let pick = targets.first().copied().unwrap_or("nowhere");
                b.route(from, move |_s: &Replace<u64>| pick, targets)
            }
            6 => {
                let node = bytes.name();
                b.gotos(node, bytes.names())
            }
            7 => b.loop_bound(bytes.name(), bytes.small()),
            8 => b.map(
                bytes.name(),
                |s: &Replace<u64>| vec![s.0; 2],
                |s: Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(s.0)) },
            ),
            9 => {
                let child = Workflow::<Replace<u64>>::builder(bytes.name(), 1)
                    .node("only", |s: Arc<Replace<u64>>, _ctx| async move {
                        Ok(NodeOutput::update(s.0))
                    })
                    .edge(START, "only")
                    .edge("only", END)
                    .build();
                match child {
                    Ok(child) => b.subgraph(
                        bytes.name(),
                        child,
                        |s: &Replace<u64>| s.clone(),
                        |c: &Replace<u64>| c.0,
                    ),
                    Err(_) => b,
                }
            }
            10 => {
                let steps = bytes.small();
                b.checkpoint_every(CheckpointPolicy {
                    every_steps: Some(u64::from(steps)),
                    every_ms: None,
                })
            }
            _ => b.permissions(bytes.names()),
        };
    }
    b.build()
}

/// Whether the operations `data` stands for build a workflow.
#[allow(dead_code, reason = "used by the corpus replay, not by the fuzz target")]
pub fn builds(data: &[u8]) -> bool {
    build(data).is_ok()
}

/// The check: never a panic; a workflow that builds is deterministic and renders.
pub fn check(data: &[u8]) {
    match build(data) {
        Ok(wf) => {
            let again = build(data).expect("the same operations build again");
            assert_eq!(wf.fingerprint(), again.fingerprint(), "the fingerprint is deterministic");
            assert!(!wf.to_dot().is_empty());
            assert!(!wf.to_mermaid().is_empty());
            let erased = wf.erase();
            if let Ok(state) = erased.state_from_json(&serde_json::json!(3)) {
                let _ = erased.start(state.as_ref());
            }
        }
        Err(error) => assert!(!error.to_string().is_empty()),
    }
}
