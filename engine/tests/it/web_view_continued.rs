//! The web view's thread page links a thread continued as new to its successor and back, in a
//! real browser (`cdp`).

use std::time::Duration;

use cairn::{Durability, Engine, StartOptions};

use crate::cdp::Browser;
use crate::common::{Effects, Tally, db};
use cairn_tools::serve::Serve as _;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_thread_page_links_the_chain_of_a_continued_thread() {
    let (_d, path) = db();
    let (engine, server) = Engine::builder(&path)
        .durability(Durability::None)
        .workflow(&crate::continue_as_new::chain(Effects::default()))
        .serve(([127, 0, 0, 1], 0).into())
        .open()
        .await
        .unwrap();
    engine.start_json("chain", Tally::default(), StartOptions::id("t")).await.unwrap();
    engine.result_following("t", Duration::from_secs(30)).await.unwrap();
    let base = format!("http://{}", server.addr());
    let mut browser = tokio::task::block_in_place(|| Browser::launch(1200, 900));
    let links = tokio::task::block_in_place(|| {
        browser.navigate(&format!("{base}/ui/threads/t~1"));
        browser.wait_for("document.body.dataset.loaded === '1'", Duration::from_secs(20));
        browser.wait_for("!!document.getElementById('continued-as')", Duration::from_secs(10));
        browser.eval(
            "(() => ({ from: document.getElementById('continued-from').getAttribute('href'), \
               as: document.getElementById('continued-as').getAttribute('href'), \
               text: document.getElementById('continued-as').textContent }))()",
        )
    });
    assert_eq!(links["from"], "/ui/threads/t", "{links}");
    assert_eq!(links["as"], "/ui/threads/t~2", "{links}");
    assert_eq!(links["text"], "t~2", "{links}");
    drop(browser);
    server.shutdown().await;
    engine.shutdown().await;
}
