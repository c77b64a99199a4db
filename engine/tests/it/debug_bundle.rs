//! Debug bundles: round trips, redaction of planted secrets in every form, malformed input.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::panic::AssertUnwindSafe;
use std::sync::Arc;

use base64::Engine as _;
use base64::engine::general_purpose::{STANDARD, URL_SAFE};
use cairn::dsl::{Ctx, Message, NodeOutput, Replace, Workflow};
use cairn::{END, Engine, Error, START, StartOptions};
use cairn_tools::debug::{Bundle, ExportOptions, Redaction};
use serde_json::{Value, json};

use crate::common::{db, open};

/// A small deterministic random stream (SplitMix64).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }

    fn text(&mut self, len: usize, alphabet: &[char]) -> String {
        (0..len).map(|_| alphabet[self.below(alphabet.len() as u64) as usize]).collect()
    }
}

const PLAIN: &[char] = &[
    'a', 'b', 'c', 'd', 'e', 'f', 'g', 'h', 'k', 'm', 'n', 'p', 'q', 'r', 's', 't', 'w', 'x', 'y',
    'z', 'A', 'B', 'C', 'D', 'E', 'F', 'G', 'H', 'K', 'M', 'N', '2', '3', '4', '5', '6', '7', '8',
];
const SPECIAL: &[char] =
    &['a', 'Q', '7', 'z', '"', '\\', '/', '+', '=', '%', '&', '?', ' ', '\n', 'é', '日', '~', '#'];

/// A secret of 8..24 chars, some with characters that JSON, URLs and base64 treat specially.
fn secret(rng: &mut Rng) -> String {
    let len = 8 + rng.below(16) as usize;
    let mut s = format!("S{}", rng.text(4, PLAIN));
    let alphabet = if rng.below(2) == 0 { PLAIN } else { SPECIAL };
    s.push_str(&rng.text(len - 5, alphabet));
    s
}

fn url(s: &str, upper: bool, plus: bool) -> String {
    let mut out = String::new();
    for &b in s.as_bytes() {
        if b.is_ascii_alphanumeric() || b"-._~".contains(&b) {
            out.push(char::from(b));
        } else if plus && b == b' ' {
            out.push('+');
        } else if upper {
            out.push_str(&format!("%{b:02X}"));
        } else {
            out.push_str(&format!("%{b:02x}"));
        }
    }
    out
}

/// The secret embedded in a longer value, in every form a system may store it in.
fn planted(rng: &mut Rng, s: &str) -> Vec<String> {
    let pad = |rng: &mut Rng| {
        let n = rng.below(5) as usize;
        rng.text(n, PLAIN)
    };
    let mut bytes = pad(rng).into_bytes();
    bytes.extend_from_slice(s.as_bytes());
    bytes.extend_from_slice(pad(rng).as_bytes());
    let nested = serde_json::to_string(&json!({ "inner": s })).unwrap();
    vec![
        format!("raw {s} end"),
        nested,
        format!("https://example.invalid/cb?q={}&x=1", url(s, true, false)),
        format!("q={}", url(s, false, false)),
        format!("form={}", url(s, true, true)),
        STANDARD.encode(&bytes),
        URL_SAFE.encode(&bytes),
        format!("Basic {}", STANDARD.encode(format!("user:{s}"))),
    ]
}

/// A workflow whose input carries planted secrets into tool inputs and outputs (one large, so
/// it travels as a payload), messages, and state under sensitive keys.
fn leaky() -> Workflow<Replace<Value>> {
    Workflow::<Replace<Value>>::builder("leaky", 1)
        .node("fetch", |s: Arc<Replace<Value>>, ctx: Ctx| async move {
            let input = json!({
                "url": s.0["forms"][2],
                "headers": {"Authorization": format!("Bearer {}", s.0["api_key"].as_str().unwrap_or(""))},
                "forms": s.0["forms"],
            });
            let out: Value = ctx
                .tool("http.get", input, |i: Value, _| async move {
                    let filler = "lorem ipsum ".repeat(2_000);
                    Ok(json!({"body": filler, "echo": i["forms"], "session_token": i["url"]}))
                })
                .await?;
            let mut next = s.0.clone();
            next["fetched"] = out["echo"].clone();
            next["api_key"] = s.0["api_key"].clone();
            Ok(NodeOutput::update(next))
        })
        .node("say", |s: Arc<Replace<Value>>, ctx: Ctx| async move {
            let forms = s.0["forms"].as_array().cloned().unwrap_or_default();
            let text = forms.iter().filter_map(Value::as_str).collect::<Vec<_>>().join(" | ");
            ctx.message(Message::new("assistant", text).to("user").correlation_id("corr-1"));
            let mut next = s.0.clone();
            next["said"] = json!(true);
            Ok(NodeOutput::update(next))
        })
        .node("end", |s: Arc<Replace<Value>>, _ctx| async move {
            let mut next = s.0.clone();
            next["password"] = json!({"old": s.0["api_key"], "new": s.0["api_key"]});
            Ok(NodeOutput::update(next))
        })
        .edge(START, "fetch")
        .edge("fetch", "say")
        .edge("say", "end")
        .edge("end", END)
        .build()
        .unwrap()
}

fn gunzip(bytes: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let mut out = Vec::new();
    flate2::read::GzDecoder::new(bytes).read_to_end(&mut out).unwrap();
    out
}

fn contains(hay: &[u8], needle: &str) -> bool {
    !needle.is_empty() && hay.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// Two bundles are the same apart from their export time.
fn same(a: &Bundle, b: &Bundle) {
    let mut b = b.clone();
    b.timestamp = a.timestamp;
    let (x, y) = (serde_json::to_value(a).unwrap(), serde_json::to_value(&b).unwrap());
    if x != y {
        let changes = cairn_tools::debug::diff_values(&x, &y);
        panic!("bundles differ: {:#?}", &changes[..changes.len().min(5)]);
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn export_import_export_gives_the_same_bundle() {
    let (_d, path) = db();
    let wf = leaky();
    let engine = open(&path, &[&wf], |b| b.seed(5).checkpoint_every(Some(1), None)).await;
    let mut rng = Rng(1);
    let s = secret(&mut rng);
    let input = json!({"forms": planted(&mut rng, &s), "api_key": "marker-abc-123"});
    let options = StartOptions::id("rt").label("team", "blue").label("api-token", "xyz-777");
    let done = engine.start_json("leaky", Replace(input), options).await.unwrap().finished().await;
    assert_eq!(done.unwrap().status, cairn::ThreadStatus::Completed);

    for (redaction, last_events) in [
        (Redaction::none(), None),
        (Redaction::default().secret(s.clone()), None),
        (Redaction::none(), Some(4)),
        (Redaction::default().secret(s.clone()), Some(7)),
    ] {
        let opts = ExportOptions {
            include_checkpoints: true,
            last_events,
            gzip: true,
            redaction: redaction.clone(),
            ..ExportOptions::default()
        };
        let first = cairn_tools::Operator::new(&engine).export_bundle("rt", &opts).await.unwrap();
        assert!(
            last_events.is_some() || !first.events.payloads.is_empty(),
            "the large tool output travels by reference"
        );
        let bytes = first.to_bytes(true).unwrap();
        let read = Bundle::from_bytes(&bytes).unwrap();
        same(&first, &read);

        let (_d2, path2) = db();
        let fresh = open(&path2, &[&wf], |b| b.seed(5).checkpoint_every(Some(1), None)).await;
        let id = cairn_tools::Operator::new(&fresh).import_bundle(&read).await.unwrap();
        assert_eq!(id.as_str(), "rt");
        let again = cairn_tools::Operator::new(&fresh).export_bundle("rt", &opts).await.unwrap();
        same(&first, &again);
        assert!(fresh.store().verify().unwrap().is_clean());

        // The imported thread is inspectable: without redaction, every state equals the
        // original's.
        let lo = first.events.events[0].seq;
        let hi = first.metadata.thread.last_seq;
        if redaction.secrets.is_empty() && redaction.key_patterns.is_empty() {
            for seq in lo.saturating_sub(1).max(1)..=hi {
                assert_eq!(
                    cairn_tools::Operator::new(&fresh)
                        .state_at("rt", Some(seq))
                        .await
                        .unwrap()
                        .state,
                    cairn_tools::Operator::new(&engine)
                        .state_at("rt", Some(seq))
                        .await
                        .unwrap()
                        .state,
                    "seq {seq}"
                );
            }
        }
        if lo > 2 {
            assert!(
                cairn_tools::Operator::new(&fresh).state_at("rt", Some(1)).await.is_err(),
                "seqs before the bundle are gone"
            );
        }
        let err = cairn_tools::Operator::new(&fresh).import_bundle(&read).await.unwrap_err();
        assert!(matches!(err, Error::Invalid(_)), "{err}");
        fresh.shutdown().await;
    }
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn planted_secrets_never_survive_export_and_malformed_bundles_never_panic() {
    let (_d, path) = db();
    let wf = leaky();
    let engine = open(&path, &[&wf], |b| b.seed(5).checkpoint_every(Some(1), None)).await;
    let mut rng = Rng(42);
    const CASES: usize = 1_000;
    let mut cases = Vec::with_capacity(CASES);
    let mut handles = Vec::with_capacity(CASES);
    for i in 0..CASES {
        let s = secret(&mut rng);
        let marker = format!("keyed-{}", rng.text(12, PLAIN));
        let input = json!({"forms": planted(&mut rng, &s), "api_key": marker});
        let id = format!("s{i}");
        let options = StartOptions::id(id.clone()).label("note", format!("has {s}"));
        handles.push(engine.start_json("leaky", Replace(input), options).await.unwrap());
        cases.push((id, s, marker));
    }
    for h in &handles {
        h.finished().await.unwrap();
    }
    let mut leaks = 0;
    let mut sample = None;
    for (i, (id, s, marker)) in cases.iter().enumerate() {
        let opts = ExportOptions {
            include_checkpoints: i % 2 == 0,
            last_events: (i % 3 == 0).then(|| 1 + rng.below(12) as usize),
            gzip: i % 4 == 0,
            redaction: Redaction::default().secret(s.clone()),
            ..ExportOptions::default()
        };
        let bundle = cairn_tools::Operator::new(&engine).export_bundle(id, &opts).await.unwrap();
        let bytes = bundle.to_bytes(opts.gzip).unwrap();
        let json = if opts.gzip { gunzip(&bytes) } else { bytes.clone() };
        for form in Redaction::forms(s).iter().chain([marker]) {
            if contains(&json, form) {
                leaks += 1;
                eprintln!("case {i}: {form:?} survived");
            }
        }
        // Whatever was redacted, the bundle is still a valid bundle.
        Bundle::from_bytes(&bytes).unwrap();
        if i == 2 {
            sample = Some(bundle);
        }
    }
    assert_eq!(leaks, 0);
    let sample = sample.unwrap();
    let (malformed, panics) = malformed_cases(&sample, &mut rng);
    assert_eq!(panics, 0);
    crate::common::report(&format!(
        "RELIABILITY bundle cases={} leaks={leaks} panics={panics}",
        CASES + malformed
    ));
    engine.shutdown().await;
}

/// Runs targeted and random malformations of `good`; returns (cases, panics).
fn malformed_cases(good: &Bundle, rng: &mut Rng) -> (usize, usize) {
    let base = serde_json::to_value(good).unwrap();
    assert!(good.checkpoints.as_ref().is_some_and(|c| !c.is_empty()));
    let payload = good.events.payloads.keys().next().unwrap().clone();
    let by_ref = good.events.events.iter().position(|e| e.payload_ref.is_some()).unwrap();
    let inline = good.events.events.iter().position(|e| e.metadata.is_some()).unwrap();
    let started = good
        .events
        .events
        .iter()
        .position(|e| e.kind == cairn::storage::EventKind::NodeStarted)
        .unwrap();
    type Edit = Box<dyn Fn(&mut Value)>;
    let p = payload.clone();
    let targeted: Vec<(&str, Edit)> = vec![
        ("$.version", Box::new(|v| v["version"] = json!("2.0.0"))),
        ("$.version", Box::new(|v| v["version"] = json!(1))),
        ("$.version", Box::new(|v| drop(v.as_object_mut().unwrap().remove("version")))),
        ("$.timestamp", Box::new(|v| v["timestamp"] = json!(-5))),
        ("$.state", Box::new(|v| drop(v.as_object_mut().unwrap().remove("state")))),
        ("$.events", Box::new(|v| v["events"] = json!([]))),
        ("$.metadata", Box::new(|v| v["metadata"] = json!("x"))),
        ("$.events.events", Box::new(|v| v["events"]["events"] = json!([]))),
        ("$.events.events[1].seq", Box::new(|v| v["events"]["events"][1]["seq"] = json!("2"))),
        ("$.events.events[2].seq", Box::new(|v| v["events"]["events"][2]["seq"] = json!(99))),
        (
            "$.events.events[1].summary",
            Box::new(|v| {
                v["events"]["events"][1].as_object_mut().unwrap().remove("summary");
            }),
        ),
        (
            "$.events.events[1].summary",
            Box::new(|v| {
                v["events"]["events"][1]["summary"] = json!("x".repeat(5_000));
            }),
        ),
        ("$.events.events[1].type", Box::new(|v| v["events"]["events"][1]["type"] = json!("nope"))),
        ("$.events.events[0].id", Box::new(|v| v["events"]["events"][0]["id"] = json!(["a"]))),
        ("$.events.events[0].colour", Box::new(|v| v["events"]["events"][0]["colour"] = json!(1))),
        (
            "payloadRef",
            Box::new(move |v| v["events"]["events"][by_ref]["payloadRef"] = json!("payload-00")),
        ),
        ("$.events.payloads.", Box::new(move |v| v["events"]["payloads"][&p]["extra"] = json!(1))),
        (
            "$.events.payloads.payload-zz",
            Box::new(|v| {
                v["events"]["payloads"]["payload-zz"] = json!({});
            }),
        ),
        (
            "metadata",
            Box::new(move |v| v["events"]["events"][inline]["metadata"]["type"] = json!(7)),
        ),
        (
            ".nodeId",
            Box::new(move |v| v["events"]["events"][started]["nodeId"] = json!("n".repeat(300))),
        ),
        (
            ".metadata",
            Box::new(move |v| v["events"]["events"][started]["metadata"]["step"] = json!("one")),
        ),
        ("$.checkpoints[0].eventIndex", Box::new(|v| v["checkpoints"][0]["eventIndex"] = json!(0))),
        ("$.checkpoints[0].stateId", Box::new(|v| v["checkpoints"][0]["stateId"] = json!("other"))),
        (
            "$.checkpoints[0].state",
            Box::new(|v| v["checkpoints"][0]["state"]["meta"] = json!(null)),
        ),
        ("$.state.meta.thread", Box::new(|v| v["state"]["meta"]["thread"] = json!("other"))),
        ("$.metadata.thread.id", Box::new(|v| v["metadata"]["thread"]["id"] = json!(""))),
        (
            "$.metadata.thread.last_seq",
            Box::new(|v| v["metadata"]["thread"]["last_seq"] = json!(1)),
        ),
        (
            "$.metadata.thread.labels",
            Box::new(|v| {
                let many: serde_json::Map<String, Value> =
                    (0..100).map(|i| (format!("k{i}"), json!("v"))).collect();
                v["metadata"]["thread"]["labels"] = Value::Object(many);
            }),
        ),
        ("$.base", Box::new(|v| v["base"] = v["state"].clone())),
    ];
    let mut cases = 0;
    let mut panics = 0;
    for (expected, edit) in &targeted {
        let mut v = base.clone();
        edit(&mut v);
        let bytes = serde_json::to_vec(&v).unwrap();
        cases += 1;
        match std::panic::catch_unwind(|| Bundle::from_bytes(&bytes)) {
            Err(_) => panics += 1,
            Ok(Ok(_)) => panic!("accepted a bundle with a problem at {expected}"),
            Ok(Err(Error::Bundle { path, detail })) => {
                assert!(path.contains(expected), "expected {expected}, got {path}: {detail}");
            }
            Ok(Err(other)) => panic!("not a bundle error: {other}"),
        }
    }
    // Not JSON, truncated, not gzip, a decompression bomb.
    let good_bytes = serde_json::to_vec(&base).unwrap();
    let mut bomb = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    let zeros = vec![b' '; 1 << 20];
    for _ in 0..=(cairn_tools::debug::BUNDLE_BYTES_MAX >> 20) {
        std::io::Write::write_all(&mut bomb, &zeros).unwrap();
    }
    let bomb = bomb.finish().unwrap();
    for bytes in [
        b"not json".to_vec(),
        good_bytes[..good_bytes.len() / 2].to_vec(),
        vec![0x1f, 0x8b, 1, 2, 3],
        bomb,
    ] {
        cases += 1;
        match std::panic::catch_unwind(|| Bundle::from_bytes(&bytes)) {
            Err(_) => panics += 1,
            Ok(Err(Error::Bundle { path, .. })) => assert_eq!(path, "$"),
            Ok(other) => panic!("expected a bundle error at $, got {other:?}"),
        }
    }
    // Random mutations anywhere: an error naming a path, or (when the mutation kept the bundle
    // valid, e.g. an edited summary) a bundle; never a panic, never another error.
    for _ in 0..1_000 {
        let mut v = base.clone();
        mutate(&mut v, rng);
        let bytes = if rng.below(10) == 0 {
            let mut b = serde_json::to_vec(&v).unwrap();
            let at = rng.below(b.len() as u64) as usize;
            b[at] ^= 1 << rng.below(8);
            b
        } else {
            serde_json::to_vec(&v).unwrap()
        };
        cases += 1;
        match std::panic::catch_unwind(AssertUnwindSafe(|| Bundle::from_bytes(&bytes))) {
            Err(_) => panics += 1,
            Ok(Ok(_)) => {}
            Ok(Err(Error::Bundle { path, .. })) => assert!(path.starts_with('$'), "{path}"),
            Ok(Err(other)) => panic!("not a bundle error: {other}"),
        }
    }
    (cases, panics)
}

/// Replaces, removes or retypes one randomly chosen value of `v`.
fn mutate(v: &mut Value, rng: &mut Rng) {
    let depth = rng.below(8);
    let mut pointer = String::new();
    let mut node = &*v;
    for _ in 0..depth {
        let (key, next) = match node {
            Value::Object(m) if !m.is_empty() => {
                let (k, next) = m.iter().nth(rng.below(m.len() as u64) as usize).unwrap();
                (k.replace('~', "~0").replace('/', "~1"), next)
            }
            Value::Array(a) if !a.is_empty() => {
                let i = rng.below(a.len() as u64) as usize;
                (i.to_string(), &a[i])
            }
            _ => break,
        };
        pointer.push('/');
        pointer.push_str(&key);
        node = next;
    }
    let replacement = match rng.below(7) {
        0 => Value::Null,
        1 => json!(-1),
        2 => json!("x"),
        3 => json!([]),
        4 => json!({}),
        5 => json!(u64::MAX),
        _ => json!(1.5),
    };
    let remove = rng.below(2) == 0;
    let target = v.pointer_mut(&pointer).unwrap();
    match target {
        Value::Object(m) if !m.is_empty() && remove => {
            let k = m.keys().nth(rng.below(m.len() as u64) as usize).unwrap().clone();
            m.remove(&k);
        }
        other => *other = replacement,
    }
}

#[tokio::test]
async fn export_needs_no_workflow_when_checkpoints_cover_the_state() {
    let (_d, path) = db();
    let wf = leaky();
    let engine = open(&path, &[&wf], |b| b.seed(5).checkpoint_every(Some(1), None)).await;
    let input = json!({"forms": ["a"], "api_key": "m"});
    engine
        .start_json("leaky", Replace(input), StartOptions::id("nw"))
        .await
        .unwrap()
        .finished()
        .await
        .unwrap();
    let with = cairn_tools::Operator::new(&engine)
        .export_bundle("nw", &ExportOptions::default())
        .await
        .unwrap();
    engine.shutdown().await;
    drop(engine);
    // The same file, opened by an engine that does not know the workflow (like the CLI).
    let bare = Engine::builder(&path).read_only().open().await.unwrap();
    let without = cairn_tools::Operator::new(&bare)
        .export_bundle("nw", &ExportOptions::default())
        .await
        .unwrap();
    same(&with, &without);
    let cut = ExportOptions { last_events: Some(3), ..ExportOptions::default() };
    let short = cairn_tools::Operator::new(&bare).export_bundle("nw", &cut).await.unwrap();
    assert!(short.base.is_some());
    Bundle::from_bytes(&short.to_bytes(false).unwrap()).unwrap();
    assert!(matches!(
        cairn_tools::Operator::new(&bare).state_at("nw", None).await,
        Err(Error::UnknownWorkflow { .. })
    ));
}

/// Bundles are read strictly: a duplicate key anywhere is refused with its path (serde_json
/// keeps the last one silently), an error names the value that is wrong (not its parent), and a
/// bundle of another version says so before anything else about it.
#[tokio::test]
async fn bundles_refuse_duplicate_keys_name_the_bad_value_and_check_the_version_first() {
    let (_d, path) = db();
    let wf = leaky();
    let engine = open(&path, &[&wf], |b| b.seed(5).checkpoint_every(Some(1), None)).await;
    let input = json!({"forms": ["x"], "api_key": "k"});
    let done =
        engine.start_json("leaky", Replace(input), StartOptions::id("strict")).await.unwrap();
    done.finished().await.unwrap();
    let good = cairn_tools::Operator::new(&engine)
        .export_bundle("strict", &ExportOptions::default())
        .await
        .unwrap();
    let text = String::from_utf8(good.to_bytes(false).unwrap()).unwrap();
    Bundle::from_bytes(text.as_bytes()).expect("the bundle as exported reads");
    let path_of = |bytes: &[u8]| match Bundle::from_bytes(bytes) {
        Err(Error::Bundle { path, detail }) => (path, detail),
        other => panic!("expected a bundle error, got {:?}", other.map(|_| ())),
    };

    // A duplicate at the top, and one deep inside (the first key of the state's meta, twice).
    let top = text.replacen('{', r#"{"timestamp": 1,"#, 1);
    assert_eq!(path_of(top.as_bytes()).0, "$.timestamp");
    let value: Value = serde_json::from_str(&text).unwrap();
    let anchor = r#""state":{"meta":{"thread":"#;
    assert!(text.contains(anchor), "the state's meta opens the state in the exported text");
    let nested = text.replacen(anchor, r#""state":{"meta":{"seq":0,"thread":"#, 1);
    assert_eq!(path_of(nested.as_bytes()).0, "$.state.meta.seq");

    // The deepest value is named: a wrong type, and a missing field.
    let mut wrong = value.clone();
    wrong["state"]["meta"]["seq"] = json!("seven");
    let (at, detail) = path_of(&serde_json::to_vec(&wrong).unwrap());
    assert_eq!(at, "$.state.meta.seq", "{detail}");
    let mut missing = value.clone();
    missing["state"]["meta"].as_object_mut().unwrap().remove("status");
    assert_eq!(path_of(&serde_json::to_vec(&missing).unwrap()).0, "$.state.meta.status");

    // Another version is said first, whatever else is wrong.
    let (at, detail) = path_of(br#"{"version": "9.9", "garbage": [1, 2], "garbage": 3}"#);
    assert_eq!(at, "$.version");
    assert!(detail.contains("unsupported bundle version \"9.9\""), "{detail}");
    engine.shutdown().await;
}
