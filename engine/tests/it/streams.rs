//! Streams to a client (`ctx.stream`, `ToolCtx::stream`, `Engine::stream`, `GET
//! /api/threads/{id}/stream`): chunks reach a live reader in order, then the durable close of
//! their step and the thread's end; a reader after a restart gets the close from the log
//! though the chunks are gone; a reader that never reads neither blocks nor slows the writer
//! and sees the gap; a finished thread's stream gives its final values at once; a write after
//! the attempt ended is refused; the SSE route serves it all over real HTTP and resumes after
//! `Last-Event-ID`.

use std::io::BufRead as _;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, ToolCtx, Workflow};
use cairn::{END, START, StartOptions, StreamItem, ThreadStatus};
use futures::StreamExt as _;
use serde_json::{Value, json};

use crate::common::{Tally, db, engine_on, serving};

/// Contexts a node and its tool kept past their attempt (to write after it ended). A kept
/// context holds its engine (through the workflow the engine holds): only one test keeps them.
#[derive(Clone, Default)]
struct Kept {
    node: Arc<Mutex<Option<Ctx>>>,
    tool: Arc<Mutex<Option<ToolCtx>>>,
}

/// `draft`: waits for the signal `go` when `gated`, streams `tokens` tokens itself and three
/// more through a tool, and returns them all; then `approve` when `approval`: waits for the
/// signal `approve`.
fn drafting(tokens: u64, gated: bool, approval: bool, kept: Option<Kept>) -> Workflow<Tally> {
    let b =
        Workflow::<Tally>::builder("drafting", 1).node("draft", move |_s: Arc<Tally>, ctx: Ctx| {
            let kept = kept.clone();
            async move {
                if gated {
                    let _: u64 = ctx.recv("go").await?;
                }
                if let Some(kept) = &kept {
                    *kept.node.lock().unwrap() = Some(ctx.clone());
                }
                let mut text = Vec::new();
                for i in 0..tokens {
                    ctx.stream(format!("t{i}"))?;
                    text.push(format!("t{i}"));
                    if i % 16 == 0 {
                        tokio::task::yield_now().await;
                    }
                }
                let tool_kept = kept.as_ref().map(|k| k.tool.clone());
                let more: Vec<String> = ctx
                    .tool("model", tokens, move |from: u64, tc: ToolCtx| async move {
                        if let Some(kept) = tool_kept {
                            *kept.lock().unwrap() = Some(tc.clone());
                        }
                        let words: Vec<String> =
                            (from..from + 3).map(|i| format!("t{i}")).collect();
                        for w in &words {
                            tc.stream(w)?;
                        }
                        Ok::<_, cairn::ToolError>(words)
                    })
                    .await?;
                text.extend(more);
                Ok(NodeOutput::update((text.len() as u64, text.join(" "))))
            }
        });
    let b = b.edge(START, "draft");
    let b = if approval {
        b.node("approve", |_s: Arc<Tally>, ctx: Ctx| async move {
            let ok: bool = ctx.recv("approve").await?;
            Ok(NodeOutput::update((0, format!("approved={ok}"))))
        })
        .edge("draft", "approve")
        .edge("approve", END)
    } else {
        b.edge("draft", END)
    };
    b.build().unwrap()
}

/// The words `t{from}`..`t{to}` joined, as the draft's update holds them.
fn words(from: u64, to: u64) -> String {
    (from..to).map(|i| format!("t{i}")).collect::<Vec<_>>().join(" ")
}

/// Every item of `reader` to its end (at most 30 s).
async fn all(reader: cairn::StreamReader) -> Vec<StreamItem> {
    let items = tokio::time::timeout(Duration::from_secs(30), reader.collect::<Vec<_>>());
    items.await.expect("the stream ends").into_iter().map(Result::unwrap).collect()
}

fn chunk_values(items: &[StreamItem]) -> Vec<String> {
    let values = items.iter().filter_map(|i| match i {
        StreamItem::Chunk { value, .. } => Some(value.as_str().unwrap().to_owned()),
        _ => None,
    });
    values.collect()
}

/// `(node, update)` of each close.
fn closes(items: &[StreamItem]) -> Vec<(String, Option<Value>)> {
    let closes = items.iter().filter_map(|i| match i {
        StreamItem::Closed { node, update, .. } => Some((node.clone(), update.clone())),
        _ => None,
    });
    closes.collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn chunks_reach_a_live_reader_in_order_then_the_durable_close_and_the_end() {
    let (_d, path) = db();
    let wf = drafting(40, true, false, None);
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("drafting", Tally::default(), StartOptions::id("s1")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let reader = engine.stream("s1").await.unwrap();
    engine.signal("s1", "go", 1u64).await.unwrap();
    let items = all(reader).await;

    let expected: Vec<String> = (0..43).map(|i| format!("t{i}")).collect();
    assert_eq!(chunk_values(&items), expected, "every chunk, in write order: {items:?}");
    let last_chunk = items.iter().rposition(|i| matches!(i, StreamItem::Chunk { .. })).unwrap();
    let close = items.iter().position(|i| matches!(i, StreamItem::Closed { .. })).unwrap();
    assert!(last_chunk < close, "the close follows its step's chunks: {items:?}");
    assert!(items.iter().all(|i| !matches!(i, StreamItem::Gap { .. })), "{items:?}");
    let update = json!([43, words(0, 43)]);
    assert_eq!(closes(&items), vec![("draft".to_owned(), Some(update))]);
    let Some(StreamItem::Ended { status, output, .. }) = items.last() else { panic!("{items:?}") };
    assert_eq!(*status, ThreadStatus::Completed);
    assert_eq!(output.as_ref().unwrap()["total"], 43);

    // No chunk is in the log: the thread's events are the same few as a thread's that streams
    // nothing (creation, the signal's wait and receipt, the step, the tool call, the end).
    let mut log = engine.thread("s1").await.unwrap().events(0).unwrap();
    let mut kinds = Vec::new();
    while let Some(e) = log.try_next().await.unwrap() {
        kinds.push(format!("{:?}", e.body.kind()));
    }
    assert!(kinds.len() < 30, "{} events for 43 chunks: {kinds:?}", kinds.len());
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_after_a_restart_gets_the_durable_close_though_the_chunks_are_gone() {
    let (_d, path) = db();
    let wf = drafting(20, false, true, None);
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("drafting", Tally::default(), StartOptions::id("s2")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput, "at the approval");
    // A restart: whatever the engine held in memory (the chunks) is gone.
    engine.shutdown().await;
    drop((t, engine));

    let engine = engine_on(&path, &[&wf], None).await;
    let mut reader = engine.stream("s2").await.unwrap();
    let first = reader.next().await.unwrap().unwrap();
    let StreamItem::Closed { seq, node, update, .. } = &first else { panic!("{first:?}") };
    assert_eq!((node.as_str(), update), ("draft", &Some(json!([23, words(0, 23)]))));
    let draft_seq = *seq;
    engine.signal("s2", "approve", true).await.unwrap();
    let rest = all(reader).await;
    assert!(chunk_values(&rest).is_empty(), "the chunks died with the engine: {rest:?}");
    assert_eq!(closes(&rest), vec![("approve".to_owned(), Some(json!([0, "approved=true"])))]);
    assert!(matches!(rest.last(), Some(StreamItem::Ended { status: ThreadStatus::Completed, .. })));

    // A reader that resumes after the draft's close (an EventSource reconnecting) gets the
    // rest only.
    let resumed = all(engine.stream_after("s2", draft_seq).await.unwrap()).await;
    assert_eq!(closes(&resumed), closes(&rest));
    assert_eq!(resumed.last(), rest.last());
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_reader_that_never_reads_does_not_block_the_writer_and_sees_the_gap() {
    const TOKENS: u64 = 20_000;
    let (_d, path) = db();
    let wf = drafting(TOKENS, true, false, None);
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("drafting", Tally::default(), StartOptions::id("s3")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let reader = engine.stream("s3").await.unwrap();
    let started = std::time::Instant::now();
    engine.signal("s3", "go", 1u64).await.unwrap();
    // The writer finishes while the reader reads nothing.
    let ended = tokio::time::timeout(Duration::from_secs(30), t.finished()).await;
    assert_eq!(ended.unwrap().unwrap().status, ThreadStatus::Completed);
    let writer_ms = started.elapsed().as_millis();

    let items = all(reader).await;
    let StreamItem::Gap { missed } = items[0] else { panic!("first a gap: {:?}", &items[..2]) };
    let got = chunk_values(&items);
    assert!(missed > 0 && !got.is_empty(), "missed {missed}, got {}", got.len());
    assert_eq!(missed + got.len() as u64, TOKENS + 3, "a gap counts exactly what was dropped");
    let newest: Vec<String> = (missed..TOKENS + 3).map(|i| format!("t{i}")).collect();
    assert_eq!(got, newest, "the reader gets the newest chunks, in order");
    assert_eq!(closes(&items).len(), 1);
    eprintln!(
        "streams: {} chunks written in {writer_ms} ms with a reader that never read; it kept \
         {} and missed {missed}",
        TOKENS + 3,
        got.len()
    );
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_threads_stream_gives_its_final_values_at_once_and_late_writes_are_refused() {
    let (_d, path) = db();
    let kept = Kept::default();
    let wf = drafting(5, false, false, Some(kept.clone()));
    let engine = engine_on(&path, &[&wf], None).await;
    let t = engine.start_json("drafting", Tally::default(), StartOptions::id("s4")).await.unwrap();
    assert_eq!(t.finished().await.unwrap().status, ThreadStatus::Completed);

    let items = all(engine.stream("s4").await.unwrap()).await;
    assert_eq!(closes(&items), vec![("draft".to_owned(), Some(json!([8, words(0, 8)])))]);
    let Some(StreamItem::Ended { seq, status, output }) = items.last().cloned() else {
        panic!("{items:?}")
    };
    assert_eq!((status, output.unwrap()["total"].as_u64()), (ThreadStatus::Completed, Some(8)));
    // Past its end, the end again (a reconnect after the last event).
    let again = all(engine.stream_after("s4", seq).await.unwrap()).await;
    assert!(matches!(
        again.as_slice(),
        [StreamItem::Ended { status: ThreadStatus::Completed, .. }]
    ));

    // Writes after the attempt ended are refused, the node's and its tool's alike.
    let node = kept.node.lock().unwrap().clone().unwrap();
    let e = node.stream("late").unwrap_err().to_string();
    assert!(e.contains("closed when its step") && e.contains("s4"), "{e}");
    let tool = kept.tool.lock().unwrap().clone().unwrap();
    let e = tool.stream("late").unwrap_err();
    assert_eq!(e.code.as_deref(), Some("stream"), "{e:?}");
    // An unknown thread has no stream.
    let unknown = engine.stream("nobody").await.unwrap_err();
    assert!(matches!(unknown, cairn::Error::UnknownThread(_)), "{unknown}");
    engine.shutdown().await;
}

/// The SSE events of a response: `(event, id, data)`, each ended by a blank line.
fn sse_events(lines: impl Iterator<Item = String>) -> Vec<(String, Option<String>, Value)> {
    let (mut out, mut name, mut id, mut data) = (Vec::new(), String::new(), None, None);
    for line in lines {
        if let Some(n) = line.strip_prefix("event:") {
            name = n.trim().to_owned();
        } else if let Some(i) = line.strip_prefix("id:") {
            id = Some(i.trim().to_owned());
        } else if let Some(d) = line.strip_prefix("data:") {
            data = Some(serde_json::from_str::<Value>(d.trim()).unwrap());
        } else if line.is_empty()
            && let Some(data) = data.take()
        {
            out.push((std::mem::take(&mut name), id.take(), data));
        }
    }
    out
}

fn agent() -> ureq::Agent {
    ureq::Agent::config_builder().http_status_as_error(false).build().into()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_stream_route_serves_chunks_closes_and_the_end_as_server_sent_events() {
    let (_d, path) = db();
    let wf = drafting(12, true, false, None);
    let (engine, server) = serving(&path, &wf).await;
    let t = engine.start_json("drafting", Tally::default(), StartOptions::id("s5")).await.unwrap();
    assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
    let base = format!("http://{}", server.addr());

    let url = format!("{base}/api/threads/s5/stream");
    let (connected_tx, connected_rx) = tokio::sync::oneshot::channel();
    let reader = tokio::task::spawn_blocking(move || {
        let mut resp = agent().get(&url).call().unwrap();
        let media = resp.headers().get("content-type").unwrap().to_str().unwrap().to_owned();
        connected_tx.send((resp.status().as_u16(), media)).unwrap();
        let lines = std::io::BufReader::new(resp.body_mut().as_reader()).lines();
        sse_events(lines.map(Result::unwrap))
    });
    let (status, media) = connected_rx.await.unwrap();
    assert_eq!((status, media.as_str()), (200, "text/event-stream"));
    engine.signal("s5", "go", 1u64).await.unwrap();
    let events = tokio::time::timeout(Duration::from_secs(30), reader).await.unwrap().unwrap();

    let names: Vec<&str> = events.iter().map(|(n, _, _)| n.as_str()).collect();
    let mut expected = vec!["chunk"; 15];
    expected.extend(["closed", "ended"]);
    assert_eq!(names, expected, "{events:?}");
    let tokens: Vec<&str> =
        events[..15].iter().map(|(_, _, d)| d["value"].as_str().unwrap()).collect();
    assert_eq!(tokens.join(" "), words(0, 15));
    assert!(events[..15].iter().all(|(_, id, d)| id.is_none() && d["node"] == "draft"));
    let (_, close_id, close) = &events[15];
    assert_eq!(close["update"], json!([15, words(0, 15)]), "{close}");
    assert_eq!(close_id.as_deref(), close["seq"].as_u64().map(|s| s.to_string()).as_deref());
    let (_, _, end) = &events[16];
    assert_eq!(
        (end["status"].as_str(), end["output"]["total"].as_u64()),
        (Some("completed"), Some(15))
    );

    // Reconnecting with Last-Event-ID (as an EventSource does) resumes after the close.
    let (url, last) = (format!("{base}/api/threads/s5/stream"), close_id.clone().unwrap());
    let resumed = tokio::task::spawn_blocking(move || {
        let mut resp = agent().get(&url).header("Last-Event-ID", last).call().unwrap();
        let lines = std::io::BufReader::new(resp.body_mut().as_reader()).lines();
        sse_events(lines.map(Result::unwrap))
    });
    let resumed = resumed.await.unwrap();
    assert_eq!(resumed.iter().map(|(n, _, _)| n.as_str()).collect::<Vec<_>>(), ["ended"]);

    // Refusals name their field.
    let get = |p: String, header: Option<&'static str>| {
        tokio::task::spawn_blocking(move || {
            let mut req = agent().get(&p);
            if let Some(h) = header {
                req = req.header("Last-Event-ID", h);
            }
            let mut resp = req.call().unwrap();
            let body: Value =
                serde_json::from_str(&resp.body_mut().read_to_string().unwrap()).unwrap();
            (resp.status().as_u16(), body["field"].as_str().map(str::to_owned))
        })
    };
    let unknown = get(format!("{base}/api/threads/nobody/stream"), None).await.unwrap();
    assert_eq!(unknown, (404, Some("thread".to_owned())));
    let bad = get(format!("{base}/api/threads/s5/stream"), Some("soon")).await.unwrap();
    assert_eq!(bad, (400, Some("Last-Event-ID".to_owned())));
    let bad = get(format!("{base}/api/threads/s5/stream?since=x"), None).await.unwrap();
    assert_eq!(bad, (400, Some("since".to_owned())));
    server.shutdown().await;
    engine.shutdown().await;
}

/// `relay`: steps `a`, `b`, `c` each stream three chunks at once, `a` after the signal `go`.
fn relay() -> Workflow<Tally> {
    let step = |name: &'static str, gated: bool| {
        move |_s: Arc<Tally>, ctx: Ctx| async move {
            if gated {
                let _: u64 = ctx.recv("go").await?;
            }
            for i in 0..3 {
                ctx.stream(format!("{name}{i}"))?;
            }
            Ok(NodeOutput::update((1, name.to_owned())))
        }
    };
    Workflow::<Tally>::builder("relay", 1)
        .node("a", step("a", true))
        .node("b", step("b", false))
        .node("c", step("c", false))
        .edge(START, "a")
        .edge("a", "b")
        .edge("b", "c")
        .edge("c", END)
        .build()
        .unwrap()
}

/// Across steps the order is the log's: a step's chunks come after the closes of every step
/// before it, even when the next step streams before the last step's commit reaches readers.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_later_steps_chunks_come_after_the_closes_of_the_steps_before_it() {
    let wf = relay();
    for round in 0..20 {
        let (_d, path) = db();
        let engine = engine_on(&path, &[&wf], None).await;
        let t = engine.start_json("relay", Tally::default(), StartOptions::id("r")).await.unwrap();
        assert_eq!(t.wait().await.unwrap().status, ThreadStatus::WaitingInput);
        let reader = engine.stream("r").await.unwrap();
        engine.signal("r", "go", 1u64).await.unwrap();
        let items = all(reader).await;
        let order: Vec<String> = items
            .iter()
            .filter_map(|i| match i {
                StreamItem::Chunk { value, .. } => Some(value.as_str().unwrap().to_owned()),
                StreamItem::Closed { node, .. } => Some(format!("closed {node}")),
                _ => None,
            })
            .collect();
        let expected = [
            "a0", "a1", "a2", "closed a", "b0", "b1", "b2", "closed b", "c0", "c1", "c2",
            "closed c",
        ];
        assert_eq!(order, expected, "round {round}: {items:?}");
        engine.shutdown().await;
    }
}
