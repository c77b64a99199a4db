//! Debounced indexing: an editor saves a document many times a minute; each save starts an
//! index job on a queue that debounces per document, so a burst of saves is indexed once, with
//! the last save's text, after the edits pause. A second queue batches notification emails per
//! tenant: the ones waiting become one send of their list.
//!
//! The queue settings live in the store with the counts (`docs/queues.md`, "Flow control"):
//! a save supersedes the document's waiting job in the same write, so a crash never leaves two
//! waiting, and a superseded save's caller hears which job took its place.

use std::path::Path;
use std::sync::Arc;

use cairn::dsl::{Ctx, NodeOutput, Replace, Workflow};
use cairn::storage::QueueLimits;
use cairn::{END, Engine, START, StartOptions};
use serde_json::{Value, json};

/// The quiet period after which a document's last save is indexed.
pub const QUIET_MS: u64 = 1_000;

/// Emails sent together, at most.
pub const BATCH_MAX: u32 = 4;

/// What the example did.
#[derive(Debug)]
pub struct Indexed {
    /// Per document: the texts its index runs indexed (one run per burst).
    pub runs: std::collections::BTreeMap<String, Vec<String>>,
    /// Saves superseded by a later save of their document.
    pub superseded: usize,
    /// The email sends: each the list of the emails it took.
    pub sends: Vec<Vec<Value>>,
}

fn index_workflow() -> Result<Workflow<Replace<Value>>, cairn::Error> {
    Ok(Workflow::<Replace<Value>>::builder("index", 1)
        .node("index", |s: Arc<Replace<Value>>, _ctx: Ctx| async move {
            // A real job would tokenize and write an index; the run records what it indexed.
            Ok(NodeOutput::update(json!({ "indexed": s.0["text"] })))
        })
        .edge(START, "index")
        .edge("index", END)
        .build()?)
}

fn send_workflow() -> Result<Workflow<Replace<Value>>, cairn::Error> {
    Ok(Workflow::<Replace<Value>>::builder("send", 1)
        .node("send", |s: Arc<Replace<Value>>, _ctx: Ctx| async move {
            // A batch run's input is the list of the waiting emails' inputs.
            Ok(NodeOutput::update(json!({ "sent": s.0 })))
        })
        .edge(START, "send")
        .edge("send", END)
        .build()?)
}

/// Saves two documents in bursts and queues six emails, on the database at `path`.
///
/// # Errors
/// Engine errors.
pub async fn run(path: &Path) -> Result<Indexed, cairn::Error> {
    let (index, send) = (index_workflow()?, send_workflow()?);
    let engine = Engine::builder(path)
        .queue("index", QueueLimits { debounce_ms: Some(QUIET_MS), ..QueueLimits::default() })
        .queue(
            "emails",
            QueueLimits {
                batch_max: Some(BATCH_MAX),
                batch_window_ms: Some(QUIET_MS),
                ..QueueLimits::default()
            },
        )
        .workflow(&index)
        .workflow(&send)
        .open()
        .await?;
    let mut saves = Vec::new();
    for (doc, texts) in
        [("readme", ["R", "Re", "Rea", "Read"]), ("guide", ["G", "Gu", "Gui", "Guid"])]
    {
        for text in texts {
            let options = StartOptions::default().on_queue("index").key(doc);
            saves.push((doc, engine.start_json("index", json!({ "text": text }), options).await?));
        }
    }
    let mut out = Indexed { runs: Default::default(), superseded: 0, sends: Vec::new() };
    for (doc, save) in &saves {
        match save.wait().await {
            Ok(outcome) => {
                let text = outcome.output.and_then(|o| o["indexed"].as_str().map(String::from));
                out.runs.entry((*doc).to_string()).or_default().extend(text);
            }
            Err(cairn::Error::Debounced { .. }) => out.superseded += 1,
            Err(e) => return Err(e),
        }
    }
    let mut emails = Vec::new();
    for n in 1..=6 {
        let options = StartOptions::default().on_queue("emails").key("acme");
        emails
            .push(engine.start_json("send", json!({ "to": format!("user-{n}") }), options).await?);
    }
    let mut runs = Vec::new();
    for email in &emails {
        match email.wait().await {
            Err(cairn::Error::Batched { into, .. }) if !runs.contains(&into) => runs.push(into),
            Err(cairn::Error::Batched { .. }) => {}
            other => return Err(other.err().unwrap_or(cairn::Error::Invalid("sent alone".into()))),
        }
    }
    for run in runs {
        let outcome = engine.thread(&run).await?.wait().await?;
        let sent = outcome.output.and_then(|o| o["sent"].as_array().cloned()).unwrap_or_default();
        out.sends.push(sent);
    }
    engine.shutdown().await;
    Ok(out)
}
