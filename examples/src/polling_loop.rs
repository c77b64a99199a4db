//! A polling loop on continue-as-new: a thread polls a feed for new items, a page per turn,
//! and every [`POLLS_PER_RUN`] turns continues as new, carrying its cursor and totals as the
//! successor's input. Each thread's log holds at most that many turns, however long the loop
//! runs; the caller follows the chain (`poller`, `poller~1`, ...) with
//! [`Engine::result_following`].
//!
//! ```text
//! START -> poll -+-> poll (the next page; a new thread every POLLS_PER_RUN turns)
//!                +-> END  (the feed is drained)
//! ```

use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use cairn::dsl::{Ctx, NodeError, NodeOutput, Replace, Workflow};
use cairn::storage::{Seq, ThreadId};
use cairn::{END, Engine, START, StartOptions, ThreadStatus, ToolError};
use serde::{Deserialize, Serialize};

/// Turns a thread of the loop runs before it continues as new.
pub const POLLS_PER_RUN: u32 = 5;

/// Items in the example's feed.
pub const FEED_ITEMS: u64 = 23;

/// Items one poll reads at most.
pub const PAGE: u64 = 2;

/// What the loop carries from turn to turn, and from thread to thread.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Poll {
    /// The last item read.
    pub cursor: u64,
    /// Items read, by every thread of the chain.
    pub seen: u64,
    /// Polls made, by every thread of the chain.
    pub polls: u64,
    /// Whether the feed is drained.
    pub done: bool,
}

/// What the example saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The threads of the chain, in order.
    pub links: Vec<String>,
    /// Events in each link's log.
    pub events: Vec<usize>,
    /// The last thread's status and its final state.
    pub status: ThreadStatus,
    /// The final state.
    pub last: Poll,
}

/// Reads the feed: up to [`PAGE`] item numbers after `cursor` (a service the loop calls).
fn read_feed(cursor: u64) -> Vec<u64> {
    (cursor + 1..=FEED_ITEMS).take(PAGE as usize).collect()
}

async fn poll(s: &Poll, ctx: &Ctx) -> Result<NodeOutput<Poll>, NodeError> {
    let items: Vec<u64> = ctx
        .tool("feed.read", s.cursor, |cursor: u64, _| async move {
            Ok::<_, ToolError>(read_feed(cursor))
        })
        .await?;
    let next = Poll {
        cursor: items.last().copied().unwrap_or(s.cursor),
        seen: s.seen + items.len() as u64,
        polls: s.polls + 1,
        done: items.is_empty(),
    };
    // This thread's last turn: its successor starts from `next`, created in this step's commit.
    if !next.done && ctx.step() >= u64::from(POLLS_PER_RUN) {
        ctx.continue_as_new(&next)?;
    }
    Ok(NodeOutput::update(next))
}

/// The polling workflow: one visit of `poll` per turn, [`POLLS_PER_RUN`] a thread at most.
///
/// # Errors
/// A build error (none for this graph).
pub fn workflow() -> Result<Workflow<Replace<Poll>>, cairn::dsl::BuildError> {
    Workflow::<Replace<Poll>>::builder("poller", 1)
        .node("poll", |s: Arc<Replace<Poll>>, ctx: Ctx| async move { poll(&s.0, &ctx).await })
        .edge(START, "poll")
        .loop_bound("poll", POLLS_PER_RUN)
        .route("poll", |s: &Replace<Poll>| if s.0.done { END } else { "poll" }, ["poll", END])
        .build()
}

/// Runs the loop on `db` until the feed is drained.
///
/// # Errors
/// Engine errors.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    let wf = workflow()?;
    let engine = Engine::builder(db).workflow(&wf).open().await?;
    engine.start(&wf, Replace(Poll::default()), StartOptions::id("poller")).await?;
    let (last_id, outcome) = engine.result_following("poller", Duration::from_secs(30)).await?;
    let outcome = outcome.ok_or_else(|| anyhow::anyhow!("{last_id} did not finish"))?;
    let last: Poll = serde_json::from_value(outcome.output.unwrap_or_default())?;
    let (mut links, mut events) = (vec!["poller".to_owned()], Vec::new());
    loop {
        let id = ThreadId::new(links.last().expect("one link").as_str())?;
        events.push(engine.store().read_since(&id, Seq(0), 10_000).await?.len());
        match engine.continued_as(id.as_str()).await? {
            Some(next) => links.push(next),
            None => break,
        }
    }
    engine.shutdown().await;
    Ok(Summary { links, events, status: outcome.status, last })
}
