//! The binary form of an event body (`docs/format.md` §10), which the engine writes since
//! format v6: [`BINARY_V1`], then the variant's number (one byte, listed below, never reused or
//! renumbered), then its fields in the order listed, each in its [`Bin`] encoding (`wire.rs`,
//! `value.rs`), and nothing after.
//!
//! JSON bodies (what every older build wrote) start with `{` (or JSON whitespace): never with
//! [`BINARY_V1`], so a reader tells the two forms apart by the first byte and reads both forever.
//! The layout is not self-describing: a field added to a variant, or a retyped one, is a new
//! layout with a new leading byte, and this module keeps reading the old one. The match below
//! names every field of every variant, so such a change does not compile until it is made here.
//! One field was added otherwise, before this rule could bite: a variant's last field may be
//! a trailing one (after `;` below), written only when present and read only when bytes are
//! left, so the bodies written before it decode unchanged (`recovery_applied`'s failure kind,
//! one byte).

use super::wire::{Bin, Malformed, Reader};
use crate::error::Error;
use crate::event::Body;

/// The first byte of a binary body: not a byte any JSON text starts with.
pub const BINARY_V1: u8 = 0x01;

/// Declares the variants' numbers and field orders: the encoder and the decoder.
macro_rules! layout {
    ($($tag:literal $variant:ident { $($field:ident),+ $(; $trail:ident)? })*) => {
        fn put_body(body: &Body, out: &mut Vec<u8>) -> Result<(), Error> {
            match body {
                $(Body::$variant { $($field),+ $(, $trail)? } => {
                    out.push($tag);
                    $(Bin::put($field, out)?;)+
                    $(put_trailing($trail, out);)?
                })*
            }
            Ok(())
        }

        fn get_body(r: &mut Reader<'_>) -> Result<Body, Malformed> {
            Ok(match r.byte()? {
                $($tag => Body::$variant { $($field: Bin::get(r)?),+ $(, $trail: get_trailing(r)?)? },)*
                _ => return Err(Malformed("unknown body variant")),
            })
        }
    };
}

layout! {
    1 ThreadCreated { workflow, input, frontier, labels, fork, arrivals, visits, policy, seed }
    2 BudgetsSet { budgets }
    3 StatusChanged { from, to, reason }
    4 NodeStarted { step, task, attempt, item }
    5 NodeCompleted { step, task, attempt, update, goto, values, duration_ms, usage }
    6 NodeFailed { step, task, attempt, error, terminal }
    7 ToolCalled { step, task, attempt, call, name, permission, input, values }
    8 ToolReturned { step, task, attempt, call, name, output, usage, models, duration_ms }
    9 RetryScheduled { step, task, attempt, delay_ms, at_ms, error }
    10 InputRequested { step, task, prompt, values }
    11 InputReceived { task, value }
    12 SignalAwaited { step, task, name, values }
    13 SignalArrived { task, name }
    14 TimerSet { step, task, until_ms, values }
    15 TimerFired { task, until_ms }
    16 StepCompleted { step, next, arrivals }
    17 CheckpointCreated { kind, description, checkpoint }
    18 Progress { task, progress }
    19 Message { task, message }
    20 Recovered { action }
    21 Output { output }
    22 Lock { name, acquired }
    23 Budget { budget, used, limit }
    24 RecoveryApplied { step, task, attempt, strategy, error; kind }
    25 RolledBack { checkpoint, to_seq, reason, snapshot }
    26 ContinuedAsNew { thread, input }
    27 ContinuedFrom { thread }
    28 CompensationBegan { reason, undos }
    29 UndoStarted { index, name, args }
    30 UndoFinished { index, name, output, duration_ms }
    31 LabelsChanged { set, removed }
    32 StateUpdated { update, reason }
    33 UpdateApplied { id, name, args, reply, state }
    35 EventPublished { task, key, value }
    36 PromiseCreated { task, promise }
    37 CheckpointRequested { request }
    38 UpdateRefused { id, name, error }
}

/// Appends the binary form of `body`, [`BINARY_V1`] first.
pub(super) fn encode(body: &Body, out: &mut Vec<u8>) -> Result<(), Error> {
    out.push(BINARY_V1);
    put_body(body, out)
}

/// Writes a trailing failure kind: nothing when absent, else its byte.
fn put_trailing(kind: &Option<cairn_dsl::FailureKind>, out: &mut Vec<u8>) {
    if let Some(kind) = kind {
        out.push(kind.byte());
    }
}

/// Reads a trailing failure kind: absent when no byte is left (a body written before it).
fn get_trailing(r: &mut Reader<'_>) -> Result<Option<cairn_dsl::FailureKind>, Malformed> {
    if r.is_empty() {
        return Ok(None);
    }
    let b = r.byte()?;
    cairn_dsl::FailureKind::from_byte(b).map(Some).ok_or(Malformed("unknown failure kind"))
}

/// Reads a binary body: [`BINARY_V1`], one body, nothing after.
pub(super) fn decode(bytes: &[u8]) -> Result<Body, Malformed> {
    let mut r = Reader::new(bytes);
    if r.byte()? != BINARY_V1 {
        return Err(Malformed("not a binary body"));
    }
    let body = get_body(&mut r)?;
    if !r.is_empty() {
        return Err(Malformed("bytes after the body"));
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use cairn_dsl::{Message, NodeError, Target, ToolError, Usage};
    use cairn_storage::{CheckpointId, CheckpointKind, ThreadStatus, WorkflowRef};
    use serde_json::json;

    use super::*;
    use crate::codec::{decode_body, encode_body};
    use crate::event::{ForkOrigin, TaskKey, ThreadPolicy};

    fn node_completed() -> Body {
        Body::NodeCompleted {
            step: 3,
            task: TaskKey::node("n"),
            attempt: 1,
            update: Some(json!({"x": 1})),
            goto: vec![],
            values: vec![json!({"clock": 5})],
            duration_ms: 2,
            usage: Usage::default(),
        }
    }

    /// The body as builds before format v6 wrote it (and as the JSON edges still show it).
    const NODE_COMPLETED_JSON: &[u8] = br#"{"type":"node_completed","step":3,"task":{"node":"n"},"attempt":1,"update":{"x":1},"values":[{"clock":5}],"duration_ms":2,"usage":{"tokens":0,"cost_micros":0}}"#;

    /// The same body as the engine writes it now (`docs/format.md` §10's worked example).
    const NODE_COMPLETED_BINARY: &[u8] = &[
        0x01, 0x05, // binary v1, node_completed
        0x03, // step 3
        0x01, b'n', 0x00, // task "n", no item
        0x01, // attempt 1
        0x01, 0x08, 0x01, 0x01, b'x', 0x03, 0x01, // update Some({"x": 1})
        0x00, // goto []
        0x01, 0x08, 0x01, 0x05, b'c', b'l', b'o', b'c', b'k', 0x03,
        0x05, // values [{"clock": 5}]
        0x02, // duration_ms 2
        0x00, 0x00, // usage 0 tokens, 0 cost
    ];

    /// A body with a wire enum and an embedded JSON type: a failed tool.
    fn tool_failed() -> Body {
        Body::ToolReturned {
            step: 1,
            task: TaskKey { node: "a".into(), item: Some(2) },
            attempt: 1,
            call: 0,
            name: "t".into(),
            output: Err(ToolError { message: "no".into(), retryable: false, code: None }),
            usage: Usage { tokens: 300, cost_micros: 0 },
            models: BTreeMap::new(),
            duration_ms: 4,
        }
    }

    const TOOL_FAILED_BINARY: &[u8] = b"\x01\x08\x01\x01a\x01\x02\x01\x00\x01t\x01\x2e{\"message\":\"no\",\"retryable\":false,\"code\":null}\xac\x02\x00\x00\x04";

    #[test]
    fn old_json_bodies_and_binary_ones_are_pinned_and_decode_forever() {
        let body = node_completed();
        assert_eq!(encode_body(&body).expect("encodes"), NODE_COMPLETED_BINARY);
        assert_eq!(decode_body(&mut NODE_COMPLETED_BINARY.to_vec()).expect("binary"), body);
        assert_eq!(decode_body(&mut NODE_COMPLETED_JSON.to_vec()).expect("json"), body);
        assert_eq!(
            serde_json::to_vec(&body).expect("json"),
            NODE_COMPLETED_JSON,
            "the edge's JSON"
        );
        let failed = tool_failed();
        assert_eq!(encode_body(&failed).expect("encodes"), TOOL_FAILED_BINARY);
        assert_eq!(decode_body(&mut TOOL_FAILED_BINARY.to_vec()).expect("binary"), failed);
        let status = Body::StatusChanged {
            from: ThreadStatus::Running,
            to: ThreadStatus::Completed,
            reason: "ok".into(),
        };
        assert_eq!(encode_body(&status).expect("encodes"), [1, 3, 2, 6, 2, b'o', b'k']);
    }

    #[test]
    fn an_update_refused_is_variant_38_and_reads_back() {
        let body = Body::UpdateRefused { id: "u".into(), name: "add".into(), error: "no".into() };
        let mut bytes = encode_body(&body).expect("encodes");
        assert_eq!(bytes, [1, 38, 1, b'u', 3, b'a', b'd', b'd', 2, b'n', b'o']);
        assert_eq!(decode_body(&mut bytes).expect("decodes"), body);
    }

    #[test]
    fn a_recovery_applied_without_a_kind_is_the_old_bytes_and_one_with_a_kind_ends_with_it() {
        let old = Body::RecoveryApplied {
            step: 2,
            task: TaskKey { node: "w".into(), item: None },
            attempt: 1,
            strategy: cairn_dsl::Recovery::Abandon,
            error: NodeError::fatal("x"),
            kind: None,
        };
        let mut old_bytes = encode_body(&old).expect("encodes");
        let Body::RecoveryApplied { step, task, attempt, strategy, error, .. } = old.clone() else {
            unreachable!()
        };
        let kind = Some(cairn_dsl::FailureKind::Deadlock);
        let new = Body::RecoveryApplied { step, task, attempt, strategy, error, kind };
        let mut new_bytes = encode_body(&new).expect("encodes");
        assert_eq!(new_bytes[..old_bytes.len()], old_bytes[..], "the kind only trails");
        assert_eq!(new_bytes[old_bytes.len()..], [2]);
        assert_eq!(decode_body(&mut old_bytes).expect("an old body decodes"), old);
        assert_eq!(decode_body(&mut new_bytes).expect("decodes"), new);
        let mut unknown = encode_body(&old).expect("encodes");
        unknown.push(9);
        assert!(decode_body(&mut unknown).is_err(), "no such kind");
    }

    /// One body of each shape of field: every [`Bin`] impl, both ways.
    fn samples() -> Vec<Body> {
        let task = TaskKey { node: "m".into(), item: Some(7) };
        let arrivals = BTreeMap::from([("j".to_owned(), vec!["a".to_owned(), "b".to_owned()])]);
        vec![
            node_completed(),
            tool_failed(),
            Body::ThreadCreated {
                workflow: WorkflowRef { id: "w".into(), version: 2, fingerprint: "ff".into() },
                input: json!([1.5, -3, "s", null, true, {"k": {}}]),
                frontier: vec!["a".into()],
                labels: BTreeMap::from([("l".to_owned(), "v".to_owned())]),
                fork: Some(ForkOrigin { thread: "p".into(), seq: 9 }),
                arrivals: arrivals.clone(),
                visits: BTreeMap::from([("a".to_owned(), 3)]),
                policy: Box::new(ThreadPolicy { deadline_at_ms: Some(5), ..Default::default() }),
                seed: Some(u64::MAX),
            },
            Body::NodeCompleted {
                step: 1,
                task: task.clone(),
                attempt: 2,
                update: None,
                goto: vec![Target::Node("b".into()), Target::End],
                values: vec![],
                duration_ms: 0,
                usage: Usage { tokens: 1, cost_micros: 2 },
            },
            Body::NodeFailed {
                step: 1,
                task: task.clone(),
                attempt: 1,
                error: NodeError::retryable("x"),
                terminal: true,
            },
            Body::ToolReturned {
                step: 1,
                task: task.clone(),
                attempt: 1,
                call: 3,
                name: "t".into(),
                output: Ok(json!("out")),
                usage: Usage::default(),
                models: BTreeMap::from([("gpt".to_owned(), Usage { tokens: 5, cost_micros: 6 })]),
                duration_ms: 1,
            },
            Body::StepCompleted { step: 4, next: vec!["a".into(), "b".into()], arrivals },
            Body::CheckpointCreated {
                kind: CheckpointKind::Completion,
                description: "d".into(),
                checkpoint: Some(CheckpointId(8)),
            },
            Body::Message { task, message: Message::new("user", "hi") },
            Body::Lock { name: "l".into(), acquired: false },
            Body::LabelsChanged { set: BTreeMap::new(), removed: vec!["x".into()] },
            Body::UpdateApplied {
                id: "u-1".into(),
                name: "add".into(),
                args: json!({"by": 2}),
                reply: json!(7),
                state: json!({"count": 7}),
            },
            Body::EventPublished {
                task: TaskKey::node("n"),
                key: "stage".into(),
                value: json!({"at": "shipping"}),
            },
            Body::PromiseCreated {
                task: TaskKey::node("n"),
                promise: "t~p1.0123456789abcdef.0".into(),
            },
            Body::CheckpointRequested {
                request: crate::checkpoint_requests::CheckpointRequest::AtNode {
                    node: "review".into(),
                    meta: cairn_storage::CheckpointMeta {
                        creator: "alice".into(),
                        tags: vec!["before-review".into()],
                        ..Default::default()
                    },
                },
            },
        ]
    }

    #[test]
    fn every_kind_of_field_round_trips() {
        for body in samples() {
            let mut bytes = encode_body(&body).expect("encodes");
            assert_eq!(decode_body(&mut bytes).expect("decodes"), body);
            let json = serde_json::to_vec(&body).expect("json");
            assert!(bytes.len() < json.len(), "{body:?}: binary is smaller");
        }
    }

    #[test]
    fn damaged_binary_bodies_are_refused_never_misread() {
        let bytes = encode_body(&tool_failed()).expect("encodes");
        for cut in 1..bytes.len() {
            assert!(decode(&bytes[..cut]).is_err(), "cut at {cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert!(decode(&longer).is_err(), "trailing byte");
        let mut unknown = bytes;
        unknown[1] = 200;
        assert!(decode(&unknown).is_err(), "unknown variant");
    }
}
