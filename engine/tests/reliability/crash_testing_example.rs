//! The example of docs/crash-testing.md ("Crash-test your own workflows"), compiled and run as
//! part of the suite. `the_example_is_the_one_docs_crash_testing_md_shows` keeps the two
//! identical: edit both together.

// tests/crash.rs
use std::sync::Arc;

use cairn::{Ctx, END, NodeOutput, START, State, Workflow};
use cairn_testkit::{Cases, CrashHarness, Effects, assert_sweep};
use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
struct Order {
    items: Vec<String>,
    total: u64,
    receipt: Option<String>,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
enum Change {
    Priced(u64),
    Charged(String),
}

impl State for Order {
    type Update = Change;
    fn apply(&mut self, change: Change) {
        match change {
            Change::Priced(total) => self.total = total,
            Change::Charged(receipt) => self.receipt = Some(receipt),
        }
    }
}

/// The workflow under test; its tools record every real execution in `fx`.
fn order_workflow(fx: Effects) -> Workflow<Order> {
    let price_fx = fx.clone();
    Workflow::<Order>::builder("order", 1)
        .node("price", move |o: Arc<Order>, ctx: Ctx| {
            let fx = price_fx.clone();
            async move {
                let total: u64 = fx
                    .tool(&ctx, "price", o.items.clone(), |items: Vec<String>, _| async move {
                        Ok(items.len() as u64 * 250)
                    })
                    .await?;
                Ok(NodeOutput::update(Change::Priced(total)))
            }
        })
        .node("charge", move |o: Arc<Order>, ctx: Ctx| {
            let fx = fx.clone();
            async move {
                // A real payment call goes here; the harness proves it never runs twice for a
                // charge whose result was recorded.
                let receipt: String = fx
                    .tool(&ctx, "charge_card", o.total, |cents: u64, _| async move {
                        Ok(format!("receipt-{cents}"))
                    })
                    .await?;
                Ok(NodeOutput::update(Change::Charged(receipt)))
            }
        })
        .edge(START, "price")
        .edge("price", "charge")
        .edge("charge", END)
        .build()
        .expect("a valid workflow")
}

#[test]
fn orders_survive_every_crash() {
    let fx = Effects::new();
    let input = Order { items: vec!["book".into(), "pen".into()], ..Order::default() };
    let harness = CrashHarness::new(&order_workflow(fx.clone()), input)
        .expect("the input serialises")
        .effects(&fx);
    // Every I/O op x every crash model (a few hundred cases, a few seconds); use
    // `Cases::Random { count, seed }` for random cases, or the proptest strategy `crash_case`.
    let summary = assert_sweep(&harness, Cases::Every);
    eprintln!("{}", summary.line("orders"));
}

#[test]
fn the_example_is_the_one_docs_crash_testing_md_shows() {
    let page = include_str!("../../../docs/crash-testing.md");
    let this = include_str!("crash_testing_example.rs");
    let example = this.split_once("\n\n").map_or("", |(_, rest)| rest);
    let example = example
        .split("\n#[test]\nfn the_example_is_the_one_docs_crash_testing_md_shows")
        .next()
        .unwrap_or("");
    assert!(page.contains(example), "docs/crash-testing.md's example and this file differ");
}
