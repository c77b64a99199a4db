//! The three canonical workflows of the crash-point test (T1), and their harnesses:
//!
//! - `linear`: five nodes in a chain, two tool calls each, reading the clock, randomness and a
//!   fresh id through the context (all recorded);
//! - `fan_out`: a split into three branches (one making two calls) joined into a merge that
//!   persists the result and checkpoints;
//! - `human_timer`: a draft, a human approval, a one-hour durable timer, a second human
//!   confirmation, then a notification (ManualClock: the harness moves it to the timer).
//!
//! Frozen: the T12 format fixtures (`tests/fixtures/v*/`) were written by these definitions and
//! are replayed against them (a thread is pinned to its workflow's fingerprint). Add new
//! workflows rather than changing these.

use std::sync::Arc;

use cairn::{Ctx, END, NodeOutput, START, State, Workflow};
use cairn_testkit::{CrashHarness, Effects};
use serde::{Deserialize, Serialize};

/// The state of every canonical workflow: a ledger of what happened, in order.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ledger {
    pub entries: Vec<String>,
    pub sum: u64,
}

/// One line and an amount.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Entry(pub String, pub u64);

impl State for Ledger {
    type Update = Entry;

    fn apply(&mut self, Entry(line, amount): Entry) {
        self.entries.push(line);
        self.sum += amount;
    }
}

/// A deterministic "external service": a hash of the tool name and input.
fn service(tool: &str, input: &str) -> u64 {
    let hash = blake3::hash(format!("{tool}:{input}").as_bytes());
    u64::from_le_bytes(hash.as_bytes()[..8].try_into().expect("8 bytes")) % 10_000
}

async fn call(
    fx: &Effects,
    ctx: &Ctx,
    tool: &'static str,
    input: String,
) -> Result<u64, cairn::NodeError> {
    fx.tool(ctx, tool, input, move |input: String, _| async move { Ok(service(tool, &input)) })
        .await
}

pub fn linear(fx: &Effects) -> Workflow<Ledger> {
    let names = ["fetch", "enrich", "decide", "commit", "notify"];
    let mut b = Workflow::<Ledger>::builder("linear-tools", 1);
    for (i, name) in names.into_iter().enumerate() {
        let fx = fx.clone();
        b = b.node(name, move |s: Arc<Ledger>, ctx: Ctx| {
            let fx = fx.clone();
            async move {
                let first = call(&fx, &ctx, "lookup", format!("{name}:{}", s.sum)).await?;
                let extra = match i {
                    1 => ctx.now_ms() % 1000,
                    2 => ctx.random_u64() % 1000,
                    3 => ctx.new_id().len() as u64,
                    _ => 0,
                };
                let second = call(&fx, &ctx, "write", format!("{name}:{first}:{extra}")).await?;
                Ok(NodeOutput::update(Entry(
                    format!("{name}:{first}:{second}:{extra}"),
                    first + extra,
                )))
            }
        });
    }
    b = b.edge(START, names[0]);
    for pair in names.windows(2) {
        b = b.edge(pair[0], pair[1]);
    }
    b.edge(names[4], END).build().expect("linear workflow")
}

pub fn fan_out(fx: &Effects) -> Workflow<Ledger> {
    let branches = ["north", "south", "east"];
    let mut b = Workflow::<Ledger>::builder("fan-out-join", 1).node("split", {
        let fx = fx.clone();
        move |_s: Arc<Ledger>, ctx: Ctx| {
            let fx = fx.clone();
            async move {
                let v = call(&fx, &ctx, "plan", "split".into()).await?;
                Ok(NodeOutput::update(Entry(format!("split:{v}"), v)))
            }
        }
    });
    for (i, name) in branches.into_iter().enumerate() {
        let fx = fx.clone();
        b = b.node(name, move |_s: Arc<Ledger>, ctx: Ctx| {
            let fx = fx.clone();
            async move {
                let mut v = call(&fx, &ctx, "survey", name.to_owned()).await?;
                if i == 0 {
                    v += call(&fx, &ctx, "survey_more", format!("{name}:{v}")).await?;
                }
                Ok(NodeOutput::update(Entry(format!("{name}:{v}"), v)))
            }
        });
    }
    let fx = fx.clone();
    b.edge(START, "split")
        .fan_out("split", branches)
        .join(branches, "merge")
        .node_with(
            "merge",
            move |s: Arc<Ledger>, ctx: Ctx| {
                let fx = fx.clone();
                async move {
                    let v = call(&fx, &ctx, "persist", s.entries.join("|")).await?;
                    Ok(NodeOutput::update(Entry(format!("merge:{v}"), v)))
                }
            },
            cairn::dsl::NodePolicy::default().checkpoint_after(true),
        )
        .edge("merge", END)
        .build()
        .expect("fan-out workflow")
}

pub fn human_timer(fx: &Effects) -> Workflow<Ledger> {
    let draft_fx = fx.clone();
    let publish_fx = fx.clone();
    let notify_fx = fx.clone();
    Workflow::<Ledger>::builder("approval-timer", 1)
        .node("draft", move |_s: Arc<Ledger>, ctx: Ctx| {
            let fx = draft_fx.clone();
            async move {
                let v = call(&fx, &ctx, "draft", "proposal".into()).await?;
                Ok(NodeOutput::update(Entry(format!("draft:{v}"), v)))
            }
        })
        .node("approve", |s: Arc<Ledger>, ctx: Ctx| async move {
            let answer: String = ctx.interrupt(format!("approve {}?", s.entries.join(",")))?;
            Ok(NodeOutput::update(Entry(format!("approved:{answer}"), 1)))
        })
        .node("cool_off", move |s: Arc<Ledger>, ctx: Ctx| {
            let fx = publish_fx.clone();
            async move {
                // An hour of durable waiting; the node runs again once the timer fired.
                ctx.sleep_ms(3_600_000).await?;
                let v = call(&fx, &ctx, "publish", format!("{}", s.sum)).await?;
                Ok(NodeOutput::update(Entry(format!("published:{v}:{}", ctx.now_ms()), v)))
            }
        })
        .node("confirm", |_s: Arc<Ledger>, ctx: Ctx| async move {
            let answer: String = ctx.interrupt("confirm the publication?")?;
            Ok(NodeOutput::update(Entry(format!("confirmed:{answer}"), 2)))
        })
        .node("notify", move |s: Arc<Ledger>, ctx: Ctx| {
            let fx = notify_fx.clone();
            async move {
                let v = call(&fx, &ctx, "notify", s.entries.join(";")).await?;
                Ok(NodeOutput::update(Entry(format!("notified:{v}"), v)))
            }
        })
        .edge(START, "draft")
        .edge("draft", "approve")
        .edge("approve", "cool_off")
        .edge("cool_off", "confirm")
        .edge("confirm", "notify")
        .edge("notify", END)
        .build()
        .expect("human-timer workflow")
}

/// The child of [`nested`]: a check and a signature, with tool calls, randomness and a fresh id.
fn review(fx: &Effects) -> Workflow<Ledger> {
    let check_fx = fx.clone();
    let sign_fx = fx.clone();
    Workflow::<Ledger>::builder("review", 1)
        .node("check", move |s: Arc<Ledger>, ctx: Ctx| {
            let fx = check_fx.clone();
            async move {
                let v = call(&fx, &ctx, "check", format!("{}", s.sum)).await?;
                let r = ctx.random_u64() % 1000;
                Ok(NodeOutput::update(Entry(format!("check:{v}:{r}"), v + r)))
            }
        })
        .node("sign", move |s: Arc<Ledger>, ctx: Ctx| {
            let fx = sign_fx.clone();
            async move {
                let id = ctx.new_id();
                let v = call(&fx, &ctx, "sign", format!("{}:{id}", s.sum)).await?;
                Ok(NodeOutput::update(Entry(format!("sign:{v}:{id}"), v)))
            }
        })
        .edge(START, "check")
        .edge("check", "sign")
        .edge("sign", END)
        .build()
        .expect("review workflow")
}

/// Sub-workflows and map nodes: a plan, then in parallel a map node over three items (a tool
/// call each) and a sub-workflow node driving a child thread ([`review`]), joined into a merge
/// that checkpoints. Crashes land inside the child, inside a map item and inside the join.
pub fn nested(fx: &Effects) -> Workflow<Ledger> {
    let plan_fx = fx.clone();
    let scatter_fx = fx.clone();
    let merge_fx = fx.clone();
    Workflow::<Ledger>::builder("nested", 1)
        .node("plan", move |s: Arc<Ledger>, ctx: Ctx| {
            let fx = plan_fx.clone();
            async move {
                let v = call(&fx, &ctx, "plan", s.entries.join(",")).await?;
                Ok(NodeOutput::update(Entry(format!("plan:{v}"), v)))
            }
        })
        .map(
            "scatter",
            |s: &Ledger| vec![format!("a{}", s.sum), format!("b{}", s.sum), format!("c{}", s.sum)],
            move |_s: Arc<Ledger>, ctx: Ctx| {
                let fx = scatter_fx.clone();
                async move {
                    let item: String = ctx.item()?;
                    let v = call(&fx, &ctx, "scatter", item.clone()).await?;
                    Ok(NodeOutput::update(Entry(format!("scatter:{item}:{v}"), v)))
                }
            },
        )
        .subgraph(
            "review",
            review(fx),
            |s: &Ledger| s.clone(),
            |c: &Ledger| {
                Entry(
                    format!("review:{}", c.entries[c.entries.len().saturating_sub(2)..].join("+")),
                    c.sum,
                )
            },
        )
        .edge(START, "plan")
        .fan_out("plan", ["scatter", "review"])
        .join(["scatter", "review"], "merge")
        .node_with(
            "merge",
            move |s: Arc<Ledger>, ctx: Ctx| {
                let fx = merge_fx.clone();
                async move {
                    let v = call(&fx, &ctx, "persist", s.entries.join("|")).await?;
                    Ok(NodeOutput::update(Entry(format!("merge:{v}"), v)))
                }
            },
            cairn::dsl::NodePolicy::default().checkpoint_after(true),
        )
        .edge("merge", END)
        .build()
        .expect("nested workflow")
}

/// The harness of [`nested`] (not one of the frozen canonical three), configured like them.
pub fn nested_harness() -> CrashHarness {
    let fx = Effects::new();
    CrashHarness::new(&nested(&fx), Ledger::default())
        .expect("input")
        .effects(&fx)
        .configure(|b| b.checkpoint_every(Some(2), None))
}

/// Four steps whose tool each returns 256 KiB (stored as offloaded payloads), so the database
/// file grows during the run: the workload of the I/O-error and disk-full tests (T6/T7).
pub fn bulky(fx: &Effects) -> Workflow<Ledger> {
    let names = ["load", "transform", "store", "report"];
    let mut b = Workflow::<Ledger>::builder("bulky", 1);
    for name in names {
        let fx = fx.clone();
        b = b.node(name, move |s: Arc<Ledger>, ctx: Ctx| {
            let fx = fx.clone();
            async move {
                let blob: String = fx
                    .tool(&ctx, "blob", format!("{name}:{}", s.sum), |key: String, _| async move {
                        let seed = service("blob", &key);
                        Ok((0..256 * 1024)
                            .map(|i| char::from(b'a' + ((seed + i) % 26) as u8))
                            .collect::<String>())
                    })
                    .await?;
                let digest = service("digest", &blob);
                Ok(NodeOutput::update(Entry(format!("{name}:{digest}"), digest)))
            }
        });
    }
    b = b.edge(START, names[0]);
    for pair in names.windows(2) {
        b = b.edge(pair[0], pair[1]);
    }
    b.edge(names[3], END).build().expect("bulky workflow")
}

/// The three canonical harnesses, with a checkpoint every two steps so that crashes also hit
/// checkpoint writes.
pub fn canonical() -> Vec<(&'static str, CrashHarness)> {
    let harness = |wf: Workflow<Ledger>, fx: &Effects, inputs: &[&str]| {
        CrashHarness::new(&wf, Ledger::default())
            .expect("input")
            .effects(fx)
            .human_inputs(inputs.iter().copied())
            .configure(|b| b.checkpoint_every(Some(2), None))
    };
    let (a, b, c) = (Effects::new(), Effects::new(), Effects::new());
    vec![
        ("linear", harness(linear(&a), &a, &[])),
        ("fan_out", harness(fan_out(&b), &b, &[])),
        ("human_timer", harness(human_timer(&c), &c, &["yes", "go"])),
    ]
}
