//! Crash-test your own workflows (a dev-dependency: `cairn-testkit`).
//!
//! Cairn's promise is that a thread survives any crash: reopen, resume, and it ends exactly as
//! if nothing happened, no acknowledged step lost, no recorded tool call run twice. This crate
//! lets you check that promise for *your* workflow, the way Cairn checks it for its own:
//!
//! - [`CrashHarness`] runs your workflow once uninterrupted on a simulated disk, then crashes it
//!   at every I/O op redb makes (or at random ones), under every crash model of
//!   [`fault`](cairn_storage_testkit::fault): process kill, power loss (unsynced writes
//!   lost, torn, reordered, or garbage), a failed fsync, transient and persistent I/O errors, a
//!   full disk, and a second crash during recovery. After each crash it reopens what the disk
//!   holds, resumes, and compares result, outputs, recorded tool calls and real side effects
//!   with the uninterrupted run.
//! - [`assert_crash_safe`] does all that in one call; [`crash_case`], [`any_crash_model`] and
//!   [`crash_point`] are proptest strategies for your own properties.
//! - [`Effects`] records the side effects your tools really perform; [`RecordingStore`] tells
//!   which events the store acknowledged; [`ManualClock`] and a seed make runs deterministic
//!   ([`deterministic_engine`]).
//!
//! Failures print the case that failed as text (`torn_write@17#2a`); set
//! `CAIRN_CRASH_CASE=torn_write@17#2a` to replay just that case, or `CAIRN_CRASH_SEED` to
//! replay a random sweep.
//!
//! # Example
//!
//! A two-step order workflow whose second step charges a card. The test proves that for every
//! crash point and model the order ends the same and the card is never charged twice for a
//! charge whose result was recorded:
//!
//! ```
//! use std::sync::Arc;
//! use cairn_testkit::{Cases, CrashHarness, Effects, assert_sweep};
//! use cairn::{Ctx, NodeOutput, State, Workflow, END, START};
//! use serde::{Deserialize, Serialize};
//!
//! #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
//! struct Order { items: Vec<String>, total: u64, receipt: Option<String> }
//!
//! #[derive(Debug, Clone, Serialize, Deserialize)]
//! enum Change { Priced(u64), Charged(String) }
//!
//! impl State for Order {
//!     type Update = Change;
//!     fn apply(&mut self, change: Change) {
//!         match change {
//!             Change::Priced(total) => self.total = total,
//!             Change::Charged(receipt) => self.receipt = Some(receipt),
//!         }
//!     }
//! }
//!
//! fn order_workflow(fx: Effects) -> Workflow<Order> {
//!     let price_fx = fx.clone();
//!     Workflow::<Order>::builder("order", 1)
//!         .node("price", move |o: Arc<Order>, ctx: Ctx| {
//!             let fx = price_fx.clone();
//!             async move {
//!                 let total: u64 = fx
//!                     .tool(&ctx, "price", o.items.clone(), |items: Vec<String>, _| async move {
//!                         Ok(items.len() as u64 * 250)
//!                     })
//!                     .await?;
//!                 Ok(NodeOutput::update(Change::Priced(total)))
//!             }
//!         })
//!         .node("charge", move |o: Arc<Order>, ctx: Ctx| {
//!             let fx = fx.clone();
//!             async move {
//!                 let receipt: String = fx
//!                     .tool(&ctx, "charge_card", o.total, |cents: u64, _| async move {
//!                         Ok(format!("receipt-{cents}"))
//!                     })
//!                     .await?;
//!                 Ok(NodeOutput::update(Change::Charged(receipt)))
//!             }
//!         })
//!         .edge(START, "price")
//!         .edge("price", "charge")
//!         .edge("charge", END)
//!         .build()
//!         .expect("a valid workflow")
//! }
//!
//! // In a test: `#[test] fn order_survives_crashes() { ... }`
//! let fx = Effects::new();
//! let input = Order { items: vec!["book".into(), "pen".into()], ..Order::default() };
//! let harness = CrashHarness::new(&order_workflow(fx.clone()), input)
//!     .expect("input serialises")
//!     .effects(&fx);
//! // `Cases::Every` crashes at every I/O op under every model (a few hundred cases here);
//! // the doc test keeps it short with random ones.
//! let summary = assert_sweep(&harness, Cases::Random { count: 12, seed: 1 });
//! assert_eq!((summary.lost_acked, summary.diverged, summary.repeated_effects), (0, 0, 0));
//! println!("{}", summary.line("order_crash_test"));
//! ```
//!
//! With proptest, a case is a value like any other:
//!
//! ```
//! # use std::sync::Arc;
//! # use cairn::{NodeOutput, Replace, Workflow, END, START};
//! use cairn_testkit::{CrashHarness, crash_case};
//! use proptest::prelude::*;
//!
//! # let wf = Workflow::<Replace<u64>>::builder("inc", 1)
//! #     .node("inc", |s: Arc<Replace<u64>>, _ctx| async move { Ok(NodeOutput::update(s.0 + 1)) })
//! #     .edge(START, "inc").edge("inc", END).build().expect("valid");
//! let harness = CrashHarness::new(&wf, 1).expect("input");
//! let ops = harness.reference().expect("uninterrupted run").ops.len() as u64;
//! proptest!(ProptestConfig::with_cases(8), |(case in crash_case(ops))| {
//!     let report = harness.check(&case).expect("reference run");
//!     prop_assert!(report.is_clean(), "{case}: {:?}", report.problems);
//! });
//! ```

mod assert;
mod case;
mod effects;
mod harness;
mod judge;
mod observe;
mod recording;
mod run;
mod schedules;
mod summary;

use std::sync::Arc;

pub use assert::{any_crash_model, assert_crash_safe, assert_sweep, crash_case, crash_point};
pub use case::{Cases, CrashCase, ParseCaseError, SECOND_CRASH_MODELS, SecondCrash, applies};
pub use effects::{Effect, Effects};
pub use harness::{Configure, CrashHarness, ENV_CASE, ENV_SEED, Reference};
pub use observe::ToolCallRecord;
pub use recording::{AckHook, RecordingStore};
pub use run::runner_released;
pub use schedules::{ScheduleCheck, check_schedule};
pub use summary::{CaseReport, Summary};

pub use cairn::clock::ManualClock;
pub use cairn_storage_testkit::fault::{CrashModel, Fault, FaultBackend, FaultController};

use cairn::Error;
use cairn::{Engine, EngineBuilder};

/// The start time of [`deterministic_engine`]'s clock: 2023-11-14T22:13:20Z.
pub const CLOCK_START_MS: u64 = 1_700_000_000_000;

/// An engine builder for tests: an in-memory database (a [`FaultBackend`] nobody arms, so
/// nothing touches the file system), no fsync, the given seed for ids and node randomness, and
/// a [`ManualClock`] at [`CLOCK_START_MS`] that only moves when the test moves it. Two engines
/// built with the same seed, workflow and inputs produce the same events.
///
/// # Errors
/// Storage errors creating the in-memory database.
///
/// # Examples
/// ```
/// use std::sync::Arc;
/// use cairn_testkit::deterministic_engine;
/// use cairn::{NodeOutput, Replace, StartOptions, Workflow, END, START};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() -> Result<(), Box<dyn std::error::Error>> {
/// let wf = Workflow::<Replace<String>>::builder("ids", 1)
///     .node("id", |_s, ctx: cairn::Ctx| async move { Ok(NodeOutput::update(ctx.new_id())) })
///     .edge(START, "id")
///     .edge("id", END)
///     .build()?;
/// let mut ids = Vec::new();
/// for _ in 0..2 {
///     let (builder, _clock) = deterministic_engine(42)?;
///     let engine = builder.workflow(&wf).open().await?;
///     let t = engine.start_json("ids", "", StartOptions::id("t")).await?;
///     ids.push(t.output::<String>().await?);
///     engine.shutdown().await;
/// }
/// assert_eq!(ids[0], ids[1]);
/// # Ok(()) }
/// ```
pub fn deterministic_engine(seed: u64) -> Result<(EngineBuilder, ManualClock), Error> {
    let options = cairn_storage::Options {
        durability: cairn_storage::Durability::None,
        cache_bytes: 4 << 20,
        ..cairn_storage::Options::default()
    };
    let store = cairn_storage::RedbStore::with_backend(FaultBackend::new(), options)?;
    let clock = ManualClock::new(CLOCK_START_MS);
    let builder = Engine::with_store(Arc::new(store)).seed(seed).clock(Arc::new(clock.clone()));
    Ok((builder, clock))
}
