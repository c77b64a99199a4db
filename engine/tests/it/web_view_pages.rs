//! The web view's pages a person reads a finished thread, a conversation, the workflows and the
//! schedules by (issue 28 item 9), in a real browser (`cdp`): a finished thread offers no
//! control it refuses and shows its whole output pretty-printed and foldable, the graph explains
//! its edges, timeline names are never cut, the sequence picture's texts never overlap, a child
//! thread's listing names its parent, the workflows page counts each workflow's threads, and
//! the schedules page lists a schedule and pauses, resumes, runs and deletes it with the token.
//! Screenshots go to `<target>/screenshots/`.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, Message, NodeOutput, Workflow};
use cairn::{Durability, END, Engine, Every, START, ScheduleSpec, StartOptions, ThreadStatus};
use serde_json::{Value, json};

use crate::cdp::Browser;
use crate::common::{Tally, db};
use crate::web_view::screenshots;
use cairn_tools::serve::Serve as _;

/// A node name longer than the timeline's name column was (170 px).
const LONG_NODE: &str = "summarise_the_quarterly_report_for_the_finance_team";

/// A note longer than the 300 characters the summary once cut the output at, with quotes and
/// escapes a cut could split.
fn long_note() -> String {
    (0..40).map(|i| format!("line {i}: \"quoted\" \\ value;")).collect::<Vec<_>>().join(" ")
}

/// Writes a long note in a node with a long name, then ends.
fn reporter() -> Workflow<Tally> {
    Workflow::<Tally>::builder("reporter", 1)
        .node(LONG_NODE, |_s: Arc<Tally>, _ctx: Ctx| async move {
            Ok(NodeOutput::update((1, long_note())))
        })
        .node("publish", |_s: Arc<Tally>, _ctx: Ctx| async move {
            Ok(NodeOutput::update((1, "published".into())))
        })
        .edge(START, LONG_NODE)
        .edge(LONG_NODE, "publish")
        .edge("publish", END)
        .build()
        .unwrap()
}

/// GET `url` off the async workers: the status and the body as JSON.
async fn get(url: String) -> (u16, Value) {
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent =
            ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let mut resp = agent.get(&url).call().unwrap();
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    })
    .await
    .unwrap()
}

/// Sends `method url` with `authorization` (if any) off the async workers: the status and the
/// body as JSON.
async fn send(method: &'static str, url: String, authorization: Option<String>) -> (u16, Value) {
    tokio::task::spawn_blocking(move || {
        let agent: ureq::Agent =
            ureq::Agent::config_builder().http_status_as_error(false).build().into();
        let mut resp = match (method, authorization) {
            ("DELETE", Some(a)) => agent.delete(&url).header("authorization", a).call(),
            ("DELETE", None) => agent.delete(&url).call(),
            (_, Some(a)) => agent.post(&url).header("authorization", a).send(""),
            (_, None) => agent.post(&url).send(""),
        }
        .unwrap();
        let status = resp.status().as_u16();
        let text = resp.body_mut().read_to_string().unwrap();
        (status, serde_json::from_str(&text).unwrap_or(Value::String(text)))
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_finished_threads_page_offers_no_refused_control_and_shows_its_whole_output() {
    let (_d, path) = db();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&reporter())
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let run =
        engine.start_json("reporter", Tally::default(), StartOptions::id("r-1")).await.unwrap();
    run.wait().await.unwrap();
    let base = format!("http://{}", server.addr());
    let shots = screenshots();
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/threads/r-1"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        browser.wait_for("document.body.dataset.status === 'completed'", Duration::from_secs(10));
        // No control the engine refuses a finished thread is offered: none shown, and none
        // enabled (hidden or not).
        let offered = browser.eval(
            "['pause', 'resume', 'cancel', 'input'].filter((id) => { \
               const b = document.getElementById(id); \
               return b && b.offsetParent !== null; })",
        );
        assert_eq!(offered, json!([]), "a completed thread offers controls it refuses");
        assert_eq!(
            browser.eval("document.getElementById('fork').offsetParent !== null"),
            json!(true)
        );

        // The output: whole, pretty-printed (one key a line), folded in a <details>.
        browser.wait_for("document.querySelector('details#output pre')", Duration::from_secs(10));
        let shown = browser.eval("document.querySelector('details#output pre').textContent");
        let shown = shown.as_str().unwrap();
        let parsed: Value = serde_json::from_str(shown).expect("the output shown is whole JSON");
        assert_eq!(parsed["log"][0], json!(long_note()), "{shown}");
        assert_eq!(parsed["total"], json!(2));
        assert!(shown.contains("\n  \"log\": ["), "pretty-printed: {shown}");
        // Its summary says what it holds, quoting no piece of it that a cut could split.
        let summary = browser.eval("document.querySelector('details#output summary').textContent");
        let summary = summary.as_str().unwrap();
        assert!(summary.starts_with("{ log, total } · "), "{summary}");
        assert!(!summary.contains("line 0"), "{summary}");
        let open = "document.querySelector('details#output').open";
        // 7 lines, but over a thousand characters: it starts folded.
        assert_eq!(browser.eval(open), json!(false), "a long output starts folded");
        browser.eval("document.querySelector('details#output summary').click()");
        let after_one = browser.eval(open);
        browser.eval("document.querySelector('details#output summary').click()");
        assert_ne!(after_one, browser.eval(open), "a click on its summary folds and unfolds it");
        browser.eval("document.querySelector('details#output').open = true");

        // The graph's edges are explained: solid, bold, dashed and dotted.
        let legend = browser.eval("document.getElementById('edge-legend').textContent");
        let legend = legend.as_str().unwrap();
        for says in ["always next", "join", "route may choose (dashed)", "goto may jump (dotted)"] {
            assert!(legend.contains(says), "the edge legend says {says:?}: {legend}");
        }
        let dashes = browser.eval(
            "[...document.querySelectorAll('#edge-legend line')].map((l) => getComputedStyle(l).strokeDasharray)",
        );
        assert_eq!(
            dashes,
            json!(["none", "none", "6px, 4px", "2px, 3px"]),
            "as the graph draws them"
        );

        // Timeline names are never cut: each fits its column (wrapped), and says all in a title.
        browser.wait_for(
            "document.querySelectorAll('#timeline .tl-row.run').length === 2",
            Duration::from_secs(10),
        );
        let cut = browser.eval(
            "[...document.querySelectorAll('#timeline .tl-row .name')] \
               .filter((n) => n.scrollWidth > n.clientWidth + 1 || !n.title.includes(n.firstChild.textContent)) \
               .map((n) => n.textContent)",
        );
        assert_eq!(cut, json!([]), "timeline names cut");
        let long = browser.eval(&format!(
            "document.querySelector('#timeline .tl-row[data-task^=\"{LONG_NODE}\"] .name').textContent"
        ));
        assert!(long.as_str().unwrap().contains(LONG_NODE), "{long}");
        // Nor are the graph's node names: each fits its box.
        let overflowing = browser.eval(
            "[...document.querySelectorAll('#graph svg g.node')].filter((g) => { \
               const box = g.querySelector('rect').getBoundingClientRect(); \
               return [...g.querySelectorAll('text')].some((t) => { \
                 const r = t.getBoundingClientRect(); \
                 return r.left < box.left - 0.5 || r.right > box.right + 0.5; }); }) \
             .map((g) => g.dataset.node)",
        );
        assert_eq!(overflowing, json!([]), "node names wider than their boxes");
        browser.screenshot(&shots.join("thread-finished.png"), 2600.);
    });
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}

/// Trades messages under one correlation id: long ones, between neighbouring lifelines and to
/// itself, in a thread with a long id, so their labels and the participants' names would
/// collide if the picture crowded them.
fn chatter() -> Workflow<Tally> {
    Workflow::<Tally>::builder("chatter", 1)
        .node("planner", |_s: Arc<Tally>, ctx: Ctx| async move {
            let corr = "conv-1";
            let long = "please research the market for blue ceramic mugs in the EU and report back";
            ctx.message(Message::new("user", long).to("planner").correlation_id(corr));
            ctx.message(Message::new("planner", long).to("researcher").correlation_id(corr));
            ctx.message(
                Message::new("planner", "NOTE TO SELF: WEB SEARCH BUDGET AT 90% FOR MARCH")
                    .correlation_id(corr),
            );
            ctx.message(
                Message::new("planner", "draft the summary").to("writer").correlation_id(corr),
            );
            Ok(NodeOutput::update((1, String::new())))
        })
        .node("researcher", |_s: Arc<Tally>, ctx: Ctx| async move {
            let corr = "conv-1";
            let found = "found 14 suppliers, 3 of them in Portugal, prices from 2.10 to 4.80 EUR";
            ctx.message(Message::new("researcher", found).to("planner").correlation_id(corr));
            ctx.message(Message::new("researcher", found).to("writer").correlation_id(corr));
            Ok(NodeOutput::update((1, String::new())))
        })
        .edge(START, "planner")
        .edge("planner", "researcher")
        .edge("researcher", END)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_sequence_pictures_texts_do_not_overlap() {
    let (_d, path) = db();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&chatter())
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let run = engine
        .start_json("chatter", Tally::default(), StartOptions::id("CONVERSATION-2026-MARCH-0001"))
        .await
        .unwrap();
    run.wait().await.unwrap();
    let base = format!("http://{}", server.addr());
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    let overlaps = tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/messages/conv-1"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        browser.wait_for(
            "document.querySelectorAll('#sequence svg g.msg').length === 6",
            Duration::from_secs(10),
        );
        browser.screenshot(&screenshots().join("messages-long.png"), 1400.);
        // Every pair of texts (participants' names, message labels, their lsn notes), and each
        // text and each arrow, measured as laid out: none intersects another.
        browser.eval(
            "(() => { \
               const boxes = [...document.querySelectorAll('#sequence svg text')] \
                 .map((t) => [t.textContent, t.getBoundingClientRect()]); \
               const arrows = [...document.querySelectorAll('#sequence svg g.msg line, #sequence svg g.msg path')] \
                 .map((a) => [`arrow of lsn ${a.parentNode.dataset.lsn}`, a.getBoundingClientRect()]); \
               const hit = (a, b) => a.left < b.right - 0.5 && b.left < a.right - 0.5 \
                 && a.top < b.bottom - 0.5 && b.top < a.bottom - 0.5; \
               const out = []; \
               for (let i = 0; i < boxes.length; i++) for (let j = i + 1; j < boxes.length; j++) \
                 if (hit(boxes[i][1], boxes[j][1])) out.push([boxes[i][0], boxes[j][0]]); \
               for (const t of boxes) for (const a of arrows) \
                 if (hit(t[1], a[1])) out.push([t[0], a[0]]); \
               const picture = document.querySelector('#sequence svg').getBoundingClientRect(); \
               const inside = (r, o) => r.left >= o.left - 0.5 && r.right <= o.right + 0.5; \
               for (const [t, r] of boxes) if (!inside(r, picture)) out.push([t, 'the picture']); \
               for (const g of document.querySelectorAll('#sequence svg g.head')) { \
                 const box = g.querySelector('rect').getBoundingClientRect(); \
                 for (const t of g.querySelectorAll('text')) \
                   if (!inside(t.getBoundingClientRect(), box)) out.push([t.textContent, 'its box']); } \
               const unhaloed = [...document.querySelectorAll('#sequence svg g.msg text.label')] \
                 .filter((t) => { const c = getComputedStyle(t); \
                   return !(c.paintOrder.startsWith('stroke') && parseFloat(c.strokeWidth) >= 3 \
                     && c.stroke === 'rgb(255, 255, 255)'); }) \
                 .map((t) => t.textContent); \
               return { texts: boxes.length, overlaps: out, unhaloed }; })()",
        )
    });
    assert!(overlaps["texts"].as_u64().unwrap() >= 12, "{overlaps}");
    assert_eq!(overlaps["overlaps"], json!([]), "texts of the sequence picture overlap");
    // A label crossing other participants' lifelines is drawn over a white halo: the dashed
    // line stops at its letters.
    assert_eq!(overlaps["unhaloed"], json!([]), "labels struck through by lifelines");
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_child_threads_listing_names_its_parent() {
    let (_d, path) = db();
    let inner = Workflow::<Tally>::builder("inner", 1)
        .node("add", |_s: Arc<Tally>, _ctx: Ctx| async move {
            Ok(NodeOutput::update((2, String::new())))
        })
        .edge(START, "add")
        .edge("add", END)
        .build()
        .unwrap();
    let outer = Workflow::<Tally>::builder("outer", 1)
        .subgraph("sub", inner, |s: &Tally| s.clone(), |c: &Tally| (c.total, "sub".to_owned()))
        .edge(START, "sub")
        .edge("sub", END)
        .build()
        .unwrap();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&outer)
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    engine
        .start_json("outer", Tally::default(), StartOptions::id("p-1"))
        .await
        .unwrap()
        .wait()
        .await
        .unwrap();
    let base = format!("http://{}", server.addr());
    let (status, listed) = get(format!("{base}/api/threads")).await;
    assert_eq!(status, 200, "{listed}");
    let rows = listed["threads"].as_array().unwrap();
    let row = |id: &str| rows.iter().find(|r| r["thread"] == id).cloned().unwrap_or(Value::Null);
    let child = row("p-1/sub@1");
    assert_eq!(child["parent"]["thread"], "p-1", "{listed}");
    assert_eq!(child["parent"]["via"], "sub-workflow", "{child}");
    assert_eq!(row("p-1")["parent"], Value::Null, "a thread started on its own has none");
    let (_, shown) = get(format!("{base}/api/threads/p-1%2Fsub%401")).await;
    assert_eq!(shown["parent"]["thread"], "p-1", "{shown}");
    // A fork names the thread and seq it was forked from, as before.
    let fork = cairn_tools::Operator::new(&engine)
        .fork(
            "p-1",
            cairn_tools::debug::ForkFrom::Seq(1),
            cairn_tools::debug::ForkOptions::id("p-1-f").paused(),
        )
        .await
        .unwrap();
    let (_, listed) = get(format!("{base}/api/threads")).await;
    let forked = listed["threads"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["thread"] == fork.id().as_str())
        .cloned()
        .unwrap();
    assert_eq!(forked["parent"], json!({"thread": "p-1", "seq": 1}), "{forked}");
    server.shutdown().await;
    engine.shutdown().await;
}

/// Waits for input, so a thread of it stays unfinished.
fn approval() -> Workflow<Tally> {
    Workflow::<Tally>::builder("approval", 1)
        .node("ask", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt(json!({"approve": true}))?;
            Ok(NodeOutput::update((n, "approved".into())))
        })
        .edge(START, "ask")
        .edge("ask", END)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workflows_and_schedules_pages_count_list_and_pause_with_the_token() {
    let (_d, path) = db();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&reporter())
        .workflow(&approval())
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    for i in 0..3 {
        let id = format!("r-{i}");
        engine
            .start_json("reporter", Tally::default(), StartOptions::id(id))
            .await
            .unwrap()
            .wait()
            .await
            .unwrap();
    }
    for i in 0..2 {
        engine
            .start_json("approval", Tally::default(), StartOptions::id(format!("a-{i}")))
            .await
            .unwrap();
    }
    for i in 0..2 {
        let h = engine.thread(&format!("a-{i}")).await.unwrap();
        let deadline = std::time::Instant::now() + Duration::from_secs(20);
        while h.status().await.unwrap() != ThreadStatus::WaitingInput {
            assert!(std::time::Instant::now() < deadline);
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    }
    let hourly = ScheduleSpec::new("reporter", Every::Interval { ms: 3_600_000 })
        .input(json!(Tally::default()));
    engine.create_schedule("hourly-report", hourly).await.unwrap();
    // Its overlap policy and jitter shown; from 2100 on, it ticks nothing here.
    let nightly =
        ScheduleSpec::new("reporter", Every::Cron { expr: "0 3 * * *".into(), tz: "UTC".into() })
            .input(json!(Tally::default()))
            .overlap(cairn::Overlap::Skip)
            .jitter_ms(30_000)
            .between(Some(4_102_444_800_000), None);
    engine.create_schedule("nightly-digest", nightly).await.unwrap();
    let base = format!("http://{}", server.addr());
    let token = server.token().to_owned();

    // The JSON routes: a listing with the next ticks; controls refused without the token.
    let (status, listed) = get(format!("{base}/api/schedules")).await;
    assert_eq!(status, 200, "{listed}");
    let s = &listed["schedules"][0];
    assert_eq!(
        (s["name"].as_str(), s["workflow"].as_str()),
        (Some("hourly-report"), Some("reporter")),
        "{listed}"
    );
    let ticks: Vec<u64> =
        s["next_ticks"].as_array().unwrap().iter().map(|t| t.as_u64().unwrap()).collect();
    assert_eq!(ticks.len(), 5, "{s}");
    assert!(ticks.windows(2).all(|w| w[1] - w[0] == 3_600_000), "{ticks:?}");
    let pause = format!("{base}/api/schedules/hourly-report/pause");
    assert_eq!(send("POST", pause.clone(), None).await.0, 401);
    assert_eq!(
        send("POST", format!("{base}/api/schedules/nope/pause"), Some(format!("Bearer {token}")))
            .await
            .0,
        404
    );
    assert_eq!(
        send(
            "POST",
            format!("{base}/api/schedules/hourly-report/explode"),
            Some(format!("Bearer {token}"))
        )
        .await
        .0,
        404
    );
    let (status, triggered) = send(
        "POST",
        format!("{base}/api/schedules/hourly-report/trigger"),
        Some(format!("Bearer {token}")),
    )
    .await;
    assert_eq!(status, 200, "{triggered}");
    let started = triggered["thread"].as_str().unwrap().to_owned();
    assert!(started.starts_with("hourly-report@now-"), "{triggered}");
    engine.thread(&started).await.unwrap().wait().await.unwrap();

    // 3 started, 1 triggered, and the ticks the schedule started (its first at its creation).
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    let done = loop {
        let (_, all) = get(format!("{base}/api/threads?workflow=reporter")).await;
        let all = all["threads"].as_array().cloned().unwrap_or_default();
        if all.iter().all(|t| t["status"] == "completed") {
            break all.len();
        }
        assert!(std::time::Instant::now() < deadline, "{all:?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(done >= 4, "{done}");

    let shots = screenshots();
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    tokio::task::block_in_place(|| {
        // Workflows: each one with its versions and its threads by status.
        browser.navigate(&format!("{base}/ui/workflows"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        let count = |wf: &str, status: &str| {
            format!(
                "document.querySelector('[data-workflow={wf}] .count[data-status={status}]')?.dataset.n"
            )
        };
        let card = browser.eval("document.querySelector('[data-workflow=reporter]')?.textContent");
        assert_eq!(
            browser.eval(&count("reporter", "completed")),
            json!(done.to_string()),
            "{card}"
        );
        assert_eq!(browser.eval(&count("approval", "waiting_input")), json!("2"));
        assert_eq!(browser.eval("document.querySelector('[data-workflow=approval] [data-versions]').dataset.versions"), json!("1"));
        browser.wait_for(
            "document.querySelector('[data-workflow=reporter] .graph svg g.node')",
            Duration::from_secs(10),
        );
        // The drain view above the cards: per version and per build (all unpinned here).
        browser.wait_for(
            r#"document.querySelector('#drain tr[data-build=""]')"#,
            Duration::from_secs(10),
        );
        let drain = browser.eval("document.getElementById('drain').textContent");
        let drain = drain.as_str().unwrap();
        assert!(drain.contains("approval") && drain.contains("(unpinned)"), "{drain}");
        let legend = browser.eval("document.getElementById('edge-legend')?.textContent ?? ''");
        assert!(legend.as_str().unwrap().contains("route may choose (dashed)"), "{legend}");
        browser.screenshot(&shots.join("workflows.png"), 2000.);

        // Schedules: listed with its next ticks and last run; Pause, with the token, pauses it.
        browser.navigate(&format!("{base}/ui/schedules"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        let row = "document.querySelector('#schedules tr[data-schedule=hourly-report]')";
        assert_eq!(
            browser.eval(&format!("{row}.querySelectorAll('[data-tick]').length")),
            json!(5)
        );
        let shown = |row: &str, n: &str| {
            format!(
                "document.querySelector('#schedules tr[data-schedule={row}] [data-n={n}]')?.textContent ?? null"
            )
        };
        assert_eq!(
            browser.eval(&shown("nightly-digest", "overlap")),
            json!("overlap skip: a tick while a run runs is skipped")
        );
        assert_eq!(
            browser.eval(&shown("nightly-digest", "jitter")),
            json!("jitter: each tick up to 30.0 s late")
        );
        // Control: the default policy, and no jitter.
        assert_eq!(
            browser.eval(&shown("hourly-report", "overlap")),
            json!("overlap allow_all: a tick while a run runs starts anyway")
        );
        assert_eq!(browser.eval(&shown("hourly-report", "jitter")), Value::Null);
        let runs = browser.eval(&format!("{row}.children[5].textContent"));
        assert!(runs.as_str().unwrap().contains(&started), "the last run is listed: {runs}");
        assert!(!runs.as_str().unwrap().contains("schedule:"), "its own thread is no run: {runs}");
        browser.eval(&format!("{row}.querySelector('button[data-control=pause]').click()"));
        browser.wait_for(
            "document.getElementById('control-result').textContent.includes('token')",
            Duration::from_secs(10),
        );
        browser.eval(&format!(
            "document.getElementById('token').value = '{token}'; \
             document.getElementById('token-save').click(); \
             {row}.querySelector('button[data-control=pause]').click()"
        ));
        browser.wait_for(&format!("{row}.dataset.status === 'paused'"), Duration::from_secs(10));
        let ticks = browser.eval(&format!("{row}.children[4].textContent"));
        assert!(ticks.as_str().unwrap().ends_with("none starts while paused"), "{ticks}");
        assert_eq!(
            browser.eval(&format!("{row}.querySelector('button[data-control=pause]')")),
            Value::Null
        );
        assert_eq!(
            browser.eval(&format!("!!{row}.querySelector('button[data-control=resume]')")),
            json!(true)
        );
        browser.screenshot(&shots.join("schedules.png"), 1400.);
    });
    let info = engine.schedule("hourly-report").await.unwrap().unwrap();
    assert_eq!(info.status, ThreadStatus::Paused);
    tokio::task::block_in_place(|| {
        let row = "document.querySelector('#schedules tr[data-schedule=hourly-report]')";
        browser.eval(&format!("{row}.querySelector('button[data-control=resume]').click()"));
        browser.wait_for(&format!("{row}.dataset.status !== 'paused'"), Duration::from_secs(10));
    });
    assert_ne!(
        engine.schedule("hourly-report").await.unwrap().unwrap().status,
        ThreadStatus::Paused
    );
    // Run now starts a thread and links it; it shows among the last runs.
    let ran = tokio::task::block_in_place(|| {
        let row = "document.querySelector('#schedules tr[data-schedule=hourly-report]')";
        browser.eval(&format!("{row}.querySelector('button[data-control=trigger]').click()"));
        let ran = browser.wait_for(
            "document.querySelector('#control-result a')?.textContent",
            Duration::from_secs(10),
        );
        let ran = ran.as_str().unwrap().to_owned();
        assert!(ran.starts_with("hourly-report@now-") && ran != started, "{ran}");
        browser.wait_for(
            &format!("{row}.children[5].textContent.includes('{ran}')"),
            Duration::from_secs(10),
        );
        ran
    });
    engine.thread(&ran).await.unwrap().wait().await.unwrap();
    // Delete asks first; confirmed, the schedule ends (its thread cancelled: it reads
    // `deleted`) and offers no control.
    tokio::task::block_in_place(|| {
        let row = "document.querySelector('#schedules tr[data-schedule=hourly-report]')";
        browser.eval("window.confirm = () => false");
        browser.eval(&format!("{row}.querySelector('button[data-control=delete]').click()"));
        let status = browser.eval(&format!("{row}.dataset.status"));
        assert_ne!(status, json!("deleted"), "a refused confirm deletes nothing");
        browser.eval("window.confirm = () => true");
        browser.eval(&format!("{row}.querySelector('button[data-control=delete]').click()"));
        browser.wait_for(&format!("{row}.dataset.status === 'deleted'"), Duration::from_secs(10));
        assert_eq!(browser.eval(&format!("{row}.querySelectorAll('button').length")), json!(0));
        browser.screenshot(&shots.join("schedules-deleted.png"), 1400.);
    });
    let info = engine.schedule("hourly-report").await.unwrap().unwrap();
    assert_eq!(info.status, ThreadStatus::Cancelled);
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}
