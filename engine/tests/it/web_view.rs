//! The web view in a real browser (Debian's headless Chromium over the DevTools protocol, see
//! `cdp`): an engine with an endpoint runs the demo's research workflow, a workflow that asks for
//! input, a failing one, and two threads trading messages under one correlation id; each page is
//! loaded and its DOM checked (threads listed, one SVG element per node, a live event arriving
//! after a step, pause pressed with the token changes the status, the messages' sequence
//! picture); a second test checks that the threads page with 10,000 threads and a thread with
//! 100,000 events render within a bound. Screenshots go to `<target>/screenshots/` for people
//! to look at.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use cairn::dsl::{Ctx, Message, NodeError, NodeOutput, NodePolicy, RetryPolicy, Workflow};
use cairn::{Durability, END, Engine, START, StartOptions, ThreadStatus};
use cairn_tools::demo::{Research, research_workflow};
use cairn_tools::model::ScriptedModel;
use serde_json::json;

use crate::cdp::Browser;
use crate::common::{Tally, db};
use cairn_tools::serve::Serve as _;

/// Where the screenshots go: `<target dir>/screenshots/` (the integration tests' scratch
/// directory is `<target dir>/tmp`).
pub fn screenshots() -> PathBuf {
    let tmp = PathBuf::from(env!("CARGO_TARGET_TMPDIR"));
    tmp.parent().map_or(tmp.clone(), std::path::Path::to_path_buf).join("screenshots")
}

/// Asks for a number, then adds it.
fn asks_input() -> Workflow<Tally> {
    Workflow::<Tally>::builder("ask", 1)
        .node("prepare", |_s: Arc<Tally>, _ctx: Ctx| async move {
            Ok(NodeOutput::update((1, "prepared".into())))
        })
        .node("ask", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt(json!({"question": "how many?"}))?;
            Ok(NodeOutput::update((n, "answered".into())))
        })
        .node("record", |_s: Arc<Tally>, _ctx: Ctx| async move {
            Ok(NodeOutput::update((0, "recorded".into())))
        })
        .edge(START, "prepare")
        .edge("prepare", "ask")
        .edge("ask", "record")
        .edge("record", END)
        .build()
        .unwrap()
}

/// Fails for good after a retry.
fn flaky() -> Workflow<Tally> {
    let retry = NodePolicy::default().retry(RetryPolicy::exponential(2, 5, 10));
    Workflow::<Tally>::builder("flaky", 1)
        .node("fetch", |_s: Arc<Tally>, ctx: Ctx| async move {
            let _: u64 = ctx.tool("lookup", 1u64, |n: u64, _| async move { Ok(n) }).await?;
            Ok(NodeOutput::update((1, "fetched".into())))
        })
        .node_with(
            "upload",
            |_s: Arc<Tally>, _ctx: Ctx| async move {
                Err::<NodeOutput<(u64, String)>, _>(NodeError::retryable("the upstream said 503"))
            },
            retry,
        )
        .edge(START, "fetch")
        .edge("fetch", "upload")
        .edge("upload", END)
        .build()
        .unwrap()
}

/// An order taken by one thread and shipped by another, every message under the order's
/// correlation id.
fn orders() -> Workflow<Tally> {
    Workflow::<Tally>::builder("orders", 1)
        .node("intake", |_s: Arc<Tally>, ctx: Ctx| async move {
            let corr = "order-7";
            ctx.message(
                Message::new("customer", "two blue mugs").to("intake").correlation_id(corr),
            );
            ctx.message(Message::new("intake", "bill 2 mugs").to("billing").correlation_id(corr));
            Ok(NodeOutput::update((1, "taken".into())))
        })
        .node("billing", |_s: Arc<Tally>, ctx: Ctx| async move {
            let corr = "order-7";
            ctx.message(
                Message::new("billing", "paid: 24 EUR").to("ship-7/ship").correlation_id(corr),
            );
            Ok(NodeOutput::update((1, "billed".into())))
        })
        .node("ship", |_s: Arc<Tally>, ctx: Ctx| async move {
            let corr = "order-7";
            ctx.message(
                Message::new("ship", "parcel sent").to("order-7/intake").correlation_id(corr),
            );
            Ok(NodeOutput::update((1, "shipped".into())))
        })
        .route(
            START,
            |s: &Tally| if s.log.iter().any(|l| l == "ship") { "ship" } else { "intake" },
            ["intake", "ship"],
        )
        .edge("intake", "billing")
        .edge("billing", END)
        .edge("ship", END)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_show_threads_a_graph_a_live_log_messages_and_pause_with_the_token() {
    let (_d, path) = db();
    let research = research_workflow(Arc::new(ScriptedModel::demo())).unwrap();
    let nodes = research.erase().nodes().len();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&research)
        .workflow(&asks_input())
        .workflow(&flaky())
        .workflow(&orders())
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let mut threads = Vec::new();
    for i in 0..6 {
        let input = Research { question: format!("question {i}"), ..Research::default() };
        let tenant = if i % 2 == 0 { "acme" } else { "globex" };
        let opts = StartOptions::id(format!("demo-{i}")).label("tenant", tenant);
        threads.push(engine.start_json("research-agent", input, opts).await.unwrap());
    }
    for i in 1..=3 {
        let opts = StartOptions::id(format!("ask-{i}")).label("tenant", "acme");
        threads.push(engine.start_json("ask", Tally::default(), opts).await.unwrap());
    }
    threads.push(
        engine.start_json("flaky", Tally::default(), StartOptions::id("flaky-1")).await.unwrap(),
    );
    threads.push(
        engine.start_json("orders", Tally::default(), StartOptions::id("order-7")).await.unwrap(),
    );
    let ship = Tally { total: 0, log: vec!["ship".into()] };
    threads.push(engine.start_json("orders", ship, StartOptions::id("ship-7")).await.unwrap());
    for t in &threads {
        t.wait().await.unwrap();
    }
    let total = threads.len();
    let base = format!("http://{}", server.addr());
    let shots = screenshots();
    let token = server.token().to_owned();

    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    tokio::task::block_in_place(|| {
        // Threads: every thread listed, counts by status, a filter by status.
        browser.navigate(&format!("{base}/ui/threads"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        let rows =
            browser.eval("document.querySelectorAll('#threads tbody tr[data-thread]').length");
        assert_eq!(rows, json!(total));
        let all =
            browser.eval("document.querySelector('.counts [data-status=all] .n').textContent");
        assert_eq!(all, json!(total.to_string()));
        let waiting = browser
            .eval("document.querySelector('.counts [data-status=waiting_input] .n').textContent");
        assert_eq!(waiting, json!("3"));
        browser.screenshot(&shots.join("threads.png"), 2000.);
        browser.eval("document.querySelector('.counts [data-status=failed]').click()");
        browser.wait_for(
            "document.querySelectorAll('#threads tbody tr[data-thread]').length === 1 && \
             document.querySelector('#threads tbody tr[data-thread]').dataset.thread === 'flaky-1'",
            Duration::from_secs(10),
        );
        assert!(browser.eval("location.search").as_str().unwrap().contains("status=failed"));
        // Labels typed into the filter (several ANDed) reach the store's label index.
        browser.eval("document.querySelector('.counts [data-status=all]').click()");
        let label = |browser: &mut Browser, value: &str| {
            browser.eval(&format!(
                "(() => {{ const i = document.getElementById('label'); i.value = '{value}'; \
                 i.dispatchEvent(new Event('change')); }})()"
            ));
        };
        let rows = "[...document.querySelectorAll('#threads tbody tr[data-thread]')]\
                    .map(r => r.dataset.thread).join(' ')";
        label(&mut browser, "tenant=acme");
        browser.wait_for(
            &format!("{rows} === 'ask-1 ask-2 ask-3 demo-0 demo-2 demo-4'"),
            Duration::from_secs(10),
        );
        assert!(browser.eval("location.search").as_str().unwrap().contains("label=tenant%3Dacme"));
        browser.eval("document.querySelector('.counts [data-status=waiting_input]').click()");
        browser.wait_for(&format!("{rows} === 'ask-1 ask-2 ask-3'"), Duration::from_secs(10));
        label(&mut browser, "tenant=acme,tenant=globex");
        browser.wait_for(&format!("{rows} === ''"), Duration::from_secs(10));
        label(&mut browser, "");
        browser.eval("document.querySelector('.counts [data-status=all]').click()");
        browser.wait_for(&format!("{rows}.split(' ').length === {total}"), Duration::from_secs(10));

        // A thread: the graph has one element per node, coloured; the timeline and the log.
        browser.navigate(&format!("{base}/ui/threads/demo-0"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        browser.wait_for("document.querySelector('#graph svg g.node')", Duration::from_secs(10));
        let drawn = browser.eval("document.querySelectorAll('#graph svg g.node').length");
        assert_eq!(drawn, json!(nodes));
        let completed =
            browser.eval("document.querySelectorAll('#graph svg g.node.st-completed').length");
        assert!(completed.as_u64().unwrap() >= 5, "{completed}");
        assert!(
            browser
                .eval("document.querySelectorAll('#timeline .tl-row.run').length")
                .as_u64()
                .unwrap()
                >= 5
        );
        assert!(
            browser.eval("document.querySelectorAll('#events tr').length").as_u64().unwrap() > 10
        );
        browser.wait_for(
            "document.getElementById('state').textContent.includes('question 0')",
            Duration::from_secs(10),
        );
        browser.wait_for(
            "document.querySelectorAll('#checkpoints tr[data-checkpoint]').length > 0",
            Duration::from_secs(10),
        );
        browser.screenshot(&shots.join("thread.png"), 2600.);

        // A failed thread shows its last error, the failed node, and the retry.
        browser.navigate(&format!("{base}/ui/threads/flaky-1"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        browser.wait_for(
            "document.querySelector('#graph svg g.node.st-failed')",
            Duration::from_secs(10),
        );
        let error = browser.eval("document.getElementById('last-error').textContent");
        assert!(error.as_str().unwrap().contains("503"), "{error}");
        let failed =
            browser.eval("document.querySelector('#graph svg g.node.st-failed').dataset.node");
        assert_eq!(failed, json!("upload"));
        browser.wait_for(
            "document.querySelector('#timeline .tl-row.run.failed')",
            Duration::from_secs(10),
        );
        browser.screenshot(&shots.join("thread-failed.png"), 2600.);

        // Live: a thread waiting for input; the input arrives (not through the page), and its
        // events appear in the followed log.
        browser.navigate(&format!("{base}/ui/threads/ask-1"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        browser.wait_for(
            "document.querySelector('#graph svg g.node.st-waiting')",
            Duration::from_secs(10),
        );
        browser.wait_for(
            "document.getElementById('live').textContent.includes('following')",
            Duration::from_secs(10),
        );
        assert_eq!(
            browser
                .eval("document.querySelectorAll('#events tr[data-kind=input_received]').length"),
            json!(0)
        );
    });
    engine.send_input("ask-1", json!(41)).await.unwrap();
    let _ = engine.thread("ask-1").await.unwrap().wait().await.unwrap();
    let forked = tokio::task::block_in_place(|| {
        browser.wait_for(
            "document.querySelectorAll('#events tr[data-kind=input_received]').length === 1 && \
             document.querySelectorAll('#events tr[data-kind=step_completed]').length >= 3",
            Duration::from_secs(10),
        );
        // The panels follow: the status and the graph say completed.
        browser.wait_for("document.body.dataset.status === 'completed'", Duration::from_secs(10));
        browser.wait_for(
            "document.querySelectorAll('#graph svg g.node.st-completed').length === 3",
            Duration::from_secs(10),
        );

        // Pause with the token: refused without it, applied with it (typed into the page, never
        // served in one).
        browser.navigate(&format!("{base}/ui/threads/ask-2"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        let html = browser.eval("document.documentElement.outerHTML");
        assert!(!html.as_str().unwrap().contains(&token), "the page carries the token");
        browser.eval("document.getElementById('pause').click()");
        browser.wait_for(
            "document.getElementById('control-result').textContent.includes('token')",
            Duration::from_secs(10),
        );
        browser.eval(&format!(
            "document.getElementById('token').value = '{token}'; \
             document.getElementById('token-save').click(); \
             document.getElementById('pause').click()"
        ));
        browser.wait_for("document.body.dataset.status === 'paused'", Duration::from_secs(10));
        browser.wait_for(
            "document.querySelector('#status .badge').dataset.status === 'paused'",
            Duration::from_secs(10),
        );
        // The pause is an event of the log, followed live.
        browser.wait_for(
            "[...document.querySelectorAll('#events tr[data-kind=status_changed]')].some(r => r.textContent.includes('paused'))",
            Duration::from_secs(10),
        );
        browser.screenshot(&shots.join("thread-paused.png"), 1400.);

        // Fork at the selected event (the page fills the seq in): the answer links the new
        // thread.
        browser.eval("document.getElementById('fork').click()");
        browser.wait_for(
            "document.querySelector('#control-result a') && \
             document.querySelector('#control-result').textContent.startsWith('forked')",
            Duration::from_secs(10),
        );
        browser.eval("document.querySelector('#control-result a').textContent")
    });
    let forked = forked.as_str().unwrap().to_owned();
    assert_eq!(engine.thread("ask-2").await.unwrap().status().await.unwrap(), ThreadStatus::Paused);
    let fork =
        engine.store().thread(&cairn::ThreadId::new(forked.clone()).unwrap()).wait().unwrap();
    assert!(fork.is_some(), "the fork {forked} of ask-2 exists");
    tokio::task::block_in_place(|| {
        // A token passed once in the address's fragment is taken and removed from the address.
        browser.navigate(&format!("{base}/ui/threads/ask-3#token={token}"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        assert_eq!(browser.eval("location.hash"), json!(""));
        browser.eval("document.getElementById('pause').click()");
        browser.wait_for("document.body.dataset.status === 'paused'", Duration::from_secs(10));

        // Messages: one arrow per message, one lifeline per participant.
        browser.navigate(&format!("{base}/ui/messages/order-7"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        let arrows = browser.eval("document.querySelectorAll('#sequence svg g.msg').length");
        assert_eq!(arrows, json!(4));
        let rows = browser.eval("document.querySelectorAll('#list tr[data-lsn]').length");
        assert_eq!(rows, json!(4));
        let heads = browser.eval("document.querySelectorAll('#sequence svg g.head').length");
        assert_eq!(heads, json!(3), "order-7's intake and billing, ship-7's ship");
        browser.screenshot(&shots.join("messages.png"), 1400.);
    });
    assert_eq!(engine.thread("ask-3").await.unwrap().status().await.unwrap(), ThreadStatus::Paused);
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}

/// Events the big thread's log holds at least.
const BIG_LOG: u64 = 100_000;
/// Threads the big listing holds.
const MANY: usize = 10_000;
/// How long a page may take to render in the browser, from navigation to its data shown: a
/// person waits for no longer, and the 2-core CI machine meets it with room.
const RENDER_BOUND: Duration = Duration::from_secs(8);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_pages_stay_usable_with_ten_thousand_threads_and_a_hundred_thousand_events() {
    let (_d, path) = db();
    let quick = Workflow::<Tally>::builder("quick", 1)
        .node("one", |_s: Arc<Tally>, _ctx: Ctx| async move {
            Ok(NodeOutput::update((1, String::new())))
        })
        .edge(START, "one")
        .edge("one", END)
        .build()
        .unwrap();
    // Two events a step or so (a node completed, a step completed; the engine's periodic
    // checkpoints add a few): a counter of 52,000 steps logs over 100,000 events.
    let steps = BIG_LOG / 2 + 2_000;
    let long = Workflow::<Tally>::builder("long", 1)
        .node("inc", |_s: Arc<Tally>, _ctx: Ctx| async move {
            Ok(NodeOutput::update((1, String::new())))
        })
        .edge(START, "inc")
        .route("inc", move |s: &Tally| if s.total >= steps { END } else { "inc" }, ["inc", END])
        .loop_bound("inc", u32::try_from(steps).unwrap())
        .build()
        .unwrap();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .concurrency(32)
        .workflow(&quick)
        .workflow(&long)
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let began = Instant::now();
    let big = engine.start_json("long", Tally::default(), StartOptions::id("big")).await.unwrap();
    let mut handles = Vec::with_capacity(MANY);
    for n in 0..MANY {
        let tenant = if n % 3 == 0 { "acme" } else { "globex" };
        let opts = StartOptions::id(format!("t-{n:05}")).label("tenant", tenant);
        handles.push(engine.start_json("quick", Tally::default(), opts).await.unwrap());
    }
    for h in &handles {
        h.wait().await.unwrap();
    }
    big.wait().await.unwrap();
    let last = engine.store().thread(big.id()).wait().unwrap().unwrap().last.unwrap().seq.0;
    assert!(last >= BIG_LOG, "the big thread logged {last} events");
    crate::common::report(&format!(
        "WEBVIEW data: {MANY} threads and a thread of {last} events in {:?}",
        began.elapsed()
    ));
    let base = format!("http://{}", server.addr());
    let shots = screenshots();
    tokio::task::block_in_place(|| {
        let mut browser = Browser::launch(1400, 1000);
        // The threads page: a page of 50 of 10,001, the counts, and the next page.
        let t = Instant::now();
        browser.navigate(&format!("{base}/ui/threads"));
        browser.wait_for("document.body.dataset.loaded === '1'", RENDER_BOUND);
        let threads_ms = t.elapsed();
        assert_eq!(
            browser.eval("document.querySelectorAll('#threads tbody tr[data-thread]').length"),
            json!(50)
        );
        let info = browser.eval("document.getElementById('pageinfo').textContent");
        assert!(info.as_str().unwrap().contains(&format!("of {}", MANY + 1)), "{info}");
        let t = Instant::now();
        browser.eval("document.getElementById('last').click()");
        browser.wait_for(
            "[...document.querySelectorAll('#threads tbody tr[data-thread]')].some(r => r.dataset.thread === 't-09999')",
            RENDER_BOUND,
        );
        let last_page_ms = t.elapsed();
        // A search narrows the 10,001 to the ten t-0999x.
        browser.eval(
            "const q = document.getElementById('q'); q.value = 't-0999'; \
             q.dispatchEvent(new Event('input'))",
        );
        browser.wait_for(
            "document.querySelectorAll('#threads tbody tr[data-thread]').length === 10",
            RENDER_BOUND,
        );
        browser.screenshot(&shots.join("threads-10000.png"), 1400.);

        // The big thread: a window of the log, not the log; older events a window at a time.
        let t = Instant::now();
        browser.navigate(&format!("{base}/ui/threads/big"));
        browser.wait_for("document.body.dataset.loaded === '1'", RENDER_BOUND);
        let thread_ms = t.elapsed();
        let rows = browser.eval("document.querySelectorAll('#events tr').length").as_u64().unwrap();
        assert!((1..=200).contains(&rows), "{rows} rows");
        let newest =
            browser.eval("Number(document.querySelector('#events tr:last-child').dataset.seq)");
        assert_eq!(newest, json!(last));
        let t = Instant::now();
        browser.eval("document.getElementById('older').click()");
        browser.wait_for("document.querySelectorAll('#events tr').length === 400", RENDER_BOUND);
        let older_ms = t.elapsed();
        let oldest = browser.eval("Number(document.querySelector('#events tr').dataset.seq)");
        assert_eq!(oldest, json!(last - 399));
        browser.wait_for("document.querySelector('#graph svg g.node')", RENDER_BOUND);
        // The timeline is a window too: the last 1,000 events, and any earlier window.
        browser.wait_for("document.getElementById('timeline').dataset.to", RENDER_BOUND);
        let window = |b: &mut Browser| {
            let from = b.eval("Number(document.getElementById('timeline').dataset.from)");
            let to = b.eval("Number(document.getElementById('timeline').dataset.to)");
            (from.as_u64().unwrap(), to.as_u64().unwrap())
        };
        assert_eq!(window(&mut browser), (last - 999, last));
        let t = Instant::now();
        browser.eval("document.getElementById('tl-earlier').click()");
        browser.wait_for(
            &format!("Number(document.getElementById('timeline').dataset.to) === {}", last - 1000),
            RENDER_BOUND,
        );
        let earlier_ms = t.elapsed();
        assert_eq!(window(&mut browser), (last - 1999, last - 1000));
        let runs = browser.eval("document.querySelectorAll('#timeline .tl-row.run').length");
        assert!(runs.as_u64().unwrap() > 0, "an earlier window shows its runs: {runs}");
        // Any window, by its last seq: the thread's first events.
        browser.eval(
            "document.getElementById('tl-to').value = '1500'; \
             document.getElementById('tl-go').click()",
        );
        browser.wait_for(
            "Number(document.getElementById('timeline').dataset.to) === 1500",
            RENDER_BOUND,
        );
        assert_eq!(window(&mut browser), (501, 1500));
        browser.eval("document.getElementById('tl-latest').click()");
        browser.wait_for(
            &format!("Number(document.getElementById('timeline').dataset.to) === {last}"),
            RENDER_BOUND,
        );
        browser.screenshot(&shots.join("thread-100000.png"), 2600.);
        crate::common::report(&format!(
            "WEBVIEW render: threads page {threads_ms:?}, its last page {last_page_ms:?}, \
             a {last}-event thread {thread_ms:?}, 200 older events {older_ms:?}, an earlier \
             timeline window {earlier_ms:?} (bound {RENDER_BOUND:?})"
        ));
    });
    server.shutdown().await;
    engine.shutdown().await;
}

/// The web view's reads over plain HTTP (no browser): the listing's search, filters, total and
/// counts; the graph's one element per node; the timeline; 4xx answers naming the field; the
/// pages' headers (a content security policy of this endpoint only) and no token in them.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_web_views_reads_filter_count_and_refuse_naming_the_field() {
    let (_d, path) = db();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&asks_input())
        .workflow(&flaky())
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    for i in 1..=12 {
        let opts =
            StartOptions::id(format!("ask-{i}")).label("team", if i <= 4 { "red" } else { "blue" });
        engine.start_json("ask", Tally::default(), opts).await.unwrap().wait().await.unwrap();
    }
    engine
        .start_json("flaky", Tally::default(), StartOptions::id("flaky-1"))
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();
    let (page, graph, (timeline, window), refusals, html) =
        tokio::task::spawn_blocking(move || {
            let agent: ureq::Agent =
                ureq::Agent::config_builder().http_status_as_error(false).build().into();
            let get = |p: &str| {
                let mut r = agent.get(&format!("{base}{p}")).call().unwrap();
                let csp = r
                    .headers()
                    .get("content-security-policy")
                    .map(|v| v.to_str().unwrap().to_owned());
                (r.status().as_u16(), r.body_mut().read_to_string().unwrap(), csp)
            };
            let json = |p: &str| {
                let (status, body, _) = get(p);
                assert_eq!(status, 200, "{p}: {body}");
                serde_json::from_str::<serde_json::Value>(&body).unwrap()
            };
            let page = json("/api/view/threads?q=ASK-1&limit=2&offset=1");
            let graph = get("/api/threads/flaky-1/graph.svg").1;
            let timeline = json("/api/threads/flaky-1/timeline");
            let window = json("/api/threads/flaky-1/timeline?to=3&last=2");
            let refusals: Vec<(u16, serde_json::Value)> = [
                "/api/view/threads?q=a&q=b",
                "/api/view/threads?status=asleep",
                "/api/view/threads?limit=0",
                "/api/threads/flaky-1/timeline?last=0",
                "/api/threads/flaky-1/timeline?colour=red",
                "/api/threads/flaky-1/timeline?to=0",
                "/api/threads/nope/graph.svg",
                "/api/threads/nope/timeline",
                "/ui/assets/nope.js",
            ]
            .iter()
            .map(|p| {
                let (status, body, _) = get(p);
                (status, serde_json::from_str(&body).unwrap())
            })
            .collect();
            let html: Vec<(u16, String, Option<String>)> =
                ["/ui/threads", "/ui/threads/ask-1", "/ui/messages/x", "/ui/assets/thread.js"]
                    .iter()
                    .map(|p| get(p))
                    .collect();
            (page, graph, (timeline, window), refusals, html)
        })
        .await
        .unwrap();
    // "ask-1" matches ask-1, ask-10, ask-11, ask-12 (case-insensitive), in natural order; the
    // counts are over the search, before the page.
    let ids: Vec<&str> =
        page["threads"].as_array().unwrap().iter().map(|t| t["thread"].as_str().unwrap()).collect();
    assert_eq!(ids, ["ask-10", "ask-11"], "{page}");
    assert_eq!(page["total"], 4);
    assert_eq!(page["counts"], json!({"waiting_input": 4}));
    assert!(page["workflows"].as_array().unwrap().contains(&json!("flaky")));
    // One node element per node, the failed one marked.
    assert_eq!(graph.matches("<g class=\"node ").count(), 2, "{graph}");
    assert!(graph.contains("class=\"node st-failed\" data-node=\"upload\""), "{graph}");
    assert!(graph.contains("class=\"node st-completed\" data-node=\"fetch\""), "{graph}");
    // The timeline: fetch with its tool call, upload's two attempts, the first retried.
    let runs = timeline["runs"].as_array().unwrap();
    let summary: Vec<(String, u64, String)> = runs
        .iter()
        .map(|r| {
            (
                r["task"].as_str().unwrap().to_owned(),
                r["attempt"].as_u64().unwrap(),
                r["status"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        summary,
        [
            ("fetch".to_owned(), 1, "completed".to_owned()),
            ("upload".to_owned(), 1, "failed".to_owned()),
            ("upload".to_owned(), 2, "failed".to_owned())
        ]
    );
    assert_eq!(runs[0]["tools"][0]["name"], "lookup");
    assert_eq!(runs[0]["tools"][0]["ok"], true);
    assert!(runs[1]["retry_delay_ms"].is_u64(), "{timeline}");
    assert_eq!(timeline["whole"], true);
    assert_eq!((&timeline["earlier"], &timeline["later"]), (&json!(null), &json!(null)));
    // A window of two events ending at seq 3: the ones before and after are named.
    assert_eq!((&window["from_seq"], &window["to_seq"]), (&json!(2), &json!(3)), "{window}");
    assert_eq!((&window["earlier"], &window["whole"]), (&json!(1), &json!(false)));
    assert_eq!(window["later"], timeline["last_seq"].as_u64().unwrap().min(5));
    let fields: Vec<(u16, Option<&str>)> =
        refusals.iter().map(|(s, e)| (*s, e["field"].as_str())).collect();
    assert_eq!(
        fields,
        [
            (400, Some("q")),
            (400, Some("status")),
            (400, Some("limit")),
            (400, Some("last")),
            (400, Some("colour")),
            (400, Some("to")),
            (404, Some("thread")),
            (404, Some("thread")),
            (404, Some("path")),
        ]
    );
    for (status, body, _) in &html {
        assert_eq!(*status, 200);
        assert!(!body.contains(&token), "a page carries the token");
        assert!(
            !body.contains("http://") && !body.contains("https://"),
            "a page links outside: {body}"
        );
    }
    for (_, _, csp) in &html[..3] {
        let csp = csp.as_deref().unwrap_or_default();
        assert!(csp.contains("default-src 'none'") && csp.contains("script-src 'self'"), "{csp}");
    }
    server.shutdown().await;
    engine.shutdown().await;
}

/// A sub-workflow node is drawn as a link to its child thread's page, and its run in the
/// timeline names the child; the child's page links back to its parent.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_sub_workflow_links_to_its_child_thread() {
    let (_d, path) = db();
    let child = Workflow::<Tally>::builder("inner", 1)
        .node("add", |_s: Arc<Tally>, _ctx: Ctx| async move {
            Ok(NodeOutput::update((2, String::new())))
        })
        .edge(START, "add")
        .edge("add", END)
        .build()
        .unwrap();
    let parent = Workflow::<Tally>::builder("outer", 1)
        .subgraph("sub", child, |s: &Tally| s.clone(), |c: &Tally| (c.total, "sub".to_owned()))
        .edge(START, "sub")
        .edge("sub", END)
        .build()
        .unwrap();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&parent)
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let run = engine.start_json("outer", Tally::default(), StartOptions::id("p-1")).await.unwrap();
    run.wait().await.unwrap();
    let base = format!("http://{}", server.addr());
    let (graph, timeline, child_page) = tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent =
            ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let get = |p: &str| {
            let mut r = agent.get(&format!("{base}{p}")).call().unwrap();
            assert_eq!(r.status().as_u16(), 200, "{p}");
            r.body_mut().read_to_string().unwrap()
        };
        let graph = get("/api/threads/p-1/graph.svg");
        let timeline: serde_json::Value =
            serde_json::from_str(&get("/api/threads/p-1/timeline")).unwrap();
        let child = timeline["runs"][0]["child"].as_str().unwrap_or("none").to_owned();
        let child_page: serde_json::Value = serde_json::from_str(&get(&format!(
            "/api/threads/{}",
            child.replace('/', "%2F").replace('@', "%40")
        )))
        .unwrap();
        (graph, timeline, child_page)
    })
    .await
    .unwrap();
    assert_eq!(timeline["runs"][0]["child"], "p-1/sub@1", "{timeline}");
    assert!(
        graph.contains(
            "<a class=\"child-link\" href=\"/ui/threads/p-1%2Fsub@1\" data-child=\"p-1/sub@1\">\
             <g class=\"node st-completed\" data-node=\"sub\""
        ),
        "{graph}"
    );
    assert!(graph.contains("data-kind=\"subgraph\""), "{graph}");
    assert_eq!(child_page["workflow"]["id"], "inner");
    assert_eq!(child_page["labels"]["parent"], "p-1", "the child's page links back: {child_page}");
    server.shutdown().await;
    engine.shutdown().await;
}
