//! `docs/embedding.md`, compiled and run: each Rust snippet of the guide is here between a
//! `// guide: FILE` line and a `// guide: end` line (inside a module standing for that file of
//! the reader's crate `shop`), and `the_guide_shows_these_snippets_verbatim` checks the guide
//! holds each one as written here, so the two cannot drift apart: edit both together. The
//! guide's own tests run here too: the order through a real engine on a file (charge, durable
//! sleep, signal), and its crash test.
#![allow(missing_docs, reason = "test code")]
#![allow(clippy::print_stdout, clippy::print_stderr, reason = "the guide's program prints")]

/// `src/lib.rs` of the guide's crate.
mod shop {
    // guide: src/lib.rs
    use std::collections::HashMap;
    use std::sync::{Arc, Mutex, PoisonError};

    use cairn::{Ctx, END, NodeOutput, START, State, Workflow};
    use serde::{Deserialize, Serialize};

    /// An order: what it costs, and what happened to it.
    #[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
    pub struct Order {
        pub id: String,
        pub cents: u64,
        pub remind_after_ms: u64,
        pub charge: Option<String>,
        pub reminded: bool,
        pub delivered_by: Option<String>,
    }

    /// What a node changes: each node returns one of these, and the engine records it.
    #[derive(Debug, Clone, Serialize, Deserialize)]
    pub enum Step {
        Charged(String),
        Reminded,
        Delivered(String),
    }

    impl State for Order {
        type Update = Step;
        fn apply(&mut self, step: Step) {
            match step {
                Step::Charged(charge) => self.charge = Some(charge),
                Step::Reminded => self.reminded = true,
                Step::Delivered(courier) => self.delivered_by = Some(courier),
            }
        }
    }

    /// A stand-in for a payment API that deduplicates requests by idempotency key, as real
    /// ones do (Stripe's `Idempotency-Key` header, for one).
    #[derive(Debug, Clone, Default)]
    pub struct Payments(Arc<Mutex<HashMap<String, u64>>>);

    impl Payments {
        /// Charges `cents`, once per key: a request repeated under a key gets the first
        /// charge back.
        pub fn charge(&self, key: &str, cents: u64) -> String {
            let mut charges = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            charges.entry(key.to_owned()).or_insert(cents);
            format!("ch_{}", &key[key.len().saturating_sub(12)..])
        }

        /// The charges made.
        pub fn charges(&self) -> usize {
            self.0.lock().unwrap_or_else(PoisonError::into_inner).len()
        }
    }
    // guide: end

    // guide: src/lib.rs workflow
    /// Charges the order (a tool call), sleeps durably, then, with `delivery`, waits for the
    /// courier's `delivered` signal.
    pub fn order_workflow(payments: Payments, delivery: bool) -> Workflow<Order> {
        let builder = Workflow::<Order>::builder("order", 1)
            .node("charge", move |o: Arc<Order>, ctx: Ctx| {
                let payments = payments.clone();
                async move {
                    let charge: String = ctx
                        .tool("charge_card", o.cents, move |cents: u64, t| async move {
                            // The same key in every run of this recorded call: a call run
                            // again after a crash gets the first charge back.
                            Ok(payments.charge(t.idempotency_key(), cents))
                        })
                        .await?;
                    Ok(NodeOutput::update(Step::Charged(charge)))
                }
            })
            .node("remind", |o: Arc<Order>, ctx: Ctx| async move {
                // Durable: the timer is stored; a restart does not start the wait again.
                ctx.sleep_ms(o.remind_after_ms).await?;
                Ok(NodeOutput::update(Step::Reminded))
            })
            .edge(START, "charge")
            .edge("charge", "remind");
        let builder = if delivery {
            builder
                .node("delivered", |_o: Arc<Order>, ctx: Ctx| async move {
                    // Parks the thread (durably) until a `delivered` signal is there.
                    let courier: String = ctx.recv("delivered").await?;
                    Ok(NodeOutput::update(Step::Delivered(courier)))
                })
                .edge("remind", "delivered")
                .edge("delivered", END)
        } else {
            builder.edge("remind", END)
        };
        builder.build().expect("a valid workflow")
    }
    // guide: end
}

/// `src/main.rs` of the guide's crate.
mod main_rs {
    #![allow(dead_code, reason = "the guide's `main`; the test calls `run`")]
    use super::shop;

    // guide: src/main.rs
    use cairn::{Engine, StartOptions};
    use shop::{Order, Payments, order_workflow};

    #[tokio::main]
    async fn main() -> Result<(), Box<dyn std::error::Error>> {
        let order = run("shop.db", 2_000).await?;
        println!("{order:?}");
        Ok(())
    }

    /// Takes order 7 on the database `db`: charged, reminded after `remind_after_ms`, delivered.
    pub async fn run(db: &str, remind_after_ms: u64) -> Result<Order, Box<dyn std::error::Error>> {
        let payments = Payments::default();
        let workflow = order_workflow(payments, true);
        let engine = Engine::builder(db).workflow(&workflow).open().await?;
        let input =
            Order { id: "order-7".into(), cents: 4_650, remind_after_ms, ..Order::default() };
        // A second run finds order-7 stored and returns it as it stands.
        let thread = engine.start(&workflow, input, StartOptions::id("order-7")).await?;
        if !thread.status().await?.is_terminal() {
            // Kept in the thread's inbox until its `recv` takes it, whenever that runs.
            engine.signal("order-7", "delivered", "courier-12").await?;
        }
        let order = thread.output().await?;
        engine.shutdown().await;
        Ok(order)
    }
    // guide: end
}

/// `tests/crash.rs` of the guide's crate.
mod crash_rs {
    use super::shop;

    // guide: tests/crash.rs
    use cairn_testkit::{Cases, CrashHarness, assert_sweep};
    use shop::{Order, Payments, order_workflow};

    #[test]
    fn an_order_is_charged_once_whatever_the_crash() {
        let payments = Payments::default();
        // No signal: the harness answers human input, but sends no signal.
        let workflow = order_workflow(payments.clone(), false);
        let input = Order {
            id: "order-7".into(),
            cents: 4_650,
            remind_after_ms: 86_400_000,
            ..Order::default()
        };
        let harness = CrashHarness::new(&workflow, input).expect("the input serialises");
        // 64 random crash cases (`Cases::Every`: every I/O op under every crash model).
        let summary = assert_sweep(&harness, Cases::Random { count: 64, seed: 7 });
        eprintln!("{}", summary.line("order"));
        // Every run, the uninterrupted one and each crashed and recovered one, charged under
        // one key: one charge.
        assert_eq!(payments.charges(), 1);
    }
    // guide: end
}

/// The guide's snippets: (file, text), each without the indentation of its module here.
fn snippets() -> Vec<(String, String)> {
    let this = include_str!("embedding_guide.rs");
    let mut out = Vec::new();
    let mut open: Option<(String, Vec<&str>)> = None;
    for line in this.lines() {
        let marker = line.trim_start().strip_prefix("// guide: ");
        match (marker, open.as_mut()) {
            (Some("end"), Some(_)) => {
                let (file, lines) = open.take().unwrap_or_default();
                let text: Vec<&str> =
                    lines.iter().map(|l| l.strip_prefix("    ").unwrap_or(l)).collect();
                out.push((file, text.join("\n")));
            }
            (Some(file), None) => open = Some((file.to_owned(), Vec::new())),
            (_, Some((_, lines))) => lines.push(line),
            _ => {}
        }
    }
    out
}

#[test]
fn the_guide_shows_these_snippets_verbatim() {
    let guide = include_str!("../../docs/embedding.md");
    let snippets = snippets();
    assert_eq!(snippets.len(), 4, "four snippets: the state, the workflow, main, the crash test");
    for (file, text) in &snippets {
        assert!(
            guide.contains(text.as_str()),
            "docs/embedding.md does not show the snippet of {file} as this file has it:\n{text}"
        );
    }
    // The dependency lines name this workspace's version and features the engine has.
    let version = env!("CARGO_PKG_VERSION");
    let minor = version.rsplit_once('.').map_or(version, |(m, _)| m);
    assert!(
        guide.contains(&format!("cairn = {{ version = \"{minor}\", default-features = false }}")),
        "{minor}"
    );
    let testkit_toml = include_str!("../../engine/testkit/Cargo.toml");
    assert!(testkit_toml.contains("\nname = \"cairn-testkit\"\n"), "the test kit's crate");
    assert!(guide.contains(&format!("[dev-dependencies]\ncairn-testkit = \"{minor}\"\n")));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_guides_order_is_charged_reminded_and_delivered() {
    let dir = tempfile::tempdir().unwrap();
    let db = dir.path().join("shop.db");
    let db = db.to_str().unwrap();
    let order = main_rs::run(db, 30).await.unwrap();
    assert!(order.charge.as_deref().is_some_and(|c| c.starts_with("ch_")), "{order:?}");
    assert!(order.reminded, "{order:?}");
    assert_eq!(order.delivered_by.as_deref(), Some("courier-12"));
    // A second run on the same file finds the order finished: no second charge, no signal.
    let again = main_rs::run(db, 30).await.unwrap();
    assert_eq!(again, order);
}

/// The guide's command for seeing the crash test's `RELIABILITY` line shows it: cargo keeps a
/// passing test's output to itself unless told `--nocapture`.
#[test]
fn the_guide_shows_the_reliability_line_with_nocapture() {
    let guide = include_str!("../../docs/embedding.md");
    let before = guide.split("`RELIABILITY order").next().unwrap_or_default();
    let command = before.rsplit("`cargo test").next().unwrap_or_default();
    assert!(
        command.starts_with(" -- --nocapture`"),
        "the guide's command before its RELIABILITY line: `cargo test{command}"
    );
    assert!(guide.contains("verdict: PASS"), "the guide shows the line's verdict");
}
