//! What a new user saw in the web view (issue 38 item 6), in a real browser (`cdp`): a
//! completed thread's progress says it is done, also after a short route that reported step 1
//! of 5 and ended; a deleted schedule reads as deleted and counts the thread its Run now
//! started; the workflows page leads with the application's workflows (the engine's own after
//! them, marked built-in and folded), draws every graph with its text at a readable size, and
//! draws a node's edge to itself as a loop whose arrowhead is on the node. Screenshots go to
//! `<target>/screenshots/`.

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::{Durability, END, Engine, Every, START, ScheduleSpec, StartOptions};
use cairn_tools::demo::{QUESTIONS, Research, research_workflow};
use cairn_tools::model::ScriptedModel;
use serde_json::json;

use crate::cdp::Browser;
use crate::common::{Tally, call, db};
use crate::web_view::screenshots;
use cairn_tools::serve::Serve as _;

/// The smallest text the pages may draw a graph with, in CSS pixels at the page's width.
const READABLE_PX: f64 = 11.0;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_completed_threads_progress_says_done_in_the_list_and_on_its_page() {
    let (_d, path) = db();
    let research = research_workflow(Arc::new(ScriptedModel::demo())).unwrap();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&research)
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    // The demo's threads, as `cairn demo` starts them: some take the short route (the direct
    // answer reports step 1 of 5, "classifying the question", and ends).
    for (i, question) in QUESTIONS.iter().enumerate() {
        let input = Research { question: (*question).to_owned(), ..Research::default() };
        let run = engine.start_json("research-agent", input, StartOptions::id(format!("demo-{i}")));
        run.await.unwrap().wait().await.unwrap();
    }
    let base = format!("http://{}", server.addr());
    let (status, listed) = call("GET", format!("{base}/api/threads"), None, String::new()).await;
    assert_eq!(status, 200, "{listed}");
    let rows = listed["threads"].as_array().unwrap().clone();
    assert_eq!(rows.len(), QUESTIONS.len(), "{listed}");
    let short: Vec<&str> = rows
        .iter()
        .filter(|r| r["progress"]["step"].as_u64() < r["progress"]["total"].as_u64())
        .map(|r| r["thread"].as_str().unwrap())
        .collect();
    assert!(!short.is_empty(), "no thread took the short route: {listed}");

    let shots = screenshots();
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/threads"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        browser.wait_for(
            &format!(
                "document.querySelectorAll('#threads tbody tr[data-thread]').length === {}",
                QUESTIONS.len()
            ),
            Duration::from_secs(10),
        );
        // Each row's progress cell: its text, and how full its bar is drawn.
        let shown = browser.eval(
            "Object.fromEntries([...document.querySelectorAll('#threads tbody tr[data-thread]')] \
               .map((r) => { const cell = r.children[5]; const bar = cell.querySelector('.progress > span'); \
                 return [r.dataset.thread, [cell.textContent.trim(), bar ? bar.style.width : null]]; }))",
        );
        browser.screenshot(&shots.join("threads-done.png"), 1200.);
        for r in &rows {
            let id = r["thread"].as_str().unwrap();
            // A short route says done; the whole route its last report, `5/5 done`, as the
            // CLI does.
            let text = if short.contains(&id) { "done" } else { "5/5 done" };
            assert_eq!(shown[id], json!([text, "100%"]), "{id} in the list: {shown}");
        }
        // A short route's own page says so too.
        let id = short[0];
        browser.navigate(&format!("{base}/ui/threads/{id}"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        let text = browser.wait_for(
            "document.querySelector('#summary .progress-wrap')?.textContent",
            Duration::from_secs(10),
        );
        assert_eq!(text, json!("done"), "{id}'s page");
        // Its graph is drawn as readable as the workflows page's.
        browser.wait_for("document.querySelector('#graph svg g.node')", Duration::from_secs(10));
        let small = browser.eval(&format!(
            "[...document.querySelectorAll('#graph svg text')].map((t) =>                [t.textContent, parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a])                .filter(([, px]) => px < {READABLE_PX})"
        ));
        browser.screenshot(&shots.join("thread-short-route.png"), 2400.);
        assert_eq!(small, json!([]), "texts drawn under {READABLE_PX} px");
    });
    drop(browser);
    // The JSON says it as the pages and the CLI do.
    for r in rows.iter().filter(|r| short.iter().any(|id| r["thread"] == *id)) {
        assert_eq!(
            (&r["status"], &r["progress_text"]),
            (&json!("completed"), &json!("done")),
            "{r}"
        );
    }
    server.shutdown().await;
    engine.shutdown().await;
}

/// Ends at once.
fn report() -> Workflow<Tally> {
    Workflow::<Tally>::builder("report", 1)
        .node("write", |_s: Arc<Tally>, _ctx: Ctx| async move {
            Ok(NodeOutput::update((1, "written".into())))
        })
        .edge(START, "write")
        .edge("write", END)
        .build()
        .unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_deleted_schedule_reads_deleted_and_counts_the_run_it_was_triggered_for() {
    let (_d, path) = db();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&report())
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    // Once a year, on 1 January at 03:00 in Berlin: no tick of its own during the test.
    let yearly = Every::Cron { expr: "0 3 1 1 *".into(), tz: "Europe/Berlin".into() };
    let spec = ScheduleSpec::new("report", yearly).input(json!(Tally::default()));
    engine.create_schedule("new-year", spec).await.unwrap();
    let base = format!("http://{}", server.addr());
    let token = Some(server.token().to_owned());
    let url = format!("{base}/api/schedules/new-year");
    let (status, ran) = call("POST", format!("{url}/trigger"), token.clone(), String::new()).await;
    assert_eq!(status, 200, "{ran}");
    engine.thread(ran["thread"].as_str().unwrap()).await.unwrap().wait().await.unwrap();
    let (status, deleted) = call("DELETE", url, token, String::new()).await;
    assert_eq!(status, 200, "{deleted}");

    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/schedules"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        let row = "document.querySelector('#schedules tr[data-schedule=new-year]')";
        browser.wait_for(row, Duration::from_secs(10));
        let shown = browser.eval(&format!(
            "[{row}.dataset.status, {row}.children[1].textContent, \
              {row}.children[6].textContent, {row}.querySelectorAll('button').length]"
        ));
        browser.screenshot(&screenshots().join("schedules-deleted-triggered.png"), 1000.);
        assert_eq!(shown[0], "deleted", "{shown}");
        assert_eq!(shown[1], "deleted", "its badge: {shown}");
        assert!(shown[2].as_str().unwrap().starts_with("1 started (1 by Run now)"), "{shown}");
        assert_eq!(shown[3], 0, "a deleted schedule offers no control: {shown}");
    });
    drop(browser);
    assert_eq!(deleted["status"], "deleted", "the delete's answer: {deleted}");
    let (_, listed) = call("GET", format!("{base}/api/schedules"), None, String::new()).await;
    let s = &listed["schedules"][0];
    let counted = (&s["status"], &s["started"], &s["triggered"]);
    assert_eq!(counted, (&json!("deleted"), &json!(1), &json!(1)), "{s}");
    server.shutdown().await;
    engine.shutdown().await;
}

/// The laid out sizes of the graphs' texts in a section of the workflows page: for each text,
/// its font size in CSS pixels as drawn (the SVG's scale applied).
fn text_sizes(browser: &mut Browser, workflow: &str) -> Vec<(String, f64)> {
    let sizes = browser.eval(&format!(
        "[...document.querySelectorAll('[data-workflow=\"{workflow}\"] .graph svg text')] \
           .map((t) => [t.textContent, parseFloat(getComputedStyle(t).fontSize) * t.getScreenCTM().a])"
    ));
    let sizes = sizes.as_array().cloned().unwrap_or_default();
    sizes.iter().map(|p| (p[0].as_str().unwrap().to_owned(), p[1].as_f64().unwrap())).collect()
}

/// Each self-loop of the built-in workflow's graphs: where it starts and ends against its
/// node's box, and how far it reaches out of it (SVG units).
const SELF_LOOPS: &str = "[...document.querySelectorAll('[data-workflow=\"cairn.schedule\"] .graph svg')] \
  .map((svg) => { const r = svg.querySelector('g.node[data-node=tick] rect').getBBox(); \
    return [...svg.querySelectorAll('path.self-loop')].map((p) => { \
      const a = p.getPointAtLength(0), b = p.getPointAtLength(p.getTotalLength()), box = p.getBBox(); \
      const onEdge = (q) => (Math.abs(q.x - r.x - r.width) < 1 || Math.abs(q.x - r.x) < 1) \
        && q.y > r.y && q.y < r.y + r.height; \
      return { ends_on_node: onEdge(a) && onEdge(b), \
        reach: Math.max(box.x + box.width - r.x - r.width, r.x - box.x), \
        marker: p.getAttribute('marker-end') }; }); })";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_workflows_page_leads_with_the_applications_graphs_drawn_readable() {
    let (_d, path) = db();
    let research = research_workflow(Arc::new(ScriptedModel::demo())).unwrap();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&research)
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    let base = format!("http://{}", server.addr());
    let shots = screenshots();
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 1000));
    tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/workflows"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        browser.wait_for(
            "document.querySelector('[data-workflow=research-agent] .graph svg g.node')",
            Duration::from_secs(10),
        );
        browser.screenshot(&shots.join("workflows-readable.png"), 2400.);
        let order = browser.eval(
            "[...document.querySelectorAll('#workflows > section')].map((s) => s.dataset.workflow)",
        );
        let order_expected = json!(["research-agent", "cairn.batch", "cairn.schedule"]);
        assert_eq!(order, order_expected, "the application's first, then the built-in ones");
        let builtin = browser.eval(
            "(() => { const s = document.querySelector('[data-workflow=\"cairn.schedule\"]'); \
               return [s.dataset.builtin, s.querySelector('summary')?.textContent ?? '', \
                 s.querySelector('details')?.open]; })()",
        );
        assert_eq!(builtin[0], "1", "{builtin}");
        assert!(builtin[1].as_str().unwrap().contains("built-in"), "{builtin}");
        assert_eq!(builtin[2], false, "the engine's own starts folded: {builtin}");
        let sizes = text_sizes(&mut browser, "research-agent");
        assert_eq!(sizes.iter().filter(|(t, _)| t == "synthesize").count(), 1, "{sizes:?}");
        let small: Vec<_> = sizes.iter().filter(|(_, px)| *px < READABLE_PX).collect();
        assert_eq!(small, Vec::<&(String, f64)>::new(), "texts drawn under {READABLE_PX} px");

        // Unfolded, the built-in one's graphs are as readable, and its loop is a loop.
        browser
            .eval("document.querySelector('[data-workflow=\"cairn.schedule\"] summary').click()");
        browser.wait_for(
            "document.querySelectorAll('[data-workflow=\"cairn.schedule\"] .graph svg g.node').length === 2",
            Duration::from_secs(10),
        );
        browser.screenshot(&shots.join("workflows-builtin.png"), 2400.);
        let sizes = text_sizes(&mut browser, "cairn.schedule");
        assert!(sizes.iter().all(|(_, px)| *px >= READABLE_PX), "{sizes:?}");
        let loops = browser.eval(SELF_LOOPS);
        let loop_ = json!({"ends_on_node": true, "marker": "url(#wf-arrow)"});
        for graph in loops.as_array().unwrap() {
            assert_eq!(graph.as_array().map(Vec::len), Some(1), "one loop a graph: {loops}");
            let l = &graph[0];
            assert_eq!(
                (&l["ends_on_node"], &l["marker"]),
                (&loop_["ends_on_node"], &loop_["marker"]),
                "{loops}"
            );
            assert!(l["reach"].as_f64().unwrap() >= 20., "a loop, not a sliver: {loops}");
        }
        assert_eq!(loops.as_array().map(Vec::len), Some(2), "{loops}");
    });
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}
