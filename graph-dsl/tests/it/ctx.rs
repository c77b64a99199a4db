//! The typed `Ctx` layer: values cross into the engine as JSON and come back typed.

use cairn_dsl::{Message, NodeError, ToolCall, ToolError};
use futures::executor::block_on;
use serde_json::json;

use crate::common::ScriptedContext;

#[test]
fn plain_accessors_forward_to_the_engine() {
    let (_, ctx) = ScriptedContext::new().ctx();
    assert_eq!((ctx.thread_id(), ctx.node(), ctx.step(), ctx.attempt()), ("t-1", "n", 7, 2));
    assert_eq!((ctx.now_ms(), ctx.random_u64(), ctx.new_id()), (1_000, 42, "id-1".to_owned()));
}

#[test]
fn a_tool_sees_the_recorded_input_not_the_captured_one() {
    let mut scripted = ScriptedContext::new();
    scripted.recorded_input = Some(json!("recorded"));
    let (_, ctx) = scripted.ctx();
    let out: String =
        block_on(ctx.tool("echo", "fresh".to_owned(), |input: String, _t| async move {
            Ok(format!("saw {input}"))
        }))
        .expect("tool runs");
    assert_eq!(out, "saw recorded");
}

#[test]
fn tool_calls_carry_name_permission_and_json_input() {
    let (scripted, ctx) = ScriptedContext::new().ctx();
    let out: Vec<u32> = block_on(ctx.call(
        ToolCall::new("search").permission("net"),
        (1_u32, 2_u32),
        |(a, b): (u32, u32), _t| async move { Ok(vec![a + b]) },
    ))
    .expect("tool runs");
    assert_eq!(out, [3]);
    assert_eq!(scripted.log(), ["tool search Some(\"net\") [1,2]"]);
}

#[test]
fn tool_errors_become_node_errors_with_their_code() {
    let (_, ctx) = ScriptedContext::new().ctx();
    let err = block_on(ctx.tool("flaky", (), |(), _t| async {
        Err::<(), _>(ToolError::retryable("503").with_code("unavailable"))
    }))
    .unwrap_err();
    assert_eq!(
        err,
        NodeError::Failed {
            code: Some("unavailable".into()),
            message: "503".into(),
            retryable: true
        }
    );
}

#[test]
fn undecodable_values_are_codec_errors_not_panics() {
    // The recorded input is not a u32: the tool body is not run, the call fails permanently.
    let mut scripted = ScriptedContext::new();
    scripted.recorded_input = Some(json!("not a number"));
    let (_, ctx) = scripted.ctx();
    let err = block_on(ctx.tool("t", 1_u32, |n: u32, _t| async move { Ok(n) })).unwrap_err();
    assert_eq!(err.code(), Some("codec"));
    assert!(!err.is_retryable(&cairn_dsl::RetryPolicy::exponential(3, 1, 2)));

    // The recorded output (from an older version of the code, say) is not what the caller
    // expects now.
    let mut scripted = ScriptedContext::new();
    scripted.recorded_output = Some(json!("text"));
    let (_, ctx) = scripted.ctx();
    let err = block_on(ctx.tool("t", (), |(), _t| async { Ok(1_u32) })).unwrap_err();
    assert!(matches!(err, NodeError::Codec { .. }), "{err:?}");

    // The input does not serialise (a map with non-string keys).
    let (scripted, ctx) = ScriptedContext::new().ctx();
    let bad_input: std::collections::BTreeMap<(u8, u8), u8> = [((1, 2), 3)].into();
    let err = block_on(ctx.tool("t", bad_input, |_m, _t| async { Ok(()) })).unwrap_err();
    assert!(matches!(err, NodeError::Codec { .. }), "{err:?}");
    assert!(scripted.log().is_empty(), "the engine was not asked");
}

#[test]
fn map_items_are_typed() {
    let mut scripted = ScriptedContext::new();
    scripted.item = Some(json!({"url": "u"}));
    let (_, ctx) = scripted.ctx();
    #[derive(serde::Deserialize, PartialEq, Debug)]
    struct Doc {
        url: String,
    }
    assert_eq!(ctx.item::<Doc>().unwrap(), Doc { url: "u".into() });
    assert!(matches!(ctx.item::<u8>(), Err(NodeError::Codec { .. })));

    let (_, ctx) = ScriptedContext::new().ctx();
    let err = ctx.item::<Doc>().unwrap_err();
    assert!(err.to_string().contains("not a map task"), "{err}");
}

#[test]
fn interrupt_suspends_until_answered() {
    let (_, ctx) = ScriptedContext::new().ctx();
    let err = ctx.interrupt::<_, bool>(json!({"q": "ok?"})).unwrap_err();
    assert_eq!(err, NodeError::Interrupted { prompt: json!({"q": "ok?"}) });
    assert!(err.is_suspension());

    let mut scripted = ScriptedContext::new();
    scripted.answer = Some(json!(true));
    let (_, ctx) = scripted.ctx();
    assert!(ctx.interrupt::<_, bool>("ok?").unwrap());
    assert!(matches!(ctx.interrupt::<_, String>("ok?"), Err(NodeError::Codec { .. })));
}

#[test]
fn recv_suspends_until_a_signal_is_there_and_converts_it() {
    let (scripted, ctx) = ScriptedContext::new().ctx();
    let err = block_on(ctx.recv::<u64>("payment")).unwrap_err();
    assert_eq!(err, NodeError::WaitingSignal { name: "payment".into() });
    assert!(err.is_suspension());
    assert_eq!(block_on(ctx.try_recv::<u64>("payment")), Ok(None));

    scripted.signals.lock().unwrap().extend([json!(30), json!(5)]);
    assert_eq!(block_on(ctx.recv::<u64>("payment")), Ok(30));
    assert_eq!(block_on(ctx.try_recv::<u64>("payment")), Ok(Some(5)));
}

/// A value that is not the type the node receives is set aside, reported, and the next one
/// received; with none after it, `recv` waits and `try_recv` finds none. Never an error.
#[test]
fn recv_sets_aside_a_signal_that_does_not_decode_and_takes_the_next() {
    let (scripted, ctx) = ScriptedContext::new().ctx();
    scripted.signals.lock().unwrap().extend([json!("thirty"), json!(30), json!(-1), json!(5)]);
    assert_eq!(block_on(ctx.recv::<u64>("payment")), Ok(30));
    assert_eq!(block_on(ctx.try_recv::<u64>("payment")), Ok(Some(5)));
    scripted.signals.lock().unwrap().extend([json!({"a": 1})]);
    assert_eq!(block_on(ctx.try_recv::<u64>("payment")), Ok(None));
    scripted.signals.lock().unwrap().extend([json!(null)]);
    let waiting = block_on(ctx.recv::<String>("note")).unwrap_err();
    assert_eq!(waiting, NodeError::WaitingSignal { name: "note".into() });
    assert_eq!(
        scripted.log(),
        [
            "set aside payment: not a u64: invalid type: string \"thirty\", expected u64",
            "set aside payment: not a u64: invalid value: integer `-1`, expected u64",
            "set aside payment: not a u64: invalid type: map, expected u64",
            "set aside note: not a String: invalid type: null, expected a string",
        ]
    );
}

#[test]
fn sleeps_locks_and_cancellation() {
    let (scripted, ctx) = ScriptedContext::new().ctx();
    assert_eq!(block_on(ctx.sleep_ms(500)), Err(NodeError::Sleeping { until_ms: 1_500 }));
    assert_eq!(block_on(ctx.sleep_until_ms(900)), Err(NodeError::Sleeping { until_ms: 900 }));
    block_on(ctx.lock("gpu", 60_000)).unwrap();
    assert!(matches!(block_on(ctx.try_lock("gpu", 10)), Err(NodeError::Lock { .. })));
    block_on(ctx.unlock("gpu")).unwrap();
    assert_eq!(scripted.log(), ["lock gpu 60000 true", "lock gpu 10 false", "unlock gpu"]);
    // Without an atomic lock_all of its own, a context takes them one by one.
    block_on(ctx.lock_all(&["a", "b"], 5)).unwrap();
    assert!(matches!(block_on(ctx.try_lock_all(&["c", "d"], 5)), Err(NodeError::Lock { .. })));
    assert_eq!(scripted.log()[3..5], ["lock a 5 true", "lock b 5 true"]);

    assert!(!ctx.is_cancelled());
    scripted.token.cancel();
    assert!(ctx.is_cancelled());
    block_on(ctx.cancelled()); // completes because the token fired
}

#[test]
fn progress_messages_and_usage_are_forwarded() {
    let (scripted, ctx) = ScriptedContext::new().ctx();
    ctx.progress(1, 6, "building context");
    ctx.message(Message::new("assistant", "outline ready"));
    ctx.usage(120, 30);
    assert_eq!(
        scripted.log(),
        ["progress 1/6 building context", "message assistant: outline ready"]
    );
    assert_eq!(
        *scripted.usage.lock().unwrap(),
        [cairn_dsl::Usage { tokens: 120, cost_micros: 30 }]
    );
}
