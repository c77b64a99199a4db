//! Decoding the bodies the log holds most of by reading their tag first.
//!
//! serde's derived decoder for the internally tagged [`Body`] cannot know the variant before it
//! has seen the `"type"` key, which may come last, so it buffers every field of every body into
//! an intermediate tree (serde's `Content`) and decodes the variant from that: for the bodies a
//! fold or a replay reads by the hundred thousand, that buffering was more than half of the
//! decode's cost. The engine's own encoder (`serde_json::to_vec` of a [`Body`]) always writes the
//! tag first, as `{"type":"<tag>",...}`; for the variants below, [`decode`] reads that prefix and
//! decodes the rest straight into the variant's fields.
//!
//! What it does not take (another variant, a tag not first, whitespace, a field it does not
//! know, any error) it leaves to the general decoder, which reads every body the same as
//! before: the bytes are not changed (no format change), and this is only a faster way to the
//! same [`Body`]. Each `*Fields` struct mirrors its variant field for field, with the same serde
//! attributes, and denies unknown fields, so a field added to the variant without being added
//! here sends those bodies to the general decoder instead of dropping the field (and the
//! conversion to [`Body`] names every field, so one removed from the variant fails to compile).

use std::collections::BTreeMap;

use cairn_dsl::{Target, ToolError, Usage};
use cairn_storage::ThreadStatus;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use crate::event::{Body, TaskKey};

/// What the engine's encoder writes before a body's tag.
const PREFIX: &[u8] = b"{\"type\":\"";

/// `bytes` (a body's JSON) decoded by its tag when it is one of the variants decoded here,
/// written as the engine writes it; `None` otherwise (or when it does not decode), for the
/// general decoder to read. `bytes` is used as scratch space and left as it was.
pub(super) fn decode(bytes: &mut [u8]) -> Option<Body> {
    let rest = bytes.strip_prefix(PREFIX)?;
    let tag_len = rest.iter().position(|&b| b == b'"')?;
    let quote = PREFIX.len() + tag_len;
    // The fields as a JSON object of their own: `{` in place of the `,` after the tag (or of
    // the tag's closing quote, for a body with no fields: `"}` becomes `{}`).
    let open = match bytes.get(quote + 1)? {
        b',' => quote + 1,
        b'}' => quote,
        _ => return None,
    };
    let was = std::mem::replace(&mut bytes[open], b'{');
    let tag = &bytes[PREFIX.len()..quote];
    let fields = &bytes[open..];
    let body = match tag {
        b"node_completed" => fields_of::<NodeCompletedFields>(fields),
        b"step_completed" => fields_of::<StepCompletedFields>(fields),
        b"node_started" => fields_of::<NodeStartedFields>(fields),
        b"tool_called" => fields_of::<ToolCalledFields>(fields),
        b"tool_returned" => fields_of::<ToolReturnedFields>(fields),
        b"status_changed" => fields_of::<StatusChangedFields>(fields),
        _ => None,
    };
    bytes[open] = was;
    body
}

/// The variant whose fields `json` holds, or `None` when they do not decode as `F`.
fn fields_of<F: DeserializeOwned + Into<Body>>(json: &[u8]) -> Option<Body> {
    serde_json::from_slice::<F>(json).ok().map(Into::into)
}

/// Declares each `*Fields` struct (a variant's fields, with its serde attributes, denying
/// unknown fields) and its conversion into the variant, which names every field.
macro_rules! fields {
    ($($fields:ident => $variant:ident { $($(#[$attr:meta])* $field:ident: $ty:ty,)* })*) => {$(
        #[doc = concat!("[`Body::", stringify!($variant), "`]'s fields.")]
        #[derive(Deserialize)]
        #[serde(deny_unknown_fields)]
        struct $fields {
            $($(#[$attr])* $field: $ty,)*
        }

        impl From<$fields> for Body {
            fn from(f: $fields) -> Self {
                let $fields { $($field),* } = f;
                Body::$variant { $($field),* }
            }
        }
    )*};
}

fields! {
    NodeCompletedFields => NodeCompleted {
        step: u64,
        task: TaskKey,
        attempt: u32,
        update: Option<Value>,
        #[serde(default)]
        goto: Vec<Target>,
        #[serde(default)]
        values: Vec<Value>,
        duration_ms: u64,
        #[serde(default)]
        usage: Usage,
    }
    StepCompletedFields => StepCompleted {
        step: u64,
        next: Vec<String>,
        #[serde(default)]
        arrivals: BTreeMap<String, Vec<String>>,
    }
    NodeStartedFields => NodeStarted {
        step: u64,
        task: TaskKey,
        attempt: u32,
        #[serde(default)]
        item: Option<Value>,
    }
    ToolCalledFields => ToolCalled {
        step: u64,
        task: TaskKey,
        attempt: u32,
        call: u32,
        name: String,
        #[serde(default)]
        permission: Option<String>,
        input: Value,
        #[serde(default)]
        values: Vec<Value>,
    }
    ToolReturnedFields => ToolReturned {
        step: u64,
        task: TaskKey,
        attempt: u32,
        call: u32,
        name: String,
        output: Result<Value, ToolError>,
        #[serde(default)]
        usage: Usage,
        #[serde(default)]
        models: BTreeMap<String, Usage>,
        duration_ms: u64,
    }
    StatusChangedFields => StatusChanged {
        from: ThreadStatus,
        to: ThreadStatus,
        reason: String,
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use cairn_dsl::{Target, ToolError, Usage};
    use cairn_storage::ThreadStatus;
    use serde_json::json;

    use super::decode;
    use crate::event::{Body, TaskKey};

    /// Every variant [`decode`] takes, once with each optional field set and once with none.
    fn taken() -> Vec<Body> {
        let task = TaskKey { node: "map".into(), item: Some(3) };
        let usage = Usage { tokens: 7, cost_micros: 9 };
        vec![
            Body::NodeCompleted {
                step: 4,
                task: task.clone(),
                attempt: 2,
                update: Some(json!({"n": 1.5, "s": "é\"\\\n"})),
                goto: vec![Target::Node("b".into()), Target::End],
                values: vec![json!(1), json!("id")],
                duration_ms: 12,
                usage,
            },
            Body::NodeCompleted {
                step: 1,
                task: TaskKey::node("a"),
                attempt: 1,
                update: None,
                goto: vec![],
                values: vec![],
                duration_ms: 0,
                usage: Usage::default(),
            },
            Body::StepCompleted {
                step: 9,
                next: vec!["a".into(), "b".into()],
                arrivals: BTreeMap::from([("join".into(), vec!["a".into()])]),
            },
            Body::StepCompleted { step: 10, next: vec![], arrivals: BTreeMap::new() },
            Body::NodeStarted { step: 2, task: task.clone(), attempt: 1, item: Some(json!([1])) },
            Body::NodeStarted { step: 2, task: TaskKey::node("a"), attempt: 3, item: None },
            Body::ToolCalled {
                step: 3,
                task: task.clone(),
                attempt: 1,
                call: 0,
                name: "search".into(),
                permission: Some("net".into()),
                input: json!({"q": "x"}),
                values: vec![json!(5)],
            },
            Body::ToolCalled {
                step: 3,
                task: TaskKey::node("a"),
                attempt: 1,
                call: 1,
                name: "search".into(),
                permission: None,
                input: json!(null),
                values: vec![],
            },
            Body::ToolReturned {
                step: 3,
                task: task.clone(),
                attempt: 1,
                call: 0,
                name: "search".into(),
                output: Ok(json!(["r"])),
                usage,
                models: BTreeMap::from([("m".into(), usage)]),
                duration_ms: 30,
            },
            Body::ToolReturned {
                step: 3,
                task,
                attempt: 1,
                call: 1,
                name: "search".into(),
                output: Err(ToolError::retryable("503")),
                usage: Usage::default(),
                models: BTreeMap::new(),
                duration_ms: 0,
            },
            Body::StatusChanged {
                from: ThreadStatus::Running,
                to: ThreadStatus::Completed,
                reason: "end".into(),
            },
        ]
    }

    #[test]
    fn the_variants_it_takes_decode_as_the_general_decoder_does() {
        for body in taken() {
            let mut bytes = serde_json::to_vec(&body).unwrap();
            let before = bytes.clone();
            let general: Body = serde_json::from_slice(&bytes).unwrap();
            assert_eq!(decode(&mut bytes).as_ref(), Some(&general), "{body:?}");
            assert_eq!(general, body);
            assert_eq!(bytes, before, "the bytes are left as they were");
        }
    }

    #[test]
    fn what_it_does_not_take_is_left_to_the_general_decoder() {
        let other = Body::Output { output: json!(1) };
        let mut bytes = serde_json::to_vec(&other).unwrap();
        assert_eq!(decode(&mut bytes), None, "a variant it does not decode");
        let cases: [&[u8]; 6] = [
            // The tag last, whitespace, a field it does not know (a newer writer's), broken.
            br#"{"step":1,"next":[],"type":"step_completed"}"#,
            br#"{ "type":"step_completed","step":1,"next":[]}"#,
            br#"{"type":"step_completed","step":1,"next":[],"later":true}"#,
            br#"{"type":"step_completed","step":1"#,
            br#"{"type":"step_completed"}"#,
            br#"{"type":"step_completed"#,
        ];
        for case in cases {
            let mut bytes = case.to_vec();
            assert_eq!(decode(&mut bytes), None, "{}", String::from_utf8_lossy(case));
            assert_eq!(bytes, case, "the bytes are left as they were");
        }
        let general: Body = serde_json::from_slice(cases[2]).unwrap();
        assert_eq!(
            general,
            Body::StepCompleted { step: 1, next: vec![], arrivals: BTreeMap::new() }
        );
    }
}
