//! Durable timers: a reminder that sleeps for a day, across a shutdown.
//!
//! The `wait` node calls [`Ctx::sleep_ms`]. The first time, the sleep is recorded (a
//! `timer_set` event with its due time) and the thread parks in `Sleeping`: nothing of it runs
//! or stays in memory. The example shuts the engine down while the thread sleeps, reopens the
//! file half a day later (the timer is re-armed from the log, and is not due yet), then lets the
//! rest of the day pass: the timer fires, the node runs again, its sleep now returns at once,
//! and the reminder is sent, exactly once.
//!
//! Time is a [`ManualClock`], so the day passes in a line; with the system clock the same code
//! waits a real day.
//!
//! ```text
//! START -> schedule -> wait (sleeps a day) -> send -> END
//! ```

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use cairn::clock::{Clock, ManualClock};
use cairn::dsl::{Ctx, NodeOutput, Replace, Workflow};
use cairn::thread_ctx::Waiting;
use cairn::{END, Engine, START, StartOptions, ThreadStatus, ToolError};

/// How long the reminder waits.
pub const DAY_MS: u64 = 24 * 60 * 60 * 1_000;

/// When the example starts: 2026-03-02T08:00:00Z.
pub const START_MS: u64 = 1_772_438_400_000;

/// What the example saw.
#[derive(Debug, Clone, PartialEq)]
pub struct Summary {
    /// The thread's status once it parked.
    pub parked: ThreadStatus,
    /// When its timer is due, as recorded.
    pub due_ms: u64,
    /// Its status after the reopen, half a day in.
    pub after_reopen: ThreadStatus,
    /// Its final status.
    pub finished: ThreadStatus,
    /// When the reminder was sent (engine clock).
    pub sent_at_ms: u64,
    /// How many times the send tool really ran.
    pub sends: u64,
}

/// The reminder workflow; `sends` counts real executions of the send tool.
///
/// # Errors
/// A build error (none for this graph).
pub fn workflow(
    sends: Arc<AtomicU64>,
) -> Result<Workflow<Replace<String>>, cairn::dsl::BuildError> {
    Workflow::<Replace<String>>::builder("reminder", 1)
        .node("schedule", |s: Arc<Replace<String>>, _ctx| async move {
            Ok(NodeOutput::update(format!("remind: {}", s.0)))
        })
        .node("wait", |s: Arc<Replace<String>>, ctx: Ctx| async move {
            // Parks the thread until the timer fires; returns at once when the node runs again.
            ctx.sleep_ms(DAY_MS).await?;
            Ok(NodeOutput::update(s.0.clone()))
        })
        .node("send", move |s: Arc<Replace<String>>, ctx: Ctx| {
            let sends = sends.clone();
            async move {
                let at = ctx.now_ms();
                let text = s.0.clone();
                let receipt: String = ctx
                    .tool("email.send", (text, at), move |(text, at): (String, u64), _| {
                        let sends = sends.clone();
                        async move {
                            sends.fetch_add(1, Ordering::SeqCst);
                            Ok::<_, ToolError>(format!("sent at {at}: {text}"))
                        }
                    })
                    .await?;
                Ok(NodeOutput::update(receipt))
            }
        })
        .edge(START, "schedule")
        .edge("schedule", "wait")
        .edge("wait", "send")
        .edge("send", END)
        .build()
}

/// The engine on `db` with the reminder workflow registered, and the workflow.
async fn open(
    db: &Path,
    clock: &ManualClock,
    sends: &Arc<AtomicU64>,
) -> anyhow::Result<(Engine, Workflow<Replace<String>>)> {
    let wf = workflow(sends.clone())?;
    let clock: Arc<dyn Clock> = Arc::new(clock.clone());
    Ok((Engine::builder(db).workflow(&wf).clock(clock).open().await?, wf))
}

/// Runs the reminder on `db`.
///
/// # Errors
/// Engine errors; an error when the thread does not behave as described.
pub async fn run(db: &Path) -> anyhow::Result<Summary> {
    let clock = ManualClock::new(START_MS);
    let sends = Arc::new(AtomicU64::new(0));
    let (engine, wf) = open(db, &clock, &sends).await?;
    let t = engine
        .start(&wf, Replace("water the plants".into()), StartOptions::id("reminder-1"))
        .await?;
    let parked = t.wait().await?.status;
    let due_ms = match cairn_tools::Operator::new(&engine)
        .state_at("reminder-1", None)
        .await?
        .meta
        .waiting
    {
        Some(Waiting::Timer { until_ms, .. }) => until_ms,
        other => anyhow::bail!("expected a timer, found {other:?}"),
    };
    engine.shutdown().await;
    drop((t, engine));

    // Half a day later, a new process opens the file: the timer is armed again, not due yet.
    clock.set_ms(START_MS + DAY_MS / 2);
    let (engine, wf) = open(db, &clock, &sends).await?;
    let t = engine.thread_of(&wf, "reminder-1").await?;
    let after_reopen = t.status().await?;

    // The rest of the day passes: the timer fires and the thread runs to its end.
    clock.set_ms(due_ms);
    let outcome = t.finished().await?;
    let Replace(receipt) = t.output().await?;
    let sent_at_ms = receipt
        .strip_prefix("sent at ")
        .and_then(|r| r.split(':').next())
        .and_then(|n| n.parse().ok())
        .ok_or_else(|| anyhow::anyhow!("unexpected receipt {receipt}"))?;
    engine.shutdown().await;
    Ok(Summary {
        parked,
        due_ms,
        after_reopen,
        finished: outcome.status,
        sent_at_ms,
        sends: sends.load(Ordering::SeqCst),
    })
}
