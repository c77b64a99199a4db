//! Queues on the endpoint and in the web view: `GET /api/queues` answers each queue's limits
//! and its counts in all and per key (as `cairn queue list --json`, with the engine clock's
//! `now_ms`), refuses a parameter naming it, and the queues page (linked from the other pages'
//! navigation) shows them in a real browser (`cdp`): one card per queue, the running count
//! against the global limit, the waiting count, one row per key with its own counts, a queue's
//! flow control in words and the start a debounce holds, with its quiet time left. The
//! screenshot goes to `<target>/screenshots/queues.png`.
#![allow(clippy::too_many_lines, reason = "a scenario test reads as one story, top to bottom")]

use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeOutput, Workflow};
use cairn::storage::{QueueLimits, RateLimit};
use cairn::{Durability, END, Engine, START, StartOptions, ThreadStatus};
use serde_json::{Value, json};

use crate::cdp::Browser;
use crate::common::{Tally, db};
use cairn_tools::serve::Serve as _;

/// Waits for input: a thread of it holds its queue slot until answered.
fn report() -> Workflow<Tally> {
    Workflow::<Tally>::builder("report", 1)
        .node("build", |_s: Arc<Tally>, ctx: Ctx| async move {
            let n: u64 = ctx.interrupt(json!({"approve": true}))?;
            Ok(NodeOutput::update((n, "built".into())))
        })
        .edge(START, "build")
        .edge("build", END)
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

/// Waits (at most 20 s) until thread `id` waits for input: admitted, and parked holding its slot.
async fn waiting_input(engine: &Engine, id: &str) {
    let h = engine.thread(id).await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(20);
    loop {
        let status = h.status().await.unwrap();
        if status == ThreadStatus::WaitingInput {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "{id} is {status:?}: {:?}",
            engine.queues().await
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_queues_route_and_page_show_limits_and_counts_per_queue_and_key() {
    let (_d, path) = db();
    let wf = report();
    let reports = QueueLimits {
        concurrency_max: Some(2),
        per_key_max: Some(1),
        rate: Some(RateLimit { starts: 10, period_ms: 60_000 }),
        ..QueueLimits::default()
    };
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .queue("reports", reports)
        .queue("emails", QueueLimits { concurrency_max: Some(5), ..QueueLimits::default() })
        .queue(
            "digests",
            QueueLimits {
                debounce_ms: Some(600_000),
                fairness: Some(cairn::storage::Fairness::new(1, [("gold".to_owned(), 3)])),
                ..QueueLimits::default()
            },
        )
        .workflow(&wf)
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    // acme and globex run one each (the per-key limit 1, the global 2); the rest wait.
    for (id, tenant) in
        [("acme-1", "acme"), ("globex-1", "globex"), ("acme-2", "acme"), ("initech-1", "initech")]
    {
        let opts = StartOptions::id(id).on_queue("reports").key(tenant);
        engine.start_json("report", Tally::default(), opts).await.unwrap();
    }
    for id in ["acme-1", "globex-1"] {
        waiting_input(&engine, id).await;
    }
    // A burst on a debounced queue: the second start supersedes the first and waits for ten
    // quiet minutes.
    for id in ["digest-1", "digest-2"] {
        let opts = StartOptions::id(id).on_queue("digests").key("daily");
        engine.start_json("report", Tally::default(), opts).await.unwrap();
    }
    let base = format!("http://{}", server.addr());

    let (status, out) = get(format!("{base}/api/queues")).await;
    assert_eq!(status, 200, "{out}");
    assert!(out["now_ms"].as_u64().is_some(), "{out}");
    let queues = out["queues"].as_array().unwrap();
    let names: Vec<&str> = queues.iter().map(|q| q["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["digests", "emails", "reports"]);
    let q = &queues[2];
    assert_eq!((q["running"].clone(), q["waiting"].clone()), (json!(2), json!(2)), "{q}");
    assert_eq!(q["limits"]["concurrency_max"], json!(2));
    assert_eq!(q["limits"]["per_key_max"], json!(1));
    assert_eq!(q["limits"]["rate"], json!({"starts": 10, "period_ms": 60_000}));
    assert_eq!(q["keys"]["acme"]["running"], json!(1));
    assert_eq!(q["keys"]["acme"]["waiting"], json!(1));
    assert_eq!(q["keys"]["initech"]["waiting"], json!(1));
    assert_eq!(q["recent"].as_array().unwrap().len(), 2, "two admissions in the rate window");
    // The same as the engine's (and `cairn queue list --json`'s) list.
    let listed = serde_json::to_value(engine.queues().await.unwrap()).unwrap();
    assert_eq!(out["queues"], listed);
    let (status, refused) = get(format!("{base}/api/queues?limit=3")).await;
    assert_eq!(status, 400, "{refused}");
    assert_eq!(refused["field"], json!("limit"), "{refused}");

    let shots = crate::web_view::screenshots();
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1400, 900));
    tokio::task::block_in_place(|| {
        // Linked from the threads page's navigation.
        browser.navigate(&format!("{base}/ui/threads"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        let link =
            browser.eval("document.querySelector('header nav a[href=\"/ui/queues\"]').textContent");
        assert_eq!(link, json!("Queues"));
        browser.navigate(&format!("{base}/ui/queues"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        let cards = browser.eval("document.querySelectorAll('section.queue').length");
        assert_eq!(cards, json!(3));
        let text = |browser: &mut Browser, sel: &str| {
            browser.eval(&format!("document.querySelector({sel:?}).textContent.trim()"))
        };
        assert_eq!(text(&mut browser, "[data-queue=reports] dd[data-n=running]"), json!("2 / 2"));
        assert_eq!(text(&mut browser, "[data-queue=reports] dd[data-n=waiting]"), json!("2"));
        assert!(
            text(&mut browser, "[data-queue=reports] dd[data-n=rate]")
                .as_str()
                .unwrap()
                .starts_with("2 / 10"),
            "two starts of ten in the window"
        );
        assert_eq!(
            text(&mut browser, "[data-queue=reports] tr[data-key=acme] td[data-n=running]"),
            json!("1 / 1")
        );
        assert_eq!(
            text(&mut browser, "[data-queue=reports] tr[data-key=acme] td[data-n=waiting]"),
            json!("1")
        );
        assert_eq!(
            text(&mut browser, "[data-queue=reports] tr[data-key=initech] td[data-n=waiting]"),
            json!("1")
        );
        let keys =
            browser.eval("document.querySelectorAll('[data-queue=reports] tr[data-key]').length");
        assert_eq!(keys, json!(3));
        assert_eq!(text(&mut browser, "[data-queue=emails] dd[data-n=running]"), json!("0 / 5"));
        // Flow control in words, and the start the debounce holds (the last of the burst).
        let flow = text(&mut browser, "[data-queue=digests] dd[data-n=flow]");
        let flow = flow.as_str().unwrap();
        assert!(flow.starts_with("debounced: a key's last start runs after"), "{flow}");
        assert!(flow.ends_with("; weighted: gold 3, other keys 1"), "its weights: {flow}");
        assert_eq!(text(&mut browser, "[data-queue=emails] dd[data-n=flow]"), json!("none"));
        let held = browser.eval(
            "[...document.querySelectorAll('[data-queue=digests] tr[data-held=debounced] a')]\
             .map((a) => a.textContent)",
        );
        assert_eq!(held, json!(["digest-2"]));
        let until = text(&mut browser, "[data-queue=digests] tr[data-held=debounced] td.muted");
        assert_eq!(until, json!("quiet for 10 min more"));
        browser.screenshot(&shots.join("queues.png"), 1400.);
    });
    // Answering acme-1 frees a slot: initech, the key served least recently, takes it before
    // acme-2 (round robin between keys), and the page follows (it refreshes).
    engine.send_input("acme-1", 1u64).await.unwrap();
    let acme_1 = engine.thread("acme-1").await.unwrap();
    let ended = tokio::time::timeout(Duration::from_secs(20), acme_1.finished()).await;
    ended.expect("acme-1 ends").unwrap();
    waiting_input(&engine, "initech-1").await;
    tokio::task::block_in_place(|| {
        browser.wait_for(
            "document.querySelector('[data-queue=reports] tr[data-key=initech] td[data-n=running]')\
             .textContent.trim() === '1 / 1'",
            Duration::from_secs(10),
        );
        // The depth over time: one sample a refresh, drawn as two lines of as many points.
        let depth = "document.querySelector('[data-queue=reports] dd[data-n=depth]')";
        browser.wait_for(&format!("Number({depth}.dataset.samples) >= 3"), Duration::from_secs(10));
        let points = browser.eval(&format!(
            "[...{depth}.querySelectorAll('polyline')].map((l) => l.getAttribute('points').split(' ').length                === Number({depth}.dataset.samples))"
        ));
        assert_eq!(points, json!([true, true]));
        let said =
            browser.eval(&format!("{depth}.querySelector('svg').getAttribute('aria-label')"));
        assert!(said.as_str().unwrap().starts_with("running 2, waiting 1"), "{said}");
        browser.screenshot(&shots.join("queues-depth.png"), 1400.);
    });
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}
